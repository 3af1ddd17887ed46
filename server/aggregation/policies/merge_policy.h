// Merge policies (fedasync, fedbuff, diloco, diloco-dn): the only code that changes the
// server's model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "delta_codec.h"
#include "result.h"
#include "staleness.h"

namespace tessera::server {

enum class PolicyKind { FedAsync, FedBuff, DiLoCo, DiLoCoDN };
std::string_view policy_name(PolicyKind kind);  // "fedasync", "fedbuff", "diloco", "diloco-dn"
std::optional<PolicyKind> policy_from_name(std::string_view name);

struct MergeSettings {
    PolicyKind kind = PolicyKind::FedAsync;
    Staleness staleness;
    double server_lr = 1.0;        // η (fedasync/fedbuff); diloco and diloco-dn outer lr ε (~0.7)
    double clip_norm = 0;          // each incoming delta is clipped to this L2 norm first; 0 = off
    std::int64_t buffer_size = 1;  // fedbuff: K deltas per merge; diloco, diloco-dn: N arrivals per momentum step
    double trim_fraction = 0;      // fedbuff: drop floor(trim·K) highest and lowest per coordinate; < 0.5
    double momentum = 0.9;         // diloco μ, diloco-dn β
    // fedasync: θ ← θ + η·s·Δ/C^p, C the arrival's concurrency; 0: off, 1: each result divided
    // by C (diloco-dn without momentum), ¾: as η = C^¼ with the division (docs/operations.md).
    double concurrency_exponent = 0;
};

// Named errors for out-of-range values: server_lr finite > 0, clip_norm finite ≥ 0,
// buffer_size ≥ 1, trim_fraction in [0, 0.5), momentum in [0, 1), concurrency_exponent in
// [0, 2], a valid staleness.
common::Status validate_settings(const MergeSettings& settings);

// One validated delta waiting to be merged.
struct IncomingDelta {
    std::string id;              // result id, reported back when merged
    std::int64_t staleness = 0;  // τ
    common::NamedTensors delta;  // Δ = θ_local − θ_base, same layout as the model
    // C: volunteers computing for the task when the result was accepted (≥ 1). The staleness
    // kind `conc` measures τ against it; fedasync with a concurrency_exponent p divides by C^p.
    std::int64_t concurrency = 1;
};

// The outcome of adding a delta: the model changed (a new version) or the delta was buffered.
struct MergeOutcome {
    bool model_changed = false;
    std::vector<std::string> merged_ids;  // ids folded into the model by this step (empty when buffered)
};

// A merge policy. Each incoming Δ is clipped to clip_norm, then weighted by s(τ, C_v), where
// C_v is the arrival's concurrency in versions: ⌈C / results folded into one version⌉.
//   fedasync:  θ ← θ + η·s·Δ on every arrival (÷ C^p with a concurrency_exponent p).
//   fedbuff:   after K arrivals θ ← θ + η·mean(s_i·Δ_i), or their coordinate-wise trimmed mean.
//   diloco:    g_i = −s_i·Δ_i; after N arrivals ḡ = mean(g_i), m ← μ·m + ḡ, θ ← θ − η·(ḡ + μ·m).
//   diloco-dn: delayed Nesterov, every arrival applied at once (delayed_nesterov.h).
// `model` must be the same model (same layout) on every call. Not thread-safe: the
// aggregator thread owns it.
class MergePolicy {
public:
    virtual ~MergePolicy() = default;
    // Adds one delta; updates `model` in place when the policy steps. A layout mismatch or a
    // non-finite value is an error, and then neither the model nor the buffer changes.
    virtual common::Result<MergeOutcome> add(common::NamedTensors& model, IncomingDelta delta) = 0;
    // Ids buffered but not yet merged (in arrival order).
    virtual std::vector<std::string> pending_ids() const = 0;
    // State that must survive a restart together with the model: diloco's momentum (tensors
    // named like the model's; empty before the first outer step), diloco-dn's momentum and
    // gathered sum (delayed_nesterov.h), empty for the others.
    virtual common::NamedTensors optimizer_state() const = 0;
    // Loads what optimizer_state returned, checked against `model`; empty = fresh state.
    // The buffer is left as it is.
    virtual common::Status load_optimizer_state(const common::NamedTensors& state,
                                                const common::NamedTensors& model) = 0;
};

common::Result<std::unique_ptr<MergePolicy>> make_merge_policy(const MergeSettings& settings);

// diloco's outer step diverges, whatever the fleet, once pseudo-gradients arrive an outer step
// late — which they do whenever more volunteers are at work than the buffer holds. On a
// quadratic, in the direction where a unit reaches its local optimum (the worst one), the outer
// Nesterov step with momentum μ on pseudo-gradients one step late converges only while
// ε·s(1) < c(μ) = (√((1−μ²)² + 4μ²(1−μ)) − (1−μ²)) / (2μ²) (c(0) = 1; Jury's test on its
// characteristic cubic z³ − (1+μ)z² + (μ + c(1+μ))z − cμ), s(1) the staleness weight at τ = 1:
// c = 1, 0.56, 0.42, 0.25 at μ = 0, 0.5, 0.7, 0.9 (docs/operations.md, "diloco's outer step").
double max_delayed_outer_step(double momentum);
// For diloco: an error naming the safe range when ε·s(1) exceeds max_delayed_outer_step(μ);
// OK for the other policies. `task create` and the fleet simulator's asynchronous runs refuse
// such a task (the simulator's synchronous rounds have no delay and take any).
common::Status check_async_stability(const MergeSettings& settings);

// The staleness limit, in versions, beyond which a result is too stale to merge (`conc:M,A,R`
// with R > 0: R × the concurrency in versions), for a result accepted with `concurrency`
// volunteers at work; none for the other staleness kinds.
std::optional<double> staleness_limit(const MergeSettings& settings, std::int64_t concurrency);

}  // namespace tessera::server
