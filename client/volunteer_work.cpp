// The volunteer's state machine, a unit's work: asking for it, downloading (patches or the whole
// model, the shards), training with heartbeats and pauses, packing and uploading the result,
// and waiting for the verdict.
#include "volunteer_loop.h"

#include <boost/json.hpp>

#include "file_io.h"
#include "model_patcher.h"
#include "progress_bar.h"
#include "result_upload.h"
#include "retry.h"
#include "sha256.h"
#include "signed_envelope.h"
#include "text_encoding.h"

namespace tessera::client::detail {
namespace {

// Thrown from the training progress callback to leave training early.
struct Interrupted {};

std::string describe(const common::ResultStatus& status) {
    if (status.state == "merged" || status.state == "accepted" || status.state == "confirmed")
        return "accepted, credit " + std::to_string(status.credit).substr(0, 6);
    if (status.state == "rejected") return "rejected (" + status.reason + ")";
    if (status.state == "validated") return "valid, waiting for its replica";
    if (status.state == "timed_out") return "too late: the unit had timed out";
    if (status.state == "abandoned") return "the unit had been given back";
    return "uploaded, validation pending";
}

std::string short_number(double value) { return std::to_string(value).substr(0, 6); }

}  // namespace

Volunteer::Next Volunteer::ask_for_work() {
    if (waiting()) turn_.reset();  // waiting is no server's work
    while (waiting() && !stop_requested()) {
        status_.set_phase(control_.paused ? "paused" : "waiting");
        sleep_unless_stopping(std::chrono::milliseconds(200), stopping());
    }
    if (stop_requested()) return Stop{};
    if (!hold_turn(true)) return stop_requested() ? Next{Stop{}} : Next{Phase::AskForWork};  // paused meanwhile
    common::WorkRequest request{api_->client_id(),
                                device_,
                                samples_per_s_,
                                cached_shards(),
                                cache_.find(held_model_) ? held_model_ : std::string(),
                                options_.preferences.tasks.only,
                                options_.preferences.tasks.exclude};
    auto response = with_retries(turn_released_on_failure([&] { return api_->request_work(request); }), stopping(),
                                 log_, "asking for work", options_.retry);
    if (!response) return stop_for(response.error());
    if (!response->has_work) {
        turn_.reset();  // another server may have work meanwhile
        log_.info("no_work", "no work; asking again in " + std::to_string(response->retry_after_s) + " s");
        sleep_unless_stopping(std::chrono::seconds(response->retry_after_s), stopping());
        return Phase::AskForWork;
    }
    auto unit = open_work_unit(response->work_unit);
    if (!unit) {
        // Unsigned or forged work never runs. Give the unit back so it is not lost.
        auto parsed = common::parse_message<common::WorkUnit>(response->work_unit.payload);
        if (parsed) (void)api_->abandon(parsed->wu_id);
        return Stop{StopReason::Untrusted, "refused a work unit: " + unit.message() +
                                               " (checked against the server key pinned in " +
                                               (state_.root() / "identity.json").string() + ")"};
    }
    unit_.emplace();
    unit_->unit = std::move(*unit);
    unit_->envelope_json = boost::json::serialize(common::envelope_to_json(response->work_unit));
    const auto& u = unit_->unit;
    log_.info("work",
              "work unit " + u.wu_id + ": model " + u.model + " v" + std::to_string(u.base_version) + ", " +
                  std::to_string(u.hyper.local_steps) + " steps × " + std::to_string(u.hyper.batch_size),
              {{"wu_id", u.wu_id}});
    if (auto saved = state_.save_current({unit_->envelope_json, u.wu_id, "training"}); !saved)
        return give_back(Stop{StopReason::Error, saved.message()});
    status_.set_unit(u.wu_id, u.hyper.local_steps);
    return Phase::Fetch;
}

common::Result<common::WorkUnit> Volunteer::open_work_unit(const common::SignedEnvelope& envelope) const {
    auto payload = common::open_envelope(envelope, common::kWorkUnitPurpose, *server_key_);
    if (!payload) return payload.error();
    auto unit = common::parse_message<common::WorkUnit>(*payload);
    if (!unit) return unit.error();
    if (unit->client_id != api_->client_id()) return common::make_error("the work unit is for another volunteer");
    return unit;
}

Volunteer::Next Volunteer::fetch() {
    auto base = server_;
    base.path += "/blobs";
    if (!unit_->unit.blob_base_url.empty()) {
        auto parsed = parse_url(unit_->unit.blob_base_url);
        if (!parsed) return give_back(Stop{StopReason::Error, "blob_base_url: " + parsed.message()});
        base = *parsed;
    }
    if (!unit_->unit.patches.empty()) {
        auto patched = patch_model(base);
        if (!patched && patched.error().kind == FailureKind::Stopped) return give_back(stop_for(patched.error()));
        if (patched) unit_->model = *patched;
    }
    if (unit_->model.empty()) {
        auto path = fetch_blob(unit_->unit.model_blob, base, unit_->model_bytes);
        if (!path) return give_back(stop_for(path.error()));
        unit_->model = *path;
    }
    for (const auto& blob : unit_->unit.shards) {
        auto path = fetch_blob(blob, base, unit_->shard_bytes);
        if (!path) return give_back(stop_for(path.error()));
        unit_->shards.push_back(*path);
    }
    return Phase::Train;
}

ApiResult<std::filesystem::path> Volunteer::patch_model(const Url& base) {
    const auto& unit = unit_->unit;
    auto held = cache_.find(unit.patch_from);
    if (!held) return ApiFailure{FailureKind::Local, "the model the patches start from is no longer held"};
    std::vector<std::filesystem::path> patches;
    for (const auto& patch : unit.patches) {
        auto path = fetch_blob(patch, base, unit_->patch_bytes);
        if (!path) {
            if (path.error().kind != FailureKind::Stopped)
                log_.error("patch " + common::short_hash(patch.sha256) + ": " + path.message() +
                           "; downloading the model whole");
            return path.error();
        }
        patches.push_back(*path);
    }
    auto built = build_patched_model(unit, *held, patches, cache_);
    if (!built) {
        log_.error("patches: " + built.message() + "; downloading the model whole");
        return ApiFailure{FailureKind::BadAnswer, built.message()};
    }
    log_.info("patched",
              "model version " + std::to_string(unit.base_version) + " built from " +
                  std::to_string(unit.patches.size()) + " patches",
              {{"patches", unit.patches.size()}});
    return *built;
}

ApiResult<std::filesystem::path> Volunteer::fetch_blob(const common::BlobRef& blob, const Url& base,
                                                       std::int64_t& downloaded) {
    bool held = cache_.find(blob.sha256).has_value();
    common::ProgressBar bar("fetch " + blob.sha256.substr(0, 8), blob.bytes);
    auto download = [&] {
        return cache_.ensure(blob, http_, base, [&](std::uint64_t done, std::uint64_t) {
            if (!log_.quiet()) bar.update(static_cast<std::int64_t>(done));
        });
    };
    auto what = "download of " + common::short_hash(blob.sha256);
    auto path = with_retries(turn_released_on_failure(download), abandoning(), log_, what, options_.retry);
    if (!path && path.error().kind == FailureKind::BadAnswer) {  // corrupt in transit? once more
        log_.error(what + ": " + path.message() + "; downloading it again");
        path = with_retries(turn_released_on_failure(download), abandoning(), log_, what, options_.retry);
    }
    if (path && !log_.quiet()) bar.finish(std::to_string(blob.bytes) + " bytes");
    if (path && !held) downloaded += blob.bytes;
    return path;
}

RunOptions Volunteer::run_options() {
    RunOptions run;
    run.device = options_.device;
    run.threads = options_.threads;
    run.max_gpu_memory_gb = options_.max_gpu_memory_gb;
    run.feedback = &carried_.feedback;
    run.optimizer = &carried_.optimizer;
    return run;
}

Volunteer::Next Volunteer::train() {
    const auto& unit = unit_->unit;
    if (!turn_for_training()) return give_back(Stop{StopReason::Requested, unit.wu_id + ": abandoned on request"});
    std::optional<common::Result<RunOutput>> output;
    bool interrupted = false;
    bool told_to_stop = false;
    bool held_too_long = false;
    {
        // Heartbeats only while training, on their own connection with a short timeout so
        // that ending training never waits long for one in flight.
        auto heartbeat_http = http_.options();
        heartbeat_http.timeout = std::chrono::seconds(10);
        HeartbeatSender heartbeat(*api_, heartbeat_http, unit.wu_id, options_.heartbeat_interval, log_);
        auto run = run_options();
        common::ProgressBar bar("train " + unit.wu_id, unit.hyper.local_steps);
        TrainingClock clock;
        run.progress = [&](std::int64_t step, std::int64_t, double loss, double speed) {
            status_.set_progress(step);
            held_too_long = !wait_while_paused(heartbeat, step, clock);
            if (held_too_long || control_.abandon_now || heartbeat.told_to_stop()) throw Interrupted();
            if (!log_.quiet())
                bar.update(
                    step, "loss " + short_number(loss) + ", " + std::to_string(static_cast<int>(speed)) + " samples/s");
        };
        try {
            output.emplace(run_work_unit(unit, unit_->model, unit_->shards, run));
            if (!log_.quiet()) bar.finish(*output ? "done" : "failed");
        } catch (const Interrupted&) {
            interrupted = true;
        }
        told_to_stop = heartbeat.told_to_stop();
        if (turn_) turn_->leave_out(clock.waited);  // the machine was free while training waited
    }
    if (interrupted && told_to_stop) return drop_unit();
    if (interrupted && held_too_long) {
        log_.info("held", unit.wu_id + ": a preference held it too long to finish before its deadline");
        give_back(Stop{});  // forgets the unit: `unit` is gone after this
        return Phase::AskForWork;
    }
    if (interrupted) return give_back(Stop{StopReason::Requested, unit.wu_id + ": abandoned on request"});
    if (!*output) {
        auto why = "training " + unit.wu_id + " failed: " + output->message();
        if (options_.once) return give_back(Stop{StopReason::Error, why});
        give_back(Stop{});
        // The next unit may fail the same way (out of memory at every micro-batch): wait
        // longer after each failure in a row.
        auto wait = training_failures_.ceiling();  // 5 s, doubling to 5 minutes
        (void)training_failures_.next();
        turn_.reset();  // another server's units may train meanwhile
        log_.error(why + "; gave the unit back, asking again in " + std::to_string(wait.count() / 1000) + " s");
        sleep_unless_stopping(wait, stopping());
        return Phase::AskForWork;
    }
    training_failures_.reset();
    return pack(std::move(**output));
}

Volunteer::Next Volunteer::pack(RunOutput output) {
    const auto& unit = unit_->unit;
    samples_per_s_ = output.metrics.samples_per_s;
    auto body = common::pack_result_of(unit, api_->client_id(), output.delta, output.metrics,
                                       output.device.substr(0, common::kMaxDeviceName));
    if (auto written = common::write_file_atomic(state_.delta_file(), body); !written)
        return give_back(Stop{StopReason::Error, written.message()});
    if (auto saved = state_.save_current({unit_->envelope_json, unit.wu_id, "uploading"}); !saved)
        return give_back(Stop{StopReason::Error, saved.message()});
    // After the delta it belongs with is safe: a crash in between carries it twice, once.
    if (!output.feedback_note.empty()) log_.info("feedback", output.feedback_note);
    if (!output.optimizer_note.empty()) log_.info("optimizer", output.optimizer_note);
    for (const auto& problem : save_carried_state(state_, carried_)) log_.error(problem);
    unit_->upload.assign(body.begin(), body.end());
    unit_->metrics = output.metrics;
    unit_->device = output.device;
    return Phase::Upload;
}

Volunteer::Next Volunteer::upload() {
    const auto& wu_id = unit_->unit.wu_id;
    auto uploaded = with_retries(turn_released_on_failure([&] { return api_->upload_result(unit_->upload); }),
                                 stopping(), log_, "uploading " + wu_id, options_.retry);
    if (!uploaded && !already_uploaded(uploaded.error())) {
        const auto& failure = uploaded.error();
        if (failure.kind == FailureKind::Stopped) return kept_for_later(wu_id);
        if (!upload_is_final(failure)) return stop_for(failure);  // the result stays on disk
        log_.info("refused", wu_id + ": the server refused the result: " + failure.message,
                  {{"wu_id", wu_id}, {"status", failure.http_status}});
        state_.clear_current();
        return unit_done();
    }
    state_.clear_current();
    return Phase::Report;
}

bool Volunteer::too_late_to_finish(const common::WorkUnit& unit, std::int64_t step, const TrainingClock& clock) {
    if (unit.deadline <= 0) return false;
    auto left = static_cast<double>(unit.deadline - unix_now());
    if (step <= clock.first_step) return left < 0;
    auto worked = std::chrono::steady_clock::now() - clock.started - clock.waited;
    double seconds_per_step =
        std::chrono::duration<double>(worked).count() / static_cast<double>(step - clock.first_step);
    double still_to_do = seconds_per_step * static_cast<double>(unit.hyper.local_steps - step);
    return left < 2 * still_to_do;
}

bool Volunteer::wait_while_paused(const HeartbeatSender& heartbeat, std::int64_t step, TrainingClock& clock) const {
    clock.saw(step);
    if (!control_.paused && !control_.held) return true;
    auto began = std::chrono::steady_clock::now();
    bool in_time = true;
    while ((control_.paused || control_.held) && !control_.abandon_now && !heartbeat.told_to_stop()) {
        status_.set_phase(control_.paused ? "paused while training" : "waiting while training");
        if (control_.held && too_late_to_finish(unit_->unit, step, clock)) {
            in_time = false;
            break;
        }
        std::this_thread::sleep_for(kStopCheckStep);
    }
    clock.waited += std::chrono::steady_clock::now() - began;
    status_.set_phase("training");
    return in_time;
}

Volunteer::Next Volunteer::report() {
    const auto& wu_id = unit_->unit.wu_id;
    common::ResultStatus outcome{wu_id, "returned", "", 0};
    for (int i = 0; i < 20 && outcome.state == "returned"; ++i) {
        if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
        auto status = api_->result_status(wu_id);
        if (!status) break;
        outcome = *status;
    }
    status_.add_result(wu_id, outcome.state, outcome.reason, outcome.credit);
    const auto& metrics = unit_->metrics;
    auto bytes = static_cast<std::int64_t>(unit_->upload.size());
    log_.info("result",
              wu_id + ": " + describe(outcome) + "; loss " + short_number(metrics.loss_start) + " → " +
                  short_number(metrics.loss_end) + ", " + std::to_string(static_cast<int>(metrics.samples_per_s)) +
                  " samples/s, " + std::to_string(bytes) + " bytes",
              {{"wu_id", wu_id},
               {"state", outcome.state},
               {"reason", outcome.reason},
               {"credit", outcome.credit},
               {"bytes", bytes},
               {"model_bytes", unit_->model_bytes},
               {"patch_bytes", unit_->patch_bytes},
               {"shard_bytes", unit_->shard_bytes},
               {"samples_per_s", metrics.samples_per_s},
               {"device", unit_->device}});
    return unit_done();
}

Volunteer::Next Volunteer::unit_done() {
    status_.add_transfers(unit_->model_bytes + unit_->patch_bytes + unit_->shard_bytes,
                          static_cast<std::int64_t>(unit_->upload.size()));
    std::set<std::string> keep{unit_->unit.model_blob.sha256};
    held_model_ = unit_->unit.model_blob.sha256;
    for (const auto& shard : unit_->unit.shards) {
        keep.insert(shard.sha256);
        known_shards_.insert(shard.sha256);
    }
    unit_.reset();
    status_.set_unit("", 0);
    cache_.evict(keep);
    auto held = cache_.held();
    std::set<std::string> still_held;
    for (auto& hash : held)
        if (known_shards_.count(hash) > 0) still_held.insert(std::move(hash));
    known_shards_ = std::move(still_held);
    remember();
    if (options_.once) return Stop{StopReason::OnceDone, ""};
    return Phase::AskForWork;
}

std::vector<std::string> Volunteer::cached_shards() const {
    std::vector<std::string> shards;
    for (auto& hash : cache_.held())
        if (known_shards_.count(hash) > 0 && shards.size() < common::kMaxCachedShards)
            shards.push_back(std::move(hash));
    return shards;
}

Stop Volunteer::give_back(Stop stop) {
    auto abandoned = api_->abandon(unit_->unit.wu_id);
    log_.info("abandoned", unit_->unit.wu_id + ": given back" + (abandoned ? "" : " (" + abandoned.message() + ")"),
              {{"wu_id", unit_->unit.wu_id}});
    state_.clear_current();
    unit_.reset();
    status_.set_unit("", 0);
    return stop;
}

Volunteer::Next Volunteer::drop_unit() {
    state_.clear_current();
    unit_.reset();
    status_.set_unit("", 0);
    return Phase::AskForWork;
}

}  // namespace tessera::client::detail
