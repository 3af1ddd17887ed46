// Hostile volunteers' deltas: turns an honest delta into the attack's poisoned one. Pure
// arithmetic on NamedTensors, deterministic for a seed.
#pragma once

#include <cstdint>

#include "delta_codec.h"
#include "fleet_spec.h"
#include "protocol.h"

namespace tessera::bench {

// Whether the attack trains, but not the unit it was given (fewer steps, other shards, a stale
// base, no clipping, no condition drop): its delta is sent as trained.
bool attack_trains_wrongly(Attack attack);
// The unit as the attack trains it: half its steps (at least one), no gradient clipping, or no
// caption drop; the unit itself for the others.
common::WorkUnit misread_unit(const common::WorkUnit& unit, Attack attack);

// Rewrites `delta` in place. `last_update` (θ_v − θ_{v−1} of the newest version; empty before
// the first merge) is what a replay uploads; with none yet, a replay returns zeros.
void poison_delta(common::NamedTensors& delta, Attack attack, const common::NamedTensors& last_update,
                  std::uint64_t seed);

}  // namespace tessera::bench
