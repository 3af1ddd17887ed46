// Clustering a latent dataset into expert datasets: features → k-means → each shard's samples
// sent to their cluster's dataset (every tensor kept) and to the router's dataset (latents
// labelled by cluster) → a picture of each cluster → clusters.json last.
#include "cluster_command.h"

#include <torch/torch.h>

#include <cstdio>

#include "cluster_features.h"
#include "dataset_manifest.h"
#include "expert_clusters.h"
#include "fashion_mnist.h"
#include "file_io.h"
#include "kmeans.h"
#include "sha256.h"
#include "shard_rows.h"
#include "shard_writer.h"
#include "torch/sampling.h"
#include "torch/shard_data.h"

namespace tessera::data {
namespace {

using common::DatasetManifest;
using common::Result;
using common::Status;
using common::TorchTensorMap;

constexpr std::int64_t kPictureColumns = 10;

torch::Tensor rows_of(const std::vector<std::int64_t>& assignment, std::int64_t begin, std::int64_t end,
                      std::int64_t cluster) {
    std::vector<std::int64_t> rows;
    for (std::int64_t i = begin; i < end; ++i)
        if (assignment[i] == cluster) rows.push_back(i - begin);
    return torch::tensor(rows, torch::kInt64);
}

// `tensors` written as train-NNN shards of at most `shard_size` samples.
Result<std::vector<common::DatasetFile>> write_train_shards(const std::filesystem::path& dir,
                                                            const TorchTensorMap& tensors, std::int64_t shard_size) {
    auto samples = sample_count(tensors);
    if (!samples) return samples.error();
    auto count = std::max<std::int64_t>(1, (*samples + shard_size - 1) / shard_size);
    std::vector<common::DatasetFile> files;
    for (std::int64_t i = 0; i < count; ++i) {
        auto begin = *samples * i / count, end = *samples * (i + 1) / count;
        auto part = select_rows(tensors, torch::arange(begin, end, torch::kInt64));
        if (!part) return part.error();
        char name[64];
        std::snprintf(name, sizeof name, "train-%03lld.safetensors.zst", static_cast<long long>(i));
        auto file = write_tensor_file(dir, name, *part, true, end - begin);
        if (!file) return file.error();
        files.push_back(std::move(file).value());
    }
    return files;
}

// The model files a split dataset shares with its source, copied byte for byte (atomically,
// as every dataset file is written).
Status copy_model_files(const std::filesystem::path& from, const std::filesystem::path& to,
                        const DatasetManifest& source) {
    for (const auto* f : {&source.encoder, &source.decoder, &source.heldout, &source.text_encoder}) {
        if (f->file.empty()) continue;
        auto bytes = common::read_file(from / f->file, common::kMaxShardBytes);
        if (!bytes) return bytes.error();
        if (auto status = common::write_file_atomic(to / f->file, *bytes); !status) return status;
    }
    return {};
}

// What a split dataset holds besides its samples: an expert's keep the source's classes and
// captions; the router's are the experts, without captions.
struct SplitKind {
    std::string name;
    std::vector<std::string> classes;
    bool router = false;
};

// A dataset in `dir` of the given training and validation tensors and the source's model files.
Status write_split(const std::filesystem::path& from, const DatasetManifest& source, const std::filesystem::path& dir,
                   const SplitKind& kind, const TorchTensorMap& train, const TorchTensorMap& validation,
                   std::int64_t shard_size) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return common::make_error("cannot create " + dir.string() + ": " + ec.message());
    DatasetManifest manifest = source;
    manifest.name = kind.name;
    manifest.classes = kind.classes;
    if (kind.router) {
        manifest.text_dim = 0;
        manifest.text_encoder = {};
        manifest.heldout = {};
    }
    auto shards = write_train_shards(dir, train, shard_size);
    if (!shards) return shards.error();
    manifest.train = std::move(shards).value();
    auto samples = sample_count(validation);
    if (!samples) return samples.error();
    auto held = write_tensor_file(dir, "validation.safetensors.zst", validation, true, *samples);
    if (!held) return held.error();
    manifest.validation = std::move(held).value();
    if (auto status = copy_model_files(from, dir, manifest); !status) return status;
    return common::save_dataset_manifest(dir / "dataset.json", manifest);
}

// The validation sample nearest `centre`.
std::int64_t nearest_sample(const Features& features, const double* centre) {
    std::int64_t best = 0;
    double best_distance = -1;
    for (std::int64_t i = 0; i < features.rows; ++i) {
        double sum = 0;
        for (std::int64_t j = 0; j < features.dim; ++j) {
            double d = features.values[i * features.dim + j] - centre[j];
            sum += d * d;
        }
        if (best_distance < 0 || sum < best_distance) best = i, best_distance = sum;
    }
    return best;
}

// The router's view of samples: the latents alone, labelled by cluster.
TorchTensorMap router_tensors(const TorchTensorMap& shard, const std::vector<std::int64_t>& clusters,
                              std::int64_t begin, std::int64_t end) {
    std::vector<std::int64_t> labels(clusters.begin() + begin, clusters.begin() + end);
    return {{"latents", shard.at("latents")}, {"labels", torch::tensor(labels, torch::kInt64)}};
}

// Up to ten samples of each cluster, a row per cluster, decoded by the source's autoencoder.
Status write_picture(const std::filesystem::path& data, const DatasetManifest& source, const common::ShardData& train,
                     const std::vector<std::int64_t>& assignment, std::int64_t experts,
                     const std::filesystem::path& out) {
    if (source.decoder.file.empty()) {
        std::fprintf(stderr, "no decoder in %s: no clusters.png\n", data.c_str());
        return {};
    }
    auto ae = load_autoencoder(data);
    if (!ae) return ae.error();
    std::vector<std::vector<std::int64_t>> picks(experts);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(assignment.size()); ++i)
        if (static_cast<std::int64_t>(picks[assignment[i]].size()) < kPictureColumns) picks[assignment[i]].push_back(i);
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> rows;
    for (const auto& pick : picks) {
        auto latents = train.inputs.index_select(0, torch::tensor(pick, torch::kInt64));
        auto images = ae->decoder->forward(latents / source.scale_factor).clamp(-1, 1);
        auto blank =
            torch::full({kPictureColumns - images.size(0), images.size(1), images.size(2), images.size(3)}, -1.0f);
        rows.push_back(torch::cat({images, blank}));
    }
    auto png = common::images_to_png(torch::cat(rows), kPictureColumns, 2);
    if (!png) return png.error();
    return common::write_file_atomic(out / "clusters.png", *png);
}

// True when `out` already holds these clusters, complete.
bool reusable(const ClusterOptions& options, const DatasetManifest& source, const std::string& source_sha256,
              const std::string& features) {
    auto existing = common::load_cluster_manifest(options.out / kClustersFileName);
    if (!existing || existing->source_sha256 != source_sha256 || existing->experts != options.experts ||
        existing->seed != options.seed || existing->features != features)
        return false;
    // Written before clusters.json counted classes: cluster again to count them.
    if (existing->class_counts.empty() != source.classes.empty()) return false;
    std::vector<std::string> dirs = existing->expert_dirs;
    dirs.push_back(existing->router_dir);
    for (const auto& dir : dirs) {
        auto manifest = common::load_dataset_manifest(options.out / dir / "dataset.json");
        if (!manifest || !common::verify_dataset_files(options.out / dir, *manifest)) return false;
    }
    return true;
}

Status check_options(const ClusterOptions& options) {
    if (options.experts < 1 || options.experts > common::kMaxExperts)
        return common::make_error("--experts must be in [1, " + std::to_string(common::kMaxExperts) + "]");
    if (options.shard_size < 1) return common::make_error("--shard-size must be at least 1");
    if (options.max_iterations < 1) return common::make_error("--iterations must be at least 1");
    if (options.out.empty()) return common::make_error("cluster needs --out DIR");
    return {};
}

// The clusters of one run: k-means on the training features, the validation samples by the
// nearest centre.
struct Clustering {
    Features features, held_features;
    KMeansResult clusters;
    std::vector<std::int64_t> held_cluster;

    const double* centre(std::int64_t c) const { return clusters.centres.data() + c * features.dim; }
};

Result<Clustering> cluster_features(const ClusterOptions& options, const common::ShardData& train,
                                    const common::ShardData& validation, const FeatureSource& source) {
    Clustering run;
    auto features = features_of(train, source, false);
    if (!features) return features.error();
    run.features = std::move(features).value();
    auto clusters =
        kmeans(run.features.values, run.features.rows, run.features.dim,
               {.clusters = options.experts, .seed = options.seed, .max_iterations = options.max_iterations});
    if (!clusters) return clusters.error();
    run.clusters = std::move(clusters).value();
    auto held = features_of(validation, source, true);
    if (!held) return held.error();
    run.held_features = std::move(held).value();
    if (run.held_features.dim != run.features.dim)
        return common::make_error("validation features have " + std::to_string(run.held_features.dim) +
                                  " values, training features " + std::to_string(run.features.dim));
    for (std::int64_t i = 0; i < run.held_features.rows; ++i)
        run.held_cluster.push_back(nearest_centre(run.held_features.values.data() + i * run.features.dim,
                                                  run.clusters.centres, run.features.dim));
    return run;
}

// Each source shard's samples sent to their cluster (every tensor) and to the router, in
// dataset order.
struct Parts {
    std::vector<std::vector<TorchTensorMap>> experts;
    std::vector<TorchTensorMap> router;
};

Result<Parts> distribute(const ClusterOptions& options, const DatasetManifest& source, const Clustering& run) {
    Parts parts;
    parts.experts.resize(options.experts);
    std::int64_t begin = 0;
    for (const auto& file : source.train) {
        auto shard = read_shard_tensors(options.data / file.file);
        if (!shard) return shard.error();
        auto end = begin + file.samples;
        for (std::int64_t c = 0; c < options.experts; ++c) {
            auto rows = rows_of(run.clusters.assignment, begin, end, c);
            if (rows.size(0) == 0) continue;
            auto part = select_rows(*shard, rows);
            if (!part) return part.error();
            parts.experts[c].push_back(std::move(part).value());
        }
        parts.router.push_back(router_tensors(*shard, run.clusters.assignment, begin, end));
        begin = end;
    }
    return parts;
}

// The expert datasets and the router's; fills the manifest's per-expert lists.
Status write_splits(const ClusterOptions& options, const DatasetManifest& source, const Clustering& run,
                    const Parts& parts, common::ClusterManifest& manifest) {
    auto held = read_shard_tensors(options.data / source.validation.file);
    if (!held) return held.error();
    std::vector<std::string> router_classes;
    for (std::int64_t c = 0; c < options.experts; ++c) {
        // An expert without validation samples of its own is judged on the one nearest its centre.
        auto held_rows = rows_of(run.held_cluster, 0, run.held_features.rows, c);
        if (held_rows.size(0) == 0)
            held_rows = torch::tensor({nearest_sample(run.held_features, run.centre(c))}, torch::kInt64);
        auto expert_train = join_shards(parts.experts[c]);
        if (!expert_train) return expert_train.error();
        auto expert_held = select_rows(*held, held_rows);
        if (!expert_held) return expert_held.error();
        SplitKind kind{source.name + "-expert-" + std::to_string(c) + "-of-" + std::to_string(options.experts),
                       source.classes};
        auto dir_name = expert_dir_name(c);
        if (auto status = write_split(options.data, source, options.out / dir_name, kind, *expert_train, *expert_held,
                                      options.shard_size);
            !status)
            return status;
        manifest.expert_dirs.push_back(dir_name);
        manifest.validation_sizes.push_back(held_rows.size(0));
        manifest.centres.emplace_back(run.centre(c), run.centre(c) + run.features.dim);
        router_classes.push_back("expert " + std::to_string(c));
    }
    auto router_train = join_shards(parts.router);
    if (!router_train) return router_train.error();
    auto router_held = router_tensors(*held, run.held_cluster, 0, run.held_features.rows);
    SplitKind router{source.name + "-router-" + std::to_string(options.experts), router_classes, true};
    manifest.router_dir = kRouterDirName;
    return write_split(options.data, source, options.out / kRouterDirName, router, *router_train, router_held,
                       options.shard_size);
}

// Training samples of each class per cluster; empty when the source has no classes.
std::vector<std::vector<std::int64_t>> class_counts(const DatasetManifest& source, const common::ShardData& train,
                                                    const std::vector<std::int64_t>& assignment, std::int64_t experts) {
    auto classes = static_cast<std::int64_t>(source.classes.size());
    if (classes == 0) return {};
    std::vector<std::vector<std::int64_t>> counts(experts, std::vector<std::int64_t>(classes, 0));
    auto labels = train.labels.contiguous();
    const auto* label = labels.data_ptr<std::int64_t>();
    for (std::size_t i = 0; i < assignment.size(); ++i)
        if (label[i] >= 0 && label[i] < classes) counts[assignment[i]][label[i]] += 1;
    return counts;
}

void report(const common::ClusterManifest& manifest) {
    std::string sizes;
    for (auto n : manifest.sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(n);
    std::fprintf(stderr, "%lld clusters by %s after %lld iterations%s: %s samples\n",
                 static_cast<long long>(manifest.experts), manifest.features.c_str(),
                 static_cast<long long>(manifest.iterations), manifest.converged ? "" : " (not converged)",
                 sizes.c_str());
}

Status split_dataset(const ClusterOptions& options, const DatasetManifest& source, const FeatureSource& features,
                     common::ClusterManifest manifest) {
    auto train = common::load_training_set(options.data, source);
    if (!train) return train.error();
    auto validation = common::load_shard_file(options.data / source.validation.file);
    if (!validation) return validation.error();
    auto run = cluster_features(options, *train, *validation, features);
    if (!run) return run.error();
    auto parts = distribute(options, source, *run);
    if (!parts) return parts.error();
    if (auto status = write_splits(options, source, *run, *parts, manifest); !status) return status;
    if (auto status =
            write_picture(options.data, source, *train, run->clusters.assignment, options.experts, options.out);
        !status)
        return status;
    manifest.feature_dim = run->features.dim;
    manifest.iterations = run->clusters.iterations;
    manifest.converged = run->clusters.converged;
    manifest.inertia = run->clusters.inertia;
    manifest.sizes = run->clusters.sizes;
    manifest.class_counts = class_counts(source, *train, run->clusters.assignment, options.experts);
    report(manifest);
    return common::save_cluster_manifest(options.out / kClustersFileName, manifest);
}

}  // namespace

std::string expert_dir_name(std::int64_t expert) { return "expert-" + std::to_string(expert); }

common::Status cluster_dataset(const ClusterOptions& options) {
    if (auto status = check_options(options); !status) return status;
    auto source = common::load_dataset_manifest(options.data / "dataset.json");
    if (!source) return source.error();
    if (source->kind != "latents")
        return common::make_error(options.data.string() +
                                  " holds pixels: experts are diffusion tasks, so cluster a latent dataset");
    if (auto verified = common::verify_dataset_files(options.data, *source); !verified) return verified;
    auto source_sha256 = common::sha256_file_hex(options.data / "dataset.json");
    if (!source_sha256) return source_sha256.error();
    auto features = FeatureSource::parse(options.features);
    if (!features) return features.error();
    if (features->kind == "auto") features->kind = source->text_dim > 0 ? "text" : "samples";
    if (reusable(options, *source, *source_sha256, features->describe())) {
        std::fprintf(stderr, "%s already holds these clusters: reusing them (delete %s to cluster again)\n",
                     options.out.c_str(), kClustersFileName);
        return {};
    }
    common::ClusterManifest manifest;
    manifest.source = source->name;
    manifest.source_sha256 = *source_sha256;
    manifest.experts = options.experts;
    manifest.seed = options.seed;
    manifest.features = features->describe();
    try {
        return split_dataset(options, *source, *features, std::move(manifest));
    } catch (const c10::Error& error) {
        return common::make_error(std::string("cluster: ") + error.what_without_backtrace());
    }
}

}  // namespace tessera::data
