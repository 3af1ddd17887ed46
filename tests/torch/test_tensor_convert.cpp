// tessera_torch conversions: safetensors ↔ torch maps for every dtype, f32 delta tensors,
// and our f16/bf16 rounding checked against torch's own.
#include <torch/torch.h>

#include "doctest_after_torch.h"

#include "half.h"
#include "torch/tensor_convert.h"

using namespace tessera::common;

TEST_CASE("torch maps survive safetensors bit for bit, in every dtype") {
    torch::manual_seed(0);
    TorchTensorMap tensors{
        {"f32", torch::randn({3, 4})},
        {"f16", torch::randn({5}).to(torch::kFloat16)},
        {"bf16", torch::randn({2, 2}).to(torch::kBFloat16)},
        {"i8", torch::randint(-128, 127, {7}).to(torch::kInt8)},
        {"u8", torch::randint(0, 255, {7}).to(torch::kUInt8)},
        {"i32", torch::randint(-1000, 1000, {4}).to(torch::kInt32)},
        {"i64", torch::randint(-1000, 1000, {2, 3})},
        {"scalar", torch::tensor(3.5f)},
        {"strided", torch::randn({4, 6}).t()},
    };
    auto bytes = to_safetensors(tensors, {{"model", "test"}});
    REQUIRE(bytes.ok());
    auto file = parse_safetensors(*bytes);
    REQUIRE(file.ok());
    CHECK(file->metadata().at("model") == "test");
    auto back = to_torch_map(*file);
    REQUIRE(back.ok());
    REQUIRE(back->size() == tensors.size());
    for (const auto& [name, tensor] : tensors) {
        INFO(name);
        const auto& copy = back->at(name);
        CHECK((copy.scalar_type() == tensor.scalar_type()));
        CHECK(copy.sizes().vec() == tensor.sizes().vec());
        CHECK(torch::equal(copy, tensor));
    }
}

TEST_CASE("unsupported dtypes are refused with the tensor's name") {
    TorchTensorMap tensors{{"doubles", torch::zeros({2}, torch::kFloat64)}};
    auto bytes = to_safetensors(tensors);
    CHECK_FALSE(bytes.ok());
    CHECK(bytes.message().find("doubles") != std::string::npos);
}

TEST_CASE("f32 named tensors round trip through torch") {
    NamedTensors named{{"w", {2, 2}, {1, 2, 3, 4}}, {"b", {2}, {-1, 0.5f}}};
    auto tensors = from_named_f32(named);
    CHECK(tensors.at("w").sizes().vec() == std::vector<std::int64_t>{2, 2});
    CHECK(tensors.at("w")[1][0].item<float>() == 3.0f);
    auto back = to_named_f32(tensors);
    REQUIRE(back.size() == 2);
    CHECK(back[0].name == "b");  // sorted by name
    CHECK(back[0].values == named[1].values);
    CHECK(back[1].values == named[0].values);
}

TEST_CASE("our f16 and bf16 conversions round exactly like torch") {
    torch::manual_seed(1);
    auto values = torch::cat(
        {torch::randn({20000}) * 100, torch::randn({20000}) * 1e-5,
         torch::tensor({0.0f, -0.0f, 65504.0f, 65520.0f, 1e9f, 6e-8f, 3e-8f, std::numeric_limits<float>::infinity()})});
    auto as_f16 = values.to(torch::kFloat16).to(torch::kFloat32);
    auto as_bf16 = values.to(torch::kBFloat16).to(torch::kFloat32);
    const float* v = values.data_ptr<float>();
    for (std::int64_t i = 0; i < values.numel(); ++i) {
        INFO("value " << v[i]);
        CHECK(f16_to_f32(f32_to_f16(v[i])) == as_f16[i].item<float>());
        CHECK(bf16_to_f32(f32_to_bf16(v[i])) == as_bf16[i].item<float>());
    }
}
