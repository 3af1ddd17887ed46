// VolunteerService: the work and result requests, between their transport and the stages.
#include "volunteer_service.h"

#include <optional>

namespace tessera::server {

common::Result<WorkAnswer> VolunteerService::request_work(const ClientRecord& client,
                                                          const common::WorkRequest& request) {
    if (request.client_id != client.id) return WorkAnswer{403, "forbidden", "client_id is not the signer", {}};
    auto device = request.device.kind + ":" + request.device.name;
    if (auto seen = clients_.note_client_seen(client.id, device, request.samples_per_s, clock_()); !seen)
        return seen.error();
    auto response = scheduler_.assign(client, request);
    if (!response) return response.error();
    return WorkAnswer{200, "", "", std::move(*response)};
}

namespace {

// Why a spooled upload cannot be taken (400, or an error for the disk's failure), if it cannot.
std::optional<common::Result<IntakeOutcome>> unreadable(const SpooledUpload& upload) {
    if (upload.delta_file().empty() && upload.error.empty())  // the spool never opened
        return IntakeOutcome{400, "bad_request", common::kUploadTooShort};
    if (upload.error.empty()) return std::nullopt;
    if (upload.disk_error) return common::Result<IntakeOutcome>(common::make_error(upload.error));
    return IntakeOutcome{400, "bad_request", upload.error};
}

}  // namespace

common::Result<IntakeOutcome> VolunteerService::upload(const std::string& client_id, SpooledUpload& upload) {
    if (auto refused = unreadable(upload)) return std::move(*refused);
    ReceivedDelta delta{upload.delta_bytes, upload.delta_sha256, [&upload](ResultFiles& files, const std::string& id) {
                            auto moved = files.adopt(id, upload.delta_file());
                            if (moved) upload.take_delta_file();
                            return moved;
                        }};
    return intake_.receive(client_id, upload.manifest_json, delta);
}

common::Result<IntakeOutcome> VolunteerService::upload_moments(const std::string& client_id, SpooledUpload& upload) {
    if (auto refused = unreadable(upload)) return std::move(*refused);
    ReceivedDelta moments{upload.delta_bytes, upload.delta_sha256,
                          [&upload](ResultFiles& files, const std::string& id) {
                              auto moved = files.adopt_moments(id, upload.delta_file());
                              if (moved) upload.take_delta_file();
                              return moved;
                          }};
    return intake_.receive_moments(client_id, upload.manifest_json, moments);
}

}  // namespace tessera::server
