// tessera-data cluster: expert datasets that hold every sample once, each nearest its own
// centre with its captions beside it; a router dataset labelled by cluster; the same clusters
// for a seed; bad input refused before anything is written.
#include <torch/torch.h>

#include <map>

#include "cluster_command.h"
#include "dataset_manifest.h"
#include "doctest_after_torch.h"
#include "expert_clusters.h"
#include "file_io.h"
#include "kmeans.h"
#include "prepare.h"
#include "shell_run.h"
#include "small_dataset.h"
#include "synthetic_dataset.h"
#include "temp_dir.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"

using namespace tessera::common;
using tessera::data::cluster_dataset;
using tessera::data::ClusterOptions;
using tessera::testing::TempDir;

namespace {

const std::filesystem::path& small_canvases() {
    static std::unique_ptr<TempDir> dir;
    if (!dir) {
        dir = std::make_unique<TempDir>();
        tessera::data::PrepareOptions options;
        options.out = dir->path();
        options.limit = 300;
        options.shard_size = 100;
        options.autoencoder_steps = 20;
        if (auto status = tessera::data::prepare_canvases(options); !status)
            throw std::runtime_error("preparing the canvases failed: " + status.message());
    }
    return dir->path();
}

ShardData training_set(const std::filesystem::path& dir) {
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    REQUIRE(verify_dataset_files(dir, manifest));
    return load_training_set(dir, manifest).value();
}

// Each sample's feature as the clusterer saw it: the latent, or its caption's mean token.
torch::Tensor features(const ShardData& data, bool text) {
    if (!text) return data.inputs.flatten(1);
    std::vector<torch::Tensor> pooled;
    auto tokens = data.text_tokens.to(torch::kFloat32);
    for (std::int64_t i = 0; i < data.size(); ++i) {
        auto start = data.text_start[i].item<std::int64_t>(), len = data.text_len[i].item<std::int64_t>();
        pooled.push_back(tokens.slice(0, start, start + len).mean(0));
    }
    return torch::stack(pooled);
}

// Checks the split in `out` against its source: sizes, sums, each sample nearest its own centre,
// the router's labels.
void check_split(const std::filesystem::path& source, const std::filesystem::path& out, std::int64_t experts,
                 bool text) {
    auto clusters = load_cluster_manifest(out / "clusters.json").value();
    auto all = training_set(source);
    CHECK(clusters.experts == experts);
    REQUIRE(clusters.expert_dirs.size() == static_cast<std::size_t>(experts));
    std::vector<double> centres;
    for (const auto& centre : clusters.centres) centres.insert(centres.end(), centre.begin(), centre.end());
    std::int64_t samples = 0;
    double latent_sum = 0;
    for (std::int64_t e = 0; e < experts; ++e) {
        auto dir = out / clusters.expert_dirs[e];
        auto expert = training_set(dir);
        CHECK(expert.size() == clusters.sizes[e]);
        CHECK(expert.size() >= 1);
        CHECK(expert.has_captions() == text);
        samples += expert.size();
        latent_sum += expert.inputs.to(torch::kFloat64).sum().item<double>();
        auto values = features(expert, text).contiguous();
        std::vector<float> flat(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
        for (std::int64_t i = 0; i < expert.size(); ++i)
            CHECK(tessera::data::nearest_centre(flat.data() + i * values.size(1), centres, values.size(1)) == e);
        auto manifest = load_dataset_manifest(dir / "dataset.json").value();
        CHECK(manifest.classes == load_dataset_manifest(source / "dataset.json").value().classes);
        CHECK(manifest.validation.samples == clusters.validation_sizes[e]);
        // Its class counts are its own samples' labels.
        auto classes = static_cast<std::int64_t>(manifest.classes.size());
        REQUIRE(clusters.class_counts.size() == static_cast<std::size_t>(experts));
        REQUIRE(clusters.class_counts[e].size() == static_cast<std::size_t>(classes));
        auto by_class = torch::bincount(expert.labels, {}, classes);
        for (std::int64_t c = 0; c < classes; ++c)
            CHECK(clusters.class_counts[e][c] == by_class[c].item<std::int64_t>());
    }
    CHECK(samples == all.size());
    CHECK(latent_sum == doctest::Approx(all.inputs.to(torch::kFloat64).sum().item<double>()).epsilon(1e-9));

    auto router = training_set(out / clusters.router_dir);
    CHECK(router.size() == all.size());
    CHECK_FALSE(router.has_captions());
    auto counts = torch::bincount(router.labels, {}, experts);
    for (std::int64_t e = 0; e < experts; ++e) CHECK(counts[e].item<std::int64_t>() == clusters.sizes[e]);
    auto router_manifest = load_dataset_manifest(out / clusters.router_dir / "dataset.json").value();
    CHECK(router_manifest.classes.size() == static_cast<std::size_t>(experts));
    CHECK(router_manifest.text_dim == 0);
}

}  // namespace

TEST_CASE("cluster splits a latent dataset into experts that hold each sample once, nearest its own centre") {
    TempDir out;
    ClusterOptions options{.data = tessera::testing::small_latent_dataset(),
                           .out = out.path(),
                           .experts = 3,
                           .seed = 7,
                           .shard_size = 700};
    REQUIRE(cluster_dataset(options));
    check_split(options.data, out.path(), 3, false);
    CHECK(std::filesystem::file_size(out.path() / "clusters.png") > 0);
    auto clusters = load_cluster_manifest(out.path() / "clusters.json").value();
    CHECK(clusters.features == "samples");
    CHECK(clusters.feature_dim == 4 * 8 * 8);
    CHECK(clusters.sizes[0] + clusters.sizes[1] + clusters.sizes[2] == tessera::testing::kSmallDatasetImages);

    // The same seed gives the same clusters in another directory; a second run reuses the first.
    TempDir again;
    options.out = again.path();
    REQUIRE(cluster_dataset(options));
    CHECK(read_file(again.path() / "clusters.json", 1 << 24).value() ==
          read_file(out.path() / "clusters.json", 1 << 24).value());
    auto before = std::filesystem::last_write_time(again.path() / "expert-0" / "dataset.json");
    REQUIRE(cluster_dataset(options));
    CHECK(std::filesystem::last_write_time(again.path() / "expert-0" / "dataset.json") == before);

    // A damaged clusters.json is refused with its reason, and a run clusters again over it.
    auto clusters_file = again.path() / "clusters.json";
    auto original = read_file(clusters_file, 1 << 24).value();
    std::string text(as_string_view(original));
    auto damaged = text.replace(text.find("\"sizes\":["), 9, "\"sizes\":[-5,");
    REQUIRE(write_file_atomic(clusters_file, as_bytes(damaged)));
    auto refused = load_cluster_manifest(clusters_file);
    REQUIRE_FALSE(refused);
    CHECK_MESSAGE(refused.message().find("sizes") != std::string::npos, refused.message());
    // Class counts ragged, negative, or a row short are refused the same way.
    for (auto [from, to] : {std::pair<std::string, std::string>{"\"class_counts\":[[", "\"class_counts\":[[1],["},
                            {"\"class_counts\":[[", "\"class_counts\":[[-1,"},
                            {"\"class_counts\":[[", "\"class_counts\":[7,["}}) {
        std::string bad(as_string_view(original));
        REQUIRE(bad.find(from) != std::string::npos);
        bad.replace(bad.find(from), from.size(), to);
        REQUIRE(write_file_atomic(clusters_file, as_bytes(bad)));
        auto why = load_cluster_manifest(clusters_file);
        REQUIRE_FALSE(why);
        CHECK_MESSAGE(why.message().find("class_counts") != std::string::npos, why.message());
    }
    REQUIRE(write_file_atomic(clusters_file, as_bytes(std::string("{\"format\":\"tessera.clusters\""))));
    CHECK_FALSE(load_cluster_manifest(clusters_file));
    REQUIRE(cluster_dataset(options));
    CHECK(read_file(clusters_file, 1 << 24).value() == read_file(out.path() / "clusters.json", 1 << 24).value());
}

TEST_CASE("captioned samples are clustered by their pooled text and keep their captions") {
    TempDir out;
    ClusterOptions options{.data = small_canvases(), .out = out.path(), .experts = 2, .seed = 1};
    REQUIRE(cluster_dataset(options));
    check_split(options.data, out.path(), 2, true);
    auto clusters = load_cluster_manifest(out.path() / "clusters.json").value();
    CHECK(clusters.features == "text");
    auto expert = load_dataset_manifest(out.path() / "expert-0" / "dataset.json").value();
    CHECK(expert.text_dim == load_dataset_manifest(options.data / "dataset.json").value().text_dim);
    CHECK_FALSE(expert.text_encoder.file.empty());
}

TEST_CASE("cluster refuses what it cannot split, writing nothing") {
    TempDir pixels, latents, out;
    tessera::testing::write_synthetic_dataset(pixels.path(), 1, tessera::testing::SyntheticKind::Pixels);
    tessera::testing::write_synthetic_dataset(latents.path(), 1);
    auto refused = [&](ClusterOptions options, const std::string& expected) {
        auto status = cluster_dataset(options);
        REQUIRE_FALSE(status);
        CHECK_MESSAGE(status.message().find(expected) != std::string::npos, status.message());
        CHECK_FALSE(std::filesystem::exists(out.path() / "clusters" / "clusters.json"));
    };
    refused({.data = pixels.path(), .out = out.path() / "clusters", .experts = 2}, "holds pixels");
    refused({.data = latents.path(), .out = out.path() / "clusters", .experts = 65}, "--experts must be in [1, 64]");
    refused({.data = latents.path(), .out = out.path() / "clusters", .experts = 0}, "--experts must be in [1, 64]");
    refused({.data = latents.path(), .out = out.path() / "clusters", .experts = 2, .features = "text"},
            "has no captions");
    refused(
        {.data = latents.path(), .out = out.path() / "clusters", .experts = 2, .features = "/nonexistent.safetensors"},
        "no file");
    refused({.data = out.path() / "missing", .out = out.path() / "clusters", .experts = 2}, "dataset.json");

    // Features from a file must have one row per sample.
    auto file = out.path() / "features.safetensors";
    REQUIRE(write_file_atomic(
        file, to_safetensors({{"features", torch::zeros({10, 3})}, {"validation_features", torch::zeros({128, 3})}})
                  .value()));
    refused({.data = latents.path(), .out = out.path() / "clusters", .experts = 2, .features = file.string()},
            "has 10 rows for 256 samples");

    auto cli = tessera::testing::run_tool("cluster --out " + out.path().string());
    CHECK(cli.status == 1);
    CHECK(cli.output.find("cluster needs --data DIR") != std::string::npos);
}

TEST_CASE("features from a file decide the clusters") {
    TempDir latents, out;
    tessera::testing::write_synthetic_dataset(latents.path(), 1);
    // The first half of the samples at one point, the second at another: two clusters by halves.
    auto train = torch::cat({torch::zeros({128, 2}), torch::ones({128, 2})});
    auto held = torch::cat({torch::zeros({64, 2}), torch::ones({64, 2})});
    auto file = out.path() / "features.safetensors";
    REQUIRE(write_file_atomic(file, to_safetensors({{"features", train}, {"validation_features", held}}).value()));
    auto cli = tessera::testing::run_tool("cluster --data " + latents.path().string() + " --out " +
                                          (out.path() / "split").string() + " --experts 2 --features " + file.string());
    REQUIRE_MESSAGE(cli.status == 0, cli.output);
    auto clusters = load_cluster_manifest(out.path() / "split" / "clusters.json").value();
    CHECK(clusters.sizes == std::vector<std::int64_t>{128, 128});
    CHECK(clusters.validation_sizes == std::vector<std::int64_t>{64, 64});
    CHECK(clusters.features == "features.safetensors");
    auto first = training_set(out.path() / "split" / clusters.expert_dirs[0]);
    auto labels = first.labels;  // synthetic labels repeat 0…9: a half holds every class
    CHECK(torch::bincount(labels).size(0) == 10);
}
