// The wall clock the server runs on; the state directory's size.
#include "state_dir.h"

#include <chrono>
#include <system_error>

namespace tessera::server {
namespace {

std::uint64_t bytes_in(const std::filesystem::path& dir) {
    std::uint64_t bytes = 0;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
        auto size = entry.is_regular_file(error) ? entry.file_size(error) : 0;
        if (!error) bytes += size;
    }
    return bytes;
}

}  // namespace

StateUsage state_usage(const StateDir& state) {
    StateUsage usage;
    usage.blobs = bytes_in(state.blobs());
    usage.results = bytes_in(state.results());
    std::error_code error;
    for (const auto* suffix : {"", "-wal", "-shm"}) {
        auto size = std::filesystem::file_size(state.database().string() + suffix, error);
        if (!error) usage.database += size;
    }
    return usage;
}

Clock system_clock() {
    return [] {
        return static_cast<std::int64_t>(
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                .count());
    };
}

}  // namespace tessera::server
