// The POSIX FileSystem: common/file_io's atomic writer and capped reads.
#include "file_system.h"

#include "file_io.h"

namespace tessera::server {
namespace {

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
};

}  // namespace

FileSystem& posix_file_system() {
    static PosixFileSystem instance;
    return instance;
}

}  // namespace tessera::server
