// The volunteer's blob cache: files named by SHA-256, verified before use, downloads resumed
// from a ".part" file, and least-recently-used eviction within a disk quota. Used by one
// client process at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bytes.h"
#include "http_client.h"
#include "protocol.h"

namespace tessera::client {

class BlobCache {
public:
    BlobCache(std::filesystem::path dir, std::uint64_t quota_bytes) : dir_(std::move(dir)), quota_(quota_bytes) {}

    // The blob's path once present and verified; fetches `<base>/<sha256>` when missing. Bytes
    // with the wrong hash are discarded and come back as a BadAnswer.
    ApiResult<std::filesystem::path> ensure(const common::BlobRef& blob, HttpClient& http, const Url& base,
                                            const DownloadProgress& progress = {});
    // The path of a complete blob held, if it is.
    std::optional<std::filesystem::path> find(const std::string& sha256) const;
    // Stores bytes made here (a model built from patches) as `blob`: refused unless they are
    // its exact bytes.
    common::Result<std::filesystem::path> put(const common::BlobRef& blob, common::ByteView bytes);
    // Hashes of the complete blobs held (for locality scheduling).
    std::vector<std::string> held() const;
    // Removes least recently used blobs until the cache fits its quota; `keep` is spared.
    void evict(const std::set<std::string>& keep);

private:
    std::filesystem::path dir_;
    std::uint64_t quota_;
};

}  // namespace tessera::client
