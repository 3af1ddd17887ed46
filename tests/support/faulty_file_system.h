// A FileSystem that does the real thing except where a test asks for a fault: the next writes
// of files whose path matches fail at a chosen step, or the next reads (or opens) fail, or
// reads or creates wait until the test lets them go (a slow disk under one file), or listing a
// directory fails. A failure at create, write, fsync or
// rename leaves the file as it was; a failure at the directory's fsync comes after the rename,
// so the new file is in place although the write reports an error — as on a real disk.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
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
    // The next `times` listings of a matching directory fail.
    void fail_lists(PathMatch matches, int times = 1) {
        std::lock_guard lock(mutex_);
        list_matches_ = std::move(matches);
        lists_left_ = times;
    }
    // The next write of a matching path throws std::runtime_error(what), as a library might.
    void throw_on_write(PathMatch matches, std::string what) {
        std::lock_guard lock(mutex_);
        throw_matches_ = std::move(matches);
        throw_what_ = std::move(what);
    }
    // Reads of a matching path (whole, or a piece of an open file) wait until release_reads();
    // held_reads() counts those waiting.
    void hold_reads(PathMatch matches) {
        std::lock_guard lock(mutex_);
        hold_matches_ = std::move(matches);
    }
    void release_reads() {
        std::lock_guard lock(mutex_);
        hold_matches_ = nullptr;
        released_.notify_all();
    }
    int held_reads() const {
        std::lock_guard lock(mutex_);
        return held_;
    }
    // Creates of a matching path (a spool file) wait until release_creates(); held_creates()
    // counts those waiting.
    void hold_creates(PathMatch matches) {
        std::lock_guard lock(mutex_);
        hold_create_matches_ = std::move(matches);
    }
    void release_creates() {
        std::lock_guard lock(mutex_);
        hold_create_matches_ = nullptr;
        released_.notify_all();
    }
    int held_creates() const {
        std::lock_guard lock(mutex_);
        return held_creates_;
    }
    int faults_injected() const {
        std::lock_guard lock(mutex_);
        return injected_;
    }

    common::Status write_atomic(const std::filesystem::path& path, common::ByteView bytes) override {
        throw_if_asked(path);
        auto fault = take_write_fault(path);
        if (!fault) return real_.write_atomic(path, bytes);
        if (*fault == WriteStep::SyncDirectory)
            if (auto written = real_.write_atomic(path, bytes); !written) return written;
        return common::make_error(std::string("injected fault: ") + write_step_name(*fault) + " of " + path.string() +
                                  why());
    }
    // Faults at the create and write steps are the writer's (the spool's: create below), so
    // here they fail before anything moves, as fsync and rename do.
    common::Status adopt(const std::filesystem::path& written, const std::filesystem::path& path) override {
        throw_if_asked(path);
        auto fault = take_write_fault(path);
        if (!fault) return real_.adopt(written, path);
        if (*fault == WriteStep::SyncDirectory)
            if (auto moved = real_.adopt(written, path); !moved) return moved;
        return common::make_error(std::string("injected fault: ") + write_step_name(*fault) + " of " + path.string() +
                                  why());
    }
    common::Result<common::Bytes> read(const std::filesystem::path& path, std::uint64_t max_bytes) override {
        hold_if_asked(path);
        if (auto status = read_fault(path); !status) return status.error();
        return real_.read(path, max_bytes);
    }
    bool exists(const std::filesystem::path& path) override { return real_.exists(path); }
    common::Status remove(const std::filesystem::path& path) override { return real_.remove(path); }
    common::Result<std::vector<server::FileEntry>> list(const std::filesystem::path& dir) override {
        {
            std::lock_guard lock(mutex_);
            if (lists_left_ > 0 && list_matches_ && list_matches_(dir)) {
                --lists_left_;
                ++injected_;
                return common::make_error("injected fault: listing " + dir.string());
            }
        }
        return real_.list(dir);
    }
    common::Status make_directories(const std::filesystem::path& dir) override { return real_.make_directories(dir); }
    common::Result<std::unique_ptr<server::ReadableFile>> open(const std::filesystem::path& path) override {
        if (auto status = read_fault(path); !status) return status.error();
        auto file = real_.open(path);
        if (!file) return file.error();
        return std::unique_ptr<server::ReadableFile>(std::make_unique<HeldFile>(*this, path, std::move(*file)));
    }
    // A write fault asked for at the create step fails here; at the write step, the file's
    // first append; the others belong to adopt (the spool's file moved into place), as does
    // throw_on_write (an exception inside the request's handler, not on the I/O thread).
    common::Result<std::unique_ptr<server::WritableFile>> create(const std::filesystem::path& path) override {
        std::optional<WriteStep> fault;
        {
            std::unique_lock lock(mutex_);
            if (hold_create_matches_ && hold_create_matches_(path)) {
                ++held_creates_;
                released_.wait(lock, [this] { return !hold_create_matches_; });
                --held_creates_;
            }
            if (left_ > 0 && matches_ && matches_(path) && (step_ == WriteStep::Create || step_ == WriteStep::Write)) {
                --left_;
                ++injected_;
                fault = step_;
            }
        }
        if (fault == WriteStep::Create) return common::make_error("injected fault: create of " + path.string() + why());
        auto file = real_.create(path);
        if (!file || !fault) return file;
        return std::unique_ptr<server::WritableFile>(
            std::make_unique<FailingFile>(std::move(*file), "injected fault: write of " + path.string() + why()));
    }

private:
    // A new file whose appends fail (with the bytes not written).
    class FailingFile final : public server::WritableFile {
    public:
        FailingFile(std::unique_ptr<server::WritableFile> file, std::string error)
            : file_(std::move(file)), error_(std::move(error)) {}
        common::Status append(common::ByteView) override { return common::make_error(error_); }
        common::Status close() override { return file_->close(); }

    private:
        std::unique_ptr<server::WritableFile> file_;
        std::string error_;
    };
    // An open file whose reads wait while reads of its path are held.
    class HeldFile final : public server::ReadableFile {
    public:
        HeldFile(FaultyFileSystem& owner, std::filesystem::path path, std::unique_ptr<server::ReadableFile> file)
            : owner_(owner), path_(std::move(path)), file_(std::move(file)) {}
        std::uint64_t size() const override { return file_->size(); }
        common::Result<std::size_t> read_at(std::uint64_t offset, std::span<char> buffer) override {
            owner_.hold_if_asked(path_);
            return file_->read_at(offset, buffer);
        }

    private:
        FaultyFileSystem& owner_;
        std::filesystem::path path_;
        std::unique_ptr<server::ReadableFile> file_;
    };

    void hold_if_asked(const std::filesystem::path& path) {
        std::unique_lock lock(mutex_);
        if (!hold_matches_ || !hold_matches_(path)) return;
        ++held_;
        released_.wait(lock, [this] { return !hold_matches_; });
        --held_;
    }
    // The injected read failure, if one is due.
    common::Status read_fault(const std::filesystem::path& path) {
        std::lock_guard lock(mutex_);
        if (reads_left_ > 0 && read_matches_ && read_matches_(path)) {
            --reads_left_;
            ++injected_;
            return common::make_error("injected fault: read of " + path.string());
        }
        return {};
    }
    void throw_if_asked(const std::filesystem::path& path) {
        std::lock_guard lock(mutex_);
        if (!throw_matches_ || !throw_matches_(path)) return;
        throw_matches_ = nullptr;
        ++injected_;
        throw std::runtime_error(throw_what_);
    }
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
    PathMatch list_matches_;
    int lists_left_ = 0;
    PathMatch throw_matches_;
    std::string throw_what_;
    PathMatch hold_matches_;
    PathMatch hold_create_matches_;
    std::condition_variable released_;
    int held_ = 0;
    int held_creates_ = 0;
    int injected_ = 0;
};

}  // namespace tessera::testing
