// Validator: loss checks as units of their own (docs/operations.md, "Loss-check units"). A result
// drawn for the loss checks in a task with `check_by volunteers` whose other checks passed is
// held while a trusted volunteer evaluates it; the answer is checked on a sample of its rows,
// and the held result validated again with it. A result nobody answers for in time, or whose
// answer is refused, is checked by the server itself.
#include <boost/json.hpp>

#include "assignment_unit.h"
#include "dataset_manifest.h"
#include "json_strict.h"
#include "loss_report.h"
#include "rejection_reasons.h"
#include "replay_audit.h"
#include "validator.h"

namespace tessera::server {
namespace {

std::string check_unit_id(const std::string& assignment_id) { return "ck-" + assignment_id; }

// The checked result's file as a blob, once its check is settled (the held-out shard stays).
common::Status drop_result_blob(Store& store, BlobStore& blobs, const WorkUnitRecord& check) {
    auto spec = common::parse_json_strict(check.check_spec);
    auto parsed = spec ? common::loss_check_from_json(*spec) : common::Result<common::LossCheck>(spec.error());
    if (!parsed) return common::with_context("loss-check unit " + check.id, parsed.error());
    // Two results can be one file (a unit trained again on the same base, a copy): kept while an
    // open unit names it.
    auto in_use = store.check_blob_in_use(parsed->result.sha256);
    if (!in_use) return in_use.error();
    return *in_use ? common::Status() : blobs.remove(parsed->result.sha256);
}

}  // namespace

bool Validator::checks_by_volunteers(const TaskConfig& config) {
    return config.check_by == "volunteers" && config.catch_up_states == 0 &&
           config.check_samples <= common::kMaxCheckSamples;
}

common::Result<bool> Validator::waits_for_check(const AssignmentRecord& a, bool answered, bool& by_server) {
    auto until = check_wait_end(a);
    if (!until || answered) return false;
    auto unit = store_.work_unit(check_unit_id(a.id));
    if (!unit) return unit.error();
    const bool open = *unit && (*unit)->state == WorkUnitState::Open;
    if (open && clock_() < *until) {
        auto held = store_.hold_result(a.id, *a.metrics_json, *until);
        if (!held) return held.error();
        return true;
    }
    // Nobody answered in time, or the unit could not be answered: the server checks it.
    by_server = true;
    if (!*unit) return false;
    if (open)
        if (auto status = store_.retire_open_unit((*unit)->id); !status) return status.error();
    if (auto status = drop_result_blob(store_, blobs_, **unit); !status) return status.error();
    return false;
}

common::Result<common::BlobRef> Validator::held_out_blob(const TaskConfig& config) {
    {
        std::lock_guard lock(mutex_);
        if (auto found = held_out_blobs_.find(config.data_dir); found != held_out_blobs_.end()) return found->second;
    }
    std::filesystem::path dir = config.data_dir;
    auto manifest = common::load_dataset_manifest(dir / "dataset.json");
    if (!manifest) return manifest.error();
    auto blob = blobs_.put_file(dir / manifest->validation.file, manifest->validation.sha256);
    if (!blob) return common::with_context("the held-out shard", blob.error());
    std::lock_guard lock(mutex_);
    held_out_blobs_[config.data_dir] = *blob;
    return *blob;
}

common::Status Validator::ask_for_check(const AssignmentRecord& a, const TaskView& task, const WorkUnitRecord& unit) {
    auto bytes = results_.read_bytes(a.id);
    if (!bytes) return bytes.error();
    auto result = blobs_.put(*bytes);
    if (!result) return result.error();
    auto held_out = held_out_blob(task.config);
    if (!held_out) return held_out.error();
    const auto now = clock_();
    WorkUnitRecord check = unit;
    check.id = check_unit_id(a.id);
    check.base_version = a.base_version;
    check.created_at = now;
    check.checks = a.id;
    check.checks_client = a.client_id;
    check.check_spec =
        boost::json::serialize(common::to_json(common::LossCheck{*result, *held_out, task.config.check_samples}));
    auto made = store_.create_check_unit(check);
    if (!made) return made.error();
    auto held = store_.hold_result(a.id, metrics_asking_check(a, now + kCheckWaitS), now + kCheckWaitS);
    if (!held) return held.error();
    if (!*made) return {};
    boost::json::object event{{"assignment_id", a.id}, {"client_id", a.client_id}, {"wu_id", check.id}};
    return store_.add_event("loss_check_unit", boost::json::serialize(event), now);
}

common::Status Validator::settle_check_answer(const AssignmentRecord& a, const TaskView& task,
                                              const WorkUnitRecord& unit) {
    auto checked = store_.assignment(unit.checks);
    if (!checked) return checked.error();
    if (!*checked || (*checked)->state != AssignmentState::Returned) {
        if (auto status = store_.retire_open_unit(unit.id); !status) return status;
        return reject(a, task, reason::kWorkUnitRetired, "the result it checks was judged without it");
    }
    auto bytes = results_.read_bytes(a.id);
    if (!bytes) return bytes.error();
    auto report =
        common::parse_loss_report(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
    std::string refusal = report ? std::string() : "the report does not parse: " + report.message();
    if (report) {
        auto sent = sent_work_unit(**checked);
        if (!sent) return sent.error();
        std::uint64_t seed = 0;
        {
            std::lock_guard lock(mutex_);
            seed = rng_();
        }
        auto spot = checks_.spot_check(**checked, task, *sent, *report, seed);
        if (!spot) return spot.error();
        refusal = std::move(*spot);
    }
    if (!refusal.empty()) {
        // Refused as a failed audit is, and the server checks the result itself.
        if (auto status = reject(a, task, reason::kCheckMismatch, refusal); !status) return status;
        if (auto status = store_.retire_open_unit(unit.id); !status) return status;
        if (auto status = drop_result_blob(store_, blobs_, unit); !status) return status;
        return validate(unit.checks, nullptr);
    }
    const double forward_passes = 2.0 * static_cast<double>(report->held_out_before.size() + report->own_before.size());
    auto confirmed = store_.confirm_check_answer(a, forward_passes / kForwardPassesPerSample / 1000.0, clock_());
    if (!confirmed) return confirmed.error();
    results_.remove(a.id);
    if (!*confirmed) return {};
    if (auto status = drop_result_blob(store_, blobs_, unit); !status) return status;
    return validate(unit.checks, &*report);
}

}  // namespace tessera::server
