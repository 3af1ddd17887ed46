// The replica-spread benchmark: relative L2 distances between deltas of one unit.
#include "replica_bench.h"

#include <torch/torch.h>

#include <algorithm>
#include <cxxopts.hpp>
#include <iomanip>
#include <iostream>

#include "command_line.h"
#include "dataset_manifest.h"
#include "torch/model_state.h"
#include "torch/shard_data.h"
#include "torch/trainer.h"
#include "torch/workload.h"

namespace tessera::bench {
namespace {

struct ReplicaOptions {
    std::string data;
    std::string model = "cnn";
    int units = 20;
    common::Hyperparameters hyper{
        .local_steps = 50, .batch_size = 64, .lr = 3e-4, .warmup_steps = 5, .weight_decay = 0.01, .grad_clip = 1.0};
    std::int64_t base_steps = 300;  // the base model: this many steps of one worker first
};

double relative_l2(const common::TorchTensorMap& a, const common::TorchTensorMap& b) {
    double difference = 0, norm_a = 0, norm_b = 0;
    for (const auto& [name, x] : a) {
        auto y = b.at(name);
        difference += (x - y).to(torch::kFloat64).square().sum().item<double>();
        norm_a += x.to(torch::kFloat64).square().sum().item<double>();
        norm_b += y.to(torch::kFloat64).square().sum().item<double>();
    }
    return std::sqrt(difference) / std::max({std::sqrt(norm_a), std::sqrt(norm_b), 1e-12});
}

void print_row(const std::string& what, std::vector<double> values) {
    std::sort(values.begin(), values.end());
    auto at = [&](double q) { return values[static_cast<std::size_t>(q * static_cast<double>(values.size() - 1))]; };
    std::cout << std::left << std::setw(44) << what << std::right << std::scientific << std::setprecision(3)
              << " min " << values.front() << "  median " << at(0.5) << "  p90 " << at(0.9) << "  max "
              << values.back() << "\n";
}

common::Status run(const ReplicaOptions& o) {
    std::filesystem::path dir = o.data;
    auto manifest = common::load_dataset_manifest(dir / "dataset.json");
    if (!manifest) return manifest.error();
    std::vector<common::ShardData> shards;
    for (const auto& file : manifest->train) {
        auto shard = common::load_shard_file(dir / file.file);
        if (!shard) return shard.error();
        shards.push_back(std::move(*shard));
    }
    auto classes = static_cast<std::int64_t>(manifest->classes.size());
    auto workload = common::make_workload(o.model, common::data_shape_of(shards[0], classes), 0);
    if (!workload) return workload.error();
    auto base = common::state_of(*(*workload)->module());
    if (o.base_steps > 0) {
        auto warm_hyper = o.hyper;
        warm_hyper.local_steps = o.base_steps;
        warm_hyper.seed = 99;
        auto warm = common::train_config_for(warm_hyper);
        warm.num_classes = classes;
        auto trained = common::train(o.model, base, shards[0], warm);
        if (!trained) return trained.error();
        for (auto& [name, tensor] : base) tensor = tensor + trained->delta.at(name);
    }
    std::vector<double> threads, streams;
    for (int u = 0; u < o.units; ++u) {
        const auto& data = shards[static_cast<std::size_t>(u) % shards.size()];
        auto config = common::train_config_for(o.hyper);
        config.num_classes = classes;
        config.seed = 1000 + static_cast<std::uint64_t>(u);
        torch::set_num_threads(2);
        auto reference = common::train(o.model, base, data, config);
        torch::set_num_threads(1);
        auto one_thread = common::train(o.model, base, data, config);
        config.seed += 500;
        auto other_streams = common::train(o.model, base, data, config);
        if (!reference || !one_thread || !other_streams) return common::make_error("training failed");
        threads.push_back(relative_l2(reference->delta, one_thread->delta));
        streams.push_back(relative_l2(reference->delta, other_streams->delta));
    }
    std::cout << "replicas of " << o.units << " units of " << o.model << " (" << o.hyper.local_steps << " steps, batch "
              << o.hyper.batch_size << ", lr " << o.hyper.lr << "), base trained " << o.base_steps << " steps\n";
    print_row("same streams, 2 threads against 1", threads);
    print_row("other random streams (another seed)", streams);
    return {};
}

}  // namespace

int run_replica_command(int argc, char** argv) {
    cxxopts::Options options("tessera-bench replicas", "Relative L2 distances between honest replicas of a unit");
    options.add_options()("data", "dataset directory (tessera-data prepare)", cxxopts::value<std::string>())(
        "model", "cnn, dit-tiny, ...", cxxopts::value<std::string>()->default_value("cnn"))(
        "units", "units measured", cxxopts::value<int>()->default_value("20"))(
        "steps", "local steps per unit", cxxopts::value<std::int64_t>()->default_value("50"))(
        "batch", "batch size", cxxopts::value<std::int64_t>()->default_value("64"))(
        "base-steps", "steps that train the base model first", cxxopts::value<std::int64_t>()->default_value("300"));
    try {
        auto parsed = common::parse_command_line(options, argc, argv);
        if (!parsed) return parsed.exit_code;
        const auto& args = *parsed;
        if (!args.count("data")) {
            std::cerr << "tessera-bench replicas: --data is required\n";
            return 2;
        }
        ReplicaOptions o;
        o.data = args["data"].as<std::string>();
        o.model = args["model"].as<std::string>();
        o.units = std::max(1, args["units"].as<int>());
        o.hyper.local_steps = args["steps"].as<std::int64_t>();
        o.hyper.batch_size = args["batch"].as<std::int64_t>();
        o.base_steps = args["base-steps"].as<std::int64_t>();
        if (auto status = run(o); !status) {
            std::cerr << "tessera-bench replicas: " << status.message() << "\n";
            return 1;
        }
        return 0;
    } catch (const cxxopts::exceptions::exception& error) {
        std::cerr << "tessera-bench replicas: " << error.what() << "\n";
        return 2;
    }
}

}  // namespace tessera::bench
