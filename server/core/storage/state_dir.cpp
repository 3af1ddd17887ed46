// The wall clock the server runs on; the state directory's size.
#include "state_dir.h"

#include <chrono>

namespace tessera::server {
namespace {

// The bytes of the files in `dir` that `wanted` accepts by name.
template <class Wanted>
std::uint64_t bytes_in(FileSystem& files, const std::filesystem::path& dir, Wanted wanted) {
    std::uint64_t bytes = 0;
    if (auto entries = files.list(dir))
        for (const auto& entry : *entries)
            if (wanted(entry.name)) bytes += entry.bytes;
    return bytes;
}

}  // namespace

StateUsage state_usage(const StateDir& state, FileSystem& files) {
    auto any = [](const std::string&) { return true; };
    StateUsage usage;
    usage.blobs = bytes_in(files, state.blobs(), any);
    usage.results = bytes_in(files, state.results(), any);
    auto database = state.database().filename().string();
    usage.database = bytes_in(files, state.database().parent_path(), [&](const std::string& name) {
        return name == database || name == database + "-wal" || name == database + "-shm";
    });
    return usage;
}

}  // namespace tessera::server
