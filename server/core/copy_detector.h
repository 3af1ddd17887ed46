// Copy and replay detection: sketches of the task's recent version updates (θ_v − θ_{v−1},
// from the aggregator) and of recently accepted results (from the validator), and the most
// similar of them to a new result. A volunteer that uploads a published update, or another
// volunteer's result, without training shows a cosine similarity near 1; honest deltas of
// different units stay well below (docs/operations.md, "Validation"). Held in memory: after
// a restart it fills again from new versions and results.
// Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "delta_sketch.h"

namespace tessera::server {

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
    void note_result(const std::string& task_id, const std::string& work_unit_id, DeltaSketch delta);
    // The kept update or result (of a unit other than `work_unit_id`: replicas of one unit
    // agree by design) most similar to `delta`.
    SimilarMatch most_similar(const std::string& task_id, const std::string& work_unit_id,
                              const DeltaSketch& delta) const;

    // Cosine of `delta` with the consensus of the kept results of other units (the sum of their
    // sketches, each scaled to norm 1); none while fewer than kConsensusMinimum are kept.
    std::optional<double> consensus_alignment(const std::string& task_id, const std::string& work_unit_id,
                                              const DeltaSketch& delta) const;
    static constexpr std::size_t kConsensusMinimum = 5;

private:
    struct Entry {
        std::string what;
        std::string work_unit_id;  // results only
        DeltaSketch sketch;
    };
    struct TaskSketches {
        std::deque<Entry> updates;
        std::deque<Entry> results;
        std::int64_t model_version = -1;
        DeltaSketch model;  // of version model_version
    };
    mutable std::mutex mutex_;
    std::map<std::string, TaskSketches> tasks_;
};

}  // namespace tessera::server
