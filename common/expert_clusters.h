// clusters.json: how `tessera-data cluster` split a dataset for decentralized experts — the
// source, the k-means settings, each cluster's size and centre, and the expert and router
// dataset directories beside the file. Format in docs/dataset_format.md, "cluster".
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "result.h"

namespace tessera::common {

constexpr std::int64_t kMaxExperts = 64;

struct ClusterManifest {
    std::string source;         // the clustered dataset's name
    std::string source_sha256;  // of its dataset.json
    std::int64_t experts = 0;
    std::uint64_t seed = 0;
    std::string features;  // "samples", "text" or the features file's name
    std::int64_t feature_dim = 0;
    std::int64_t iterations = 0;
    bool converged = false;
    double inertia = 0;
    std::vector<std::int64_t> sizes;             // training samples per expert
    std::vector<std::int64_t> validation_sizes;  // validation samples per expert
    std::vector<std::vector<double>> centres;    // experts × feature_dim
    // Training samples of each class per expert (experts × classes); empty when the source has
    // no classes. Optional: absent from files written before it.
    std::vector<std::vector<std::int64_t>> class_counts;
    std::vector<std::string> expert_dirs;        // relative to the file's directory
    std::string router_dir;
};

Result<ClusterManifest> load_cluster_manifest(const std::filesystem::path& path);
Status save_cluster_manifest(const std::filesystem::path& path, const ClusterManifest& manifest);

}  // namespace tessera::common
