// The server's file access to its state directory — blobs (checkpoints, shards), result files,
// their listing and sizes — behind one small interface, as LevelDB's Env: the POSIX
// implementation writes atomically (temp file, fsync, rename, fsync of the directory); tests
// substitute one that fails a chosen step, to show that a failed write loses nothing and applies
// nothing twice, and that a disk that cannot be read or listed is reported, not ignored.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bytes.h"
#include "result.h"

namespace tessera::server {

// A regular file found in a directory.
struct FileEntry {
    std::string name;
    std::uint64_t bytes = 0;
    std::filesystem::file_time_type modified;
};

// A file open for reading at any offset (a blob sent in pieces, whole or a range of it).
class ReadableFile {
public:
    virtual ~ReadableFile() = default;
    virtual std::uint64_t size() const = 0;
    // Up to buffer.size() bytes from `offset`; 0 at the end of the file.
    virtual common::Result<std::size_t> read_at(std::uint64_t offset, std::span<char> buffer) = 0;
};

// A new file written from its start (an upload's body spooled as it arrives). Not synced: it
// becomes durable when FileSystem::adopt moves it into place. Closed, if still open, when
// destroyed.
class WritableFile {
public:
    virtual ~WritableFile() = default;
    virtual common::Status append(common::ByteView bytes) = 0;
    virtual common::Status close() = 0;
};

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
    // The regular files directly in `dir`; a missing directory has none.
    virtual common::Result<std::vector<FileEntry>> list(const std::filesystem::path& dir) = 0;
    virtual common::Status make_directories(const std::filesystem::path& dir) = 0;
    virtual common::Result<std::unique_ptr<ReadableFile>> open(const std::filesystem::path& path) = 0;
    // A file that must not exist yet, for appending (with permission bits 0644).
    virtual common::Result<std::unique_ptr<WritableFile>> create(const std::filesystem::path& path) = 0;
};

// The real one; lives for the whole process.
FileSystem& posix_file_system();

// Streams `from` into a new file beside `to` and moves it into place (FileSystem::adopt): `to`
// ends with its old content or all of `from`'s, and a failure leaves no temp file behind.
common::Status copy_file_atomic(FileSystem& files, const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace tessera::server
