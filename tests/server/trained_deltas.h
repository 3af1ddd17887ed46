// Deltas for tests of the contribution checks: what an honest volunteer trains on a unit's
// shards (fetched from /blobs), and the attacks made from it.
#pragma once

#include <torch/torch.h>

#include <random>

#include "server_fixture.h"
#include "tensor_math.h"
#include "torch/shard_data.h"
#include "torch/trainer.h"

namespace tessera::testing {

// The cnn on random images with arbitrary labels: training can only memorise, so it lowers
// the loss on the unit's own samples and not on held-out ones (DiT on the synthetic random
// latents learns too little in a few steps to tell). Every result of a new volunteer gets
// the loss checks.
inline void checked_task(TaskConfig& c) {
    c.local_steps = 12;
    c.batch_size = 16;
    c.lr = 2e-3;
    c.warmup_steps = 1;
    c.codec = {common::DeltaDType::F32, 1.0};
    c.loss_check = 1.0;
    c.trust_streak = 5;
    c.min_alignment = TaskConfig{}.min_alignment;
    c.max_in_flight = 4;
}

// What an honest volunteer sends: the unit's training on its own shards, fetched from /blobs.
inline common::NamedTensors trained_delta(TestServer& server, TestVolunteer& volunteer, const common::WorkUnit& wu) {
    std::vector<common::ShardData> shards;
    for (const auto& shard : wu.shards) {
        auto reply = http_get(server.port(), "/blobs/" + shard.sha256);
        if (reply.status != 200) throw std::runtime_error("shard: " + reply.body);
        shards.push_back(common::load_shard(common::as_bytes(reply.body)).value());
    }
    auto data = common::concat_shards(shards).value();
    auto config = common::train_config_for(wu.hyper);
    config.num_classes = server.config().num_classes;
    auto theta0 = common::from_named_f32(volunteer.base_model(wu));
    auto outcome = common::train(wu.model, theta0, data, config).value();
    return common::to_named_f32(outcome.delta);
}

// Uploads `delta` for the unit and waits for its verdict: the assignment's state.
inline std::string uploaded(TestServer& server, TestVolunteer& volunteer, const common::WorkUnit& wu,
                            const common::NamedTensors& delta) {
    auto reply = volunteer.upload(wu, delta);
    if (reply.status != 200) throw std::runtime_error("upload: " + reply.body);
    server.app().wait_idle();
    return state_of(server, wu.wu_id);
}

inline common::NamedTensors scaled(common::NamedTensors delta, double factor) {
    server::scale_in_place(delta, factor);
    return delta;
}

// Gaussian noise with the norm of `like`.
inline common::NamedTensors noise_like(const common::NamedTensors& like, std::uint32_t seed) {
    auto noise = like;
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    for (auto& t : noise)
        for (auto& v : t.values) v = normal(rng);
    server::scale_in_place(noise, server::l2_norm(like) / server::l2_norm(noise));
    return noise;
}

inline ClientRecord client_of(TestServer& server, const TestVolunteer& volunteer) {
    return server.store().client(volunteer.id()).value().value();
}

}  // namespace tessera::testing
