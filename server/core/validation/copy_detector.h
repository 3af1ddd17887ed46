// Copy and replay detection: sketches of the task's recent version updates (θ_v − θ_{v−1},
// from the aggregator) and of recent results (from the validator: accepted ones, and those
// refused only for their direction, which form the consensus too; volunteers' warm-up units
// apart from the others, forming a consensus of their own), and the most
// similar of them to a new result. A volunteer that uploads a published update, or another
// volunteer's result, without training shows a cosine similarity near 1; honest deltas of
// different units stay well below (docs/operations.md, "Validation"). Held in memory: after
// a restart it fills again from new versions and results.
// Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "delta_sketch.h"

namespace tessera::server {

// Where a result stands: the version its unit was based on and when it came back.
struct ResultPlace {
    std::int64_t base_version = 0;
    std::int64_t at = 0;  // seconds
};

struct SimilarMatch {
    double similarity = 0;  // cosine; 0 when nothing was compared
    std::string what;       // "the update to version 12", "the result for unit wu-…"
};

class CopyDetector {
public:
    // How many of each kind are kept per task.
    static constexpr std::size_t kUpdatesKept = 16;
    static constexpr std::size_t kResultsKept = 64;

    // A version's published model: its update is sketched from the model noted before it, an
    // earlier version's (with a publishing cadence, the previous publication's; the sketch is
    // linear, so no model is kept).
    void note_model(const std::string& task_id, std::int64_t version, const common::NamedTensors& model);
    void note_update(const std::string& task_id, std::int64_t version, DeltaSketch update);
    // `warm_up`: a volunteer's first unit, too short to show the current descent direction
    // (docs/operations.md, "Alignment"): it forms only the warm-up consensus, and is compared
    // for copies as any result.
    void note_result(const std::string& task_id, const std::string& work_unit_id, DeltaSketch delta, ResultPlace place,
                     bool warm_up = false);
    // The kept update or result (of a unit other than `work_unit_id`: replicas of one unit
    // agree by design) most similar to `delta`.
    SimilarMatch most_similar(const std::string& task_id, const std::string& work_unit_id,
                              const DeltaSketch& delta) const;

    // Cosine of `delta` with the consensus of the kept results of other units (the sum of their
    // sketches, each scaled to norm 1); none while fewer than kConsensusMinimum are kept. A
    // consensus ages: it is formed only of results based at most kConsensusVersions before
    // `place`'s version and returned at most kConsensusSeconds before it, after the last
    // restart_consensus. A warm-up unit (`warm_up`) is judged by the consensus of the other
    // warm-up units while kConsensusMinimum of them are current, else by the others'.
    std::optional<double> consensus_alignment(const std::string& task_id, const std::string& work_unit_id,
                                              const DeltaSketch& delta, ResultPlace place, bool warm_up = false) const;
    // Results noted before `at` no longer form the task's consensus (the stall guard found it
    // stale); they are still compared for copies.
    void restart_consensus(const std::string& task_id, std::int64_t at);
    static constexpr std::size_t kConsensusMinimum = 5;
    static constexpr std::int64_t kConsensusVersions = 32;
    static constexpr std::int64_t kConsensusSeconds = 600;

private:
    struct Entry {
        Entry(std::string what, std::string work_unit_id, DeltaSketch sketch, ResultPlace place);
        std::string what;
        std::string work_unit_id;  // results only
        DeltaSketch sketch;
        ResultPlace place;   // results only
        double squares = 0;  // the sketch's sum of squares
        DeltaSketch unit;    // the sketch scaled to norm 1 (empty when it is zero): a consensus term
    };
    struct TaskSketches {
        std::deque<Entry> updates;
        std::deque<Entry> results;
        std::deque<Entry> warm_ups;  // results of warm-up units
        std::int64_t model_version = -1;
        DeltaSketch model;  // of version model_version
        std::int64_t consensus_since = std::numeric_limits<std::int64_t>::min();
    };
    // The cosine with the consensus of `results` (the caller holds the lock).
    static std::optional<double> alignment_with(const TaskSketches& task, const std::deque<Entry>& results,
                                                const std::string& work_unit_id, const DeltaSketch& delta,
                                                ResultPlace place);
    mutable std::mutex mutex_;
    std::map<std::string, TaskSketches> tasks_;
};

}  // namespace tessera::server
