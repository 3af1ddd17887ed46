// What `tessera-data cluster` measures each sample by (docs/dataset_format.md, "cluster"):
// the stored sample itself (a latent is the autoencoder's feature of its image), the pooled
// text embedding (the mean of a caption's tokens), or features an operator computed elsewhere.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "result.h"
#include "torch/shard_data.h"

namespace tessera::data {

struct Features {
    std::vector<float> values;  // rows × dim, row-major
    std::int64_t rows = 0;
    std::int64_t dim = 0;
};

// "samples", "text", or a safetensors file holding `features` F32/F16 [N, D] for the training
// samples in dataset order and `validation_features` [M, D] for the validation shard's.
struct FeatureSource {
    std::string kind = "auto";  // auto: text when the dataset has captions, else samples
    std::filesystem::path file;

    static common::Result<FeatureSource> parse(const std::string& text);
    std::string describe() const;
};

// The features of `data` (training or validation samples); `validation` picks the file's tensor.
common::Result<Features> features_of(const common::ShardData& data, const FeatureSource& source, bool validation);

}  // namespace tessera::data
