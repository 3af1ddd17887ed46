// Model shapes, parameter counts and initial behaviour; weights survive safetensors exactly.
#include <torch/torch.h>

#include "doctest_after_torch.h"
#include "torch/model_state.h"
#include "torch/models/autoencoder.h"
#include "torch/models/cnn.h"
#include "torch/models/dit.h"
#include "torch/models/dit_parts.h"
#include "torch/workload.h"

using namespace tessera::common;

namespace {

// Parameters of a DiT with adaLN-single, counted from its definition.
std::int64_t expected_dit_parameters(std::int64_t h, std::int64_t depth, std::int64_t patch_dim = 16) {
    std::int64_t m = 4 * h;
    std::int64_t block = (h * 3 * h + 3 * h) + (h * h + h)          // qkv, proj
                         + (h * m + m) + (m * 9 + m) + (m * h + h)  // fc1, depthwise conv, fc2
                         + 6 * h;                                   // scale_shift_table
    std::int64_t stem = (patch_dim * h + h) + (256 * h + h) + (h * h + h) + (h * 6 * h + 6 * h) + 11 * h;
    std::int64_t head = 2 * h + (h * patch_dim + patch_dim);
    return stem + depth * block + head;
}

}  // namespace

TEST_CASE("DiT presets have the shapes and parameter counts of their definition") {
    for (auto [name, hidden, depth] : {std::tuple{"dit-nano", 32, 2}, std::tuple{"dit-tiny", 64, 2},
                                       std::tuple{"dit-s", 384, 12}, std::tuple{"dit-b", 768, 12}}) {
        INFO(name);
        auto workload = make_workload(name, DataShape{});
        REQUIRE(workload.ok());
        CHECK(parameter_count(*(*workload)->module()) == expected_dit_parameters(hidden, depth));
    }
    // dit-s: DiT-S/2 has 33M with a modulation MLP per block; adaLN-single shares one.
    auto dit_s = make_workload("dit-s", DataShape{}).value();
    auto count = parameter_count(*dit_s->module());
    CHECK(count > 22'000'000);
    CHECK(count < 24'000'000);
}

TEST_CASE("DiT maps latents to velocities of the same shape; the zero output layer starts at 0") {
    DitConfig config;
    config.hidden = 64;
    config.depth = 2;
    config.heads = 2;
    Dit dit(config);
    auto x = torch::randn({3, 4, 8, 8});
    auto v = dit->forward(x, torch::rand({3}), {torch::tensor({0, 5, 10}), {}, {}});
    CHECK(v.sizes().vec() == x.sizes().vec());
    CHECK(v.abs().max().item<float>() == 0.0f);

    config.text_dim = 32;
    Dit with_text(config);
    auto text = torch::randn({3, 7, 32});
    CHECK(with_text->forward(x, torch::rand({3}), {{}, text, {}}).sizes().vec() == x.sizes().vec());
    CHECK(with_text->named_parameters().contains("blocks.0.cross_kv.weight"));
    CHECK_FALSE(with_text->named_parameters().contains("class_embed.weight"));
}

TEST_CASE("DiT works on other latent sizes, e.g. 4x32x32 Stable Diffusion latents") {
    auto workload = make_workload("dit-tiny", DataShape{4, 32, 1000, 0});
    REQUIRE(workload.ok());
    auto* dit = dit_of(**workload);
    REQUIRE(dit != nullptr);
    auto x = torch::randn({2, 4, 32, 32});
    CHECK((*dit)->forward(x, torch::rand({2}), {torch::tensor({3, 999}), {}, {}}).sizes().vec() == x.sizes().vec());
    CHECK_FALSE(make_workload("dit-tiny", DataShape{4, 7, 10, 0}).ok());
}

TEST_CASE("the token grid's conv gives the same values and gradients read channels-last as on an NCHW copy") {
    torch::manual_seed(3);
    torch::nn::Conv2d conv(torch::nn::Conv2dOptions(32, 32, 3).padding(1).groups(32));
    auto tokens = torch::randn({5, 16, 32}, torch::requires_grad());
    auto nchw = grid_conv(conv, tokens, 4, false);
    auto nhwc = grid_conv(conv, tokens, 4, true);
    CHECK(nchw.sizes() == tokens.sizes());
    CHECK(nhwc.sizes() == tokens.sizes());
    CHECK(torch::allclose(nchw, nhwc, 1e-6, 1e-6));
    // Token n = gy·4 + gx is pixel (gy, gx): a 3×3 kernel of ones over channel 0 sums a token's
    // neighbours, the corner token (0, 0) has four.
    torch::NoGradGuard no_grad;
    conv->weight.fill_(1);
    conv->bias.zero_();
    auto ones = torch::ones({1, 16, 32});
    CHECK(grid_conv(conv, ones, 4, true)[0][0][0].item<float>() == 4);
    CHECK(grid_conv(conv, ones, 4, true)[0][5][0].item<float>() == 9);
    CHECK(grid_conv(conv, ones, 4, false)[0][3][0].item<float>() == 4);
}

TEST_CASE("gradients through the token grid's conv agree between its two layouts") {
    torch::manual_seed(4);
    torch::nn::Conv2d conv(torch::nn::Conv2dOptions(8, 8, 3).padding(1).groups(8));
    auto tokens = torch::randn({3, 9, 8}, torch::requires_grad());
    auto weights = torch::randn({3, 9, 8});
    auto nchw = torch::autograd::grad({(grid_conv(conv, tokens, 3, false) * weights).sum()}, {tokens, conv->weight});
    auto nhwc = torch::autograd::grad({(grid_conv(conv, tokens, 3, true) * weights).sum()}, {tokens, conv->weight});
    CHECK(torch::allclose(nchw[0], nhwc[0], 1e-6, 1e-6));
    CHECK(torch::allclose(nchw[1], nhwc[1], 1e-6, 1e-6));
}

TEST_CASE("the CNN has about 110K parameters and gives 10 logits") {
    Cnn cnn;
    auto count = parameter_count(*cnn);
    CHECK(count > 100'000);
    CHECK(count < 115'000);
    CHECK(cnn->forward(torch::randn({5, 1, 28, 28})).sizes().vec() == std::vector<std::int64_t>{5, 10});
    CHECK_FALSE(make_workload("cnn", DataShape{4, 8, 10, 0}).ok());
}

TEST_CASE("the autoencoder maps 1x32x32 to 4x8x8 and back") {
    Encoder encoder;
    Decoder decoder;
    auto z = encoder->forward(torch::rand({2, 1, 32, 32}) * 2 - 1);
    CHECK(z.sizes().vec() == std::vector<std::int64_t>{2, 4, 8, 8});
    auto y = decoder->forward(z);
    CHECK(y.sizes().vec() == std::vector<std::int64_t>{2, 1, 32, 32});
    CHECK(y.abs().max().item<float>() <= 1.0f);
}

TEST_CASE("the same seed gives the same initial weights; another seed differs") {
    auto a = state_of(*make_workload("dit-tiny", DataShape{}, 7).value()->module());
    auto b = state_of(*make_workload("dit-tiny", DataShape{}, 7).value()->module());
    auto c = state_of(*make_workload("dit-tiny", DataShape{}, 8).value()->module());
    CHECK(torch::equal(a.at("blocks.0.qkv.weight"), b.at("blocks.0.qkv.weight")));
    CHECK_FALSE(torch::equal(a.at("blocks.0.qkv.weight"), c.at("blocks.0.qkv.weight")));
}

TEST_CASE("a model exported to safetensors loads back bit-identical") {
    for (const char* preset : {"dit-tiny", "cnn"}) {
        INFO(preset);
        DataShape shape = std::string(preset) == "cnn" ? DataShape{1, 28, 10, 0} : DataShape{};
        auto source = make_workload(preset, shape, 1).value();
        auto bytes = to_safetensors(state_of(*source->module()));
        REQUIRE(bytes.ok());
        auto file = parse_safetensors(*bytes);
        REQUIRE(file.ok());
        auto state = to_torch_map(*file);
        REQUIRE(state.ok());
        auto target = make_workload(preset, shape, 2).value();
        REQUIRE(load_state(*target->module(), *state).ok());
        auto original = state_of(*source->module());
        auto loaded = state_of(*target->module());
        for (const auto& [name, tensor] : original) CHECK(torch::equal(tensor, loaded.at(name)));
    }
}

TEST_CASE("weights that do not fit the model are refused, and the model is unchanged") {
    auto workload = make_workload("dit-tiny", DataShape{}, 1).value();
    auto before = state_of(*workload->module());
    auto wrong = before;
    wrong.at("out.weight") = torch::zeros({3, 3});
    auto status = load_state(*workload->module(), wrong);
    CHECK(status.message().find("out.weight") != std::string::npos);
    auto missing = before;
    missing.erase("out.bias");
    CHECK_FALSE(load_state(*workload->module(), missing).ok());
    CHECK(torch::equal(state_of(*workload->module()).at("blocks.0.qkv.weight"), before.at("blocks.0.qkv.weight")));
}
