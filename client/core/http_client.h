// A blocking HTTP(S) client for the volunteer (Boost.Beast): answered connections kept for the
// next request (keep-alive, http_connection.h), timeouts on every step, TLS verified against the system store (or a given CA file), and
// blob downloads to a file that resume with Range. Failures come back as ApiResults that say
// whether retrying can help (a certificate that fails verification is Untrusted); nothing a
// server sends can crash the client (bodies are capped). Safe to use from several threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "api_result.h"
#include "rate_limiter.h"
#include "url.h"

namespace tessera::client {

struct HttpResponse {
    int status = 0;
    std::string body;
    std::map<std::string, std::string> headers;  // lower-case names
};

struct HttpOptions {
    std::chrono::seconds timeout{60};
    std::uint64_t max_body_bytes = 16 << 20;  // JSON answers
    std::filesystem::path ca_file;            // empty: the system's trusted CAs
    // Bandwidth caps shared by every copy of these options (null: none): downloads' bodies,
    // and requests as they are written.
    std::shared_ptr<RateLimiter> download_limit;
    std::shared_ptr<RateLimiter> upload_limit;
    // When this turns true a download, or a request under a cap longer than one chunk (64 KiB),
    // ends at the next chunk (or while the cap makes it wait) as FailureKind::Stopped; a download
    // keeps its partial file.
    std::function<bool()> interrupted;
    // An answered connection is reused by the next request to its server while it has been idle
    // for less than this; 0: a connection per request. Well under the server's idle limit (its
    // header timeout, 30 s by default).
    std::chrono::seconds keep_alive{5};
};

class IdleConnections;

// Called with (bytes so far, total bytes) while a download runs.
using DownloadProgress = std::function<void(std::uint64_t, std::uint64_t)>;

class HttpClient {
public:
    // Copies share the kept connections.
    explicit HttpClient(HttpOptions options = {});
    const HttpOptions& options() const { return options_; }

    // `target` is the path and query on `origin` (scheme://host:port from a Url). On a kept
    // connection the server closed meanwhile, the request is sent once more on a new one (a
    // request the server did take is then refused as a replay of its nonce, not run twice).
    ApiResult<HttpResponse> request(const Url& origin, const std::string& method, const std::string& target,
                                    const std::string& body = "",
                                    const std::map<std::string, std::string>& headers = {}) const;

    // Appends the rest of `target`'s body to `file` (resuming after what it holds) until the
    // file has `total_bytes`. Fails on a network error with the partial file kept.
    ApiStatus download(const Url& origin, const std::string& target, const std::filesystem::path& file,
                       std::uint64_t total_bytes, const DownloadProgress& progress = {}) const;

private:
    HttpOptions options_;
    std::shared_ptr<IdleConnections> idle_;
};

}  // namespace tessera::client
