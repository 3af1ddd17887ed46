// The volunteer's state machine, a unit's work: asking for it, downloading (patches or the whole
// model, the shards), training with heartbeats and pauses, packing and uploading the result,
// and waiting for the verdict.
#include "volunteer_loop.h"

#include <boost/json.hpp>

#include "file_io.h"
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

std::string short_number(double value) { return std::to_string(value).substr(0, 6); }

}  // namespace

Volunteer::Next Volunteer::ask_for_work() {
    if (waiting()) turn_.reset();  // waiting is no server's work
    while (waiting() && !stop_requested()) {
        status_.set_phase(control_.paused ? "paused" : "waiting");
        sleep_unless_stopping(std::chrono::milliseconds(200), stopping());
    }
    if (stop_requested()) {
        ahead_.reset();  // gives the unit fetched ahead back
        return join_background_upload().value_or(Stop{});
    }
    if (ahead_) {
        auto fetched = ahead_->take();
        ahead_.reset();
        if (fetched.stop) return *fetched.stop;
        if (fetched.unit) {
            log_.info("work", "work unit " + fetched.unit->unit.wu_id + ": fetched while the last one trained",
                      {{"wu_id", fetched.unit->unit.wu_id}});
            auto next = begin_unit(std::move(*fetched.unit), Phase::Train);
            state_.clear_next();
            return next;
        }
    }
    if (!hold_turn(true)) return stop_requested() ? Next{Stop{}} : Next{Phase::AskForWork};  // paused meanwhile
    auto request = work_request(cache_.find(held_model_) ? held_model_ : std::string(), {});
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
    UnitInHand hand;
    hand.unit = std::move(*unit);
    hand.envelope_json = boost::json::serialize(common::envelope_to_json(response->work_unit));
    const auto& u = hand.unit;
    log_.info("work",
              "work unit " + u.wu_id + ": model " + u.model + " v" + std::to_string(u.base_version) + ", " +
                  std::to_string(u.hyper.local_steps) + " steps × " + std::to_string(u.hyper.batch_size),
              {{"wu_id", u.wu_id}});
    return begin_unit(std::move(hand), Phase::Fetch);
}

common::WorkRequest Volunteer::work_request(const std::string& held_model,
                                            const std::vector<common::BlobRef>& also_cached) {
    auto shards = cached_shards();
    for (const auto& blob : also_cached)
        if (shards.size() < common::kMaxCachedShards &&
            std::find(shards.begin(), shards.end(), blob.sha256) == shards.end())
            shards.push_back(blob.sha256);
    return {api_->client_id(),
            device_,
            samples_per_s_,
            std::move(shards),
            held_model,
            options_.preferences.tasks.only,
            options_.preferences.tasks.exclude};
}

Volunteer::Next Volunteer::begin_unit(UnitInHand hand, Phase next) {
    unit_.emplace(std::move(hand));
    const auto& u = unit_->unit;
    if (auto saved = state_.save_current({unit_->envelope_json, u.wu_id, "training"}); !saved)
        return give_back(Stop{StopReason::Error, saved.message()});
    status_.set_unit(u.wu_id, u.hyper.local_steps);
    return next;
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
    UnitDownloader downloader(cache_, http_, log_, download_settings());
    auto downloaded = downloader.download(*unit_);
    if (downloaded) return Phase::Train;
    // A loss-check unit's inputs go once its result is judged: given back, no reason to stop.
    if (unit_->unit.check && downloaded.error().kind == FailureKind::Refused) {
        log_.info("check_gone", unit_->unit.wu_id + ": its inputs are gone (" + downloaded.message() + "); given back");
        give_back(Stop{});
        return Phase::AskForWork;
    }
    return give_back(stop_for(downloaded.error()));
}

UnitDownloader::Settings Volunteer::download_settings() {
    return {server_, options_.retry, abandoning(), [this] { turn_.reset(); }, true};
}

bool Volunteer::looks_ahead() const {
    return options_.look_ahead_lead.count() > 0 && !options_.once && !shared_ && !stop_requested() && !waiting();
}

void Volunteer::look_ahead_when_due(std::int64_t step, const TrainingClock& clock) {
    if (ahead_ || !looks_ahead()) return;
    auto left = clock.seconds_left(step, unit_->unit.hyper.local_steps);
    if (!left) return;
    double training_s = clock.seconds_trained() + *left;
    hide_transfers_ = hide_transfers_ || last_download_s_ + last_upload_s_ >= options_.look_ahead_share * training_s;
    auto lead = std::chrono::duration<double>(options_.look_ahead_lead).count() + 2 * last_download_s_;
    if (!hide_transfers_ || *left > lead) return;
    auto settings = download_settings();
    settings.on_failure = {};  // no turn to give up: the machine is this server's alone
    settings.progress_bars = false;
    settings.give_up = stopping();  // a finish request ends its retries too
    LookAhead::Context context{*api_,
                               http_.options(),
                               cache_,
                               state_,
                               log_,
                               std::move(settings),
                               [this](const common::SignedEnvelope& envelope) { return open_work_unit(envelope); }};
    const auto& unit = unit_->unit;
    ahead_ = std::make_unique<LookAhead>(std::move(context), work_request(unit.model_blob.sha256, unit.shards));
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
        run.twin_moments = unit_->moments;
        common::ProgressBar bar("train " + unit.wu_id, unit.hyper.local_steps);
        TrainingClock clock;
        last_download_s_ = unit_->download_s;
        hide_transfers_ = false;
        run.progress = [&](std::int64_t step, std::int64_t, double loss, double speed) {
            status_.set_progress(step);
            held_too_long = !wait_while_paused(heartbeat, step, clock);
            if (held_too_long || control_.abandon_now || heartbeat.told_to_stop()) throw Interrupted();
            look_ahead_when_due(step, clock);
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

std::optional<Volunteer::Next> Volunteer::save_upload(const common::Bytes& body) {
    if (auto written = common::write_file_atomic(state_.delta_file(), body); !written)
        return give_back(Stop{StopReason::Error, written.message()});
    if (auto saved = state_.save_current({unit_->envelope_json, unit_->unit.wu_id, "uploading"}); !saved)
        return give_back(Stop{StopReason::Error, saved.message()});
    return std::nullopt;
}

Volunteer::Next Volunteer::pack(RunOutput output) {
    const auto& unit = unit_->unit;
    samples_per_s_ = output.metrics.samples_per_s;
    auto body = common::pack_result_of(unit, api_->client_id(), output.delta, output.metrics,
                                       output.device.substr(0, common::kMaxDeviceName), &output.commitments);
    if (auto stop = save_upload(body)) return *stop;
    // After the delta it belongs with is safe: a crash in between carries it twice, once.
    if (!output.feedback_note.empty()) log_.info("feedback", output.feedback_note);
    if (!output.optimizer_note.empty()) log_.info("optimizer", output.optimizer_note);
    // The moments this unit resumed (the state file until it is replaced, or an audit twin's
    // downloaded moments) stay until its upload is answered: a replay audit may ask for them.
    if (const auto& resumed = output.commitments.moments_in; resumed && !resumed->sha256.empty())
        if (auto kept = state_.keep_moments_in(unit.wu_id, unit_->moments); !kept)
            log_.error("moments", kept.message());
    for (const auto& problem : save_carried_state(state_, carried_)) log_.error(problem);
    unit_->upload.assign(body.begin(), body.end());
    unit_->metrics = output.metrics;
    unit_->device = output.device;
    return Phase::Upload;
}

Volunteer::Next Volunteer::upload() {
    if (auto stop = join_background_upload()) return *stop;  // this result stays on disk for the next start
    const auto& wu_id = unit_->unit.wu_id;
    if (looks_ahead() && hide_transfers_) {
        if (auto handed = state_.hand_over_upload(); handed) {
            auto settings = delivery_settings();
            settings.on_failure = {};  // no turn to give up: the machine is this server's alone
            uploading_ = std::make_unique<BackgroundUpload>(*api_, http_.options(), delivery_of(*unit_), state_,
                                                            status_, log_, std::move(settings));
            return unit_done();
        } else {
            log_.error(handed.message() + "; uploading " + wu_id + " before the next unit");
        }
    }
    auto started = std::chrono::steady_clock::now();
    auto uploaded = upload_result(*api_, delivery_of(*unit_), log_, delivery_settings());
    last_upload_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    switch (uploaded.how) {
        case Delivered::Uploaded: state_.clear_current(); return Phase::Report;
        case Delivered::Refused: state_.clear_current(); return unit_done();
        case Delivered::Stopped: return kept_for_later(wu_id, state_.delta_file());
        case Delivered::Failed: return stop_for(uploaded.failure);  // the result stays on disk
    }
    return Phase::Report;
}

DeliverySettings Volunteer::delivery_settings() {
    return {options_.retry, stopping(), [this] { turn_.reset(); }, &state_};
}

std::optional<Stop> Volunteer::join_background_upload() {
    if (!uploading_) return std::nullopt;
    auto stop = uploading_->finish();
    last_upload_s_ = uploading_->seconds();
    uploading_.reset();
    return stop;
}

double Volunteer::TrainingClock::seconds_trained() const {
    if (first_step == 0) return 0;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started - waited).count();
}

std::optional<double> Volunteer::TrainingClock::seconds_left(std::int64_t step, std::int64_t steps) const {
    if (first_step == 0 || step <= first_step) return std::nullopt;
    double seconds_per_step = seconds_trained() / static_cast<double>(step - first_step);
    return seconds_per_step * static_cast<double>(steps - step);
}

bool Volunteer::too_late_to_finish(const common::WorkUnit& unit, std::int64_t step, const TrainingClock& clock) {
    if (unit.deadline <= 0) return false;
    auto left = static_cast<double>(unit.deadline - unix_now());
    auto still_to_do = clock.seconds_left(step, unit.hyper.local_steps);
    if (!still_to_do) return left < 0;
    return left < 2 * *still_to_do;
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
    report_verdict(*api_, delivery_of(*unit_), status_, log_, delivery_settings());
    return unit_done();
}

Volunteer::Next Volunteer::unit_done() {
    status_.add_transfers(unit_->model_bytes + unit_->patch_bytes + unit_->shard_bytes,
                          static_cast<std::int64_t>(unit_->upload.size()));
    std::set<std::string> keep{unit_->unit.model_blob.sha256};
    if (ahead_ && (stop_requested() || options_.once)) ahead_.reset();  // gives it back
    if (ahead_)
        for (auto& blob : ahead_->wait()) keep.insert(std::move(blob));  // the next unit's, fetched meanwhile
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
