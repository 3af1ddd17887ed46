// Runs a loss-check unit (docs/protocol.md, "Loss-check units"): the unit's base model, its
// shards, the checked result's delta file and the held-out shard from the cache; per-sample
// losses before and after the delta, on the CPU whatever the volunteer trains on (a check is a
// few hundred forward passes, and the server compares its figures at the CPU's tolerance);
// the report as it is uploaded. Torch stays behind this header.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "bytes.h"
#include "protocol.h"

namespace tessera::client {

struct CheckInputs {
    std::filesystem::path model;
    std::vector<std::filesystem::path> shards;
    std::filesystem::path result;    // the checked result's delta file, as its volunteer uploaded it
    std::filesystem::path held_out;  // the held-out shard
};

struct CheckOutput {
    common::Bytes report;  // the loss report's bytes (loss_report.h)
    // samples: the forward passes (four per checked sample); loss_start and loss_end: the mean
    // loss on the unit's own rows before and after the delta.
    common::TrainMetrics metrics;
    std::string device = "cpu";
};

// An error is the unit's inputs' (a delta that does not decode or does not fit the model, a
// damaged shard): the volunteer gives the unit back rather than report losses it cannot measure.
common::Result<CheckOutput> run_loss_check(const common::WorkUnit& unit, const CheckInputs& inputs, int threads);

}  // namespace tessera::client
