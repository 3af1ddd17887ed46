// tessera-bench: Tessera's benchmarks. `train` measures the trainer's samples/s against
// PyTorch Python running the same model and loop; `fleet` simulates a volunteer fleet
// training through the server's components on a virtual clock (docs/fleet_simulator.md);
// `dispatch` and `ingest` measure one server's front end and result pipeline; `replicas` how
// far apart honest replicas of a unit are; `soak` loads running servers for hours and
// `soak-check` checks what they did with it.
#include <cxxopts.hpp>
#include <iostream>

#include "allocator_tuning.h"
#include "command_line.h"
#include "dispatch_bench.h"
#include "fleet/fleet_command.h"
#include "ingest_bench.h"
#include "replica_bench.h"
#include "soak/soak_command.h"
#include "train_bench.h"

int main(int argc, char** argv) {
    tessera::common::tune_allocator_for_training();
    std::string command = argc >= 2 ? argv[1] : "";
    if (command == "fleet") return tessera::bench::run_fleet_command(argc - 1, argv + 1);
    if (command == "dispatch") return tessera::bench::run_dispatch_command(argc - 1, argv + 1);
    if (command == "ingest") return tessera::bench::run_ingest_command(argc - 1, argv + 1);
    if (command == "replicas") return tessera::bench::run_replica_command(argc - 1, argv + 1);
    if (command == "soak") return tessera::bench::run_soak_command(argc - 1, argv + 1);
    if (command == "soak-check") return tessera::bench::run_soak_check_command(argc - 1, argv + 1);
    if (command != "train") {
        std::cerr << "usage: tessera-bench train --model PRESET --device cpu|cuda [options]\n"
                     "       tessera-bench fleet --data DIR [--fleet home] [--volunteers K] [options]\n"
                     "       tessera-bench dispatch --data DIR [--volunteers N] [--connections C] [options]\n"
                     "       tessera-bench ingest --data DIR [--model dit-s] [--results R] [options]\n"
                     "       tessera-bench replicas --data DIR [--model cnn] [--units N] [options]\n"
                     "       tessera-bench soak --server URL --out DIR [--volunteers N] [--minutes M] [options]\n"
                     "       tessera-bench soak-check --db URL --acks FILE\n"
                     "Run `tessera-bench COMMAND --help` for the options.\n";
        return 2;
    }
    cxxopts::Options options("tessera-bench train", "Training throughput: C++ trainer vs PyTorch Python");
    options.add_options()("model", "model preset (dit-tiny, dit-s, dit-b)",
                          cxxopts::value<std::string>()->default_value("dit-s"))(
        "device", "cpu, cuda, cuda:N or auto", cxxopts::value<std::string>()->default_value("cpu"))(
        "batch", "batch size", cxxopts::value<std::int64_t>()->default_value("32"))(
        "latent-size", "synthetic latents are 4 x N x N (patch 2: N²/4 tokens per sample)",
        cxxopts::value<std::int64_t>()->default_value("8"))("steps", "measured steps",
                                                            cxxopts::value<std::int64_t>()->default_value("20"))(
        "warmup", "warm-up steps before measuring", cxxopts::value<std::int64_t>()->default_value("3"))(
        "threads", "CPU threads on both sides", cxxopts::value<int>()->default_value("2"))(
        "repeats", "alternating C++/Python runs (medians are reported)", cxxopts::value<int>()->default_value("3"))(
        "python", "Python with PyTorch", cxxopts::value<std::string>()->default_value("/usr/bin/python3"))(
        "python-script", "the Python reference", cxxopts::value<std::string>()->default_value(TESSERA_BENCH_SCRIPT))(
        "no-python", "measure the C++ trainer only")(
        "foreach-adamw-too", "also time the C++ trainer with the _foreach AdamW in place of the fused kernel (CUDA)")(
        "peak-tflops", "the device's peak TFLOP/s, to print MFU", cxxopts::value<double>()->default_value("0"));
    try {
        auto parsed = tessera::common::parse_command_line(options, argc - 1, argv + 1);
        if (!parsed) return parsed.exit_code;
        const auto& args = *parsed;
        tessera::bench::TrainBenchOptions bench;
        bench.model = args["model"].as<std::string>();
        bench.device = args["device"].as<std::string>();
        bench.batch = args["batch"].as<std::int64_t>();
        bench.latent_size = args["latent-size"].as<std::int64_t>();
        if (bench.latent_size < 2 || bench.latent_size > 256 || bench.latent_size % 2 != 0) {
            std::cerr << "tessera-bench: --latent-size must be even, 2 to 256 (patch 2)\n";
            return 2;
        }
        bench.steps = args["steps"].as<std::int64_t>();
        bench.warmup_steps = args["warmup"].as<std::int64_t>();
        bench.threads = args["threads"].as<int>();
        bench.repeats = args["repeats"].as<int>();
        bench.python = args["python"].as<std::string>();
        bench.python_script = args["python-script"].as<std::string>();
        bench.run_python = args.count("no-python") == 0;
        bench.foreach_adamw_too = args.count("foreach-adamw-too") > 0;
        bench.peak_tflops = args["peak-tflops"].as<double>();
        if (auto status = tessera::bench::run_train_bench(bench); !status) {
            std::cerr << "tessera-bench: " << status.message() << "\n";
            return 1;
        }
    } catch (const cxxopts::exceptions::exception& error) {
        std::cerr << "tessera-bench: " << error.what() << "\n";
        return 2;
    }
    return 0;
}
