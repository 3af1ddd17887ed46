// Result upload framing: a length-prefixed manifest followed by the delta.
#include "result_upload.h"

#include <boost/json/serialize.hpp>

#include "sha256.h"

namespace tessera::common {

Bytes pack_result_upload(std::string_view manifest_json, ByteView delta) {
    Bytes body;
    body.reserve(kManifestLengthBytes + manifest_json.size() + delta.size());
    auto length = static_cast<std::uint32_t>(manifest_json.size());
    for (std::size_t i = 0; i < kManifestLengthBytes; ++i) body.push_back(static_cast<std::uint8_t>(length >> (8 * i)));
    auto manifest = as_bytes(manifest_json);
    body.insert(body.end(), manifest.begin(), manifest.end());
    body.insert(body.end(), delta.begin(), delta.end());
    return body;
}

ResultManifest result_manifest_of(const WorkUnit& unit, const std::string& client_id, ByteView delta,
                                  const TrainMetrics& metrics, const std::string& device,
                                  const Commitments* commitments) {
    ResultManifest manifest;
    manifest.wu_id = unit.wu_id;
    manifest.client_id = client_id;
    manifest.base_version = unit.base_version;
    manifest.delta_blob = {sha256_hex(delta), static_cast<std::int64_t>(delta.size())};
    manifest.encoding = unit.encoding;
    manifest.metrics = metrics;
    manifest.device = device;
    if (commitments != nullptr) manifest.commitments = *commitments;
    return manifest;
}

Bytes pack_result_of(const WorkUnit& unit, const std::string& client_id, ByteView delta, const TrainMetrics& metrics,
                     const std::string& device, const Commitments* commitments) {
    auto manifest = result_manifest_of(unit, client_id, delta, metrics, device, commitments);
    return pack_result_upload(boost::json::serialize(to_json(manifest)), delta);
}

Result<std::uint32_t> read_manifest_length(const std::uint8_t* prefix) {
    std::uint32_t length = 0;
    for (std::size_t i = 0; i < kManifestLengthBytes; ++i) length |= std::uint32_t{prefix[i]} << (8 * i);
    if (length == 0 || length > kMaxManifestBytes)
        return make_error("result upload: manifest length " + std::to_string(length) + " is outside 1.." +
                          std::to_string(kMaxManifestBytes));
    return length;
}

Result<ResultUploadView> unpack_result_upload(ByteView body) {
    if (body.size() < kManifestLengthBytes) return make_error(kUploadTooShort);
    auto length = read_manifest_length(body.data());
    if (!length) return length.error();
    if (*length > body.size() - kManifestLengthBytes)
        return make_error("result upload: manifest length " + std::to_string(*length) + " exceeds the body");
    return ResultUploadView{as_string_view(body.subspan(kManifestLengthBytes, *length)),
                            body.subspan(kManifestLengthBytes + *length)};
}

}  // namespace tessera::common
