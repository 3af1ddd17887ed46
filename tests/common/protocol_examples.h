// Valid example messages, shared by the protocol tests and tests/tools/proto_tool.
#pragma once

#include "loss_report.h"
#include "protocol.h"

namespace tessera::testing {

inline common::WorkUnit example_work_unit() {
    common::WorkUnit wu;
    wu.wu_id = "wu-000042";
    wu.task_id = "fmnist-dit";
    wu.client_id = "c-7f3a";
    wu.model = "dit-tiny";
    wu.base_version = 17;
    wu.model_blob = {std::string(64, 'a'), 123456};
    wu.patch_from = std::string(64, 'e');
    wu.patches = {{std::string(64, 'f'), 3000}, {std::string(64, '1'), 2900}};
    wu.blob_base_url = "http://cache.example:8080/blobs";
    wu.shards = {{std::string(64, 'b'), 4096}, {std::string(64, 'c'), 8192}};
    wu.hyper = {.local_steps = 50,
                .batch_size = 64,
                .lr = 3e-4,
                .warmup_steps = 5,
                .weight_decay = 0.01,
                .grad_clip = 1.0,
                .seed = 1234567};
    wu.encoding = {common::DeltaDType::Int8, 1.0};
    wu.issued_at = 1800000000;
    wu.deadline = 1800001800;
    return wu;
}

// A unit that keeps the volunteer's optimizer state and follows the run's schedule.
inline common::WorkUnit example_scheduled_work_unit() {
    auto wu = example_work_unit();
    wu.hyper.optimizer = common::InnerOptimizer::Kept;
    wu.hyper.schedule = common::LrSchedule{common::LrSchedule::Kind::Cosine, 20000, 2000000, 0.1};
    wu.hyper.schedule_from = 640000;
    wu.hyper.schedule_to = 665600;
    return wu;
}

// An audit twin of a kept unit: it resumes the audited unit's moments, sent as a blob.
inline common::WorkUnit example_twin_work_unit() {
    auto wu = example_scheduled_work_unit();
    wu.moments = common::BlobRef{std::string(64, '9'), 1 << 20};
    return wu;
}

// A loss-check unit: the losses before and after another volunteer's result for this unit.
inline common::WorkUnit example_loss_check_unit() {
    auto wu = example_work_unit();
    wu.check = common::LossCheck{{std::string(64, '7'), 41000}, {std::string(64, '8'), 1 << 22}, 128};
    return wu;
}

// A loss-check unit's answer: three held-out rows and two of the unit's own.
inline common::LossReport example_loss_report() {
    return {{0.5, 0.25, 1.0}, {0.375, 0.25, 0.875}, {0.75, 0.625}, {0.5, 0.5}};
}

inline common::ResultManifest example_result_manifest() {
    common::ResultManifest m;
    m.wu_id = "wu-000042";
    m.client_id = "c-7f3a";
    m.base_version = 17;
    m.delta_blob = {std::string(64, 'd'), 30000};
    m.encoding = {common::DeltaDType::BF16, 0.25};
    m.metrics = {.loss_start = 1.25, .loss_end = 0.75, .samples = 3200, .seconds = 12.5, .samples_per_s = 256.0};
    m.device = "NVIDIA GeForce RTX 4090";
    return m;
}

// A manifest with commitments: a 20-step unit (every 3 steps: 3, 6, …, 18, 20) whose lossy
// codec carried a residual in and left one out, resuming kept moments.
inline common::ResultManifest example_committed_result_manifest() {
    auto m = example_result_manifest();
    common::Commitments c;
    c.every = common::commitment_every(20);
    for (auto step : common::commitment_steps(20)) {
        common::CommitmentSketch sketch{};
        for (std::size_t i = 0; i < sketch.size(); ++i) sketch[i] = 0.001 * static_cast<double>(step) - 0.0005 * i;
        c.segments.push_back({step, 1.25 - 0.02 * static_cast<double>(step), 0.01 * static_cast<double>(step), sketch});
    }
    c.residual_in = {std::string(64, 'a'), c.segments.front().sketch};
    c.residual_out = {std::string(64, 'b'), c.segments[1].sketch};
    c.moments_in = common::MomentsCommitment{std::string(64, 'c'), 340};
    m.commitments = c;
    return m;
}

inline common::RegisterRequest example_register_request() {
    return {"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "alice's desktop", "0.1.0"};
}

inline common::RegisterResponse example_register_response() {
    return {"c-7f3a", "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=", "0123456789abcdef"};
}

inline common::WorkRequest example_work_request() {
    common::WorkRequest m;
    m.client_id = "c-7f3a";
    m.device = {"cuda", "NVIDIA GeForce RTX 4090", 25769803776, 16};
    m.samples_per_s = 512.5;
    m.cached_shards = {std::string(64, 'b')};
    m.held_model = std::string(64, 'e');
    m.only_tasks = {"fashion-mnist-dit-tiny", "dit-s"};
    m.exclude_tasks = {"cnn"};
    return m;
}

inline common::WorkResponse example_no_work_response() {
    common::WorkResponse m;
    m.retry_after_s = 30;
    return m;
}

}  // namespace tessera::testing
