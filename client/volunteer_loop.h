// The volunteer's state machine (volunteer.h runs it): one method per phase, each returning the
// next phase or a Stop. Connecting, registering and resuming are in volunteer.cpp; a unit's
// work from asking for it to its verdict in volunteer_work.cpp.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "backoff.h"
#include "blob_cache.h"
#include "carried_state.h"
#include "client_state.h"
#include "heartbeat.h"
#include "preference_watcher.h"
#include "server_api.h"
#include "turn_table.h"
#include "training/work_runner.h"
#include "volunteer.h"

namespace tessera::client::detail {

// The work unit in hand, from its verified envelope to its upload.
struct UnitInHand {
    common::WorkUnit unit;
    std::string envelope_json;
    std::filesystem::path model;
    std::vector<std::filesystem::path> shards;
    std::string upload;  // the packed result, once trained
    // Bytes downloaded for this unit, by what they were (blobs already held count nothing).
    std::int64_t model_bytes = 0, patch_bytes = 0, shard_bytes = 0;
    common::TrainMetrics metrics;
    std::string device;
};

// An upload that failed for good: the server refused it or answered nonsense. Anything else
// (no trust, a local problem) ends the run with the result kept for the next start.
inline bool upload_is_final(const ApiFailure& failure) {
    return failure.kind == FailureKind::Refused || failure.kind == FailureKind::BadAnswer;
}

// The server answers 409 to a result it already holds (an earlier try got through).
inline bool already_uploaded(const ApiFailure& failure) { return failure.http_status == 409; }

class Volunteer {
public:
    Volunteer(const VolunteerOptions& options, VolunteerControl& control, const SharedMachine* shared);

    Stop run() {
        Next next = Phase::Start;
        while (const auto* phase = std::get_if<Phase>(&next)) next = step(*phase);
        return std::get<Stop>(std::move(next));
    }

private:
    enum class Phase { Start, Connect, Resume, AskForWork, Fetch, Train, Upload, Report };
    using Next = std::variant<Phase, Stop>;

    static const char* phase_name(Phase phase);

    Next step(Phase phase);

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

    Next start();

    bool waiting() const { return control_.paused || control_.held; }

    // Among several servers: this server's turn on the machine, taken (or, `renew`ing the last
    // unit's, competed for again) unless it already holds it. False when a stop request, a
    // pause or a preference's wait came first (no turn then).
    bool hold_turn(bool renew);

    // Among several servers, training needs the turn (given up if a download failed); a pause
    // does not stop it here, as it does not stop training in hand. False: quit was asked.
    bool turn_for_training();

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
    Next connect();

    // One line when the server recommends a newer client (older ones it refuses at
    // registration). Best effort: a server without GET /api/v1/server says nothing.
    void advise_update() const;

    // A unit left by the last run: upload a finished result, otherwise give the unit back.
    Next resume();

    Next ask_for_work();

    // Verifies a work unit's envelope against the pinned key before anything else reads it.
    common::Result<common::WorkUnit> open_work_unit(const common::SignedEnvelope& envelope) const;

    // The model and shards into the cache. A blob that cannot be had (refused, corrupt twice,
    // the disk) stops the volunteer: the next unit would need it too.
    Next fetch();

    // The unit's model from the one held and the unit's patches. Any failure but a stop is
    // logged and answered by downloading the model whole.
    ApiResult<std::filesystem::path> patch_model(const Url& base);

    // A blob into the cache; `downloaded` grows by its size when it was not held.
    ApiResult<std::filesystem::path> fetch_blob(const common::BlobRef& blob, const Url& base, std::int64_t& downloaded);

    Next train();
    // How a unit trains here: the device, threads and memory, and what carries over between units.
    RunOptions run_options();

    // The result as uploaded, also kept in the state directory until the server has it.
    Next pack(RunOutput output);

    Next upload();

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
    static bool too_late_to_finish(const common::WorkUnit& unit, std::int64_t step, const TrainingClock& clock);

    // `tessera-client pause`, or a preference that says wait, between two training steps:
    // heartbeats go on meanwhile, and the unit's deadline keeps running. A pause past it loses
    // the unit (the heartbeat says stop); a preference's wait gives the unit back once it could
    // no longer finish in time (too_late_to_finish), so the server can reissue it at once.
    // False: give the unit back.
    bool wait_while_paused(const HeartbeatSender& heartbeat, std::int64_t step, TrainingClock& clock) const;

    // Validation usually settles within a second: wait up to 5 s for the verdict to print it.
    Next report();

    // After an upload: keep this unit's blobs, evict over the quota, remember the shards held.
    Next unit_done();

    void remember() const {
        Remembered remembered{{known_shards_.begin(), known_shards_.end()}, samples_per_s_, held_model_};
        if (auto saved = state_.save_remembered(remembered); !saved) log_.error("cannot remember: " + saved.message());
    }

    // The cached shards, for locality scheduling: model versions are left out (a new one comes
    // with nearly every unit, so they would only grow the request), and the list is capped.
    std::vector<std::string> cached_shards() const;

    // Gives the unit in hand back to the server (best effort) and forgets it; then `stop`.
    Stop give_back(Stop stop);

    // The server no longer wants the unit (heartbeat): nothing to give back, ask for another.
    Next drop_unit();

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
    std::optional<TurnTable::Turn> turn_;         // among several servers: from asking for a unit to the next ask
    std::unique_ptr<PreferenceWatcher> watcher_;  // last: its thread writes to control_ and log_
};

}  // namespace tessera::client::detail
