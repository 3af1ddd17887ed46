// Per-sample features for clustering.
#include "cluster_features.h"

#include <torch/torch.h>

#include "shard_rows.h"

namespace tessera::data {
namespace {

Features from_tensor(const torch::Tensor& matrix) {
    auto values = matrix.to(torch::kFloat32).contiguous();
    Features features;
    features.rows = values.size(0);
    features.dim = values.size(1);
    const float* data = values.data_ptr<float>();
    features.values.assign(data, data + values.numel());
    return features;
}

// Each caption's tokens averaged: the pooled text embedding.
common::Result<Features> pooled_text(const common::ShardData& data) {
    if (!data.has_captions()) return common::make_error("--features text: the dataset has no captions");
    auto tokens = data.text_tokens.to(torch::kFloat32);
    std::vector<torch::Tensor> pooled;
    auto start = data.text_start.contiguous(), len = data.text_len.contiguous();
    auto s = start.accessor<std::int64_t, 1>(), n = len.accessor<std::int64_t, 1>();
    for (std::int64_t i = 0; i < data.size(); ++i) pooled.push_back(tokens.slice(0, s[i], s[i] + n[i]).mean(0));
    return from_tensor(torch::stack(pooled));
}

common::Result<Features> from_file(const std::filesystem::path& file, std::int64_t rows, bool validation) {
    auto tensors = read_shard_tensors(file);
    if (!tensors) return tensors.error();
    const char* name = validation ? "validation_features" : "features";
    auto found = tensors->find(name);
    if (found == tensors->end() || found->second.dim() != 2 || !found->second.is_floating_point())
        return common::make_error(file.string() + ": no float tensor \"" + name + "\" [N, D]");
    if (found->second.size(0) != rows)
        return common::make_error(file.string() + ": \"" + name + "\" has " + std::to_string(found->second.size(0)) +
                                  " rows for " + std::to_string(rows) + " samples");
    return from_tensor(found->second);
}

}  // namespace

common::Result<FeatureSource> FeatureSource::parse(const std::string& text) {
    FeatureSource source;
    if (text == "auto" || text == "samples" || text == "text") {
        source.kind = text;
        return source;
    }
    if (!std::filesystem::is_regular_file(text))
        return common::make_error("--features is auto, samples, text or a file of features; no file " + text);
    source.kind = "file";
    source.file = text;
    return source;
}

std::string FeatureSource::describe() const { return kind == "file" ? file.filename().string() : kind; }

common::Result<Features> features_of(const common::ShardData& data, const FeatureSource& source, bool validation) {
    if (source.kind == "file") return from_file(source.file, data.size(), validation);
    if (source.kind == "text" || (source.kind == "auto" && data.has_captions())) return pooled_text(data);
    return from_tensor(data.inputs.flatten(1));
}

}  // namespace tessera::data
