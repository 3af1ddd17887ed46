// The multi-tensor AdamW step, operation for operation torch::optim::AdamW's.
#include "adamw.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>

namespace tessera::common {

MultiTensorAdamW::MultiTensorAdamW(std::vector<torch::Tensor> parameters, double weight_decay, double beta1,
                                   double beta2, double eps)
    : parameters_(std::move(parameters)), moments_(parameters_.size()), weight_decay_(weight_decay), beta1_(beta1),
      beta2_(beta2), eps_(eps) {}

namespace {

// `m`, with zero moments of `p`'s shape before its parameter's first step.
AdamWMoments& started(AdamWMoments& m, const torch::Tensor& p) {
    if (!m.exp_avg.defined()) {
        m.exp_avg = torch::zeros_like(p, torch::MemoryFormat::Preserve);
        m.exp_avg_sq = torch::zeros_like(p, torch::MemoryFormat::Preserve);
    }
    return m;
}

}  // namespace

// LibTorch 2.x's fused kernel, for float parameters on a CUDA device. It reads each
// parameter's step count from a device tensor, so parameters that went without a gradient
// need no group of their own. False (nothing done) where the kernel does not apply.
bool MultiTensorAdamW::step_fused(double lr) {
#if TORCH_VERSION_MAJOR >= 2
    if (!fused_ || update_clipping_ || parameters_.empty()) return false;
    for (const auto& p : parameters_)
        if (!p.is_cuda() || p.scalar_type() != torch::kFloat) return false;
    device_steps_.resize(parameters_.size());
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
        const auto& p = parameters_[i];
        if (!p.grad().defined()) continue;
        auto& m = started(moments_[i], p);
        if (!device_steps_[i].defined())
            device_steps_[i] = torch::full({}, static_cast<double>(m.steps), p.options().dtype(torch::kFloat));
        ++m.steps;
        params.push_back(p);
        grads.push_back(p.grad());
        exp_avgs.push_back(m.exp_avg);
        exp_avg_sqs.push_back(m.exp_avg_sq);
        steps.push_back(device_steps_[i]);
    }
    if (params.empty()) return true;
    at::_foreach_add_(steps, 1);
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, {}, steps, lr, beta1_, beta2_, weight_decay_, eps_,
                      /*amsgrad=*/false, /*maximize=*/false);
    return true;
#else
    (void)lr;
    return false;
#endif
}

void MultiTensorAdamW::zero_grad() {
    for (auto& p : parameters_) p.mutable_grad() = torch::Tensor();
}

void MultiTensorAdamW::step(double lr) {
    torch::NoGradGuard no_grad;
    if (step_fused(lr)) return;
    device_steps_.clear();  // host counts lead from here; a later fused step starts from them
    // Parameters are grouped by their step count (the same for all unless some went without
    // a gradient), since the bias correction depends on it.
    struct Group {
        std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs;
    };
    std::map<std::int64_t, Group> groups;
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
        const auto& p = parameters_[i];
        if (!p.grad().defined()) continue;
        auto& m = started(moments_[i], p);
        auto& group = groups[++m.steps];
        group.params.push_back(p);
        group.grads.push_back(p.grad());
        group.exp_avgs.push_back(m.exp_avg);
        group.exp_avg_sqs.push_back(m.exp_avg_sq);
    }
    for (auto& [steps, g] : groups) {
        if (weight_decay_ != 0) at::_foreach_mul_(g.params, 1 - lr * weight_decay_);
        double bias_correction1 = 1 - std::pow(beta1_, static_cast<double>(steps));
        double bias_correction2 = 1 - std::pow(beta2_, static_cast<double>(steps));
        at::_foreach_mul_(g.exp_avgs, beta1_);
        at::_foreach_add_(g.exp_avgs, g.grads, 1 - beta1_);
        at::_foreach_mul_(g.exp_avg_sqs, beta2_);
        at::_foreach_addcmul_(g.exp_avg_sqs, g.grads, g.grads, 1 - beta2_);
        auto denom = at::_foreach_sqrt(g.exp_avg_sqs);
        at::_foreach_div_(denom, std::sqrt(bias_correction2));
        at::_foreach_add_(denom, eps_);
        if (update_clipping_) {
            // On the device, without a host sync: a 0-d divisor per tensor.
            for (std::size_t j = 0; j < g.params.size(); ++j) {
                auto v_hat = (g.exp_avg_sqs[j] / bias_correction2).clamp_min(eps_ * eps_);
                auto rms = (g.grads[j].square() / v_hat).mean().sqrt().clamp_min(1.0);
                g.params[j].sub_(g.exp_avgs[j] / denom[j] / rms, lr / bias_correction1);
            }
            continue;
        }
        at::_foreach_addcdiv_(g.params, g.exp_avgs, denom, -lr / bias_correction1);
    }
}

std::vector<AdamWMoments> MultiTensorAdamW::moments() const {
    std::vector<AdamWMoments> copies;
    copies.reserve(moments_.size());
    for (const auto& m : moments_)
        copies.push_back({m.exp_avg.defined() ? m.exp_avg.clone() : torch::Tensor(),
                          m.exp_avg_sq.defined() ? m.exp_avg_sq.clone() : torch::Tensor(), m.steps});
    return copies;
}

Status MultiTensorAdamW::load_moments(std::vector<AdamWMoments> moments) {
    if (moments.size() != parameters_.size())
        return make_error("optimizer state for " + std::to_string(moments.size()) + " parameters, the model has " +
                          std::to_string(parameters_.size()));
    for (std::size_t i = 0; i < moments.size(); ++i) {
        auto& m = moments[i];
        const auto& p = parameters_[i];
        const bool fresh = !m.exp_avg.defined() && !m.exp_avg_sq.defined() && m.steps == 0;
        if (fresh) continue;
        if (!m.exp_avg.defined() || !m.exp_avg_sq.defined() || m.steps < 1 || m.exp_avg.sizes() != p.sizes() ||
            m.exp_avg_sq.sizes() != p.sizes())
            return make_error("optimizer state of parameter " + std::to_string(i) +
                              ": moments of the parameter's shape and a step count >= 1 expected");
        // Copies: the optimizer updates its moments in place, and the caller's stay as they were.
        m.exp_avg = m.exp_avg.to(p.device(), p.scalar_type(), false, true).contiguous();
        m.exp_avg_sq = m.exp_avg_sq.to(p.device(), p.scalar_type(), false, true).contiguous();
    }
    moments_ = std::move(moments);
    device_steps_.clear();
    return {};
}

}  // namespace tessera::common
