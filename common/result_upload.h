// The body of a result upload (POST /api/v1/results): the result manifest's JSON and the
// delta file in one signed body, so one signature covers both.
// Layout: u32 little-endian manifest length, the manifest JSON, then the delta bytes.
#pragma once

#include <string>
#include <string_view>

#include "bytes.h"
#include "protocol.h"
#include "result.h"

namespace tessera::common {

constexpr std::size_t kMaxManifestBytes = 64 << 10;

struct ResultUploadView {
    std::string_view manifest_json;
    ByteView delta;
};

Bytes pack_result_upload(std::string_view manifest_json, ByteView delta);
// The manifest of a result of `unit` whose delta file is `delta`: the unit's id, base version
// and encoding, the delta's SHA-256 and size, and what the volunteer reports of its training.
ResultManifest result_manifest_of(const WorkUnit& unit, const std::string& client_id, ByteView delta,
                                  const TrainMetrics& metrics, const std::string& device);
// That manifest packed with the delta: the body to upload.
Bytes pack_result_of(const WorkUnit& unit, const std::string& client_id, ByteView delta, const TrainMetrics& metrics,
                     const std::string& device);
// Splits an untrusted body; the views point into `body`.
Result<ResultUploadView> unpack_result_upload(ByteView body);

}  // namespace tessera::common
