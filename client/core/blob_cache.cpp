// BlobCache: verify, resume, evict.
#include "blob_cache.h"

#include <algorithm>

#include "file_io.h"
#include "sha256.h"
#include "text_encoding.h"

namespace tessera::client {

ApiResult<std::filesystem::path> BlobCache::ensure(const common::BlobRef& blob, HttpClient& http, const Url& base,
                                                   const DownloadProgress& progress) {
    std::error_code error;
    std::filesystem::create_directories(dir_, error);
    auto path = dir_ / blob.sha256;
    if (std::filesystem::exists(path, error) &&
        std::filesystem::file_size(path, error) == static_cast<std::uint64_t>(blob.bytes)) {
        std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), error);  // LRU
        return path;
    }
    auto part = dir_ / (blob.sha256 + ".part");
    if (auto status =
            http.download(base, base.path + "/" + blob.sha256, part, static_cast<std::uint64_t>(blob.bytes), progress);
        !status)
        return status.error();
    auto digest = common::sha256_file_hex(part);
    if (!digest) return ApiFailure{FailureKind::Local, digest.message()};
    if (*digest != blob.sha256) {
        std::filesystem::remove(part, error);
        return ApiFailure{FailureKind::BadAnswer, "blob " + common::short_hash(blob.sha256) + " arrived with hash " +
                                                      common::short_hash(*digest) + ": discarded"};
    }
    std::filesystem::rename(part, path, error);
    if (error) return ApiFailure{FailureKind::Local, "cannot store blob: " + error.message()};
    return path;
}

std::optional<std::filesystem::path> BlobCache::find(const std::string& sha256) const {
    std::error_code error;
    auto path = dir_ / sha256;
    if (!common::is_lower_hex(sha256, common::kSha256HexLength) || !std::filesystem::is_regular_file(path, error))
        return std::nullopt;
    std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), error);  // LRU
    return path;
}

common::Result<std::filesystem::path> BlobCache::put(const common::BlobRef& blob, common::ByteView bytes) {
    if (bytes.size() != static_cast<std::uint64_t>(blob.bytes) || common::sha256_hex(bytes) != blob.sha256)
        return common::make_error("the bytes are not blob " + common::short_hash(blob.sha256) + "'s");
    std::error_code error;
    std::filesystem::create_directories(dir_, error);
    auto path = dir_ / blob.sha256;
    if (auto status = common::write_file_atomic(path, bytes); !status) return status.error();
    return path;
}

std::vector<std::string> BlobCache::held() const {
    std::vector<std::string> hashes;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
        auto name = entry.path().filename().string();
        if (common::is_lower_hex(name, common::kSha256HexLength)) hashes.push_back(name);
    }
    return hashes;
}

void BlobCache::evict(const std::set<std::string>& keep) {
    struct Entry {
        std::filesystem::path path;
        std::filesystem::file_time_type used;
        std::uint64_t bytes;
    };
    std::vector<Entry> entries;
    std::uint64_t total = 0;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
        auto bytes = entry.file_size(error);
        total += bytes;
        if (!keep.count(entry.path().filename().string()))
            entries.push_back({entry.path(), entry.last_write_time(error), bytes});
    }
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.used < b.used; });
    for (const auto& e : entries) {
        if (total <= quota_) break;
        if (std::filesystem::remove(e.path, error)) total -= e.bytes;
    }
}

}  // namespace tessera::client
