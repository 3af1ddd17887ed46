// Result upload bodies spooled to disk as they arrive.
#include "upload_spool.h"

#include <utility>

#include "file_io.h"
#include "result_upload.h"
#include "text_encoding.h"

namespace tessera::server {

SpooledUpload::SpooledUpload(SpooledUpload&& other) noexcept { *this = std::move(other); }

SpooledUpload& SpooledUpload::operator=(SpooledUpload&& other) noexcept {
    if (this == &other) return *this;
    remove_file();
    directory = std::move(other.directory);
    files = other.files;
    received = std::move(other.received);
    manifest_json = std::move(other.manifest_json);
    delta_bytes = other.delta_bytes;
    body_sha256 = std::move(other.body_sha256);
    delta_sha256 = std::move(other.delta_sha256);
    error = std::move(other.error);
    disk_error = other.disk_error;
    delta_file_ = other.take_delta_file();
    return *this;
}

SpooledUpload::~SpooledUpload() { remove_file(); }

std::filesystem::path SpooledUpload::take_delta_file() { return std::exchange(delta_file_, {}); }

void SpooledUpload::remove_file() {
    if (delta_file_.empty()) return;
    // Not removed (a failing disk): a start removes it as an orphan temp file.
    (void)files->remove(delta_file_);
    delta_file_.clear();
}

SpoolWriter::~SpoolWriter() = default;

void SpoolWriter::fail(std::string message, bool disk) {
    if (!upload_.error.empty()) return;  // the first reason stands
    upload_.error = std::move(message);
    upload_.disk_error = disk;
    file_.reset();
}

void SpoolWriter::open() {
    if (std::exchange(opened_, true)) return;
    // Named as AtomicFileWriter's temp files, and without ".delta": a start after a crash
    // removes it as an orphan.
    auto path = upload_.directory / ("upload" + common::temp_file_suffix());
    auto file = upload_.files->create(path);
    if (!file) return fail(file.message(), true);
    file_ = std::move(*file);
    upload_.delta_file_ = std::move(path);
}

void SpoolWriter::write(const std::uint8_t* data, std::size_t size) {
    if (!opened_) open();
    body_hash_.update({data, size});
    if (upload_.error.empty()) take(data, size);
}

// Splits the bytes into the 4-byte little-endian manifest length, the manifest and the delta
// (as unpack_result_upload), the delta to the spool file.
void SpoolWriter::take(const std::uint8_t* data, std::size_t size) {
    while (prefix_read_ < prefix_.size() && size > 0) {
        prefix_[prefix_read_++] = *data++;
        --size;
        if (prefix_read_ < prefix_.size()) continue;
        auto length = common::read_manifest_length(prefix_.data());
        if (!length) return fail(length.message(), false);
        manifest_length_ = *length;
    }
    auto& manifest = upload_.manifest_json;
    if (manifest.size() < manifest_length_ && size > 0) {
        auto part = std::min<std::size_t>(size, manifest_length_ - manifest.size());
        manifest.append(reinterpret_cast<const char*>(data), part);
        data += part;
        size -= part;
    }
    if (size == 0) return;
    delta_hash_.update({data, size});
    upload_.delta_bytes += size;
    if (auto written = file_->append({data, size}); !written) fail(written.message(), true);
}

void SpoolWriter::spool_received() {
    write(upload_.received.data(), upload_.received.size());
    upload_.received.clear();
}

void SpoolWriter::finish() {
    // An empty body has its (empty) spool file too.
    if (!opened_) open();
    upload_.body_sha256 = common::to_hex(body_hash_.finish());  // the signature is checked first, whatever else
    if (!upload_.error.empty()) return;
    if (prefix_read_ < prefix_.size()) return fail(common::kUploadTooShort, false);
    if (upload_.manifest_json.size() < manifest_length_)
        return fail("result upload: manifest length " + std::to_string(manifest_length_) + " exceeds the body", false);
    upload_.delta_sha256 = common::to_hex(delta_hash_.finish());
    // Durability comes when the intake moves the file into place (it fsyncs it then).
    auto closed = file_->close();
    file_.reset();
    if (!closed) fail(closed.message(), true);
}

SpooledUpload spool_upload(common::ByteView body, std::filesystem::path directory, FileSystem& files) {
    SpooledUpload upload;
    upload.directory = std::move(directory);
    upload.files = &files;
    SpoolWriter writer(upload);
    writer.open();
    writer.write(body.data(), body.size());
    writer.finish();
    return upload;
}

}  // namespace tessera::server
