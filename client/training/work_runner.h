// Runs one work unit's training: the base model and shards from the cache, the trainer with
// the unit's hyperparameters, and the delta encoded as the unit asks (plus the error-feedback
// residual carried from earlier units), in a zstd frame as it is uploaded. On a GPU the first
// unit of a model and batch sizes its micro-batch (gradient accumulation) from the free memory,
// measured by probe steps; an out-of-memory error still retries with micro-batches half as
// large, and the micro-batch that fitted is used from the start for later units of the same
// model and batch. Torch stays behind this header.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bytes.h"
#include "error_feedback.h"
#include "optimizer_state.h"
#include "protocol.h"

namespace tessera::client {

struct RunOptions {
    std::string device = "auto";
    int threads = 0;               // 0: LibTorch's default
    double max_gpu_memory_gb = 0;  // > 0: cap LibTorch's CUDA allocator at this much
    std::function<void(std::int64_t step, std::int64_t steps, double loss, double samples_per_s)> progress;
    // When set: added to a lossy codec's input if it fits the unit, and replaced by what this
    // unit's encoding left out (cleared for a lossless codec).
    ErrorFeedback* feedback = nullptr;
    // When set and the unit asks for kept state (`optimizer: kept`): a unit of the same task
    // and model continues from these moments without the unit's warm-up (another task's or an
    // empty state: fresh AdamW and the warm-up), and once it has trained they are replaced by
    // its own. Left as they were on failure and by fresh units.
    KeptOptimizerState* optimizer = nullptr;
    // An audit twin of a kept unit (`unit.moments`): the file of the moments it resumes, without
    // the warm-up, in place of `optimizer`, which it neither reads nor replaces.
    std::filesystem::path twin_moments;
};

struct RunOutput {
    common::Bytes delta;  // encoded delta file in a zstd frame
    std::string feedback_note;   // why a carried residual was dropped, if it was
    std::string optimizer_note;  // why a kept optimizer state was not used, if it was not
    common::TrainMetrics metrics;
    std::string device;  // "cpu" or the GPU's name
    common::Commitments commitments;  // sent with the result (docs/protocol.md, "Commitments")
};

common::Result<RunOutput> run_work_unit(const common::WorkUnit& unit, const std::filesystem::path& model_file,
                                        const std::vector<std::filesystem::path>& shard_files,
                                        const RunOptions& options);

// The device `device` ("auto", "cpu", "cuda:N") resolves to, as work requests report it: kind
// "cuda" with the GPU's name and memory, or "cpu" with the machine's memory and the threads.
common::Result<common::DeviceInfo> probe_device(const std::string& device, int threads);

// What the client prints at start: "cuda:0 (NVIDIA …, 24.0 GiB)" or "cpu (N threads)".
std::string describe_device(const std::string& device, int threads);

}  // namespace tessera::client
