// Where honest deltas put their change, module by module, and how much the volunteers agree
// there (issue 29's question of why merged models lose class conditioning): for each delta, each
// module group's share of its squared norm and the cosine of that part with the sum of the
// deltas recorded just before it. The class embedding is split into its class rows and the null
// row that classifier-free guidance samples without a class. Torch-free; docs/fleet_simulator.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "delta_codec.h"

namespace tessera::bench {

struct ModuleProbe {
    std::string group;                // "class_embed.classes", "blocks.0", "t_fc1", ...
    double share = 0;                 // the group's part of the delta's squared norm
    std::optional<double> alignment;  // cosine with the recent deltas' sum; none for the first
};

struct ProbedDelta {
    std::int64_t base_version = 0;
    std::int64_t local_steps = 0;
    std::vector<ModuleProbe> modules;  // by group name
};

// The module group of each parameter's elements: [begin, end) ranges of its flat values.
struct GroupSlice {
    std::string group;
    std::size_t begin = 0, end = 0;
};
std::vector<GroupSlice> group_slices(const common::NamedTensor& tensor);

class DeltaProbe {
public:
    // Alignment is measured against the sum of the last `window` deltas recorded.
    explicit DeltaProbe(std::size_t window);
    void record(const common::NamedTensors& delta, std::int64_t base_version, std::int64_t local_steps);
    const std::vector<ProbedDelta>& deltas() const { return deltas_; }

private:
    using GroupVectors = std::map<std::string, std::vector<float>>;
    std::size_t window_;
    std::deque<GroupVectors> recent_;
    std::vector<ProbedDelta> deltas_;
};

// Per group over a run's deltas: the median share and the median alignment.
struct GroupSummary {
    std::string group;
    double median_share = 0;
    std::optional<double> median_alignment;
    std::size_t deltas = 0;
};
std::vector<GroupSummary> summarize_probes(const std::vector<ProbedDelta>& deltas);

}  // namespace tessera::bench
