// `tessera-bench train`: samples/s of the C++ trainer and of the same model and loop in
// PyTorch Python (scripts/bench_train.py), measured in one run, and their ratio.
#pragma once

#include <cstdint>

#include <string>

#include "result.h"

namespace tessera::bench {

struct TrainBenchOptions {
    std::string model = "dit-s";
    std::string device = "cpu";
    std::int64_t batch = 32;
    std::int64_t latent_size = 8;  // synthetic latents are C × size × size: (size / 2)² tokens per sample
    std::int64_t channels = 4;     // 4 (SD/SDXL VAEs) or 16 (SD3/FLUX)
    std::int64_t caption_tokens = 120;  // text presets: the longest synthetic caption (lengths in [L/2, L])
    std::int64_t text_dim = 4096;       // text presets: the caption features' width (T5-XXL)
    std::int64_t steps = 20;
    std::int64_t warmup_steps = 3;
    int threads = 2;
    int repeats = 3;  // alternate C++ and Python runs; report medians
    std::string python = "/usr/bin/python3";
    std::string python_script;  // scripts/bench_train.py
    bool run_python = true;
    bool foreach_adamw_too = false;  // also time the C++ trainer with the _foreach AdamW, not the fused one
    double peak_tflops = 0;  // > 0: print model FLOPs utilisation against this peak
    // > 0: every run also times the C++ trainer with this patch mask (its unit field) beside
    // the unmasked one, and the Python reference trains masked too.
    double patch_mask = 0;
};

// Prints the report to stdout; the last line is the C++/Python ratio.
common::Status run_train_bench(const TrainBenchOptions& options);

// `tessera-bench train [options]` (argv[0] is "train"): parses, runs, prints; the exit code.
int run_train_command(int argc, char** argv);

}  // namespace tessera::bench
