// Presets and the two workloads: DiT with rectified flow, and the CNN classifier.
#include "workload.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <mutex>

#include "models/cnn.h"
#include "rectified_flow.h"

namespace tessera::common {
namespace {

constexpr std::int64_t kEvalGrid = 8;  // t values for evaluation: (i + 0.5) / 8
constexpr std::uint64_t kEvalNoiseSeed = 20240611;
constexpr std::int64_t kEvalBatch = 256;

const std::vector<ModelPreset>& presets() {
    static const std::vector<ModelPreset> all = [] {
        auto dit = [](std::string name, std::int64_t hidden, std::int64_t depth, std::int64_t heads) {
            ModelPreset p{std::move(name), ModelKind::Dit, {}};
            p.dit.hidden = hidden;
            p.dit.depth = depth;
            p.dit.heads = heads;
            return p;
        };
        return std::vector<ModelPreset>{dit("dit-tiny", 64, 2, 2), dit("dit-s", 384, 12, 6), dit("dit-b", 768, 12, 12),
                                        ModelPreset{"cnn", ModelKind::Cnn, {}}};
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
        Batch batch{data.inputs.slice(0, begin, end).to(device),
                    data.labels.slice(0, begin, end).to(device),
                    data.text_emb.defined() ? data.text_emb.slice(0, begin, end).to(device) : torch::Tensor(),
                    {}};
        body(batch, begin);
    }
}

class DitWorkload : public Workload {
public:
    DitWorkload(ModelPreset preset, const DitConfig& config) : Workload(std::move(preset)), model_(config) {}
    std::shared_ptr<torch::nn::Module> module() override { return model_.ptr(); }
    Dit& dit() { return model_; }

    void draw(Batch& batch, at::Generator& generator) override {
        auto draws = draw_flow(batch.inputs, generator);
        batch.draws = {draws.t, draws.noise, draws.drop};
    }

    torch::Tensor loss(const Batch& batch) override {
        FlowDraws draws{batch.draws.at(0), batch.draws.at(1), batch.draws.at(2)};
        return flow_matching_loss(model_, batch.inputs, batch.labels, batch.text_emb, draws);
    }

    EvalResult evaluate(const ShardData& data, torch::Device device, std::int64_t max_samples) override {
        model_->eval();
        auto generator = at::detail::createCPUGenerator(kEvalNoiseSeed);
        double total = 0;
        std::int64_t count = 0;
        for_each_eval_batch(data, device, max_samples, [&](const Batch& batch, std::int64_t) {
            for (std::int64_t i = 0; i < kEvalGrid; ++i) {
                auto b = batch.inputs.size(0);
                auto t = torch::full({b}, (static_cast<double>(i) + 0.5) / kEvalGrid, torch::kFloat32).to(device);
                auto noise = torch::randn(batch.inputs.sizes(), generator, torch::kFloat32).to(device);
                auto loss = flow_matching_loss_at(model_, batch.inputs, batch.labels, batch.text_emb, t, noise);
                total += loss.item<double>() * static_cast<double>(b);
                count += b;
            }
        });
        model_->train();
        return {count > 0 ? total / static_cast<double>(count) : 0.0, -1, count / kEvalGrid};
    }

private:
    Dit model_;
};

class CnnWorkload : public Workload {
public:
    explicit CnnWorkload(ModelPreset preset) : Workload(std::move(preset)) {}
    std::shared_ptr<torch::nn::Module> module() override { return model_.ptr(); }

    void draw(Batch&, at::Generator&) override {}

    torch::Tensor loss(const Batch& batch) override {
        return torch::cross_entropy_loss(model_->forward(batch.inputs), batch.labels);
    }

    EvalResult evaluate(const ShardData& data, torch::Device device, std::int64_t max_samples) override {
        model_->eval();
        double total = 0;
        std::int64_t correct = 0, count = 0;
        for_each_eval_batch(data, device, max_samples, [&](const Batch& batch, std::int64_t) {
            auto logits = model_->forward(batch.inputs);
            total += torch::cross_entropy_loss(logits, batch.labels, {}, at::Reduction::Sum).item<double>();
            correct += logits.argmax(1).eq(batch.labels).sum().item<std::int64_t>();
            count += batch.inputs.size(0);
        });
        model_->train();
        if (count == 0) return {};
        return {total / static_cast<double>(count), static_cast<double>(correct) / static_cast<double>(count), count};
    }

private:
    Cnn model_;
};

}  // namespace

Batch Batch::slice(std::int64_t begin, std::int64_t end) const {
    Batch out{inputs.slice(0, begin, end),
              labels.slice(0, begin, end),
              text_emb.defined() ? text_emb.slice(0, begin, end) : torch::Tensor(),
              {}};
    for (const auto& d : draws) out.draws.push_back(d.slice(0, begin, end));
    return out;
}

Result<ModelPreset> find_preset(std::string_view name) {
    for (const auto& preset : presets())
        if (preset.name == name) return preset;
    std::string known;
    for (const auto& preset : presets()) known += (known.empty() ? "" : ", ") + preset.name;
    return make_error("unknown model preset \"" + std::string(name) + "\" (known: " + known + ")");
}

std::vector<std::string> preset_names() {
    std::vector<std::string> names;
    for (const auto& preset : presets()) names.push_back(preset.name);
    return names;
}

DataShape data_shape_of(const ShardData& data, std::int64_t num_classes) {
    DataShape shape;
    shape.channels = data.inputs.size(1);
    shape.size = data.inputs.size(2);
    shape.num_classes = num_classes;
    shape.text_dim = data.text_emb.defined() ? data.text_emb.size(2) : 0;
    return shape;
}

Result<std::unique_ptr<Workload>> make_workload(std::string_view name, const DataShape& shape, std::uint64_t seed) {
    auto preset = find_preset(name);
    if (!preset) return preset.error();
    static std::mutex global_rng;
    std::lock_guard lock(global_rng);
    torch::manual_seed(seed);
    if (preset->kind == ModelKind::Cnn) {
        if (shape.channels != 1 || shape.size != 28 || shape.num_classes != 10)
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
    return std::unique_ptr<Workload>(std::make_unique<DitWorkload>(*preset, config));
}

Dit* dit_of(Workload& workload) {
    auto* dit = dynamic_cast<DitWorkload*>(&workload);
    return dit != nullptr ? &dit->dit() : nullptr;
}

}  // namespace tessera::common
