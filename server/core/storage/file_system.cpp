// The POSIX FileSystem: common/file_io's atomic writer and capped reads, directory listings,
// files read at an offset with pread, and new files appended to (the upload spool).
#include "file_system.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "file_io.h"

namespace tessera::server {
namespace {

class PosixReadableFile final : public ReadableFile {
public:
    PosixReadableFile(int fd, std::uint64_t size, std::filesystem::path path)
        : fd_(fd), size_(size), path_(std::move(path)) {}
    ~PosixReadableFile() override { ::close(fd_); }
    PosixReadableFile(const PosixReadableFile&) = delete;
    PosixReadableFile& operator=(const PosixReadableFile&) = delete;

    std::uint64_t size() const override { return size_; }
    common::Result<std::size_t> read_at(std::uint64_t offset, std::span<char> buffer) override {
        for (;;) {
            auto got = ::pread(fd_, buffer.data(), buffer.size(), static_cast<off_t>(offset));
            if (got >= 0) return static_cast<std::size_t>(got);
            if (errno != EINTR)
                return common::make_error("cannot read " + path_.string() + ": " + std::strerror(errno));
        }
    }

private:
    int fd_;
    std::uint64_t size_;
    std::filesystem::path path_;
};

class PosixWritableFile final : public WritableFile {
public:
    PosixWritableFile(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
    ~PosixWritableFile() override {
        if (fd_ >= 0) ::close(fd_);
    }
    PosixWritableFile(const PosixWritableFile&) = delete;
    PosixWritableFile& operator=(const PosixWritableFile&) = delete;

    common::Status append(common::ByteView bytes) override {
        const auto* data = bytes.data();
        auto size = bytes.size();
        while (size > 0) {
            auto n = ::write(fd_, data, size);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return common::make_error("cannot write " + path_.string() + ": " + std::strerror(errno));
            data += n;
            size -= static_cast<std::size_t>(n);
        }
        return {};
    }
    common::Status close() override {
        if (fd_ < 0) return {};
        if (::close(std::exchange(fd_, -1)) != 0)
            return common::make_error("cannot close " + path_.string() + ": " + std::strerror(errno));
        return {};
    }

private:
    int fd_;
    std::filesystem::path path_;
};

class PosixFileSystem final : public FileSystem {
public:
    common::Status write_atomic(const std::filesystem::path& path, common::ByteView bytes) override {
        return common::write_file_atomic(path, bytes);
    }
    common::Status adopt(const std::filesystem::path& written, const std::filesystem::path& path) override {
        return common::move_file_atomic(written, path);
    }
    common::Result<common::Bytes> read(const std::filesystem::path& path, std::uint64_t max_bytes) override {
        return common::read_file(path, max_bytes);
    }
    bool exists(const std::filesystem::path& path) override {
        std::error_code error;
        return std::filesystem::is_regular_file(path, error);
    }
    common::Status remove(const std::filesystem::path& path) override {
        std::error_code error;
        std::filesystem::remove(path, error);
        if (error) return common::make_error("cannot remove " + path.string() + ": " + error.message());
        return {};
    }
    common::Result<std::vector<FileEntry>> list(const std::filesystem::path& dir) override {
        std::vector<FileEntry> entries;
        std::error_code error;
        std::filesystem::directory_iterator it(dir, error);
        if (error == std::errc::no_such_file_or_directory) return entries;
        for (; !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
            std::error_code kind, size, time;  // a file removed meanwhile is simply not listed
            if (!it->is_regular_file(kind)) continue;
            FileEntry entry{it->path().filename().string(), it->file_size(size), it->last_write_time(time)};
            if (!size && !time) entries.push_back(std::move(entry));
        }
        if (error) return common::make_error("cannot list " + dir.string() + ": " + error.message());
        return entries;
    }
    common::Status make_directories(const std::filesystem::path& dir) override {
        std::error_code error;
        std::filesystem::create_directories(dir, error);
        if (error) return common::make_error("cannot create " + dir.string() + ": " + error.message());
        return {};
    }
    common::Result<std::unique_ptr<ReadableFile>> open(const std::filesystem::path& path) override {
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return common::make_error("cannot open " + path.string() + ": " + std::strerror(errno));
        struct stat info {};
        if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
            ::close(fd);
            return common::make_error(path.string() + " is not a readable file");
        }
        return std::unique_ptr<ReadableFile>(
            std::make_unique<PosixReadableFile>(fd, static_cast<std::uint64_t>(info.st_size), path));
    }
    common::Result<std::unique_ptr<WritableFile>> create(const std::filesystem::path& path) override {
        int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) return common::make_error("cannot create " + path.string() + ": " + std::strerror(errno));
        return std::unique_ptr<WritableFile>(std::make_unique<PosixWritableFile>(fd, path));
    }
};

}  // namespace

FileSystem& posix_file_system() {
    static PosixFileSystem instance;
    return instance;
}

common::Status copy_file_atomic(FileSystem& files, const std::filesystem::path& from, const std::filesystem::path& to) {
    auto source = files.open(from);
    if (!source) return source.error();
    auto temp = to;
    temp += common::temp_file_suffix();
    auto target = files.create(temp);
    if (!target) return target.error();
    auto copied = [&]() -> common::Status {
        std::vector<char> buffer(1 << 20);
        for (std::uint64_t offset = 0;;) {
            auto got = (*source)->read_at(offset, buffer);
            if (!got) return got.error();
            if (*got == 0) break;
            if (auto written = (*target)->append({reinterpret_cast<const std::uint8_t*>(buffer.data()), *got});
                !written)
                return written;
            offset += *got;
        }
        if (auto closed = (*target)->close(); !closed) return closed;
        return files.adopt(temp, to);
    }();
    if (!copied) {
        target->reset();
        (void)files.remove(temp);  // left behind on a failing disk: a start removes it as an orphan
    }
    return copied;
}

}  // namespace tessera::server
