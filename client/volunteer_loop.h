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
#include "look_ahead.h"
#include "preference_watcher.h"
#include "result_delivery.h"
#include "server_api.h"
#include "turn_table.h"
#include "unit_download.h"
#include "training/work_runner.h"
#include "volunteer.h"

namespace tessera::client::detail {

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

    // What the last run left: a unit fetched ahead is given back; a finished result (uploading
    // in the background, or the unit in hand) is uploaded, an unfinished unit given back.
    Next resume();
    // One unit left: its result in `delta` uploaded, or the unit given back; a Stop to end with.
    std::optional<Stop> resume_unit(const CurrentWork& work, const std::filesystem::path& delta);

    Next ask_for_work();
    // What a request for work says: the model held (patches start there), the shards cached
    // and `also_cached`, the task preferences.
    common::WorkRequest work_request(const std::string& held_model, const std::vector<common::BlobRef>& also_cached);
    // The unit in hand from here on, saved as the current one; then `next`.
    Next begin_unit(UnitInHand hand, Phase next);

    // Verifies a work unit's envelope against the pinned key before anything else reads it.
    common::Result<common::WorkUnit> open_work_unit(const common::SignedEnvelope& envelope) const;

    // The model and shards into the cache. A blob that cannot be had (refused, corrupt twice,
    // the disk) stops the volunteer: the next unit would need it too.
    Next fetch();
    UnitDownloader::Settings download_settings();

    Next train();
    // How a unit trains here: the device, threads and memory, and what carries over between units.
    RunOptions run_options();

    // A loss-check unit (docs/protocol.md, "Loss-check units"): its losses measured on the CPU and
    // packed as its result; inputs it cannot use give the unit back.
    Next check();

    // The result as uploaded, also kept in the state directory until the server has it.
    Next pack(RunOutput output);
    // `body` (a packed upload) saved as the current unit's: a stop when it could not be.
    std::optional<Next> save_upload(const common::Bytes& body);

    // With look-ahead, the result is handed to a BackgroundUpload and the loop goes on to the
    // next unit; otherwise uploaded here. Either way the last background upload ends first.
    Next upload();
    DeliverySettings delivery_settings();
    // Waits for the result uploading in the background, if any: the Stop it calls for.
    std::optional<Stop> join_background_upload();

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
        // Seconds of training still to do after `step` of `steps`, at the pace so far; none
        // before a pace is known.
        std::optional<double> seconds_left(std::int64_t step, std::int64_t steps) const;
        double seconds_trained() const;
    };

    // Whether a preference's wait has gone on so long that less than twice the training still
    // to do (at the pace so far; before a pace is known, nothing) is left before the deadline.
    static bool too_late_to_finish(const common::WorkUnit& unit, std::int64_t step, const TrainingClock& clock);

    // Look-ahead (client/look_ahead.h): whether this volunteer may fetch its next unit while it
    // trains (not with --once, among several servers, or once stopping or waiting); whether
    // this unit's transfers are worth hiding (the last download and upload took at least
    // `--look-ahead-share` of its training time); and, when both, the start of that once the
    // training left is within the lead (`--look-ahead-s`) plus twice the last download time.
    bool looks_ahead() const;
    void look_ahead_when_due(std::int64_t step, const TrainingClock& clock);

    // `tessera-client pause`, or a preference that says wait, between two training steps:
    // heartbeats go on meanwhile, and the unit's deadline keeps running. A pause past it loses
    // the unit (the heartbeat says stop); a preference's wait gives the unit back once it could
    // no longer finish in time (too_late_to_finish), so the server can reissue it at once.
    // False: give the unit back.
    bool wait_while_paused(const HeartbeatSender& heartbeat, std::int64_t step, TrainingClock& clock) const;

    // The verdict, then the unit is done.
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
    std::unique_ptr<LookAhead> ahead_;             // the next unit, asked for while this one trains
    std::unique_ptr<BackgroundUpload> uploading_;  // the last unit's result, delivered while the next trains
    double last_download_s_ = 0;                   // the last unit's downloads took this long
    double last_upload_s_ = 0;                     // and the last upload
    bool hide_transfers_ = false;                  // this unit's: look ahead, and upload while the next trains
    std::optional<TurnTable::Turn> turn_;         // among several servers: from asking for a unit to the next ask
    std::unique_ptr<PreferenceWatcher> watcher_;  // last: its thread writes to control_ and log_
};

}  // namespace tessera::client::detail
