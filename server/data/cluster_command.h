// `tessera-data cluster`: a latent dataset split by seeded k-means into E expert datasets and
// one router dataset (the same samples labelled by cluster), for decentralized experts
// (docs/dataset_format.md, "cluster"; docs/plans/experts.md).
#pragma once

#include <filesystem>
#include <string>

#include "result.h"

namespace tessera::data {

struct ClusterOptions {
    std::filesystem::path data;  // a latent dataset (dataset.json)
    std::filesystem::path out;
    std::int64_t experts = 4;
    std::uint64_t seed = 0;
    std::string features = "auto";  // FeatureSource::parse
    std::int64_t shard_size = 4096;
    std::int64_t max_iterations = 100;
};

// Writes out/expert-<k>/ (k = 0 … E−1) and out/router/, each a dataset of its own, then
// out/clusters.png and, last, out/clusters.json. A directory whose clusters.json matches the
// options and whose datasets verify is reused.
common::Status cluster_dataset(const ClusterOptions& options);

// The directory names inside `out`.
std::string expert_dir_name(std::int64_t expert);
inline constexpr const char* kRouterDirName = "router";
inline constexpr const char* kClustersFileName = "clusters.json";

}  // namespace tessera::data
