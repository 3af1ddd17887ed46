// tessera-data: the dataset tool. prepare (Fashion-MNIST → latent or pixel shards, or
// captioned two-item canvases), inspect (print a tensor file), import (adopt shards made
// elsewhere), cluster (split a latent dataset into expert datasets and a router's).
#include <torch/torch.h>

#include <cxxopts.hpp>
#include <iostream>

#include "allocator_tuning.h"
#include "cluster_command.h"
#include "command_line.h"
#include "import_command.h"
#include "inspect_command.h"
#include "prepare.h"
#include "tessera_version.h"

namespace {

constexpr const char* kUsage =
    "usage: tessera-data <command> [options]\n"
    "  prepare fashion-mnist --out DIR [--pixels] [--source DIR] [--shard-size N]\n"
    "                        [--autoencoder-steps N] [--limit N] [--seed N] [--threads N]\n"
    "  prepare canvases --out DIR [--source DIR] [--shard-size N] [--autoencoder-steps N]\n"
    "                   [--limit N] [--seed N] [--threads N]\n"
    "  inspect FILE...\n"
    "  import --out DIR [--validation FILE] [--name NAME] [--scale-factor X] [--classes N] FILE...\n"
    "  cluster --data DIR --out DIR [--experts E] [--seed N] [--features auto|samples|text|FILE]\n"
    "          [--shard-size N] [--iterations N] [--threads N]\n"
    "  --version\n"
    "Run `tessera-data <command> --help` for details.\n";

int fail(const std::string& message) {
    std::cerr << "tessera-data: " << message << "\n";
    return 1;
}

int run_prepare(int argc, char** argv) {
    cxxopts::Options options("tessera-data prepare",
                             "Prepare Fashion-MNIST shards (latents by default) or captioned canvases of two items");
    const tessera::data::PrepareOptions defaults;
    options.add_options()("dataset", "dataset name (fashion-mnist or canvases)", cxxopts::value<std::string>())(
        "out", "output directory", cxxopts::value<std::string>())(
        "pixels", "fashion-mnist: write 28x28 pixel shards for the classifier instead of latents")(
        "source", "directory of the IDX files", cxxopts::value<std::string>()->default_value(defaults.source.string()))(
        "shard-size", "samples per shard, at most",
        cxxopts::value<std::int64_t>()->default_value(std::to_string(defaults.shard_size)))(
        "autoencoder-steps", "autoencoder training steps",
        cxxopts::value<std::int64_t>()->default_value(std::to_string(defaults.autoencoder_steps)))(
        "limit", "fashion-mnist: use only the first N training images; canvases: make N (0: all)",
        cxxopts::value<std::int64_t>()->default_value("0"))("seed", "random seed",
                                                            cxxopts::value<std::uint64_t>()->default_value("0"))(
        "threads", "CPU threads for LibTorch (0: its default)", cxxopts::value<int>()->default_value("0"));
    options.parse_positional({"dataset"});
    auto parsed = tessera::common::parse_command_line(options, argc, argv);
    if (!parsed) return parsed.exit_code;
    const auto& args = *parsed;
    auto dataset = args.count("dataset") ? args["dataset"].as<std::string>() : "";
    if (dataset != "fashion-mnist" && dataset != "canvases")
        return fail("prepare knows two datasets: fashion-mnist and canvases");
    if (!args.count("out")) return fail("prepare needs --out DIR");
    if (args["threads"].as<int>() > 0) torch::set_num_threads(args["threads"].as<int>());
    tessera::data::PrepareOptions prepare;
    prepare.out = args["out"].as<std::string>();
    prepare.pixels = args.count("pixels") > 0;
    prepare.source = args["source"].as<std::string>();
    prepare.shard_size = args["shard-size"].as<std::int64_t>();
    prepare.autoencoder_steps = args["autoencoder-steps"].as<std::int64_t>();
    prepare.limit = args["limit"].as<std::int64_t>();
    prepare.seed = args["seed"].as<std::uint64_t>();
    auto status = dataset == "canvases" ? tessera::data::prepare_canvases(prepare)
                                        : tessera::data::prepare_fashion_mnist(prepare);
    if (!status) return fail(status.message());
    std::cerr << "dataset ready in " << prepare.out.string() << "\n";
    return 0;
}

int run_import(int argc, char** argv) {
    cxxopts::Options options("tessera-data import", "Check shards made elsewhere and add them to a dataset");
    options.add_options()("out", "dataset directory", cxxopts::value<std::string>())(
        "validation", "held-out shard", cxxopts::value<std::string>()->default_value(""))(
        "name", "dataset name (new datasets)", cxxopts::value<std::string>()->default_value("imported"))(
        "scale-factor", "latent scale factor already applied (new datasets)",
        cxxopts::value<double>()->default_value("1"))("classes", "number of classes (0: from the labels)",
                                                      cxxopts::value<std::int64_t>()->default_value("0"))(
        "files", "shard files: safetensors (plain or zstd) or webdataset .tar",
        cxxopts::value<std::vector<std::string>>());
    options.parse_positional({"files"});
    auto parsed = tessera::common::parse_command_line(options, argc, argv);
    if (!parsed) return parsed.exit_code;
    const auto& args = *parsed;
    if (!args.count("out")) return fail("import needs --out DIR");
    tessera::data::ImportOptions import;
    import.out = args["out"].as<std::string>();
    import.validation = args["validation"].as<std::string>();
    import.name = args["name"].as<std::string>();
    import.scale_factor = args["scale-factor"].as<double>();
    import.num_classes = args["classes"].as<std::int64_t>();
    if (args.count("files"))
        for (const auto& file : args["files"].as<std::vector<std::string>>()) import.shards.emplace_back(file);
    auto status = tessera::data::import_shards(import);
    return status ? 0 : fail(status.message());
}

int run_cluster(int argc, char** argv) {
    cxxopts::Options options("tessera-data cluster",
                             "Split a latent dataset by seeded k-means into one dataset per expert and a router's");
    const tessera::data::ClusterOptions defaults;
    options.add_options()("data", "the latent dataset to split", cxxopts::value<std::string>())(
        "out", "output directory (expert-0 … expert-E−1, router, clusters.json)", cxxopts::value<std::string>())(
        "experts", "clusters, one expert each",
        cxxopts::value<std::int64_t>()->default_value(std::to_string(defaults.experts)))(
        "seed", "k-means++ seed", cxxopts::value<std::uint64_t>()->default_value("0"))(
        "features",
        "what samples are clustered by: auto (text with captions, else samples), samples (the latents), text (the "
        "pooled caption embedding) or a safetensors file with features [N, D] and validation_features [M, D]",
        cxxopts::value<std::string>()->default_value(defaults.features))(
        "shard-size", "samples per written shard, at most",
        cxxopts::value<std::int64_t>()->default_value(std::to_string(defaults.shard_size)))(
        "iterations", "Lloyd's iterations, at most",
        cxxopts::value<std::int64_t>()->default_value(std::to_string(defaults.max_iterations)))(
        "threads", "CPU threads for LibTorch (0: its default)", cxxopts::value<int>()->default_value("0"));
    auto parsed = tessera::common::parse_command_line(options, argc, argv);
    if (!parsed) return parsed.exit_code;
    const auto& args = *parsed;
    if (!args.count("data")) return fail("cluster needs --data DIR");
    if (!args.count("out")) return fail("cluster needs --out DIR");
    if (args["threads"].as<int>() > 0) torch::set_num_threads(args["threads"].as<int>());
    tessera::data::ClusterOptions cluster;
    cluster.data = args["data"].as<std::string>();
    cluster.out = args["out"].as<std::string>();
    cluster.experts = args["experts"].as<std::int64_t>();
    cluster.seed = args["seed"].as<std::uint64_t>();
    cluster.features = args["features"].as<std::string>();
    cluster.shard_size = args["shard-size"].as<std::int64_t>();
    cluster.max_iterations = args["iterations"].as<std::int64_t>();
    auto status = tessera::data::cluster_dataset(cluster);
    if (!status) return fail(status.message());
    std::cerr << "experts and router ready in " << cluster.out.string() << "\n";
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    tessera::common::tune_allocator_for_training();
    if (argc < 2) {
        std::cerr << kUsage;
        return 2;
    }
    if (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
        std::cout << kUsage;
        return 0;
    }
    if (std::string(argv[1]) == "--version") {
        std::cout << "tessera-data " << tessera::common::kVersion << "\n";
        return 0;
    }
    std::string command = argv[1];
    try {
        if (command == "prepare") return run_prepare(argc - 1, argv + 1);
        if (command == "import") return run_import(argc - 1, argv + 1);
        if (command == "cluster") return run_cluster(argc - 1, argv + 1);
        if (command == "inspect") {
            if (argc < 3) return fail("inspect needs a FILE");
            int rc = 0;
            for (int i = 2; i < argc; ++i)
                if (auto status = tessera::data::inspect_tensor_file(argv[i], std::cout); !status)
                    rc = fail(status.message());
            return rc;
        }
    } catch (const cxxopts::exceptions::exception& error) {
        return fail(error.what());
    }
    std::cerr << "tessera-data: unknown command \"" << command << "\"\n" << kUsage;
    return 2;
}
