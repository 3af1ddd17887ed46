// The server's file access for blobs (checkpoints, shards) and result files, behind one small
// interface, as LevelDB's Env: the POSIX implementation writes atomically (temp file, fsync,
// rename, fsync of the directory); tests substitute one that fails a chosen step, to show that
// a failed write loses nothing and applies nothing twice.
#pragma once

#include <cstdint>
#include <filesystem>

#include "bytes.h"
#include "result.h"

namespace tessera::server {

class FileSystem {
public:
    virtual ~FileSystem() = default;
    // Afterwards `path` holds its old content or all of `bytes`, even across a crash. An error
    // may come after the rename (the directory's fsync): the new content is then in place but
    // not known to be durable.
    virtual common::Status write_atomic(const std::filesystem::path& path, common::ByteView bytes) = 0;
    // The same for a file already written beside `path` (an upload spooled to disk): moved into
    // place with common::move_file_atomic's guarantees.
    virtual common::Status adopt(const std::filesystem::path& written, const std::filesystem::path& path) = 0;
    // The whole file; larger than `max_bytes` is an error.
    virtual common::Result<common::Bytes> read(const std::filesystem::path& path, std::uint64_t max_bytes) = 0;
    virtual bool exists(const std::filesystem::path& path) = 0;
    // Removing a missing file is not an error.
    virtual common::Status remove(const std::filesystem::path& path) = 0;
};

// The real one; lives for the whole process.
FileSystem& posix_file_system();

}  // namespace tessera::server
