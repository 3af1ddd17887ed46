// Evaluating weights on the held-out validation data, behind an interface so the server's
// core stays free of torch (server/torch implements it). A pool hands one probe to each
// concurrent evaluation, since a probe (a torch workload) is single-threaded.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "delta_codec.h"
#include "result.h"

namespace tessera::server {

struct ProbeResult {
    double loss = 0;
    std::optional<double> accuracy;  // classifiers only
    std::int64_t samples = 0;        // how many validation samples were evaluated
};

// Asks a probe for every validation sample it holds.
constexpr std::int64_t kWholeValidationSet = std::int64_t{1} << 40;

// Not thread-safe: one user at a time (ProbePool enforces that).
class ModelProbe {
public:
    virtual ~ModelProbe() = default;
    // Loss on the first `max_samples` validation samples (all of them for
    // kWholeValidationSet), deterministic for given weights.
    virtual common::Result<ProbeResult> evaluate(const common::NamedTensors& weights, std::int64_t max_samples) = 0;
};

using ModelProbeFactory = std::function<common::Result<std::unique_ptr<ModelProbe>>()>;

// Up to `size` probes, made on first use. Thread-safe.
class ProbePool {
public:
    ProbePool(ModelProbeFactory factory, std::size_t size) : factory_(std::move(factory)), size_(size) {}
    common::Result<ProbeResult> evaluate(const common::NamedTensors& weights, std::int64_t max_samples);

private:
    ModelProbeFactory factory_;
    std::size_t size_;
    std::size_t made_ = 0;
    std::vector<std::unique_ptr<ModelProbe>> idle_;
    std::mutex mutex_;
    std::condition_variable available_;
};

}  // namespace tessera::server
