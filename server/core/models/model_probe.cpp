// ProbePool: lends each evaluation its own probe, making new ones up to the pool's size.
#include "model_probe.h"

namespace tessera::server {

template <class T>
common::Result<T> ProbePool::with_probe(const std::function<common::Result<T>(ModelProbe&)>& use) {
    std::unique_ptr<ModelProbe> probe;
    {
        std::unique_lock lock(mutex_);
        available_.wait(lock, [&] { return !idle_.empty() || made_ < size_; });
        if (!idle_.empty()) {
            probe = std::move(idle_.back());
            idle_.pop_back();
        } else {
            ++made_;
        }
    }
    if (!probe) {
        auto made = factory_();
        if (!made) {
            std::lock_guard lock(mutex_);
            --made_;
            available_.notify_one();
            return made.error();
        }
        probe = std::move(*made);
    }
    auto result = use(*probe);
    {
        std::lock_guard lock(mutex_);
        idle_.push_back(std::move(probe));
    }
    available_.notify_one();
    return result;
}

common::Result<ProbeResult> ProbePool::evaluate(const common::NamedTensors& weights, std::int64_t max_samples) {
    return with_probe<ProbeResult>([&](ModelProbe& probe) { return probe.evaluate(weights, max_samples); });
}

common::Result<SampleLosses> ProbePool::check_losses(const common::NamedTensors& weights, std::int64_t max_samples,
                                                     const std::vector<std::int64_t>& rows) {
    return with_probe<SampleLosses>([&](ModelProbe& probe) { return probe.check_losses(weights, max_samples, rows); });
}

common::Result<std::int64_t> ProbePool::held_out_rows() {
    return with_probe<std::int64_t>([&](ModelProbe& probe) { return probe.held_out_rows(); });
}

common::Result<std::int64_t> ProbePool::assigned_rows(const AssignedSamples& samples) {
    return with_probe<std::int64_t>([&](ModelProbe& probe) { return probe.assigned_rows(samples); });
}

common::Result<std::vector<SampleLosses>> ProbePool::losses_on_assigned(
    const std::vector<const common::NamedTensors*>& weights, const AssignedSamples& samples) {
    return with_probe<std::vector<SampleLosses>>(
        [&](ModelProbe& probe) { return probe.losses_on_assigned(weights, samples); });
}

common::Result<double> ProbePool::opening_loss(const common::NamedTensors& base, const AssignedSamples& samples,
                                               const common::Hyperparameters& hyper) {
    return with_probe<double>([&](ModelProbe& probe) { return probe.opening_loss(base, samples, hyper); });
}

common::Result<common::Commitments> ProbePool::replay(const common::NamedTensors& base, const AssignedSamples& samples,
                                                      const common::Hyperparameters& hyper,
                                                      const ReplayMoments* moments) {
    return with_probe<common::Commitments>(
        [&](ModelProbe& probe) { return probe.replay(base, samples, hyper, moments); });
}

void ProbePools::add(const std::string& task_id, std::shared_ptr<ProbePool> pool) {
    std::lock_guard lock(mutex_);
    pools_[task_id] = std::move(pool);
}

void ProbePools::remove(const std::string& task_id) {
    std::lock_guard lock(mutex_);
    pools_.erase(task_id);
}

common::Result<std::shared_ptr<ProbePool>> ProbePools::of(const std::string& task_id) const {
    std::lock_guard lock(mutex_);
    auto found = pools_.find(task_id);
    if (found == pools_.end()) return common::make_error("task '" + task_id + "' is not served by this process");
    return found->second;
}

}  // namespace tessera::server
