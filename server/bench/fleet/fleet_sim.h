// The fleet simulator's engine: N simulated volunteers drive the server's own components
// (InProcessServer) through the calls the API makes, on a virtual clock. Every unit is
// trained for real with the volunteer's trainer on the CPU and encoded with the unit's codec;
// only time is simulated: a unit occupies its volunteer for H·batch/speed virtual seconds of
// training, with its download before and its upload after (with look-ahead, both while another
// unit trains). Deterministic for a seed. docs/fleet_simulator.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "curve_points.h"
#include "fleet_run.h"
#include "fleet_spec.h"
#include "result.h"
#include "sample_judge.h"
#include "task_config.h"

namespace tessera::bench {

class CaptionJudge;

struct SimSettings {
    std::string run_name;  // "fedasync", "sync-fedavg", ...
    std::string fleet_name;
    // Sync: rounds in which every volunteer starts from the same version and the next round
    // starts when the slowest has returned (the task's policy must merge K results at once).
    bool synchronous = false;
    std::int64_t sample_budget = 100000;  // the equal-samples point: final figures are taken here
    // > 0: keep going past the budget until the curve reaches this loss, for at most
    // `overrun` × the budget (time to a target is measured even when it takes more samples).
    double target_loss = 0;
    double overrun = 1;
    std::int64_t curve_points = 10;  // validation evaluations up to the budget
    CurveSpacing curve_spacing = CurveSpacing::even;  // ...spaced in samples merged (curve_points.h)
    // Validation samples per curve point (0: all); the final figures use the whole set.
    std::int64_t eval_samples = 2000;
    double tick_s = 10;  // transitioner period, virtual seconds
    double max_virtual_s = 1e8;
    std::uint64_t seed = 1;
    int threads = 0;               // LibTorch CPU threads for training; 0: its default
    // Model, patch and delta bytes are counted × this (shards and manifests as they are): the
    // transfers of a larger model on this model's training (`--transfer-as`).
    double payload_scale = 1;
    // The client's look-ahead (client/look_ahead.h): the next unit is asked for once the
    // training left is within this lead plus twice the last download's time and downloaded
    // while the unit trains, and a result uploads while the next unit trains; 0: off, as the
    // client's default (download, train, upload, one unit after the other).
    double look_ahead_s = 0;
    double look_ahead_share = 0.1;  // ...for units whose transfers take at least this share of their training
    bool quiet = false;            // no progress lines on stderr
    SampleJudge* judge = nullptr;  // set: score the DiT's samples at the budget point
    CaptionJudge* caption_judge = nullptr;  // set: score the text DiT's prompt fidelity there
    std::vector<double> judge_guidances{3.0};  // at these guidance scales (the first is the headline)
    bool probe_deltas = false;     // RunResult::probes: every honest delta's modules (delta_probe.h)
};

// Runs one simulation in `work_dir` (a fresh server state directory is made inside it).
common::Result<RunResult> simulate_fleet(const server::TaskConfig& config, const std::vector<SimVolunteer>& fleet,
                                         const SimSettings& settings, const std::filesystem::path& work_dir);

// The judges' figures of `weights` at the budget point, into `result` (none set: nothing).
common::Status judge_samples(const SimSettings& settings, const std::string& model,
                             const common::NamedTensors& weights, RunResult& result);

// The validation samples of a curve point: eval_samples, or all.
std::int64_t curve_samples(const SimSettings& settings);

// The seconds a transfer of `bytes` takes on a link of `mbit` Mbit/s.
double transfer_seconds(double bytes, double mbit);

}  // namespace tessera::bench
