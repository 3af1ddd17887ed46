// HttpClient: requests over kept or new connections, a capped string body for API answers, a
// streamed body for blob downloads (on a connection of their own).
#include "http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <fstream>
#include <optional>

#include "http_connection.h"
#include "server_answer.h"

namespace tessera::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

// Bytes written or read between two looks at a bandwidth cap.
constexpr std::size_t kPacedChunk = 1 << 16;

// Thrown out of a transfer that HttpOptions::interrupted stopped.
struct Interrupted {};

bool interrupted(const HttpOptions& options) { return options.interrupted && options.interrupted(); }

// Why a connection or exchange failed: a certificate that fails verification (no retry can
// fix it) or anything else on the way (worth retrying).
ApiFailure failure_of(const Url& origin, const boost::system::system_error& error) {
    const auto& code = error.code();
    if (code == http::error::body_limit)
        return {FailureKind::BadAnswer, origin.origin() + ": the answer is larger than any the protocol allows"};
    if (code.category() == asio::error::get_ssl_category() &&
        ERR_GET_REASON(static_cast<unsigned long>(code.value())) == SSL_R_CERTIFICATE_VERIFY_FAILED)
        return {FailureKind::Untrusted, origin.origin() + ": the server's TLS certificate failed verification (" +
                                            code.message() +
                                            "); if the operator gave you its certificate, pass it with --ca-cert"};
    return {FailureKind::NoAnswer, origin.origin() + ": " + code.message()};
}

// Runs `body`, turning what a connection or exchange throws into an ApiFailure.
template <class Body>
auto guarded(const Url& origin, Body&& body) -> decltype(body()) {
    try {
        return body();
    } catch (const Interrupted&) {
        return ApiFailure{FailureKind::Stopped, origin.origin() + ": the transfer was stopped on request"};
    } catch (const boost::system::system_error& error) {
        return failure_of(origin, error);
    } catch (const std::exception& error) {
        return ApiFailure{FailureKind::NoAnswer, origin.origin() + ": " + error.what()};
    }
}

// Opens a connection of its own to `origin`, hands the ready stream to `use`, and ends it.
template <class Use>
ApiStatus with_stream(const Url& origin, const HttpOptions& options, Use&& use) {
    return guarded(origin, [&]() -> ApiStatus {
        auto connection = HttpConnection::open(origin, options);
        if (!connection) return connection.error();
        auto status = (*connection)->use(use);
        (*connection)->finish();
        return status;
    });
}

// A kept connection found closed when used: the server ended it before it read the request.
bool closed_while_idle(const boost::system::error_code& code) {
    return code == http::error::end_of_stream || code == asio::error::eof || code == asio::error::connection_reset ||
           code == asio::error::broken_pipe || code == asio::error::connection_aborted;
}

http::request<http::string_body> make_request(const Url& origin, const std::string& method, const std::string& target,
                                              const std::string& body,
                                              const std::map<std::string, std::string>& headers) {
    http::request<http::string_body> request{http::string_to_verb(method), target, 11};
    request.set(http::field::host, origin.host);
    request.set(http::field::user_agent, "tessera-client");
    for (const auto& [name, value] : headers) request.set(name, value);
    request.body() = body;
    request.prepare_payload();
    return request;
}

// Writes what is left of the request, no faster than the upload cap.
template <class Stream>
void write_paced(Stream& stream, http::request_serializer<http::string_body>& serializer, const HttpOptions& options) {
    if (!options.upload_limit) {
        beast::get_lowest_layer(stream).expires_after(options.timeout);
        http::write(stream, serializer);
        return;
    }
    serializer.limit(kPacedChunk);
    while (!serializer.is_done()) {
        beast::get_lowest_layer(stream).expires_after(options.timeout);
        auto written = http::write_some(stream, serializer);
        if (serializer.is_done()) {  // a request of one chunk (a give-back after quit) is never cut
            options.upload_limit->spend(written);
            break;
        }
        if (!options.upload_limit->spend(written, options.interrupted) || interrupted(options)) throw Interrupted{};
    }
}

template <class Stream>
void send(Stream& stream, const Url& origin, const std::string& method, const std::string& target,
          const std::string& body, const std::map<std::string, std::string>& headers, const HttpOptions& options) {
    auto request = make_request(origin, method, target, body, headers);
    http::request_serializer<http::string_body> serializer(request);
    write_paced(stream, serializer, options);
}

template <class Stream>
http::response<http::string_body> read_answer(Stream& stream, beast::flat_buffer& buffer, const HttpOptions& options) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(options.max_body_bytes);
    beast::get_lowest_layer(stream).expires_after(options.timeout);
    http::read(stream, buffer, parser);
    return parser.release();
}

// Sends the request and reads the answer. With "Expect: 100-continue" the header goes first and
// the body only once the server answers 100 Continue: a server that refuses on the header (an
// upload from a volunteer with nothing in progress) answers in its place, and the body is never
// sent into a connection the server is closing.
template <class Stream>
http::response<http::string_body> exchange(Stream& stream, const Url& origin, const std::string& method,
                                           const std::string& target, const std::string& body,
                                           const std::map<std::string, std::string>& headers,
                                           const HttpOptions& options) {
    auto request = make_request(origin, method, target, body, headers);
    beast::flat_buffer buffer;
    http::request_serializer<http::string_body> serializer(request);
    if (request[http::field::expect] != "100-continue") {
        write_paced(stream, serializer, options);
        return read_answer(stream, buffer, options);
    }
    beast::get_lowest_layer(stream).expires_after(options.timeout);
    http::write_header(stream, serializer);
    http::response_parser<http::string_body> interim;
    interim.body_limit(options.max_body_bytes);
    beast::get_lowest_layer(stream).expires_after(options.timeout);
    http::read_header(stream, buffer, interim);
    if (interim.get().result() != http::status::continue_) {
        http::read(stream, buffer, interim);
        return interim.release();
    }
    write_paced(stream, serializer, options);
    return read_answer(stream, buffer, options);
}

}  // namespace

HttpClient::HttpClient(HttpOptions options)
    : options_(std::move(options)), idle_(std::make_shared<IdleConnections>()) {}

ApiResult<HttpResponse> HttpClient::request(const Url& origin, const std::string& method, const std::string& target,
                                            const std::string& body,
                                            const std::map<std::string, std::string>& headers) const {
    const auto key = origin.origin();
    return guarded(origin, [&]() -> ApiResult<HttpResponse> {
        for (bool first_try = true;; first_try = false) {
            auto connection = first_try ? idle_->take(key, options_.keep_alive) : nullptr;
            const bool kept = connection != nullptr;
            if (!connection) {
                auto opened = HttpConnection::open(origin, options_);
                if (!opened) return opened.error();
                connection = std::move(*opened);
            }
            std::optional<http::response<http::string_body>> answer;
            try {
                answer = connection->use(
                    [&](auto& stream) { return exchange(stream, origin, method, target, body, headers, options_); });
            } catch (const boost::system::system_error& error) {
                if (kept && closed_while_idle(error.code())) continue;  // once more, on a new connection
                throw;
            }
            if (answer->keep_alive())
                idle_->give_back(key, std::move(connection), options_.keep_alive);
            else
                connection->finish();
            return http_response_of(std::move(*answer));
        }
    });
}

ApiStatus HttpClient::download(const Url& origin, const std::string& target, const std::filesystem::path& file,
                               std::uint64_t total_bytes, const DownloadProgress& progress) const {
    std::error_code error;
    std::uint64_t have = std::filesystem::exists(file, error) ? std::filesystem::file_size(file, error) : 0;
    if (have > total_bytes) {
        std::filesystem::remove(file, error);
        have = 0;
    }
    if (have == total_bytes) return {};
    return with_stream(origin, options_, [&](auto& stream) -> ApiStatus {
        std::map<std::string, std::string> headers;
        if (have > 0) headers["Range"] = "bytes=" + std::to_string(have) + "-";
        send(stream, origin, "GET", target, "", headers, options_);
        beast::flat_buffer buffer;
        http::response_parser<http::buffer_body> parser;
        parser.body_limit(total_bytes + 1);  // a server that ignores Range sends it all
        beast::get_lowest_layer(stream).expires_after(options_.timeout);
        http::read_header(stream, buffer, parser);
        auto code = parser.get().result_int();
        if (code == 200 && have > 0)
            have = 0;  // the server ignored the range: start over
        else if (code != 200 && code != 206)
            return ApiFailure{failure_kind_of_status(static_cast<int>(code)),
                              origin.origin() + target + ": HTTP " + std::to_string(code), static_cast<int>(code)};
        std::ofstream out(file, have > 0 ? std::ios::binary | std::ios::app : std::ios::binary | std::ios::trunc);
        if (!out) return ApiFailure{FailureKind::Local, "cannot write " + file.string()};
        char chunk[kPacedChunk];
        while (!parser.is_done()) {
            parser.get().body().data = chunk;
            parser.get().body().size = sizeof chunk;
            beast::error_code read_error;
            beast::get_lowest_layer(stream).expires_after(options_.timeout);
            http::read(stream, buffer, parser, read_error);
            if (read_error && read_error != http::error::need_buffer)
                return ApiFailure{FailureKind::NoAnswer, origin.origin() + target + ": " + read_error.message()};
            auto got = sizeof chunk - parser.get().body().size;
            out.write(chunk, static_cast<std::streamsize>(got));
            have += got;
            if (progress) progress(have, total_bytes);
            if ((options_.download_limit && !options_.download_limit->spend(got, options_.interrupted)) ||
                interrupted(options_))
                throw Interrupted{};  // what arrived stays in the file
        }
        out.flush();
        if (!out) return ApiFailure{FailureKind::Local, "cannot write " + file.string()};
        return {};
    });
}

}  // namespace tessera::client
