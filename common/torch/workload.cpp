// Presets and the three workloads: DiT with rectified flow, the experts' router, and the CNN
// classifier.
#include "workload.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <mutex>

#include "models/cnn.h"
#include "rectified_flow.h"
#include "unit_draws.h"

namespace tessera::common {
namespace {

constexpr std::int64_t kEvalGrid = 8;  // t values for evaluation: (i + 0.5) / 8
constexpr std::uint64_t kEvalNoiseSeed = 20240611;
constexpr std::int64_t kEvalBatch = 256;

const std::vector<ModelPreset>& presets() {
    static const std::vector<ModelPreset> all = [] {
        // Patch masking's mixer: a sixth of the blocks (MicroDiT's is about a fifth of its depth).
        auto dit = [](std::string name, std::int64_t hidden, std::int64_t depth, std::int64_t heads,
                      std::int64_t mixer_depth, bool text) {
            ModelPreset p{std::move(name), ModelKind::Dit, {}, text};
            p.dit.hidden = hidden;
            p.dit.depth = depth;
            p.dit.heads = heads;
            p.dit.mixer_depth = mixer_depth;
            return p;
        };
        auto router = [&](std::string name, std::int64_t hidden, std::int64_t depth, std::int64_t heads) {
            auto p = dit(std::move(name), hidden, depth, heads, depth, false);
            p.kind = ModelKind::Router;
            return p;
        };
        // dit-nano(-text): about a quarter of dit-tiny(-text), an expert of four (docs/experts.md).
        return std::vector<ModelPreset>{dit("dit-nano", 32, 2, 2, 1, false),
                                        dit("dit-tiny", 64, 2, 2, 1, false),
                                        dit("dit-s", 384, 12, 6, 2, false),
                                        dit("dit-b", 768, 12, 12, 2, false),
                                        dit("dit-nano-text", 32, 2, 2, 1, true),
                                        dit("dit-tiny-text", 64, 2, 2, 1, true),
                                        dit("dit-s-text", 384, 12, 6, 2, true),
                                        dit("dit-b-text", 768, 12, 12, 2, true),
                                        ModelPreset{"cnn", ModelKind::Cnn, {}, false},
                                        router("router", 64, 2, 2)};
    }();
    return all;
}

// Runs `body` over `data` in fixed batches on `device`, without gradients.
template <class Body>
void for_each_eval_batch(const ShardData& data, torch::Device device, std::int64_t max_samples, Body body) {
    torch::NoGradGuard no_grad;
    auto n = std::min(data.size(), max_samples);
    for (std::int64_t begin = 0; begin < n; begin += kEvalBatch) {
        auto end = std::min(n, begin + kEvalBatch);
        auto part = data.slice(begin, end);
        auto captions = part.padded_captions();
        auto moved = [&](const torch::Tensor& t) { return t.defined() ? t.to(device) : t; };
        Batch batch{moved(part.inputs), moved(part.labels), moved(captions.text), moved(captions.len), {}};
        body(batch, begin);
    }
}

// Of the batch of rows [begin, begin + size), the positions among `rows` (all when `rows` is
// empty, an undefined tensor then) as indices into the batch; `next` walks `rows` in order.
torch::Tensor chosen_in_batch(const std::vector<std::int64_t>& rows, std::size_t& next, std::int64_t begin,
                              std::int64_t size) {
    if (rows.empty()) return {};
    std::vector<std::int64_t> chosen;
    while (next < rows.size() && rows[next] < begin + size) {
        if (rows[next] >= begin) chosen.push_back(rows[next] - begin);
        ++next;
    }
    return torch::tensor(chosen, torch::kInt64);
}

// Per-sample losses of every batch → the evaluation's result (no samples: loss 0).
EvalResult summarised(const std::vector<torch::Tensor>& per_batch, double accuracy) {
    EvalResult result;
    result.accuracy = accuracy;
    result.sample_losses = per_batch.empty() ? torch::zeros({0}, torch::kFloat64) : torch::cat(per_batch);
    result.samples = result.sample_losses.size(0);
    if (result.samples > 0) result.loss = result.sample_losses.mean().item<double>();
    return result;
}

// Each sample's loss at every t of the evaluation grid, with the grid's fixed noise, averaged over
// the grid; stratified, sample i's at the grid's point i mod kEvalGrid only. `loss_at(batch, t,
// noise)` gives a batch's (B,) f64 losses on the CPU at per-sample times t.
// With `rows`, only those rows are evaluated, each with the t and noise it has in the whole.
template <class LossAt>
std::vector<torch::Tensor> grid_sample_losses(const ShardData& data, torch::Device device, std::int64_t max_samples,
                                              EvalGrid grid, const std::vector<std::int64_t>& rows, LossAt loss_at) {
    auto generator = at::detail::createCPUGenerator(kEvalNoiseSeed);
    std::vector<torch::Tensor> per_batch;
    std::size_t next_row = 0;
    for_each_eval_batch(data, device, max_samples, [&](const Batch& whole, std::int64_t begin) {
        auto b = whole.inputs.size(0);
        // Every batch's noise is drawn, so that the chosen rows get the draws they have in the whole.
        auto chosen = chosen_in_batch(rows, next_row, begin, b);
        auto pick = [&](const torch::Tensor& t) {
            return chosen.defined() ? t.index_select(0, chosen.to(t.device())) : t;
        };
        auto batch = chosen.defined() ? whole.rows(chosen.to(device)) : whole;
        auto n = batch.inputs.size(0);
        if (grid == EvalGrid::Stratified) {
            auto points = (torch::arange(begin, begin + b, torch::kInt64) % kEvalGrid).to(torch::kFloat32);
            auto t = pick(((points + 0.5) / static_cast<double>(kEvalGrid)).to(device));
            auto noise = pick(torch::randn(whole.inputs.sizes(), generator, torch::kFloat32).to(device));
            if (n > 0) per_batch.push_back(loss_at(batch, t, noise));
            return;
        }
        auto total = torch::zeros({n}, torch::kFloat64);
        for (std::int64_t i = 0; i < kEvalGrid; ++i) {
            auto t = torch::full({n}, (static_cast<double>(i) + 0.5) / kEvalGrid, torch::kFloat32).to(device);
            auto noise = pick(torch::randn(whole.inputs.sizes(), generator, torch::kFloat32).to(device));
            if (n > 0) total += loss_at(batch, t, noise);
        }
        if (n > 0) per_batch.push_back(total / static_cast<double>(kEvalGrid));
    });
    return per_batch;
}

class DitWorkload : public Workload {
public:
    DitWorkload(ModelPreset preset, const DitConfig& config) : Workload(std::move(preset)), model_(config) {}
    std::shared_ptr<torch::nn::Module> module() override { return model_.ptr(); }
    Dit& dit() { return model_; }

    void draw(Batch& batch, std::uint64_t seed, std::int64_t step) override {
        ConditionDrop drop;
        if (model_->takes_text()) drop = {true, caption_drop()};
        auto draws = draw_flow(batch.inputs, seed, step, drop);
        batch.draws = {draws.t, draws.noise, draws.drop};
        if (patch_mask() > 0) batch.draws.push_back(draw_kept_tokens(model_, batch.inputs, seed, step, patch_mask()));
    }

    torch::Tensor loss(const Batch& batch) override {
        FlowDraws draws{batch.draws.at(0), batch.draws.at(1), batch.draws.at(2),
                        batch.draws.size() > 3 ? batch.draws[3] : torch::Tensor()};
        return flow_matching_loss(model_, batch.inputs, condition_of(batch), draws);
    }

    EvalResult evaluate(const ShardData& data, torch::Device device, std::int64_t max_samples) override {
        model_->eval();
        auto per_batch = grid_sample_losses(
            data, device, max_samples, eval_grid(), eval_rows(),
            [&](const Batch& batch, const torch::Tensor& t, const torch::Tensor& noise) {
                return flow_matching_sample_losses_at(model_, batch.inputs, condition_of(batch), t, noise)
                    .to(torch::kCPU, torch::kFloat64);
            });
        model_->train();
        return summarised(per_batch, -1);
    }

private:
    Dit model_;
};

// The experts' router: the cross-entropy of the cluster label given x_t and t, with x_t and t
// drawn from the unit's streams exactly as the DiT's flow objective draws them.
class RouterWorkload : public Workload {
public:
    RouterWorkload(ModelPreset preset, const DitConfig& config) : Workload(std::move(preset)), model_(config) {}
    std::shared_ptr<torch::nn::Module> module() override { return model_.ptr(); }
    Router& router() { return model_; }

    void draw(Batch& batch, std::uint64_t seed, std::int64_t step) override {
        auto draws = draw_flow(batch.inputs, seed, step, {});
        batch.draws = {draws.t, draws.noise};
    }

    torch::Tensor loss(const Batch& batch) override {
        const auto& t = batch.draws.at(0);
        return torch::cross_entropy_loss(model_->forward(noised(batch.inputs, t, batch.draws.at(1)), t), batch.labels);
    }

    // Loss and accuracy over every sample at each t of the grid; a sample's loss is its mean.
    EvalResult evaluate(const ShardData& data, torch::Device device, std::int64_t max_samples) override {
        model_->eval();
        std::int64_t correct = 0, judged = 0;
        auto per_batch = grid_sample_losses(
            data, device, max_samples, eval_grid(), eval_rows(),
            [&](const Batch& batch, const torch::Tensor& t, const torch::Tensor& noise) {
                auto logits = model_->forward(noised(batch.inputs, t, noise), t);
                correct += logits.argmax(1).eq(batch.labels).sum().item<std::int64_t>();
                judged += batch.inputs.size(0);
                return torch::cross_entropy_loss(logits, batch.labels, {}, at::Reduction::None)
                    .to(torch::kCPU, torch::kFloat64);
            });
        model_->train();
        return summarised(per_batch, judged > 0 ? static_cast<double>(correct) / static_cast<double>(judged) : -1);
    }

private:
    // x_t = (1 − t)·x + t·ε, as the flow objective forms it.
    static torch::Tensor noised(const torch::Tensor& x, const torch::Tensor& t, const torch::Tensor& noise) {
        auto t4 = t.view({-1, 1, 1, 1});
        return (1 - t4) * x + t4 * noise;
    }

    Router model_;
};

class CnnWorkload : public Workload {
public:
    explicit CnnWorkload(ModelPreset preset) : Workload(std::move(preset)) {}
    std::shared_ptr<torch::nn::Module> module() override { return model_.ptr(); }

    void draw(Batch& batch, std::uint64_t seed, std::int64_t step) override {
        auto dropped = unit_below_tensor(seed, DrawPurpose::DropoutMask, step,
                                         {batch.inputs.size(0), CnnImpl::kFlatFeatures}, CnnImpl::kDropout);
        auto scale = (~dropped).to(torch::kFloat32) * static_cast<float>(1.0 / (1.0 - CnnImpl::kDropout));
        batch.draws = {to_device(scale, batch.inputs.device())};
    }

    torch::Tensor loss(const Batch& batch) override {
        return torch::cross_entropy_loss(model_->forward(batch.inputs, batch.draws.at(0)), batch.labels);
    }

    EvalResult evaluate(const ShardData& data, torch::Device device, std::int64_t max_samples) override {
        model_->eval();
        std::vector<torch::Tensor> per_batch;
        std::int64_t correct = 0;
        std::size_t next_row = 0;
        for_each_eval_batch(data, device, max_samples, [&](const Batch& whole, std::int64_t begin) {
            auto chosen = chosen_in_batch(eval_rows(), next_row, begin, whole.inputs.size(0));
            auto batch = chosen.defined() ? whole.rows(chosen.to(device)) : whole;
            if (batch.inputs.size(0) == 0) return;
            auto logits = model_->forward(batch.inputs);
            per_batch.push_back(torch::cross_entropy_loss(logits, batch.labels, {}, at::Reduction::None)
                                    .to(torch::kCPU, torch::kFloat64));
            correct += logits.argmax(1).eq(batch.labels).sum().item<std::int64_t>();
        });
        model_->train();
        auto result = summarised(per_batch, -1);
        if (result.samples > 0) result.accuracy = static_cast<double>(correct) / static_cast<double>(result.samples);
        return result;
    }

private:
    Cnn model_;
};

}  // namespace

Batch Batch::slice(std::int64_t begin, std::int64_t end) const {
    auto rows = [&](const torch::Tensor& all) { return all.defined() ? all.slice(0, begin, end) : torch::Tensor(); };
    Batch out{rows(inputs), rows(labels), rows(text_emb), rows(text_len), {}};
    for (const auto& d : draws) out.draws.push_back(d.slice(0, begin, end));
    return out;
}

Batch Batch::rows(const torch::Tensor& index) const {
    auto chosen = [&](const torch::Tensor& all) {
        return all.defined() ? all.index_select(0, index) : torch::Tensor();
    };
    Batch out{chosen(inputs), chosen(labels), chosen(text_emb), chosen(text_len), {}};
    for (const auto& d : draws) out.draws.push_back(chosen(d));
    return out;
}

DitCondition condition_of(const Batch& batch) { return {batch.labels, batch.text_emb, batch.text_len}; }

std::string preset_summary() {
    std::string summary;
    for (const auto& preset : presets()) {
        auto takes = preset.kind == ModelKind::Cnn      ? "pixels"
                     : preset.kind == ModelKind::Router ? "an expert cluster's router"
                     : preset.text                      ? "captions"
                                                        : "class";
        summary += (summary.empty() ? "" : ", ") + preset.name + " (" + takes + ")";
    }
    return summary;
}

Result<ModelPreset> find_preset(std::string_view name) {
    for (const auto& preset : presets())
        if (preset.name == name) return preset;
    std::string known;
    for (const auto& preset : presets()) known += (known.empty() ? "" : ", ") + preset.name;
    return make_error("unknown model preset \"" + std::string(name) + "\" (known: " + known + ")");
}

DataShape data_shape_of(const ShardData& data, std::int64_t num_classes) {
    DataShape shape;
    shape.channels = data.inputs.size(1);
    shape.size = data.inputs.size(2);
    shape.num_classes = num_classes;
    shape.text_dim = data.text_dim();
    return shape;
}

Result<std::unique_ptr<Workload>> make_workload(std::string_view name, const DataShape& shape, std::uint64_t seed) {
    auto preset = find_preset(name);
    if (!preset) return preset.error();
    static std::mutex global_rng;
    std::lock_guard lock(global_rng);
    torch::manual_seed(seed);
    if (preset->kind == ModelKind::Cnn) {
        if (shape.channels != 1 || shape.size != CnnImpl::kImageSide || shape.num_classes != CnnImpl::kClasses)
            return make_error("preset cnn needs 1×28×28 pixel shards with 10 classes");
        return std::unique_ptr<Workload>(std::make_unique<CnnWorkload>(*preset));
    }
    auto config = preset->dit;
    config.in_channels = shape.channels;
    config.input_size = shape.size;
    config.num_classes = shape.num_classes;
    config.text_dim = shape.text_dim;
    if (shape.size % config.patch != 0 || shape.size < config.patch)
        return make_error("latent size " + std::to_string(shape.size) + " is not a multiple of the patch size 2");
    if (preset->kind == ModelKind::Router) {
        if (shape.num_classes < 2)
            return make_error(
                "preset router needs a dataset labelled by cluster with two or more clusters "
                "(tessera-data cluster writes one)");
        return std::unique_ptr<Workload>(std::make_unique<RouterWorkload>(*preset, config));
    }
    if (preset->text && shape.text_dim == 0)
        return make_error("preset " + preset->name + " is a text-to-image model: its dataset needs captions (text_emb)");
    if (!preset->text && shape.text_dim > 0)
        return make_error("preset " + preset->name + " is class-conditional, but the dataset has captions: use " +
                          preset->name + "-text");
    return std::unique_ptr<Workload>(std::make_unique<DitWorkload>(*preset, config));
}

Dit* dit_of(Workload& workload) {
    auto* dit = dynamic_cast<DitWorkload*>(&workload);
    return dit != nullptr ? &dit->dit() : nullptr;
}

Router* router_of(Workload& workload) {
    auto* router = dynamic_cast<RouterWorkload*>(&workload);
    return router != nullptr ? &router->router() : nullptr;
}

}  // namespace tessera::common
