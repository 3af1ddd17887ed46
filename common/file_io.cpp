// POSIX file helpers: capped reads and atomic replacement.
#include "file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <random>
#include <utility>

namespace tessera::common {
namespace {

Error errno_error(const std::string& what, const std::filesystem::path& path) {
    return make_error(what + " " + path.string() + ": " + std::strerror(errno));
}

std::string random_suffix() {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    return std::to_string(rng());
}

std::string host_name() {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "host";
    return host;
}

Status fsync_directory(const std::filesystem::path& dir) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno_error("cannot open directory", dir);
    int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) return errno_error("cannot fsync", dir);
    return {};
}

}  // namespace

Result<Bytes> read_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_error("cannot open", path);
    Bytes out;
    std::uint8_t chunk[1 << 16];
    for (;;) {
        ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            auto error = errno_error("cannot read", path);
            ::close(fd);
            return error;
        }
        if (n == 0) break;
        if (out.size() + static_cast<std::uint64_t>(n) > max_bytes) {
            ::close(fd);
            return make_error(path.string() + " is larger than the limit of " + std::to_string(max_bytes) + " bytes");
        }
        out.insert(out.end(), chunk, chunk + n);
    }
    ::close(fd);
    return out;
}

std::string temp_file_suffix() {
    return ".tmp-" + std::to_string(::getpid()) + "@" + host_name() + "-" + random_suffix();
}

Status move_file_atomic(const std::filesystem::path& from, const std::filesystem::path& to) {
    int fd = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_error("cannot open", from);
    int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) return errno_error("cannot fsync", from);
    if (::rename(from.c_str(), to.c_str()) != 0) return errno_error("cannot rename into", to);
    return fsync_directory(to.has_parent_path() ? to.parent_path() : ".");
}

Result<AtomicFileWriter> AtomicFileWriter::create(const std::filesystem::path& path, mode_t mode) {
    auto temp = path;
    temp += temp_file_suffix();
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) return errno_error("cannot create", temp);
    return AtomicFileWriter(path, temp, fd);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)), temp_(std::move(other.temp_)), fd_(std::exchange(other.fd_, -1)) {}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::discard() {
    if (fd_ < 0) return;
    ::close(fd_);
    ::unlink(temp_.c_str());
    fd_ = -1;
}

Status AtomicFileWriter::append(ByteView bytes) {
    if (fd_ < 0) return make_error("write to " + path_.string() + " after commit or failure");
    std::size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            auto error = errno_error("cannot write", temp_);
            discard();
            return error;
        }
        done += static_cast<std::size_t>(n);
    }
    return {};
}

Status AtomicFileWriter::commit() {
    if (fd_ < 0) return make_error("commit of " + path_.string() + " after commit or failure");
    if (::fsync(fd_) != 0) {
        auto error = errno_error("cannot fsync", temp_);
        discard();
        return error;
    }
    ::close(std::exchange(fd_, -1));
    if (::rename(temp_.c_str(), path_.c_str()) != 0) {
        auto error = errno_error("cannot rename into", path_);
        ::unlink(temp_.c_str());
        return error;
    }
    // The rename is durable only once the directory entry is on disk.
    return fsync_directory(path_.has_parent_path() ? path_.parent_path() : ".");
}

Status write_file_atomic(const std::filesystem::path& path, ByteView bytes, mode_t mode) {
    auto writer = AtomicFileWriter::create(path, mode);
    if (!writer) return writer.error();
    if (auto appended = writer->append(bytes); !appended) return appended;
    return writer->commit();
}

std::optional<TempFileWriter> temp_file_writer(const std::string& name) {
    auto start = name.rfind(".tmp-");
    auto at = name.find('@', start == std::string::npos ? 0 : start);
    auto dash = name.rfind('-');
    if (start == std::string::npos || at == std::string::npos || dash == std::string::npos || dash < at) return {};
    TempFileWriter writer;
    try {
        writer.pid = std::stol(name.substr(start + 5, at - start - 5));
    } catch (const std::exception&) {
        return {};
    }
    writer.host = name.substr(at + 1, dash - at - 1);
    return writer;
}

bool temp_file_abandoned(const std::string& name) {
    auto writer = temp_file_writer(name);
    return writer && writer->host == host_name() && writer->pid > 0 &&
           ::kill(static_cast<pid_t>(writer->pid), 0) != 0 && errno == ESRCH;
}

}  // namespace tessera::common
