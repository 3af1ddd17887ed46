// A simulated volunteer's state, and what it sends for a unit: honest training on the unit (the
// client's own work runner, its error feedback and optimizer state carried across units) or its
// attack, packed as the client packs a result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <string>

#include "delta_probe.h"
#include "fleet_sim.h"
#include "in_process_server.h"
#include "training/work_runner.h"

namespace tessera::bench {

// A unit a volunteer holds: its upload is ready (computed when the unit was taken, since it
// depends only on the base model and the unit) and is delivered at `finish`.
// What a volunteer sends: the packed body, of which `delta_bytes` are the delta file.
struct Upload {
    common::Bytes body;
    std::size_t delta_bytes = 0;
    common::Bytes delta;  // the delta file, which a copier can take once the upload is in
    // The kept moments its unit resumed: handed to the server's replay audits as a volunteer
    // will upload them when asked (replay_audit.h).
    std::optional<server::ReplayMoments> moments_in;
    bool check = false;  // a loss-check unit's report, not a delta
};

struct HeldUnit {
    common::WorkUnit unit;
    Upload upload;
    double issued = 0;
    double train_start = 0, train_end = 0;  // after its download (and the unit before it, uploaded)
    double download_s = 0, upload_s = 0;
    double unhidden_s = 0;  // from the end of the training before (or the request) to its start
    double finish = 0;      // its upload is in
};

struct VolunteerState {
    SimVolunteer spec;
    std::string client_id;
    bool online = true;
    bool returning = false;  // offline, with a return scheduled
    std::uint64_t epoch = 0;
    double online_since = 0;
    double next_leave = std::numeric_limits<double>::infinity();  // drawn ahead, one at a time
    double measured_speed = 0;  // reported from the second request on, as the client does
    std::set<std::string> cached_shards;
    std::string cached_model;  // the model blob of its last unit
    std::deque<HeldUnit> held;  // in training order: with look-ahead, the next unit behind the one training
    // Its last upload: when it was in, and when that unit's training had ended (a request at
    // that moment waited for the upload since).
    double uploaded_at = -1, uploaded_trained_at = -1;
    bool ask_after_upload = false;  // a look-ahead met two units in flight: ask again after the upload
    std::mt19937_64 rng;
    client::ErrorFeedback feedback;        // carried across units, as the client keeps it on disk
    client::KeptOptimizerState optimizer;  // used by units that ask for kept state
    std::int64_t units_taken = 0;
    std::deque<common::Bytes> past_deltas;  // an old replayer's last kReplayAge deltas, oldest first
    // The attack of the unit it takes next: after each spec.honest_units honest units, one.
    Attack next_attack() {
        return units_taken++ % (spec.honest_units + 1) == spec.honest_units ? spec.attack : Attack::None;
    }
};

class UploadMaker {
public:
    UploadMaker(server::InProcessServer& server, const SimSettings& settings, DeltaProbe& probe)
        : server_(server), settings_(settings), probe_(probe) {}
    // The signed upload body a volunteer sends for `unit`: honest training, or `attack`.
    common::Result<Upload> compute(VolunteerState& v, const common::WorkUnit& unit, Attack attack);
    // Real seconds spent training so far, apart from the audit twins' (docs/operations.md,
    // "Audit twins") and the replicas' beyond a unit's first copy: checks' compute, not training.
    double training_seconds() const { return training_s_; }
    double audit_twin_seconds() const { return audit_twin_s_; }
    double replica_seconds() const { return replica_s_; }
    double check_unit_seconds() const { return check_unit_s_; }
    // `client`'s upload is in: its delta is what a copier sends next.
    void delivered(const std::string& client, const Upload& upload);

private:
    // The honest delta as the server will decode it, into the module probe.
    common::Status probe(const common::Bytes& delta, const common::WorkUnit& unit);
    common::Result<common::Bytes> poisoned_delta(const common::WorkUnit& unit, Attack attack,
                                                 const common::Bytes& honest);
    // The unit trained honestly, or as an attack that trains wrongly does.
    // `moments_in`: the kept moments it resumed, if it did.
    common::Result<client::RunOutput> train(VolunteerState& v, const common::WorkUnit& unit, Attack attack,
                                            std::optional<server::ReplayMoments>& moments_in);
    // Adds a trained unit's real seconds to training, or to what checks cost: an audit twin's
    // all, a unit computed n times (n − 1) / n of each copy's.
    common::Status count_training(const common::WorkUnit& unit, double seconds);
    // A loss-check unit's answer, as the client computes it (client/training/loss_check_runner.h),
    // or a lying checker's.
    common::Result<Upload> answer_check(const VolunteerState& v, const common::WorkUnit& unit, Attack attack);
    // A shard of the task that `unit` does not assign, among those units have named so far.
    std::string other_shard(const common::WorkUnit& unit) const;
    // What a copy (another volunteer's newest delivered delta) or an old replay (its own,
    // kReplayAge units back) sends; empty bytes when there is none yet (refused as undecodable).
    common::Bytes resent_delta(const VolunteerState& v, Attack attack) const;

    static constexpr std::size_t kRecentUploads = 8;

    server::InProcessServer& server_;
    const SimSettings& settings_;
    DeltaProbe& probe_;
    double training_s_ = 0;
    double audit_twin_s_ = 0;
    double replica_s_ = 0;
    double check_unit_s_ = 0;
    std::set<std::string> shards_seen_;
    std::deque<std::pair<std::string, common::Bytes>> recent_;  // (client, delta), newest last
};

}  // namespace tessera::bench
