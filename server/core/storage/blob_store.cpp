// BlobStore: content-addressed files written atomically.
#include "blob_store.h"

#include "bytes.h"
#include "sha256.h"

namespace tessera::server {

bool BlobStore::has(const std::string& sha256) const { return files_.exists(path_of(sha256)); }

common::Result<common::BlobRef> BlobStore::put(common::ByteView bytes) {
    common::BlobRef ref{common::sha256_hex(bytes), static_cast<std::int64_t>(bytes.size())};
    if (has(ref.sha256)) return ref;
    if (auto status = files_.write_atomic(path_of(ref.sha256), bytes); !status) return status.error();
    return ref;
}

common::Result<common::BlobRef> BlobStore::put_file(const std::filesystem::path& source, const std::string& sha256) {
    auto bytes = files_.read(source, 4 * common::kGiB);
    if (!bytes) return bytes.error();
    auto ref = put(*bytes);
    if (ref && ref->sha256 != sha256)
        return common::make_error(source.string() + ": SHA-256 is " + ref->sha256 + ", expected " + sha256);
    return ref;
}

common::Result<common::Bytes> BlobStore::read(const std::string& sha256, std::uint64_t max_bytes) const {
    return files_.read(path_of(sha256), max_bytes);
}

common::Result<std::unique_ptr<ReadableFile>> BlobStore::open(const std::string& sha256) const {
    return files_.open(path_of(sha256));
}

common::Status BlobStore::remove(const std::string& sha256) { return files_.remove(path_of(sha256)); }

}  // namespace tessera::server
