// A result upload's body written to disk as it arrives (docs/protocol.md, "Uploading a
// result"): the manifest (at most 64 KiB) stays in memory, the delta goes to a spool file in the
// results directory (through the server's FileSystem, so tests can fail its disk) while the
// SHA-256 of the whole body (the signature covers it) and of the delta (the manifest names it)
// are computed. An upload then holds a read buffer of memory, however large it is; the intake
// moves the spooled file into place instead of writing the delta again. No transport here: the
// HTTP session reads the body into `received` and hands it to a SpoolWriter on the handler
// pool, so that I/O threads only move bytes (spooled_upload_body.h, upload_session.h); the
// in-process server spools a whole body at once.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "bytes.h"
#include "file_system.h"
#include "result_upload.h"
#include "sha256.h"

namespace tessera::server {

// What an upload's body became. Owns its spool file: removed when this is destroyed, unless
// taken (take_delta_file) to be moved into place.
class SpooledUpload {
public:
    SpooledUpload() = default;
    SpooledUpload(SpooledUpload&& other) noexcept;
    SpooledUpload& operator=(SpooledUpload&& other) noexcept;
    SpooledUpload(const SpooledUpload&) = delete;
    SpooledUpload& operator=(const SpooledUpload&) = delete;
    ~SpooledUpload();

    // Set before the body is read: where the spool file goes, and through what.
    std::filesystem::path directory;
    FileSystem* files = &posix_file_system();
    // Body bytes read and not yet spooled (SpoolWriter::spool_received).
    common::Bytes received;
    std::string manifest_json;
    std::uint64_t delta_bytes = 0;
    std::string body_sha256;   // hex, of every byte of the body
    std::string delta_sha256;  // hex, of the bytes after the manifest
    // Why the body could not be taken: its framing (the volunteer's fault) or the disk (the
    // server's: disk_error). Empty when it was. The rest of such a body is read and dropped, so
    // that the answer reaches a sender still writing it.
    std::string error;
    bool disk_error = false;

    const std::filesystem::path& delta_file() const { return delta_file_; }
    // The spool file, now the caller's to move or remove.
    std::filesystem::path take_delta_file();

private:
    friend class SpoolWriter;
    void remove_file();
    std::filesystem::path delta_file_;
};

// Splits the body into manifest and delta as it arrives, and writes the delta to the spool
// file. Not thread-safe (one per body).
class SpoolWriter {
public:
    explicit SpoolWriter(SpooledUpload& upload) : upload_(upload) {}
    SpoolWriter(const SpoolWriter&) = delete;
    SpoolWriter& operator=(const SpoolWriter&) = delete;
    ~SpoolWriter();

    // Each records in upload.error why the body cannot be taken; bytes after that are dropped.
    // The spool file is created by open(), or by the first write.
    void open();
    void write(const std::uint8_t* data, std::size_t size);
    void finish();
    // Writes what the upload has received so far and empties `received`.
    void spool_received();

private:
    void fail(std::string message, bool disk);
    void take(const std::uint8_t* data, std::size_t size);

    SpooledUpload& upload_;
    std::unique_ptr<WritableFile> file_;
    bool opened_ = false;
    std::array<std::uint8_t, common::kManifestLengthBytes> prefix_{};
    std::size_t prefix_read_ = 0;
    std::uint32_t manifest_length_ = 0;
    common::Sha256 body_hash_, delta_hash_;
};

// A whole body spooled at once (what the HTTP session does piece by piece), into `directory`.
SpooledUpload spool_upload(common::ByteView body, std::filesystem::path directory, FileSystem& files);

}  // namespace tessera::server
