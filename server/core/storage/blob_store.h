// Content-addressed blobs: files named by the SHA-256 of their bytes in one directory, which
// the server (and any HTTP cache pointed at the same directory) serves at /blobs/<sha256>.
// Writes are atomic (temp, fsync, rename). Thread-safe: files are never rewritten in place.
// File access goes through a FileSystem (the POSIX one unless a test injects faults).
#pragma once

#include <filesystem>
#include <string>

#include "bytes.h"
#include "file_system.h"
#include "protocol.h"
#include "result.h"

namespace tessera::server {

class BlobStore {
public:
    explicit BlobStore(std::filesystem::path dir, FileSystem& files = posix_file_system())
        : dir_(std::move(dir)), files_(files) {}
    const std::filesystem::path& dir() const { return dir_; }
    std::filesystem::path path_of(const std::string& sha256) const { return dir_ / sha256; }
    bool has(const std::string& sha256) const;
    // Stores bytes and returns their reference (a no-op when the blob exists).
    common::Result<common::BlobRef> put(common::ByteView bytes);
    // Copies a file in after checking it has the expected hash.
    common::Result<common::BlobRef> put_file(const std::filesystem::path& source, const std::string& sha256);
    common::Result<common::Bytes> read(const std::string& sha256, std::uint64_t max_bytes) const;
    // For reading in pieces (a download).
    common::Result<std::unique_ptr<ReadableFile>> open(const std::string& sha256) const;
    // Removing a missing blob is not an error (retention; a download under way keeps reading).
    common::Status remove(const std::string& sha256);

private:
    std::filesystem::path dir_;
    FileSystem& files_;
};

}  // namespace tessera::server
