// Int8 deltas formed from two weight maps: the same bytes as the CPU codec's encoding of
// their difference (on the GPU too, where tests/cuda checks the kernel itself).
#include <torch/torch.h>

#include "doctest_after_torch.h"
#include "torch/device_delta.h"

using namespace tessera::common;

TEST_CASE("encode_int8_delta equals encode_delta(int8) of θ_H − θ0") {
    torch::manual_seed(5);
    TorchTensorMap theta0{{"a.weight", torch::randn({40, 30})}, {"a.bias", torch::randn({30})}, {"s", torch::randn({})}};
    TorchTensorMap theta_h;
    for (const auto& [name, tensor] : theta0) theta_h.emplace(name, tensor + 0.01 * torch::randn_like(tensor));
    theta_h.at("a.bias") = theta0.at("a.bias").clone();  // an unchanged tensor: all-zero delta

    auto bytes = encode_int8_delta(theta_h, theta0);
    REQUIRE(bytes.ok());
    TorchTensorMap difference;
    for (const auto& [name, tensor] : theta_h) difference.emplace(name, tensor - theta0.at(name));
    auto expected = encode_delta(to_named_f32(difference), {DeltaDType::Int8, 1.0});
    REQUIRE(expected.ok());
    CHECK(*bytes == expected->bytes);
    auto decoded = decode_delta(*bytes);
    REQUIRE(decoded.ok());
    CHECK(decoded->tensors.size() == 3);
}

TEST_CASE("encode_int8_delta refuses weights that do not correspond") {
    TorchTensorMap theta0{{"w", torch::zeros({2, 2})}};
    CHECK_FALSE(encode_int8_delta({{"w", torch::zeros({3})}}, theta0).ok());
    CHECK_FALSE(encode_int8_delta({{"v", torch::zeros({2, 2})}}, theta0).ok());
}
