// A read-only memory map of a whole file, so tensor views can point into it without copies.
#pragma once

#include <filesystem>

#include "bytes.h"
#include "result.h"

namespace tessera::common {

// Owns one read-only mapping; move-only. Views from bytes() live as long as this object.
// Safe to read from several threads; not to move while others read.
class MappedFile {
public:
    static Result<MappedFile> open(const std::filesystem::path& path);

    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    ByteView bytes() const { return {static_cast<const std::uint8_t*>(data_), size_}; }

private:
    MappedFile(void* data, std::size_t size) : data_(data), size_(size) {}
    void* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace tessera::common
