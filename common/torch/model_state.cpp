// Model weights ↔ tensor maps.
#include "model_state.h"

#include <torch/torch.h>

#include "../file_io.h"
#include "../safetensors.h"

namespace tessera::common {

TorchTensorMap state_of(const torch::nn::Module& module) {
    TorchTensorMap state;
    for (const auto& item : module.named_parameters()) state.emplace(item.key(), item.value().detach().clone());
    return state;
}

Status load_state(torch::nn::Module& module, const TorchTensorMap& state) {
    auto params = module.named_parameters();
    if (params.size() != state.size())
        return make_error("model has " + std::to_string(params.size()) + " tensors but the weights have " +
                          std::to_string(state.size()));
    for (const auto& item : params) {
        auto found = state.find(item.key());
        if (found == state.end()) return make_error("weights lack tensor \"" + item.key() + "\"");
        if (found->second.sizes() != item.value().sizes())
            return make_error("tensor \"" + item.key() + "\" has shape " + c10::str(found->second.sizes()) +
                              ", the model needs " + c10::str(item.value().sizes()));
        if (!found->second.is_floating_point())
            return make_error("tensor \"" + item.key() + "\" is not floating point");
    }
    torch::NoGradGuard no_grad;
    for (auto& item : params) item.value().copy_(state.at(item.key()));
    return {};
}

Status load_state_file(torch::nn::Module& module, const std::filesystem::path& file, std::uint64_t max_bytes) {
    auto bytes = read_file(file, max_bytes);
    if (!bytes) return bytes.error();
    auto tensors = parse_safetensors(*bytes);
    if (!tensors) return with_context(file.string(), tensors.error());
    auto state = to_torch_map(*tensors);
    if (!state) return with_context(file.string(), state.error());
    if (auto status = load_state(module, *state); !status) return with_context(file.string(), status.error());
    return {};
}

std::int64_t parameter_count(const torch::nn::Module& module) {
    std::int64_t count = 0;
    for (const auto& p : module.parameters()) count += p.numel();
    return count;
}

}  // namespace tessera::common
