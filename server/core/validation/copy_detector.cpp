// CopyDetector: bounded per-task rings of sketches, searched linearly (80 cosines of 4096
// buckets per result: well under a millisecond), each kept with its sum of squares and its
// unit-norm copy so that a comparison is one pass.
#include "copy_detector.h"

#include <cmath>

namespace tessera::server {
namespace {

template <typename T>
void push_bounded(std::deque<T>& ring, T item, std::size_t limit) {
    ring.push_back(std::move(item));
    while (ring.size() > limit) ring.pop_front();
}

}  // namespace

CopyDetector::Entry::Entry(std::string what, std::string work_unit_id, DeltaSketch sketch, ResultPlace place)
    : what(std::move(what)), work_unit_id(std::move(work_unit_id)), sketch(std::move(sketch)), place(place),
      squares(sketch_squares(this->sketch)) {
    double norm = std::sqrt(squares);
    if (!(norm > 0)) return;
    unit.buckets.resize(kSketchSize);
    for (std::size_t i = 0; i < kSketchSize; ++i) unit.buckets[i] = this->sketch.buckets[i] / norm;
}

void CopyDetector::note_model(const std::string& task_id, std::int64_t version, const common::NamedTensors& model) {
    auto sketch = sketch_of(model);  // outside the lock: the whole model is read
    DeltaSketch update;
    {
        std::lock_guard lock(mutex_);
        auto& task = tasks_[task_id];
        if (task.model_version >= 0 && task.model_version < version) update = sketch_difference(sketch, task.model);
        task.model_version = version;
        task.model = std::move(sketch);
    }
    note_update(task_id, version, std::move(update));
}

void CopyDetector::note_update(const std::string& task_id, std::int64_t version, DeltaSketch update) {
    if (update.empty()) return;
    Entry entry("the update to version " + std::to_string(version), "", std::move(update), {});  // outside the lock
    std::lock_guard lock(mutex_);
    push_bounded(tasks_[task_id].updates, std::move(entry), kUpdatesKept);
}

void CopyDetector::note_result(const std::string& task_id, const std::string& work_unit_id, DeltaSketch delta,
                               ResultPlace place, bool warm_up) {
    if (delta.empty()) return;
    Entry entry("the result for unit " + work_unit_id, work_unit_id, std::move(delta), place);  // outside the lock
    std::lock_guard lock(mutex_);
    auto& task = tasks_[task_id];
    push_bounded(warm_up ? task.warm_ups : task.results, std::move(entry), kResultsKept);
}

void CopyDetector::restart_consensus(const std::string& task_id, std::int64_t at) {
    std::lock_guard lock(mutex_);
    tasks_[task_id].consensus_since = at;
}

SimilarMatch CopyDetector::most_similar(const std::string& task_id, const std::string& work_unit_id,
                                        const DeltaSketch& delta) const {
    SimilarMatch best;
    std::lock_guard lock(mutex_);
    auto found = tasks_.find(task_id);
    if (found == tasks_.end()) return best;
    const double squares = sketch_squares(delta);
    auto consider = [&](const Entry& entry) {
        double similarity = delta.empty() ? 0 : cosine_of(sketch_dot(delta, entry.sketch), squares, entry.squares);
        if (best.what.empty() || similarity > best.similarity) best = {similarity, entry.what};
    };
    for (const auto& entry : found->second.updates) consider(entry);
    for (const auto* results : {&found->second.results, &found->second.warm_ups})
        for (const auto& entry : *results)
            if (entry.work_unit_id != work_unit_id) consider(entry);
    return best;
}

std::optional<double> CopyDetector::consensus_alignment(const std::string& task_id, const std::string& work_unit_id,
                                                        const DeltaSketch& delta, ResultPlace place,
                                                        bool warm_up) const {
    std::lock_guard lock(mutex_);
    auto found = tasks_.find(task_id);
    if (found == tasks_.end()) return std::nullopt;
    const auto& task = found->second;
    if (warm_up)
        if (auto alignment = alignment_with(task, task.warm_ups, work_unit_id, delta, place)) return alignment;
    return alignment_with(task, task.results, work_unit_id, delta, place);
}

std::optional<double> CopyDetector::alignment_with(const TaskSketches& task, const std::deque<Entry>& results,
                                                   const std::string& work_unit_id, const DeltaSketch& delta,
                                                   ResultPlace place) {
    DeltaSketch consensus;
    consensus.buckets.assign(kSketchSize, 0.0);
    std::size_t counted = 0;
    for (const auto& entry : results) {
        bool current = entry.place.at >= task.consensus_since && place.at - entry.place.at <= kConsensusSeconds &&
                       place.base_version - entry.place.base_version <= kConsensusVersions;
        if (entry.work_unit_id == work_unit_id || !current || entry.unit.empty()) continue;
        for (std::size_t i = 0; i < kSketchSize; ++i) consensus.buckets[i] += entry.unit.buckets[i];
        ++counted;
    }
    if (counted < kConsensusMinimum) return std::nullopt;
    return cosine_similarity(delta, consensus);
}

}  // namespace tessera::server
