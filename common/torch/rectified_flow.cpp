// Rectified-flow objective and sampler.
#include "rectified_flow.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "unit_draws.h"

namespace tessera::common {
namespace {

torch::Tensor cpu_randn(at::IntArrayRef shape, at::Generator& generator) {
    return torch::randn(shape, generator, torch::kFloat32);
}

}  // namespace

torch::Tensor flow_matching_sample_losses_at(Dit& model, const torch::Tensor& x0, const DitCondition& condition,
                                             const torch::Tensor& t, const torch::Tensor& noise) {
    auto t4 = t.view({-1, 1, 1, 1});
    auto xt = (1 - t4) * x0 + t4 * noise;
    auto velocity = model->forward(xt, t, condition);
    return (velocity.to(torch::kFloat32) - (noise - x0)).square().flatten(1).mean(1);
}

torch::Tensor flow_matching_loss_at(Dit& model, const torch::Tensor& x0, const DitCondition& condition,
                                    const torch::Tensor& t, const torch::Tensor& noise) {
    auto t4 = t.view({-1, 1, 1, 1});
    auto xt = (1 - t4) * x0 + t4 * noise;
    auto velocity = model->forward(xt, t, condition);
    return torch::mse_loss(velocity.to(torch::kFloat32), noise - x0);
}

FlowDraws draw_flow(const torch::Tensor& x0, std::uint64_t seed, std::int64_t step, const ConditionDrop& drop) {
    auto b = x0.size(0);
    auto device = x0.device();
    FlowDraws draws;
    draws.t = to_device(torch::sigmoid(unit_normal_tensor(seed, DrawPurpose::Timestep, step, {b})), device);
    draws.noise = to_device(unit_normal_tensor(seed, DrawPurpose::Noise, step, x0.sizes()), device);
    auto purpose = drop.captions ? DrawPurpose::CaptionDrop : DrawPurpose::LabelDrop;
    draws.drop = to_device(unit_below_tensor(seed, purpose, step, {b}, drop.rate), device);
    return draws;
}

torch::Tensor draw_kept_tokens(const Dit& model, const torch::Tensor& x0, std::uint64_t seed, std::int64_t step,
                               double ratio) {
    auto side = x0.size(2) / model->config().patch;
    auto tokens = side * side;
    auto keep = unit_kept_tokens_tensor(seed, step, x0.size(0), tokens, kept_token_count(tokens, ratio));
    return to_device(keep, x0.device());
}

torch::Tensor flow_matching_loss(Dit& model, const torch::Tensor& x0, const DitCondition& condition,
                                 const FlowDraws& draws) {
    if (!draws.keep.defined())
        return flow_matching_loss_at(model, x0, model->dropped(condition, draws.drop), draws.t, draws.noise);
    auto t4 = draws.t.view({-1, 1, 1, 1});
    auto xt = (1 - t4) * x0 + t4 * draws.noise;
    auto velocity = model->forward_kept(xt, draws.t, model->dropped(condition, draws.drop), draws.keep);
    auto target = model->patchify(draws.noise - x0);
    target = target.gather(1, draws.keep.unsqueeze(-1).expand({target.size(0), draws.keep.size(1), target.size(2)}));
    return torch::mse_loss(velocity.to(torch::kFloat32), target);
}

std::int64_t condition_rows(const DitCondition& condition) {
    return condition.text.defined() ? condition.text.size(0) : condition.labels.size(0);
}

torch::Tensor sampling_noise(const DitConfig& config, std::int64_t rows, std::uint64_t seed, torch::Device device) {
    auto generator = at::detail::createCPUGenerator(seed);
    return cpu_randn({rows, config.in_channels, config.input_size, config.input_size}, generator).to(device);
}

torch::Tensor guided_velocity(Dit& model, const torch::Tensor& x, const torch::Tensor& t, const DitCondition& condition,
                              const DitCondition& unconditional, double guidance) {
    auto v = model->forward(x, t, condition);
    if (guidance == 1.0) return v;
    auto v_uncond = model->forward(x, t, unconditional);
    return v_uncond + guidance * (v - v_uncond);
}

torch::Tensor euler_sample(Dit& model, const DitCondition& condition, const SampleOptions& options) {
    torch::NoGradGuard no_grad;
    auto rows = condition_rows(condition);
    auto device = condition.text.defined() ? condition.text.device() : condition.labels.device();
    auto x = sampling_noise(model->config(), rows, options.seed, device);
    auto unconditional = model->unconditional(rows, device);
    double dt = 1.0 / static_cast<double>(options.steps);
    for (std::int64_t i = options.steps; i > 0; --i) {
        auto t = torch::full({rows}, static_cast<double>(i) * dt, x.options());
        auto v = guided_velocity(model, x, t, condition, unconditional, options.guidance);
        x = x - dt * v.to(x.dtype());
    }
    return x;
}

}  // namespace tessera::common
