// Whole-file reads with a size cap, and crash-safe writes (temp file, fsync, rename).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <sys/types.h>

#include "bytes.h"
#include "result.h"

namespace tessera::common {

// Reads a whole file; a file larger than `max_bytes` is an error, not an allocation.
Result<Bytes> read_file(const std::filesystem::path& path, std::uint64_t max_bytes);

// Writes a file so that `path` holds either its old content or all of the new one, even
// across a crash: bytes go to a temp file beside it; commit() fsyncs it, renames it over
// `path` and fsyncs the directory. Dropped without commit(), the temp file is removed.
// Not thread-safe.
class AtomicFileWriter {
public:
    // `mode` is the new file's permission bits (0600 for secrets).
    static Result<AtomicFileWriter> create(const std::filesystem::path& path, mode_t mode = 0644);

    AtomicFileWriter(AtomicFileWriter&& other) noexcept;
    AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
    ~AtomicFileWriter();

    Status append(ByteView bytes);
    Status commit();

private:
    AtomicFileWriter(std::filesystem::path path, std::filesystem::path temp, int fd)
        : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}
    void discard();

    std::filesystem::path path_;
    std::filesystem::path temp_;
    int fd_ = -1;
};

// AtomicFileWriter's temp files are named `<path>.tmp-<pid>@<host>-<random>`: a process that
// starts after a crash can tell its dead predecessor's from those another live process is
// writing into a shared directory. The writer of `name`, if it is such a temp file.
struct TempFileWriter {
    long pid = 0;
    std::string host;
};
std::optional<TempFileWriter> temp_file_writer(const std::string& name);
// Whether the temp file `name` was left by a process of this host that is no longer running.
bool temp_file_abandoned(const std::string& name);

// One-call form of AtomicFileWriter.
Status write_file_atomic(const std::filesystem::path& path, ByteView bytes, mode_t mode = 0644);

// The suffix AtomicFileWriter gives its temp files (".tmp-<pid>@<host>-<random>"), for other
// files written in pieces that a later start must tell apart (temp_file_abandoned).
std::string temp_file_suffix();
// Moves a complete file into place so that `to` holds its old content or all of the file's, even
// across a crash: fsyncs `from`, renames it over `to` (the same file system) and fsyncs the
// directory. On an error before the rename `from` is left where it was.
Status move_file_atomic(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace tessera::common
