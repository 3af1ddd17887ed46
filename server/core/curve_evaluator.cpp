// CurveEvaluator: coalesced evaluations of checkpoints read back from the blob store.
#include "curve_evaluator.h"

#include <iostream>

#include "checkpoint.h"

namespace tessera::server {

void CurveEvaluator::version_committed(std::int64_t version, bool now_or_soon) {
    std::lock_guard lock(mutex_);
    newest_ = std::max(newest_, version);
    if (newest_ <= launched_) return;  // its evaluation is done or under way
    if (in_flight_) {
        wanted_ = wanted_ || now_or_soon;
        return;
    }
    bool due = last_started_at_ < 0 || clock_() - last_started_at_ >= interval_s_;
    if (now_or_soon || due) launch_locked(newest_);
}

void CurveEvaluator::launch_locked(std::int64_t version) {
    in_flight_ = true;
    wanted_ = false;
    launched_ = version;
    last_started_at_ = clock_();
    bool full = last_started_at_ - last_full_at_ >= full_interval_s_;
    if (full) last_full_at_ = last_started_at_;
    executor_([this, version, full] { evaluate(version, full); });
}

void CurveEvaluator::evaluate(std::int64_t version, bool full) {
    auto result = [&]() -> common::Result<ProbeResult> {
        auto record = store_.version(task_id_, version);
        if (!record) return record.error();
        if (!*record) return common::make_error("no version " + std::to_string(version));
        // The true model (with downlink patches the published one lags it).
        auto bytes = blobs_.read((*record)->state_sha256.value_or((*record)->blob_sha256), std::uint64_t{8} << 30);
        if (!bytes) return bytes.error();
        auto weights = common::read_checkpoint(*bytes);
        if (!weights) return weights.error();
        return probes_.evaluate(*weights, full ? kWholeValidationSet : samples_);
    }();
    if (result) {
        ValidationResult figures{result->loss, result->accuracy, result->samples, full};
        if (auto status = store_.set_validation_result(task_id_, version, figures); !status)
            std::cerr << "evaluation of version " << version << ": " << status.message() << "\n";
    } else {
        std::cerr << "evaluation of version " << version << ": " << result.message() << "\n";
    }
    std::lock_guard lock(mutex_);
    in_flight_ = false;
    bool due = clock_() - last_started_at_ >= interval_s_;
    if (newest_ > version && (wanted_ || due)) launch_locked(newest_);
}

}  // namespace tessera::server
