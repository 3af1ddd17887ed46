// A FileSystem that does the real thing except where a test asks for a fault: the next writes
// of files whose path matches fail at a chosen step, or the next reads fail. A failure at create, write, fsync or
// rename leaves the file as it was; a failure at the directory's fsync comes after the rename,
// so the new file is in place although the write reports an error — as on a real disk.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "file_system.h"

namespace tessera::testing {

enum class WriteStep { Create, Write, Sync, Rename, SyncDirectory };

inline const char* write_step_name(WriteStep step) {
    switch (step) {
        case WriteStep::Create: return "create";
        case WriteStep::Write: return "write";
        case WriteStep::Sync: return "fsync";
        case WriteStep::Rename: return "rename";
        case WriteStep::SyncDirectory: return "directory fsync";
    }
    return "?";
}

class FaultyFileSystem final : public server::FileSystem {
public:
    using PathMatch = std::function<bool(const std::filesystem::path&)>;

    // The next `times` writes of a matching path fail at `step`, with `why` at the end of the
    // error (as strerror would put it: "No space left on device").
    void fail_writes(PathMatch matches, WriteStep step, int times = 1, std::string why = "") {
        std::lock_guard lock(mutex_);
        matches_ = std::move(matches);
        step_ = step;
        left_ = times;
        why_ = why.empty() ? "" : ": " + why;
    }
    // The next `times` reads of a matching path fail.
    void fail_reads(PathMatch matches, int times = 1) {
        std::lock_guard lock(mutex_);
        read_matches_ = std::move(matches);
        reads_left_ = times;
    }
    int faults_injected() const {
        std::lock_guard lock(mutex_);
        return injected_;
    }

    common::Status write_atomic(const std::filesystem::path& path, common::ByteView bytes) override {
        auto fault = take_write_fault(path);
        if (!fault) return real_.write_atomic(path, bytes);
        if (*fault == WriteStep::SyncDirectory)
            if (auto written = real_.write_atomic(path, bytes); !written) return written;
        return common::make_error(std::string("injected fault: ") + write_step_name(*fault) + " of " + path.string() +
                                  why());
    }
    // Faults at the create and write steps are the writer's (the spool's), so here they fail
    // before anything moves, as fsync and rename do.
    common::Status adopt(const std::filesystem::path& written, const std::filesystem::path& path) override {
        auto fault = take_write_fault(path);
        if (!fault) return real_.adopt(written, path);
        if (*fault == WriteStep::SyncDirectory)
            if (auto moved = real_.adopt(written, path); !moved) return moved;
        return common::make_error(std::string("injected fault: ") + write_step_name(*fault) + " of " + path.string() +
                                  why());
    }
    common::Result<common::Bytes> read(const std::filesystem::path& path, std::uint64_t max_bytes) override {
        {
            std::lock_guard lock(mutex_);
            if (reads_left_ > 0 && read_matches_ && read_matches_(path)) {
                --reads_left_;
                ++injected_;
                return common::make_error("injected fault: read of " + path.string());
            }
        }
        return real_.read(path, max_bytes);
    }
    bool exists(const std::filesystem::path& path) override { return real_.exists(path); }
    common::Status remove(const std::filesystem::path& path) override { return real_.remove(path); }

private:
    // The step at which this write of `path` is to fail, if it is one of those asked for.
    std::optional<WriteStep> take_write_fault(const std::filesystem::path& path) {
        std::lock_guard lock(mutex_);
        if (left_ <= 0 || !matches_ || !matches_(path)) return std::nullopt;
        --left_;
        ++injected_;
        return step_;
    }
    std::string why() const {
        std::lock_guard lock(mutex_);
        return why_;
    }

    server::FileSystem& real_ = server::posix_file_system();
    mutable std::mutex mutex_;
    PathMatch matches_;
    WriteStep step_ = WriteStep::Create;
    int left_ = 0;
    std::string why_;
    PathMatch read_matches_;
    int reads_left_ = 0;
    int injected_ = 0;
};

}  // namespace tessera::testing
