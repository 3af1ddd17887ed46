// The volunteer's state machine: one method per phase, each returning the next phase or a Stop.
#include "volunteer.h"

#include <boost/json.hpp>

#include <memory>
#include <optional>
#include <set>
#include <variant>

#include "backoff.h"
#include "blob_cache.h"
#include "carried_state.h"
#include "client_state.h"
#include "file_io.h"
#include "heartbeat.h"
#include "model_patcher.h"
#include "preference_watcher.h"
#include "progress_bar.h"
#include "result_upload.h"
#include "server_api.h"
#include "signed_envelope.h"
#include "tessera_version.h"
#include "version_number.h"
#include "text_encoding.h"
#include "turn_table.h"
#include "training/work_runner.h"

namespace tessera::client {
namespace {

// Thrown from the training progress callback to leave training early.
struct Interrupted {};

// The work unit in hand, from its verified envelope to its upload.
struct UnitInHand {
    common::WorkUnit unit;
    std::string envelope_json;
    std::filesystem::path model;
    std::vector<std::filesystem::path> shards;
    std::string upload;  // the packed result, once trained
    common::TrainMetrics metrics;
    std::string device;
};

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

// An upload that failed for good: the server refused it or answered nonsense. Anything else
// (no trust, a local problem) ends the run with the result kept for the next start.
bool upload_is_final(const ApiFailure& failure) {
    return failure.kind == FailureKind::Refused || failure.kind == FailureKind::BadAnswer;
}

// The server answers 409 to a result it already holds (an earlier try got through).
bool already_uploaded(const ApiFailure& failure) { return failure.http_status == 409; }

// The volunteer's HTTP settings, with its bandwidth caps (among several servers, one pair for
// all of them); `quit` stops a transfer in progress.
HttpOptions http_options_of(const VolunteerOptions& options, const SharedMachine* shared,
                            const VolunteerControl& control) {
    HttpOptions http{std::chrono::seconds(60), 16 << 20, options.ca_file, nullptr, nullptr, nullptr};
    http.interrupted = [&control] { return control.abandon_now.load(); };
    if (shared) {
        http.download_limit = shared->download_limit;
        http.upload_limit = shared->upload_limit;
        return http;
    }
    if (options.max_download_mbps > 0)
        http.download_limit =
            std::make_shared<RateLimiter>(RateLimiter::bytes_per_second_of_mbps(options.max_download_mbps));
    if (options.max_upload_mbps > 0)
        http.upload_limit = std::make_shared<RateLimiter>(RateLimiter::bytes_per_second_of_mbps(options.max_upload_mbps));
    return http;
}

class Volunteer {
public:
    Volunteer(const VolunteerOptions& options, VolunteerControl& control, const SharedMachine* shared)
        : options_(options), control_(control), shared_(shared ? std::optional(*shared) : std::nullopt),
          status_(shared ? *shared->status : control.status),
          log_("tessera-client", options.quiet, options.json_logs, shared ? shared->source : ""),
          state_(options.state_dir), http_(http_options_of(options, shared, control)),
          cache_(state_.cache_dir(), options.cache_quota_bytes) {}

    Stop run() {
        Next next = Phase::Start;
        while (const auto* phase = std::get_if<Phase>(&next)) next = step(*phase);
        return std::get<Stop>(std::move(next));
    }

private:
    enum class Phase { Start, Connect, Resume, AskForWork, Fetch, Train, Upload, Report };
    using Next = std::variant<Phase, Stop>;

    static const char* phase_name(Phase phase) {
        switch (phase) {
            case Phase::Start: return "starting";
            case Phase::Connect: return "registering";
            case Phase::Resume: return "resuming";
            case Phase::AskForWork: return "asking for work";
            case Phase::Fetch: return "downloading";
            case Phase::Train: return "training";
            case Phase::Upload: return "uploading";
            case Phase::Report: return "waiting for the verdict";
        }
        return "?";
    }

    Next step(Phase phase) {
        status_.set_phase(phase_name(phase));
        switch (phase) {
            case Phase::Start: return start();
            case Phase::Connect: return connect();
            case Phase::Resume: return resume();
            case Phase::AskForWork: return ask_for_work();
            case Phase::Fetch: return fetch();
            case Phase::Train: return train();
            case Phase::Upload: return upload();
            case Phase::Report: return report();
        }
        return Stop{StopReason::Error, "unknown phase"};
    }

    bool stop_requested() const { return control_.stop_after_unit || control_.abandon_now; }
    std::function<bool()> stopping() const {
        return [this] { return stop_requested(); };
    }
    std::function<bool()> abandoning() const {
        return [this] { return control_.abandon_now.load(); };
    }

    // A failure that ends the loop, as the Stop it becomes.
    static Stop stop_for(const ApiFailure& failure) {
        switch (failure.kind) {
            case FailureKind::Stopped: return {StopReason::Requested, failure.message};
            case FailureKind::Untrusted: return {StopReason::Untrusted, failure.message};
            default: return {StopReason::Error, failure.message};
        }
    }

    Next start() {
        auto server = parse_url(options_.server);
        if (!server) return Stop{StopReason::Error, server.message()};
        server_ = *server;
        auto probed = probe_device(options_.device, options_.threads);
        if (!probed) return Stop{StopReason::Error, probed.message()};
        device_ = *probed;
        device_.name = device_.name.substr(0, 128);
        log_.info("device", "device: " + describe_device(options_.device, options_.threads),
                  {{"kind", device_.kind}, {"name", device_.name}, {"memory_bytes", device_.memory_bytes}});
        auto remembered = state_.load_remembered();
        if (!remembered)
            log_.error(remembered.message() + "; starting without what earlier runs remembered");
        else {
            known_shards_.insert(remembered->shards.begin(), remembered->shards.end());
            samples_per_s_ = remembered->samples_per_s;
            held_model_ = remembered->model;
        }
        std::vector<std::string> problems;
        carried_ = load_carried_state(state_, problems);
        for (const auto& problem : problems) log_.error(problem);
        watch_preferences();
        return Phase::Connect;
    }

    bool waiting() const { return control_.paused || control_.held; }

    // Among several servers: this server's turn on the machine, taken (or, `renew`ing the last
    // unit's, competed for again) unless it already holds it. False when a stop request, a
    // pause or a preference's wait came first (no turn then).
    bool hold_turn(bool renew) {
        if (!shared_) return true;
        if (turn_ && !renew) return true;
        status_.set_phase("waiting for its turn");
        auto give_up = [this] { return stop_requested() || waiting(); };
        bool got = turn_ ? turn_->renew(give_up) : shared_->turns->take(shared_->index, give_up);
        if (got && !turn_) turn_.emplace(*shared_->turns, shared_->index);
        if (got && waiting()) got = false;  // paused just as the turn came
        if (!got) turn_.reset();
        status_.set_worked_seconds(shared_->turns->worked_seconds()[shared_->index]);
        return got;
    }

    // Among several servers, training needs the turn (given up if a download failed); a pause
    // does not stop it here, as it does not stop training in hand. False: quit was asked.
    bool turn_for_training() {
        if (!shared_ || turn_) return true;
        status_.set_phase("waiting for its turn");
        if (!shared_->turns->take(shared_->index, abandoning())) return false;
        turn_.emplace(*shared_->turns, shared_->index);
        return true;
    }

    // A call that gives the turn up when it fails: a server out of reach, retried in the
    // background, must not keep the machine from the others.
    template <class Call>
    auto turn_released_on_failure(Call call) {
        return [this, call] {
            auto result = call();
            if (!result) turn_.reset();
            return result;
        };
    }

    // From here on a preference that says wait holds work (control_.held), and says why.
    void watch_preferences() {
        if (!shared_) watcher_ = client::watch_preferences(options_, control_, log_);  // else run_volunteers does
    }

    // Registers (idempotent: the same key keeps its id) and pins the server's key on first contact.
    Next connect() {
        auto key = state_.load_or_create_key();
        if (!key) return Stop{StopReason::Error, key.message()};
        key_ = std::make_unique<common::SigningKey>(std::move(*key));
        api_ = std::make_unique<ServerApi>(server_, http_, *key_);
        auto response = with_retries([&] { return api_->register_client(options_.name, common::kVersion); }, stopping(),
                                     log_, "registering with " + options_.server, options_.retry);
        if (!response) return stop_for(response.error());
        auto pinned = state_.load_identity();
        if (!pinned) return Stop{StopReason::Error, pinned.message()};
        if (*pinned && (*pinned)->server_public_key != response->server_public_key)
            return Stop{StopReason::Untrusted, "the server's key (" + response->server_key_id +
                                                   ") is not the one pinned at first registration (" +
                                                   (*pinned)->server_key_id +
                                                   "): refusing to work for it. If the operator really changed "
                                                   "keys, remove " +
                                                   (state_.root() / "identity.json").string()};
        Identity identity{options_.server, response->client_id,
                          *pinned ? (*pinned)->server_public_key : response->server_public_key,
                          response->server_key_id};
        if (!*pinned)
            if (auto saved = state_.save_identity(identity); !saved) return Stop{StopReason::Error, saved.message()};
        auto raw = common::from_base64(identity.server_public_key);
        auto verify = raw ? common::VerifyKey::from_raw(*raw) : common::Result<common::VerifyKey>(raw.error());
        if (!verify) return Stop{StopReason::Error, "pinned server key unreadable: " + verify.message()};
        server_key_ = std::make_unique<common::VerifyKey>(std::move(*verify));
        api_->set_client_id(response->client_id);
        status_.set_identity(options_.server, response->client_id,
                                     device_.kind == device_.name ? device_.name : device_.kind + " " + device_.name);
        log_.info("registered",
                  "registered with " + options_.server + " as " + response->client_id + " (server key " +
                      identity.server_key_id + ")",
                  {{"client_id", response->client_id}});
        advise_update();
        return Phase::Resume;
    }

    // One line when the server recommends a newer client (older ones it refuses at
    // registration). Best effort: a server without GET /api/v1/server says nothing.
    void advise_update() const {
        auto info = api_->server_info();
        if (!info || !common::version_older(common::kVersion, info->recommended_client_version)) return;
        log_.info("update", std::string("this server recommends tessera-client ") + info->recommended_client_version +
                                " or newer; this one is " + common::kVersion + ": install a newer one when you can",
                  {{"recommended", info->recommended_client_version}});
    }

    // A unit left by the last run: upload a finished result, otherwise give the unit back.
    Next resume() {
        auto current = state_.load_current();
        if (!current) log_.error(current.message() + "; ignoring the unit the last run left");
        if (!current || !*current) return Phase::AskForWork;
        const auto& work = **current;
        std::error_code error;
        auto body = work.phase == "uploading" && std::filesystem::exists(state_.delta_file(), error)
                        ? common::read_file(state_.delta_file(), std::uint64_t{8} << 30)
                        : common::Result<common::Bytes>(common::make_error("no finished result"));
        if (body) {
            std::string packed(body->begin(), body->end());
            auto uploaded = with_retries([&] { return api_->upload_result(packed); }, stopping(), log_,
                                         "uploading " + work.wu_id, options_.retry);
            if (!uploaded && uploaded.error().kind == FailureKind::Stopped) return kept_for_later(work.wu_id);
            if (!uploaded && !upload_is_final(uploaded.error())) return stop_for(uploaded.error());
            log_.info("resumed",
                      work.wu_id + ": the result left by the last run " +
                          (uploaded || already_uploaded(uploaded.error()) ? std::string("is uploaded")
                                                                          : "was refused: " + uploaded.message()));
        } else {
            auto abandoned = api_->abandon(work.wu_id);
            log_.info("abandoned", work.wu_id + ": the last run left no finished result; given back" +
                                       (abandoned ? "" : " (" + abandoned.message() + ")"));
        }
        state_.clear_current();
        return Phase::AskForWork;
    }

    Next ask_for_work() {
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

    // Verifies a work unit's envelope against the pinned key before anything else reads it.
    common::Result<common::WorkUnit> open_work_unit(const common::SignedEnvelope& envelope) const {
        auto payload = common::open_envelope(envelope, common::kWorkUnitPurpose, *server_key_);
        if (!payload) return payload.error();
        auto unit = common::parse_message<common::WorkUnit>(*payload);
        if (!unit) return unit.error();
        if (unit->client_id != api_->client_id()) return common::make_error("the work unit is for another volunteer");
        return unit;
    }

    // The model and shards into the cache. A blob that cannot be had (refused, corrupt twice,
    // the disk) stops the volunteer: the next unit would need it too.
    Next fetch() {
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
        std::vector<common::BlobRef> blobs;
        if (unit_->model.empty()) blobs.push_back(unit_->unit.model_blob);
        blobs.insert(blobs.end(), unit_->unit.shards.begin(), unit_->unit.shards.end());
        for (const auto& blob : blobs) {
            auto path = fetch_blob(blob, base);
            if (!path) return give_back(stop_for(path.error()));
            if (unit_->model.empty())
                unit_->model = *path;
            else
                unit_->shards.push_back(*path);
        }
        return Phase::Train;
    }

    // The unit's model from the one held and the unit's patches. Any failure but a stop is
    // logged and answered by downloading the model whole.
    ApiResult<std::filesystem::path> patch_model(const Url& base) {
        const auto& unit = unit_->unit;
        auto held = cache_.find(unit.patch_from);
        if (!held) return ApiFailure{FailureKind::Local, "the model the patches start from is no longer held"};
        std::vector<std::filesystem::path> patches;
        for (const auto& patch : unit.patches) {
            auto path = fetch_blob(patch, base);
            if (!path) {
                if (path.error().kind != FailureKind::Stopped)
                    log_.error("patch " + patch.sha256.substr(0, 12) + ": " + path.message() +
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

    ApiResult<std::filesystem::path> fetch_blob(const common::BlobRef& blob, const Url& base) {
        common::ProgressBar bar("fetch " + blob.sha256.substr(0, 8), blob.bytes);
        auto download = [&] {
            return cache_.ensure(blob, http_, base, [&](std::uint64_t done, std::uint64_t) {
                if (!log_.quiet()) bar.update(static_cast<std::int64_t>(done));
            });
        };
        auto what = "download of " + blob.sha256.substr(0, 12);
        auto path = with_retries(turn_released_on_failure(download), abandoning(), log_, what, options_.retry);
        if (!path && path.error().kind == FailureKind::BadAnswer) {  // corrupt in transit? once more
            log_.error(what + ": " + path.message() + "; downloading it again");
            path = with_retries(turn_released_on_failure(download), abandoning(), log_, what, options_.retry);
        }
        if (path && !log_.quiet()) bar.finish(std::to_string(blob.bytes) + " bytes");
        return path;
    }

    Next train() {
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
            RunOptions run;
            run.device = options_.device;
            run.threads = options_.threads;
            run.max_gpu_memory_gb = options_.max_gpu_memory_gb;
            run.feedback = &carried_.feedback;
            run.optimizer = &carried_.optimizer;
            common::ProgressBar bar("train " + unit.wu_id, unit.hyper.local_steps);
            TrainingClock clock;
            run.progress = [&](std::int64_t step, std::int64_t, double loss, double speed) {
                status_.set_progress(step);
                held_too_long = !wait_while_paused(heartbeat, step, clock);
                if (held_too_long || control_.abandon_now || heartbeat.told_to_stop()) throw Interrupted();
                if (!log_.quiet())
                    bar.update(step, "loss " + short_number(loss) + ", " + std::to_string(static_cast<int>(speed)) +
                                         " samples/s");
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

    // The result as uploaded, also kept in the state directory until the server has it.
    Next pack(RunOutput output) {
        const auto& unit = unit_->unit;
        samples_per_s_ = output.metrics.samples_per_s;
        auto body =
            common::pack_result_of(unit, api_->client_id(), output.delta, output.metrics, output.device.substr(0, 128));
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

    Next upload() {
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

    // How long training has run since its first step ended, waits left out: the pace that
    // says how long the rest takes (the first step also loaded the model and the data).
    struct TrainingClock {
        std::int64_t first_step = 0;  // 0: no step seen yet
        std::chrono::steady_clock::time_point started;
        std::chrono::steady_clock::duration waited{};
        void saw(std::int64_t step) {
            if (first_step == 0) {
                first_step = step;
                started = std::chrono::steady_clock::now();
            }
        }
    };

    // Whether a preference's wait has gone on so long that less than twice the training still
    // to do (at the pace so far; before a pace is known, nothing) is left before the deadline.
    static bool too_late_to_finish(const common::WorkUnit& unit, std::int64_t step, const TrainingClock& clock) {
        if (unit.deadline <= 0) return false;
        auto left = static_cast<double>(unit.deadline - unix_now());
        if (step <= clock.first_step) return left < 0;
        auto worked = std::chrono::steady_clock::now() - clock.started - clock.waited;
        double seconds_per_step =
            std::chrono::duration<double>(worked).count() / static_cast<double>(step - clock.first_step);
        double still_to_do = seconds_per_step * static_cast<double>(unit.hyper.local_steps - step);
        return left < 2 * still_to_do;
    }

    // `tessera-client pause`, or a preference that says wait, between two training steps:
    // heartbeats go on meanwhile, and the unit's deadline keeps running. A pause past it loses
    // the unit (the heartbeat says stop); a preference's wait gives the unit back once it could
    // no longer finish in time (too_late_to_finish), so the server can reissue it at once.
    // False: give the unit back.
    bool wait_while_paused(const HeartbeatSender& heartbeat, std::int64_t step, TrainingClock& clock) const {
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
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        clock.waited += std::chrono::steady_clock::now() - began;
        status_.set_phase("training");
        return in_time;
    }

    // Validation usually settles within a second: wait up to 5 s for the verdict to print it.
    Next report() {
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
                   {"samples_per_s", metrics.samples_per_s},
                   {"device", unit_->device}});
        return unit_done();
    }

    // After an upload: keep this unit's blobs, evict over the quota, remember the shards held.
    Next unit_done() {
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

    void remember() const {
        Remembered remembered{{known_shards_.begin(), known_shards_.end()}, samples_per_s_, held_model_};
        if (auto saved = state_.save_remembered(remembered); !saved) log_.error("cannot remember: " + saved.message());
    }

    // The cached shards, for locality scheduling: model versions are left out (a new one comes
    // with nearly every unit, so they would only grow the request), and the list is capped.
    std::vector<std::string> cached_shards() const {
        std::vector<std::string> shards;
        for (auto& hash : cache_.held())
            if (known_shards_.count(hash) > 0 && shards.size() < common::kMaxCachedShards)
                shards.push_back(std::move(hash));
        return shards;
    }

    // Gives the unit in hand back to the server (best effort) and forgets it; then `stop`.
    Stop give_back(Stop stop) {
        auto abandoned = api_->abandon(unit_->unit.wu_id);
        log_.info("abandoned", unit_->unit.wu_id + ": given back" + (abandoned ? "" : " (" + abandoned.message() + ")"),
                  {{"wu_id", unit_->unit.wu_id}});
        state_.clear_current();
        unit_.reset();
        status_.set_unit("", 0);
        return stop;
    }

    // The server no longer wants the unit (heartbeat): nothing to give back, ask for another.
    Next drop_unit() {
        state_.clear_current();
        unit_.reset();
        status_.set_unit("", 0);
        return Phase::AskForWork;
    }

    Stop kept_for_later(const std::string& wu_id) const {
        return {StopReason::Requested, "the result of " + wu_id + " is kept in " + state_.delta_file().string() +
                                           " and is uploaded when the client starts again"};
    }

    const VolunteerOptions& options_;
    VolunteerControl& control_;
    std::optional<SharedMachine> shared_;
    VolunteerStatus& status_;  // this server's board
    common::Logger log_;
    ClientState state_;
    HttpClient http_;
    BlobCache cache_;
    Url server_;
    common::DeviceInfo device_;
    std::unique_ptr<common::SigningKey> key_;
    std::unique_ptr<ServerApi> api_;
    std::unique_ptr<common::VerifyKey> server_key_;
    std::set<std::string> known_shards_;  // blobs that came as shards (the rest are model versions)
    double samples_per_s_ = 0;            // last measured; 0 until the first unit
    std::string held_model_;              // the model blob last trained from (patches start there)
    CarriedState carried_;                // error feedback and optimizer moments between units
    Backoff training_failures_{std::chrono::seconds(5), std::chrono::minutes(5)};
    std::optional<UnitInHand> unit_;
    std::optional<TurnTable::Turn> turn_;       // among several servers: from asking for a unit to the next ask
    std::unique_ptr<PreferenceWatcher> watcher_;  // last: its thread writes to control_ and log_
};

}  // namespace

std::unique_ptr<PreferenceWatcher> watch_preferences(const VolunteerOptions& options, VolunteerControl& control,
                                                     const common::Logger& log) {
    control.status.set_preferences(options.preferences.describe());
    auto sensors = options.sensors ? options.sensors : std::make_shared<SystemSensors>();
    return std::make_unique<PreferenceWatcher>(options.preferences, std::move(sensors), options.preference_interval,
                                               [&control, &log](const std::optional<std::string>& reason) {
                                                   control.held = reason.has_value();
                                                   control.status.set_waiting_because(reason.value_or(""));
                                                   if (reason)
                                                       log.info("waiting", "waiting: " + *reason, {{"reason", *reason}});
                                                   else
                                                       log.info("working", "the preferences let it work again");
                                               });
}

int exit_code(StopReason reason) {
    switch (reason) {
        case StopReason::Requested:
        case StopReason::OnceDone: return 0;
        case StopReason::Error: return 1;
        case StopReason::Untrusted: return 3;
    }
    return 1;
}

Stop run_volunteer(const VolunteerOptions& options, VolunteerControl& control, const SharedMachine* shared) {
    return Volunteer(options, control, shared).run();
}

}  // namespace tessera::client
