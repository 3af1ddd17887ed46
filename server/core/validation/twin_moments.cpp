// Audit twins of kept units (twin_moments.h).
#include "twin_moments.h"

#include "optimizer_moments.h"
#include "replay_audit.h"

namespace tessera::server {

bool twinned_from_moments(const AssignmentRecord& a, const TaskConfig& config, const WorkUnitRecord& unit,
                          const ResultFiles& results) {
    return config.audit_by == "volunteers" && audit_asked(a) == "moments" && !asked_for_a_flag(a) &&
           unit.replicas == 1 && results.has_moments(a.id);
}

common::Result<std::optional<common::BlobRef>> publish_twin_moments(const AssignmentRecord& a,
                                                                    const common::Commitments* commitments,
                                                                    const ResultFiles& results, BlobStore& blobs,
                                                                    std::string& refusal) {
    auto bytes = results.read_moments(a.id);
    if (!bytes) return bytes.error();
    if (!*bytes) return common::make_error("the moments of " + a.id + " are gone");
    auto parsed = common::read_optimizer_moments(**bytes);
    if (!parsed) {
        refusal = "the moments it sent do not parse: " + parsed.message();
        return std::optional<common::BlobRef>();
    }
    const auto& m = parsed->moments;
    const auto* stated = commitments != nullptr && commitments->moments_in ? &*commitments->moments_in : nullptr;
    if (stated == nullptr || common::moments_sha256(m.exp_avg, m.exp_avg_sq) != stated->sha256 ||
        m.steps != stated->steps) {
        refusal = "the moments it sent are not those its commitments name";
        return std::optional<common::BlobRef>();
    }
    auto blob = blobs.put(**bytes);
    if (!blob) return blob.error();
    return std::optional<common::BlobRef>(std::move(*blob));
}

common::Status drop_twin_moments(Store& store, BlobStore& blobs, const std::string& work_unit_id) {
    auto unit = store.work_unit(work_unit_id);
    if (!unit) return unit.error();
    if (!*unit || (*unit)->moments_sha256.empty() || (*unit)->state == WorkUnitState::Open) return {};
    const auto& sha256 = (*unit)->moments_sha256;
    auto in_use = store.moments_in_use(sha256);
    if (!in_use) return in_use.error();
    return *in_use ? common::Status() : blobs.remove(sha256);
}

}  // namespace tessera::server
