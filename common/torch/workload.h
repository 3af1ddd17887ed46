// Model presets and the training objective each trains with. A Workload owns one model
// (a torch module) and knows its loss and its evaluation; the trainer and evaluator are
// written against this interface. Not thread-safe: one workload per thread.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "../result.h"
#include "models/dit.h"
#include "models/router.h"
#include "shard_data.h"

namespace tessera::common {

enum class ModelKind { Dit, Cnn, Router };

struct ModelPreset {
    std::string name;
    ModelKind kind = ModelKind::Dit;
    DitConfig dit;      // hidden/depth/heads/mixer_depth for DiT presets and the router's trunk
    bool text = false;  // a text-to-image DiT: trains on captioned shards only
};

// The shape of the data a model is built for (from the dataset).
struct DataShape {
    std::int64_t channels = 4;
    std::int64_t size = 8;
    std::int64_t num_classes = 10;
    std::int64_t text_dim = 0;
};

Result<ModelPreset> find_preset(std::string_view name);
// Every preset's name, each with what it takes ("dit-tiny (class)", "dit-tiny-text (captions)").
std::string preset_summary();
DataShape data_shape_of(const ShardData& data, std::int64_t num_classes);

// One batch, with the random draws its loss needs (filled by Workload::draw; may be empty).
struct Batch {
    torch::Tensor inputs;
    torch::Tensor labels;
    torch::Tensor text_emb;  // may be undefined
    torch::Tensor text_len;  // (B,) i64 caption lengths; undefined: every token of text_emb
    std::vector<torch::Tensor> draws;

    // Rows [begin, end) of every tensor, draws included.
    Batch slice(std::int64_t begin, std::int64_t end) const;
    // The rows `index` (a 1-D i64 tensor) of every tensor, draws included.
    Batch rows(const torch::Tensor& index) const;
};

// A DiT's condition from a batch: its labels, or its captions and their lengths.
DitCondition condition_of(const Batch& batch);

struct EvalResult {
    double loss = 0;       // the mean of sample_losses
    double accuracy = -1;  // classifiers only
    std::int64_t samples = 0;
    // (samples,) f64 on the CPU: each sample's loss (DiT: its mean over the t grid), so two
    // weight sets can be compared sample by sample.
    torch::Tensor sample_losses;
};

// How a flow model's evaluation spreads the time t: every sample at each point of the t grid
// (loss curves), or each sample at one point, the points in turn (the contribution checks'
// paired comparisons: the same mean over samples for an eighth of the forward passes, each
// sample's loss noisier). Classifiers have no t: both are the same.
enum class EvalGrid { Full, Stratified };

class Workload {
public:
    virtual ~Workload() = default;
    const ModelPreset& preset() const { return preset_; }
    virtual std::shared_ptr<torch::nn::Module> module() = 0;
    // Fills batch.draws (DiT: t, noise, condition drops, with patch masking the kept tokens; cnn:
    // the dropout mask) for training step
    // `step` of the unit seeded `seed`, from its specified streams (unit_random.h), so training
    // is reproducible on any device and in any language, and micro-batches see the batch's draws.
    virtual void draw(Batch& batch, std::uint64_t seed, std::int64_t step) = 0;
    // A text DiT drops captions to its null caption at this rate (the unit's `caption_drop`).
    void set_caption_drop(double rate) { caption_drop_ = rate; }
    double caption_drop() const { return caption_drop_; }
    // A DiT drops this fraction of each sample's patches after its patch mixer (the unit's
    // `patch_mask`; 0: off). Training only: evaluation and sampling see every patch.
    void set_patch_mask(double ratio) { patch_mask_ = ratio; }
    double patch_mask() const { return patch_mask_; }
    // How evaluate spreads t (EvalGrid::Full unless set).
    void set_eval_grid(EvalGrid grid) { eval_grid_ = grid; }
    EvalGrid eval_grid() const { return eval_grid_; }
    // Evaluate only these rows (increasing positions in the evaluated data), each with the t and
    // noise the whole evaluation gives it, so a few samples' losses can be checked against a
    // full evaluation's (loss-check units); empty (the default): every row.
    void set_eval_rows(std::vector<std::int64_t> rows) { eval_rows_ = std::move(rows); }
    const std::vector<std::int64_t>& eval_rows() const { return eval_rows_; }
    // The training loss of a batch (or a slice of one) with its draws.
    virtual torch::Tensor loss(const Batch& batch) = 0;
    // Deterministic: a fixed t grid (eval_grid) and noise seed for DiT, so versions are comparable.
    virtual EvalResult evaluate(const ShardData& data, torch::Device device, std::int64_t max_samples) = 0;

protected:
    explicit Workload(ModelPreset preset) : preset_(std::move(preset)) {}

private:
    ModelPreset preset_;
    double caption_drop_ = 0.1;
    double patch_mask_ = 0;
    EvalGrid eval_grid_ = EvalGrid::Full;
    std::vector<std::int64_t> eval_rows_;
};

// Builds the preset's model for data of `shape`. Initial weights come from torch's global
// generator seeded with `seed` (under a lock), so the same seed gives the same version 0.
Result<std::unique_ptr<Workload>> make_workload(std::string_view preset, const DataShape& shape,
                                                std::uint64_t seed = 0);

// The DiT inside a DiT workload, for sampling; nullptr for other workloads.
Dit* dit_of(Workload& workload);
// The router inside a router workload, for routed sampling; nullptr for other workloads.
Router* router_of(Workload& workload);

}  // namespace tessera::common
