// The attacks of a hostile fleet (docs/fleet_simulator.md, "Hostile volunteers").
#include "poison.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "tensor_math.h"

namespace tessera::bench {

bool attack_trains_wrongly(Attack attack) {
    return attack == Attack::FewerSteps || attack == Attack::OtherShards || attack == Attack::StaleBase ||
           attack == Attack::NoClip || attack == Attack::NoDrop;
}

common::WorkUnit misread_unit(const common::WorkUnit& unit, Attack attack) {
    auto misread = unit;
    if (attack == Attack::FewerSteps) misread.hyper.local_steps = std::max<std::int64_t>(1, unit.hyper.local_steps / 2);
    if (attack == Attack::NoClip) misread.hyper.grad_clip = 0;
    if (attack == Attack::NoDrop) misread.hyper.caption_drop = 0;
    return misread;
}

void poison_delta(common::NamedTensors& delta, Attack attack, const common::NamedTensors& last_update,
                  std::uint64_t seed) {
    auto fill = [&](float value) {
        for (auto& t : delta) std::fill(t.values.begin(), t.values.end(), value);
    };
    switch (attack) {
        case Attack::None: return;
        case Attack::NaN:
            if (!delta.empty() && !delta.front().values.empty())
                delta.front().values.front() = std::numeric_limits<float>::quiet_NaN();
            return;
        case Attack::Scaled: server::scale_in_place(delta, 10.0); return;
        case Attack::Scaled3: server::scale_in_place(delta, 3.0); return;
        case Attack::SignFlip: server::scale_in_place(delta, -1.0); return;
        case Attack::Zero: fill(0.0f); return;
        case Attack::Tiny: fill(1e-30f); return;
        case Attack::Noise: {
            double norm = server::l2_norm(delta);
            std::mt19937_64 rng(seed);
            std::normal_distribution<float> gauss(0.0f, 1.0f);
            for (auto& t : delta)
                for (auto& v : t.values) v = gauss(rng);
            double noise_norm = server::l2_norm(delta);
            if (noise_norm > 0) server::scale_in_place(delta, norm / noise_norm);
            return;
        }
        case Attack::Replay:
            if (last_update.size() == delta.size())
                delta = last_update;
            else
                fill(0.0f);
            return;
        default: return;  // the attacks that train wrongly or resend bytes (volunteer_uploads.cpp)
    }
}

}  // namespace tessera::bench
