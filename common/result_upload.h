// The body of a result upload (POST /api/v1/results): the result manifest's JSON and the
// delta file in one signed body, so one signature covers both.
// Layout: u32 little-endian manifest length, the manifest JSON, then the delta bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "bytes.h"
#include "protocol.h"
#include "result.h"

namespace tessera::common {

constexpr std::size_t kMaxManifestBytes = 64 << 10;
// The bytes before the manifest: its length, u32 little-endian.
constexpr std::size_t kManifestLengthBytes = 4;
// What a body shorter than that prefix is told.
constexpr const char* kUploadTooShort = "result upload: shorter than its 4-byte length prefix";
// How fast an upload's body must arrive at a server's default settings (tessera-server run
// --upload-min-rate): at least this average once the grace has passed.
constexpr std::uint64_t kDefaultUploadMinBytesPerS = 8 << 10;  // 64 kbit/s
constexpr std::int64_t kDefaultUploadGraceS = 300;

struct ResultUploadView {
    std::string_view manifest_json;
    ByteView delta;
};

Bytes pack_result_upload(std::string_view manifest_json, ByteView delta);
// The manifest of a result of `unit` whose delta file is `delta`: the unit's id, base version
// and encoding, the delta's SHA-256 and size, what the volunteer reports of its training, and
// its commitments when given.
ResultManifest result_manifest_of(const WorkUnit& unit, const std::string& client_id, ByteView delta,
                                  const TrainMetrics& metrics, const std::string& device,
                                  const Commitments* commitments = nullptr);
// That manifest packed with the delta: the body to upload.
Bytes pack_result_of(const WorkUnit& unit, const std::string& client_id, ByteView delta, const TrainMetrics& metrics,
                     const std::string& device, const Commitments* commitments = nullptr);
// The manifest's length from a body's first kManifestLengthBytes, if within 1..kMaxManifestBytes.
Result<std::uint32_t> read_manifest_length(const std::uint8_t* prefix);
// Splits an untrusted body; the views point into `body`.
Result<ResultUploadView> unpack_result_upload(ByteView body);

}  // namespace tessera::common
