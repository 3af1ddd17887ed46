// The GPU's way of encoding a delta (LibTorch operations, run here on the CPU) against the CPU
// codec: the same bytes for every codec. tests/cuda checks the int8 kernel itself on a GPU.
#include <torch/torch.h>

#include "doctest_after_torch.h"
#include "torch/device_delta.h"

using namespace tessera::common;

namespace {

TorchTensorMap random_delta() {
    torch::manual_seed(5);
    return {
        {"a.weight", 0.01 * torch::randn({40, 30})}, {"a.bias", 0.01 * torch::randn({300})}, {"s", torch::randn({})}};
}

}  // namespace

TEST_CASE("the torch path writes encode_delta's bytes for every codec") {
    for (auto dtype : {DeltaDType::F32, DeltaDType::BF16, DeltaDType::Int8}) {
        for (double fraction : {1.0, 0.1, 0.013}) {
            CAPTURE(delta_dtype_name(dtype));
            CAPTURE(fraction);
            auto delta = random_delta();
            if (fraction == 1.0) delta.at("a.bias").zero_();  // an unchanged tensor (ties only matter to top-k)
            DeltaEncoding encoding{dtype, fraction};
            auto bytes = encode_delta_with_torch(delta, encoding);
            REQUIRE(bytes.ok());
            auto expected = encode_delta(to_named_f32(delta), encoding);
            REQUIRE(expected.ok());
            CHECK(*bytes == expected->bytes);
            auto on_device = encode_delta_on_device(delta, encoding);
            REQUIRE(on_device.ok());
            CHECK(*on_device == expected->bytes);
        }
    }
}

TEST_CASE("the torch path refuses non-finite values, naming the tensor, and bad fractions") {
    auto delta = random_delta();
    delta.at("a.weight")[3][4] = std::numeric_limits<float>::quiet_NaN();
    auto refused = encode_delta_with_torch(delta, {DeltaDType::Int8, 1.0});
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.message().find("a.weight") != std::string::npos);
    delta.at("a.weight")[3][4] = std::numeric_limits<float>::infinity();
    CHECK_FALSE(encode_delta_with_torch(delta, {DeltaDType::BF16, 0.5}).ok());
    CHECK_FALSE(encode_delta_with_torch(random_delta(), {DeltaDType::F32, 0.0}).ok());
    CHECK_FALSE(encode_delta_with_torch(random_delta(), {DeltaDType::F32, 1.5}).ok());
}
