// What `tessera-client doctor` says about the compute side: the LibTorch build (its version,
// CUDA or not), and each GPU it sees with its memory and free memory. Torch stays in this file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::client {

struct GpuReport {
    int index = 0;
    std::string name;
    std::int64_t total_bytes = 0;
    std::int64_t free_bytes = -1;  // -1: could not be read
};

struct TorchReport {
    std::string libtorch_version;  // "1.13.1"
    bool cuda_build = false;       // this client was built against a CUDA LibTorch
    std::string cuda_version;      // the CUDA runtime it was built with, "12.1"; empty on CPU builds
    std::vector<GpuReport> gpus;   // what the CUDA runtime sees (none on a CPU build)
    std::string problem;           // why the GPUs could not be listed, when that failed
    int cpu_threads = 0;           // LibTorch's default
};

TorchReport torch_report();

}  // namespace tessera::client
