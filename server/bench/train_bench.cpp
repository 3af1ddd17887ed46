// The training-throughput benchmark. Both sides train on the same synthetic latents (the
// data's content does not change the work), with the same thread count, batch and steps,
// after the same number of warm-up steps.
#include "train_bench.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include <sys/resource.h>

#include <cxxopts.hpp>

#include "command_line.h"
#include "json_strict.h"
#include "torch/model_state.h"
#include "torch/trainer.h"
#include "training/gpu_memory.h"

namespace tessera::bench {
namespace {

constexpr std::int64_t kSyntheticSamples = 4096;
constexpr std::int64_t kSyntheticCaptioned = 256;  // at T5-XXL width 4096 samples' captions would take GBs

bool takes_text(const std::string& model) { return model.ends_with("-text"); }
std::int64_t synthetic_samples(const TrainBenchOptions& o) {
    return takes_text(o.model) ? kSyntheticCaptioned : kSyntheticSamples;
}

// Synthetic training data as a unit holds it: latents, labels and, for a text preset, packed
// f16 caption tokens (as `tessera-data import` stores them) of lengths in [L/2, L].
common::ShardData synthetic_data(const TrainBenchOptions& o) {
    auto generator = at::detail::createCPUGenerator(0);
    auto n = synthetic_samples(o);
    common::ShardData data;
    data.inputs = torch::randn({n, o.channels, o.latent_size, o.latent_size}, generator, torch::kFloat32);
    data.labels = torch::randint(0, 10, {n}, generator, torch::kInt64);
    if (takes_text(o.model)) {
        data.text_len = torch::randint((o.caption_tokens + 1) / 2, o.caption_tokens + 1, {n}, generator, torch::kInt64);
        data.text_start = data.text_len.cumsum(0) - data.text_len;
        data.text_tokens = torch::randn({data.text_len.sum().item<std::int64_t>(), o.text_dim}, generator,
                                        torch::kFloat32)
                               .to(torch::kFloat16);
    }
    return data;
}

// The process's CPU time so far (user + system), in seconds: under a shared machine's load it
// measures the work a run did better than the wall clock does.
double cpu_seconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// The process's peak resident memory (Linux: ru_maxrss is in KiB).
double peak_rss_mib() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// Training FLOPs per sample (3 × forward), counting matmuls, attention and the depthwise conv;
// a text DiT's caption projection and cross-attention for captions of `caption` tokens.
double training_flops_per_sample(const common::DitConfig& c, double caption) {
    double h = static_cast<double>(c.hidden),
           n = static_cast<double>((c.input_size / c.patch) * (c.input_size / c.patch));
    double m = h * static_cast<double>(c.mlp_ratio);
    double per_block = 2 * n * (4 * h * h + 2 * h * m) + 4 * n * n * h + 2 * 9 * m * n + 2 * 6 * h;
    double stem =
        2 * n * h * static_cast<double>(c.patch * c.patch * c.in_channels) * 2 + 2 * (256 * h + h * h + 6 * h * h);
    if (c.text_dim > 0) {
        per_block += 2 * n * 2 * h * h + 2 * caption * 2 * h * h + 4 * n * caption * h;
        stem += 2 * caption * (static_cast<double>(c.text_dim) * h + h * h);
    }
    return 3 * (stem + static_cast<double>(c.depth) * per_block);
}

common::Result<double> python_samples_per_s(const TrainBenchOptions& o) {
    std::string command = o.python + " " + o.python_script + " --model " + o.model + " --device " +
                          (o.device == "auto" ? std::string(torch::cuda::is_available() ? "cuda" : "cpu") : o.device) +
                          " --batch " + std::to_string(o.batch) + " --latent-size " + std::to_string(o.latent_size) +
                          " --channels " + std::to_string(o.channels) + " --caption-tokens " +
                          std::to_string(o.caption_tokens) + " --text-dim " + std::to_string(o.text_dim) +
                          " --steps " + std::to_string(o.steps) + " --warmup-steps " + std::to_string(o.warmup_steps) +
                          " --threads " + std::to_string(o.threads) + " --samples " + std::to_string(synthetic_samples(o)) +
                          " --patch-mask " + std::to_string(o.patch_mask);
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return common::make_error("cannot run " + command);
    std::string output;
    char buffer[4096];
    while (auto n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
    int status = pclose(pipe);
    if (status != 0)
        return common::make_error(
            "the Python reference failed (is python3-torch installed? scripts/bench installs it): " + command);
    auto json = common::parse_json_strict(output);
    if (!json) return common::with_context("Python reference output", json.error());
    const auto* object = json->if_object();
    if (object == nullptr || !object->contains("samples_per_s"))
        return common::make_error("Python reference printed no samples_per_s");
    return object->at("samples_per_s").to_number<double>();
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    auto n = values.size();
    return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The runs' medians, the model's FLOP/s and MFU when the peak is given, and C++ against Python.
void print_medians(const TrainBenchOptions& o, common::Workload& workload, std::vector<double> cpp,
                   std::vector<double> cpp_foreach, std::vector<double> cpp_masked, std::vector<double> python,
                   const std::vector<double>& cpu_step, const std::vector<double>& cpu_step_masked) {
    double cpp_median = median(cpp);
    std::printf("C++ (LibTorch %s): %.2f samples/s (median), %.3f s a step\n", TORCH_VERSION, cpp_median,
                static_cast<double>(o.batch) / cpp_median);
    if (!cpp_masked.empty()) {
        double masked = median(cpp_masked);
        std::printf("C++ with patch mask %.2f: %.2f samples/s (median), %.3f s a step; %.2fx the unmasked speed\n",
                    o.patch_mask, masked, static_cast<double>(o.batch) / masked, masked / cpp_median);
        std::printf("CPU time a step (median): %.3f s unmasked, %.3f s masked; %.2fx less\n", median(cpu_step),
                    median(cpu_step_masked), median(cpu_step) / median(cpu_step_masked));
    }
    if (!cpp_foreach.empty())
        std::printf("C++ with _foreach AdamW: %.2f samples/s (median); fused/_foreach ratio %.3f\n",
                    median(cpp_foreach), cpp_median / median(cpp_foreach));
    if (auto* dit = common::dit_of(workload); dit != nullptr && o.peak_tflops > 0) {
        double mean_caption = static_cast<double>((o.caption_tokens + 1) / 2 + o.caption_tokens) / 2;
        double flops = training_flops_per_sample((*dit)->config(), mean_caption) * cpp_median;
        std::printf("C++ model FLOPs: %.1f TFLOP/s, MFU %.1f%% of %.0f TFLOP/s\n", flops / 1e12,
                    100 * flops / (o.peak_tflops * 1e12), o.peak_tflops);
    }
    if (!o.run_python) return;
    double python_median = median(python);
    std::printf("Python (PyTorch, same model and loop): %.2f samples/s (median)\n", python_median);
    std::printf("ratio C++/Python samples/s: %.3f\n", cpp_median / python_median);
}

// The trainer's settings for every C++ run.
common::TrainConfig bench_config(const TrainBenchOptions& o) {
    common::TrainConfig config;
    config.batch_size = o.batch;
    config.device = o.device;
    config.lr = 3e-4;
    config.warmup_steps = 10;
    return config;
}

// What is measured, on one line.
void print_setup(const TrainBenchOptions& o, std::int64_t parameters, bool captions) {
    std::cout << "model " << o.model << " (" << parameters << " parameters), device " << o.device << ", batch "
              << o.batch << ", latents " << o.channels << "×" << o.latent_size << "×" << o.latent_size;
    if (captions)
        std::cout << ", captions of " << (o.caption_tokens + 1) / 2 << " to " << o.caption_tokens << " tokens × "
                  << o.text_dim << " (f16, packed)";
    std::cout << ", threads " << o.threads << ", " << o.steps << " measured steps after " << o.warmup_steps
              << " warm-up, " << o.repeats << " alternating runs each";
    if (o.patch_mask > 0) std::cout << ", patch mask " << o.patch_mask << " beside none";
    std::cout << "\n";
}

}  // namespace

common::Status run_train_bench(const TrainBenchOptions& o) {
    torch::set_num_threads(o.threads);
    auto data = synthetic_data(o);
    auto workload = common::make_workload(o.model, common::data_shape_of(data, 10));
    if (!workload) return workload.error();
    auto theta0 = common::state_of(*(*workload)->module());

    auto config = bench_config(o);
    print_setup(o, common::parameter_count(*(*workload)->module()), data.has_captions());

    // Runs alternate between the two sides, so drift in the machine's speed hits both.
    std::vector<double> cpu_step, cpu_step_masked;  // CPU seconds a measured step
    auto time_cpp = [&](bool fused_adamw, double patch_mask = 0) -> common::Result<double> {
        config.fused_adamw = fused_adamw;
        config.patch_mask = patch_mask;
        config.steps = o.warmup_steps;
        if (o.warmup_steps > 0)
            if (auto warm = common::train(o.model, theta0, data, config); !warm) return warm.error();
        config.steps = o.steps;
        double cpu_before = cpu_seconds();
        auto measured = common::train(o.model, theta0, data, config);
        if (!measured) return measured.error();
        if (fused_adamw)
            (patch_mask > 0 ? cpu_step_masked : cpu_step)
                .push_back((cpu_seconds() - cpu_before) / static_cast<double>(std::max<std::int64_t>(o.steps, 1)));
        return measured->stats.samples_per_s;
    };
    std::vector<double> cpp, cpp_foreach, cpp_masked, python;
    for (int run = 0; run < std::max(o.repeats, 1); ++run) {
        auto fused = time_cpp(true);
        if (!fused) return fused.error();
        cpp.push_back(*fused);
        std::printf("  run %d: C++ %.2f samples/s", run + 1, cpp.back());
        if (o.foreach_adamw_too) {
            auto foreach = time_cpp(false);
            if (!foreach) return foreach.error();
            cpp_foreach.push_back(*foreach);
            std::printf(", C++ with _foreach AdamW %.2f samples/s", cpp_foreach.back());
        }
        if (o.patch_mask > 0) {
            auto masked = time_cpp(true, o.patch_mask);
            if (!masked) return masked.error();
            cpp_masked.push_back(*masked);
            std::printf(", C++ with patch mask %.2f %.2f samples/s", o.patch_mask, cpp_masked.back());
        }
        if (o.run_python) {
            client::release_gpu_cache();  // the reference is another process: it needs the GPU's memory
            auto sample = python_samples_per_s(o);
            if (!sample) return sample.error();
            python.push_back(*sample);
            std::printf(", Python %.2f samples/s", python.back());
        }
        std::printf("\n");
        std::fflush(stdout);
    }
    print_medians(o, **workload, cpp, cpp_foreach, cpp_masked, python, cpu_step, cpu_step_masked);
    std::printf("C++ peak resident memory: %.0f MiB (the process, data included)\n", peak_rss_mib());
    return {};
}

namespace {

// The command line's options, checked.
common::Result<TrainBenchOptions> train_bench_options(const cxxopts::ParseResult& args) {
    TrainBenchOptions bench;
    bench.model = args["model"].as<std::string>();
    bench.device = args["device"].as<std::string>();
    bench.batch = args["batch"].as<std::int64_t>();
    bench.latent_size = args["latent-size"].as<std::int64_t>();
    if (bench.latent_size < 2 || bench.latent_size > 256 || bench.latent_size % 2 != 0)
        return common::make_error("--latent-size must be even, 2 to 256 (patch 2)");
    bench.channels = args["channels"].as<std::int64_t>();
    bench.caption_tokens = args["caption-tokens"].as<std::int64_t>();
    bench.text_dim = args["text-dim"].as<std::int64_t>();
    if (bench.channels < 1 || bench.channels > 64 || bench.caption_tokens < 1 || bench.caption_tokens > 1024 ||
        bench.text_dim < 1 || bench.text_dim > 8192)
        return common::make_error("--channels 1 to 64, --caption-tokens 1 to 1024, --text-dim 1 to 8192");
    bench.steps = args["steps"].as<std::int64_t>();
    bench.warmup_steps = args["warmup"].as<std::int64_t>();
    bench.threads = args["threads"].as<int>();
    bench.repeats = args["repeats"].as<int>();
    bench.python = args["python"].as<std::string>();
    bench.python_script = args["python-script"].as<std::string>();
    bench.run_python = args.count("no-python") == 0;
    bench.foreach_adamw_too = args.count("foreach-adamw-too") > 0;
    bench.peak_tflops = args["peak-tflops"].as<double>();
    bench.patch_mask = args["patch-mask"].as<double>();
    if (!(bench.patch_mask >= 0 && bench.patch_mask < 1)) return common::make_error("--patch-mask must be in [0, 1)");
    return bench;
}

}  // namespace

int run_train_command(int argc, char** argv) {
    cxxopts::Options options("tessera-bench train", "Training throughput: C++ trainer vs PyTorch Python");
    options.add_options()("model", "model preset (dit-tiny, dit-s, dit-b, or one of them with -text)",
                          cxxopts::value<std::string>()->default_value("dit-s"))(
        "device", "cpu, cuda, cuda:N or auto", cxxopts::value<std::string>()->default_value("cpu"))(
        "batch", "batch size", cxxopts::value<std::int64_t>()->default_value("32"))(
        "latent-size", "synthetic latents are C x N x N (patch 2: N²/4 tokens per sample)",
        cxxopts::value<std::int64_t>()->default_value("8"))(
        "channels", "latent channels: 4 (SD, SDXL VAEs) or 16 (SD3, FLUX)",
        cxxopts::value<std::int64_t>()->default_value("4"))(
        "caption-tokens", "text presets: the longest synthetic caption (lengths from half of it)",
        cxxopts::value<std::int64_t>()->default_value("120"))(
        "text-dim", "text presets: the caption features' width", cxxopts::value<std::int64_t>()->default_value("4096"))(
        "steps", "measured steps",
                                                            cxxopts::value<std::int64_t>()->default_value("20"))(
        "warmup", "warm-up steps before measuring", cxxopts::value<std::int64_t>()->default_value("3"))(
        "threads", "CPU threads on both sides", cxxopts::value<int>()->default_value("2"))(
        "repeats", "alternating C++/Python runs (medians are reported)", cxxopts::value<int>()->default_value("3"))(
        "python", "Python with PyTorch", cxxopts::value<std::string>()->default_value("/usr/bin/python3"))(
        "python-script", "the Python reference", cxxopts::value<std::string>()->default_value(TESSERA_BENCH_SCRIPT))(
        "no-python", "measure the C++ trainer only")(
        "foreach-adamw-too", "also time the C++ trainer with the _foreach AdamW in place of the fused kernel (CUDA)")(
        "peak-tflops", "the device's peak TFLOP/s, to print MFU", cxxopts::value<double>()->default_value("0"))(
        "patch-mask",
        "also time the C++ trainer with this fraction of patches dropped after the mixer (the unit's patch_mask), "
        "beside none; the Python side trains masked",
        cxxopts::value<double>()->default_value("0"));
    try {
        auto parsed = common::parse_command_line(options, argc, argv);
        if (!parsed) return parsed.exit_code;
        auto bench = train_bench_options(*parsed);
        if (!bench) {
            std::cerr << "tessera-bench: " << bench.message() << "\n";
            return 2;
        }
        if (auto status = run_train_bench(*bench); !status) {
            std::cerr << "tessera-bench: " << status.message() << "\n";
            return 1;
        }
    } catch (const cxxopts::exceptions::exception& error) {
        std::cerr << "tessera-bench: " << error.what() << "\n";
        return 2;
    }
    return 0;
}

}  // namespace tessera::bench
