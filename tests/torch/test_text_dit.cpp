// The text-to-image DiT: captions masked by their length, the learned null caption for dropped
// captions and guidance, the caption drop drawn from its own stream, the presets that take
// text, and caption shards in their three layouts with the errors bad ones get.
#include <torch/torch.h>

#include "doctest_after_torch.h"
#include "safetensors.h"
#include "torch/model_state.h"
#include "torch/models/dit.h"
#include "torch/rectified_flow.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "torch/trainer.h"
#include "torch/workload.h"
#include "unit_random.h"

using namespace tessera::common;

namespace {

constexpr std::int64_t kWidth = 16;

DitConfig text_config() {
    DitConfig config;
    config.hidden = 32;
    config.depth = 2;
    config.heads = 2;
    config.text_dim = kWidth;
    config.null_caption_tokens = 4;
    return config;
}

// A text DiT whose zero-initialised layers (the output, the cross-attention's projection) are
// made non-zero, so that its velocity depends on the caption.
Dit perturbed_text_dit() {
    torch::manual_seed(11);
    Dit dit(text_config());
    torch::NoGradGuard no_grad;
    for (auto& parameter : dit->parameters()) parameter.add_(torch::randn_like(parameter) * 0.05);
    return dit;
}

std::vector<std::int64_t> values_of(const torch::Tensor& t) {
    auto flat = t.to(torch::kInt64).contiguous();
    return {flat.data_ptr<std::int64_t>(), flat.data_ptr<std::int64_t>() + flat.numel()};
}

double max_difference(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

Bytes shard_bytes(const TorchTensorMap& tensors) { return to_safetensors(tensors).value(); }

TorchTensorMap latents_and_labels(std::int64_t n) {
    return {{"latents", torch::randn({n, 4, 8, 8})}, {"labels", torch::zeros({n}, torch::kInt64)}};
}

}  // namespace

TEST_CASE("tokens past a caption's length do not change the velocity; tokens within it do") {
    auto dit = perturbed_text_dit();
    auto x = torch::randn({2, 4, 8, 8});
    auto t = torch::rand({2});
    auto text = torch::randn({2, 6, kWidth});
    auto lengths = torch::tensor({3, 6}, torch::kInt64);
    auto v = dit->forward(x, t, {{}, text, lengths});

    auto garbage = text.clone();
    garbage[0].slice(0, 3, 6).copy_(torch::randn({3, kWidth}) * 10);  // sample 0's padding only
    CHECK(max_difference(dit->forward(x, t, {{}, garbage, lengths}), v) < 1e-6);

    auto changed = text.clone();
    changed[0][1] += 1.0;  // a token sample 0 attends
    auto v_changed = dit->forward(x, t, {{}, changed, lengths});
    CHECK(max_difference(v_changed[0], v[0]) > 1e-4);
    CHECK(max_difference(v_changed[1], v[1]) < 1e-6);  // the other sample is its own

    // Without lengths every token is attended, padding included.
    CHECK(max_difference(dit->forward(x, t, {{}, garbage, {}}), v) > 1e-4);
}

TEST_CASE("a dropped caption becomes the learned null caption, every token of it attended") {
    auto dit = perturbed_text_dit();
    auto text = torch::randn({3, 6, kWidth});
    auto lengths = torch::tensor({2, 6, 5}, torch::kInt64);
    auto drop = torch::tensor({false, true, false});
    auto dropped = dit->dropped({{}, text, lengths}, drop);
    REQUIRE(dropped.text.sizes().vec() == std::vector<std::int64_t>{3, 6, kWidth});
    auto null_caption = dit->named_parameters()["null_caption"];
    CHECK(null_caption.sizes().vec() == std::vector<std::int64_t>{4, kWidth});
    CHECK(torch::equal(dropped.text[1].slice(0, 0, 4), null_caption.detach()));
    CHECK(torch::equal(dropped.text[0], text[0]));
    CHECK(values_of(dropped.text_len) == std::vector<std::int64_t>{2, 4, 5});

    // The unconditional branch of guidance is the same null caption.
    auto x = torch::randn({1, 4, 8, 8});
    auto t = torch::rand({1});
    auto unconditional = dit->forward(x, t, dit->unconditional(1, torch::kCPU));
    auto as_dropped = dit->forward(x, t, dit->dropped({{}, text.slice(0, 1, 2), lengths.slice(0, 1, 2)}, torch::tensor({true})));
    CHECK(max_difference(unconditional, as_dropped) < 1e-6);

    // Shorter captions than the null caption are padded to its length.
    auto short_text = torch::randn({2, 2, kWidth});
    auto mixed = dit->dropped({{}, short_text, torch::tensor({2, 1}, torch::kInt64)}, torch::tensor({true, false}));
    CHECK(mixed.text.size(1) == 4);
    CHECK(values_of(mixed.text_len) == std::vector<std::int64_t>{4, 1});
}

TEST_CASE("the null caption learns only from dropped captions") {
    auto workload = make_workload("dit-tiny-text", DataShape{4, 8, 10, kWidth}, 0).value();
    auto& dit = *dit_of(*workload);
    Batch batch{torch::randn({16, 4, 8, 8}), torch::zeros({16}, torch::kInt64), torch::randn({16, 5, kWidth}),
                torch::full({16}, 5, torch::kInt64), {}};
    auto null_grad = [&](double rate) {
        workload->set_caption_drop(rate);
        workload->draw(batch, 99, 0);
        dit->zero_grad();
        workload->loss(batch).backward();
        auto grad = dit->named_parameters()["null_caption"].grad();
        return grad.defined() ? grad.abs().sum().item<double>() : 0.0;
    };
    // The output layer starts at zero: one step of training gives the rest a gradient.
    {
        torch::NoGradGuard no_grad;
        for (auto& parameter : dit->parameters()) parameter.add_(torch::randn_like(parameter) * 0.05);
    }
    CHECK(null_grad(0.0) == 0.0);
    CHECK(null_grad(1.0) > 0.0);
}

TEST_CASE("captions drop where the unit's CaptionDrop stream says, at the task's rate") {
    auto workload = make_workload("dit-tiny-text", DataShape{4, 8, 10, kWidth}, 0).value();
    Batch batch{torch::randn({64, 4, 8, 8}), torch::zeros({64}, torch::kInt64), torch::randn({64, 3, kWidth}), {}, {}};
    workload->set_caption_drop(0.3);
    workload->draw(batch, 1234, 7);
    auto expected = unit_below(UnitStream(1234, DrawPurpose::CaptionDrop, 7), 64, 0.3);
    auto drawn = batch.draws.at(2).to(torch::kUInt8).contiguous();
    CHECK(std::vector<std::uint8_t>(drawn.data_ptr<std::uint8_t>(), drawn.data_ptr<std::uint8_t>() + 64) == expected);
    auto dropped = drawn.sum().item<std::int64_t>();
    CHECK(dropped > 5);
    CHECK(dropped < 35);

    // A class model draws its label drops from LabelDrop at 0.1, whatever the caption rate.
    auto class_model = make_workload("dit-tiny", DataShape{}, 0).value();
    class_model->set_caption_drop(0.9);
    Batch labels{torch::randn({64, 4, 8, 8}), torch::zeros({64}, torch::kInt64), {}, {}, {}};
    class_model->draw(labels, 1234, 7);
    auto label_drops = labels.draws.at(2).to(torch::kUInt8).contiguous();
    CHECK(std::vector<std::uint8_t>(label_drops.data_ptr<std::uint8_t>(), label_drops.data_ptr<std::uint8_t>() + 64) ==
          unit_below(UnitStream(1234, DrawPurpose::LabelDrop, 7), 64, kLabelDropout));
}

TEST_CASE("text presets take captions and class presets take classes, each refusing the other's data") {
    auto text = make_workload("dit-tiny-text", DataShape{4, 8, 10, kWidth}, 0);
    REQUIRE(text.ok());
    auto names = state_of(*(*text)->module());
    CHECK(names.contains("null_caption"));
    CHECK(names.contains("caption_fc1.weight"));
    CHECK(names.at("caption_fc1.weight").sizes().vec() == std::vector<std::int64_t>{64, kWidth});
    CHECK(names.at("blocks.1.cross_kv.weight").sizes().vec() == std::vector<std::int64_t>{128, 64});
    CHECK_FALSE(names.contains("class_embed.weight"));

    auto no_captions = make_workload("dit-tiny-text", DataShape{}, 0);
    REQUIRE_FALSE(no_captions.ok());
    CHECK(no_captions.error().message.find("needs captions") != std::string::npos);
    auto captions_to_class = make_workload("dit-s", DataShape{4, 8, 10, kWidth}, 0);
    REQUIRE_FALSE(captions_to_class.ok());
    CHECK(captions_to_class.error().message.find("dit-s-text") != std::string::npos);
    CHECK(preset_summary().find("dit-b-text (captions)") != std::string::npos);
    // docs/protocol.md's table, for captions 64 wide on canvases' 4x16x16 latents.
    for (auto [name, tensors, parameters] :
         {std::tuple{"dit-nano-text", 50, 56'944}, std::tuple{"dit-tiny-text", 50, 195'280},
          std::tuple{"dit-s-text", 220, 29'903'760}}) {
        INFO(name);
        auto model = make_workload(name, DataShape{4, 16, 3, 64}, 0).value();
        CHECK(static_cast<std::int64_t>(state_of(*model->module()).size()) == tensors);
        CHECK(parameter_count(*model->module()) == parameters);
    }
    CHECK(preset_summary().find("dit-tiny (class)") != std::string::npos);
}

TEST_CASE("sampling is conditioned on the caption it is given, and guided away from the null caption") {
    auto dit = perturbed_text_dit();
    auto caption_a = torch::randn({1, 3, kWidth});
    auto caption_b = caption_a + 1.0;
    auto lengths = torch::tensor({3}, torch::kInt64);
    SampleOptions options;
    options.steps = 4;
    options.seed = 5;  // the same starting noise for every call
    auto a = euler_sample(dit, {{}, caption_a, lengths}, options);
    CHECK(a.sizes().vec() == std::vector<std::int64_t>{1, 4, 8, 8});
    CHECK(torch::isfinite(a).all().item<bool>());
    CHECK(max_difference(euler_sample(dit, {{}, caption_a, lengths}, options), a) < 1e-6);
    CHECK(max_difference(euler_sample(dit, {{}, caption_b, lengths}, options), a) > 1e-4);
    options.guidance = 1.0;
    CHECK(max_difference(euler_sample(dit, {{}, caption_a, lengths}, options), a) > 1e-4);
}

TEST_CASE("caption shards load from padded with lengths, padded with a mask, and packed tokens alike") {
    auto base = latents_and_labels(3);
    auto lengths = torch::tensor({2, 4, 1}, torch::kInt64);
    auto padded = torch::zeros({3, 4, kWidth});
    auto packed = torch::randn({7, kWidth});
    padded[0].slice(0, 0, 2).copy_(packed.slice(0, 0, 2));
    padded[1].copy_(packed.slice(0, 2, 6));
    padded[2].slice(0, 0, 1).copy_(packed.slice(0, 6, 7));
    auto mask = torch::arange(4).unsqueeze(0).lt(lengths.unsqueeze(1)).to(torch::kInt64);

    auto with = [&](TorchTensorMap extra) {
        auto tensors = base;
        for (auto& [name, tensor] : extra) tensors[name] = tensor;
        return load_shard(shard_bytes(tensors));
    };
    auto from_lengths = with({{"text_emb", padded.to(torch::kFloat16)}, {"text_len", lengths}});
    auto from_mask = with({{"text_emb", padded}, {"text_mask", mask}});
    auto from_packed = with({{"text_tokens", packed.to(torch::kBFloat16)}, {"text_len", lengths}});
    REQUIRE(from_lengths.ok());
    REQUIRE(from_mask.ok());
    REQUIRE(from_packed.ok());
    for (const auto* shard : {&*from_lengths, &*from_mask, &*from_packed}) {
        CHECK(values_of(shard->text_len) == values_of(lengths));
        auto captions = shard->padded_captions().text.to(torch::kFloat);
        CHECK(captions.sizes().vec() == std::vector<std::int64_t>{3, 4, kWidth});
        CHECK(max_difference(captions, padded) < 0.05);  // f16 / bf16 rounding
    }
    auto without_lengths = with({{"text_emb", padded}});
    REQUIRE(without_lengths.ok());
    CHECK(values_of(without_lengths->text_len) == std::vector<std::int64_t>{4, 4, 4});

    // Shards whose captions differ in length pad to the longest when concatenated.
    auto longer = with({{"text_emb", torch::randn({3, 6, kWidth})}}).value();
    auto both = concat_shards({*from_packed, longer});
    REQUIRE(both.ok());
    CHECK(both->padded_captions().text.size(1) == 6);
    CHECK(values_of(both->text_len) == std::vector<std::int64_t>{2, 4, 1, 6, 6, 6});

    // Captions stay packed in the file's type; a batch pads to its own longest caption.
    CHECK((from_packed->text_tokens.scalar_type() == torch::kBFloat16));
    CHECK(from_packed->text_tokens.size(0) == 7);
    auto picked = from_packed->rows(torch::tensor({2, 0}, torch::kInt64)).padded_captions();
    CHECK(values_of(picked.len) == std::vector<std::int64_t>{1, 2});
    REQUIRE(picked.text.sizes().vec() == std::vector<std::int64_t>{2, 2, kWidth});
    auto rounded = packed.to(torch::kBFloat16);
    CHECK(picked.text[0][0].equal(rounded[6]));
    CHECK(picked.text[0][1].abs().sum().item<float>() == 0.0f);
    CHECK(picked.text[1].equal(rounded.slice(0, 0, 2)));
}

TEST_CASE("real sizes: 16-channel 32×32 latents (256 tokens) with 300-token captions 4096 wide train a unit") {
    // SD3/FLUX-VAE latents of a 256 px image and T5-XXL captions as PixArt-Σ caches them.
    constexpr std::int64_t kSamples = 3, kTokens = 300, kT5Width = 4096;
    auto lengths = torch::tensor({kTokens, std::int64_t{17}, std::int64_t{120}}, torch::kInt64);
    auto tokens = torch::randn({lengths.sum().item<std::int64_t>(), kT5Width}).to(torch::kFloat16);
    auto shard = load_shard(shard_bytes({{"latents", torch::randn({kSamples, 16, 32, 32}).to(torch::kFloat16)},
                                         {"labels", torch::zeros({kSamples}, torch::kInt64)},
                                         {"text_tokens", tokens},
                                         {"text_len", lengths}}));
    REQUIRE_MESSAGE(shard.ok(), shard.message());
    // The captions are held as stored: f16, only their own tokens (2.5 MB, not 3 × 300 × 4096 × 4).
    CHECK(shard->text_tokens.nbytes() == static_cast<std::size_t>(437 * kT5Width * 2));
    auto workload = make_workload("dit-tiny-text", data_shape_of(*shard, 10), 3);
    REQUIRE_MESSAGE(workload.ok(), workload.message());
    auto* dit = dit_of(**workload);
    REQUIRE(dit != nullptr);
    CHECK((*dit)->config().in_channels == 16);
    CHECK((*dit)->config().text_dim == kT5Width);
    TrainConfig config;
    config.steps = 2;
    config.batch_size = 2;
    config.seed = 9;
    auto theta0 = state_of(*(*workload)->module());
    auto outcome = train("dit-tiny-text", theta0, *shard, config);
    REQUIRE_MESSAGE(outcome.ok(), outcome.message());
    CHECK(outcome->delta.at("caption_fc1.weight").sizes().vec() == std::vector<std::int64_t>{64, kT5Width});
    double moved = 0;
    for (const auto& [name, delta] : outcome->delta) {
        CHECK(torch::isfinite(delta).all().item<bool>());
        moved += delta.abs().sum().item<double>();
    }
    CHECK(moved > 0);
    auto velocity = (*dit)->forward(shard->inputs.slice(0, 0, 2), torch::full({2}, 0.5),
                                    {{}, shard->slice(0, 2).padded_captions().text,
                                     shard->slice(0, 2).padded_captions().len});
    CHECK(velocity.sizes().vec() == std::vector<std::int64_t>{2, 16, 32, 32});
}

TEST_CASE("bad caption tensors get a named error") {
    auto base = latents_and_labels(2);
    auto refused = [&](TorchTensorMap extra, const std::string& expected) {
        auto tensors = base;
        for (auto& [name, tensor] : extra) tensors[name] = tensor;
        auto shard = load_shard(shard_bytes(tensors));
        REQUIRE_FALSE(shard.ok());
        INFO(shard.error().message);
        CHECK(shard.error().message.find(expected) != std::string::npos);
    };
    auto text = torch::randn({2, 3, kWidth});
    refused({{"text_emb", text}, {"text_len", torch::tensor({2, 4}, torch::kInt64)}}, "longer than");
    refused({{"text_emb", text}, {"text_len", torch::tensor({0, 2}, torch::kInt64)}}, "no tokens");
    refused({{"text_emb", text}, {"text_len", torch::tensor({1, 2, 3}, torch::kInt64)}}, "text_len");
    refused({{"text_emb", text}, {"text_mask", torch::tensor({{1, 0, 1}, {1, 1, 0}}, torch::kInt64)}},
            "ones followed by zeros");
    refused({{"text_emb", text}, {"text_mask", torch::tensor({{1, 2, 0}, {1, 1, 0}}, torch::kInt64)}},
            "other than 0 and 1");
    refused({{"text_emb", text}, {"text_mask", torch::ones({2, 4}, torch::kInt64)}}, "shape [N, L]");
    refused({{"text_tokens", torch::randn({5, kWidth})}, {"text_len", torch::tensor({2, 2}, torch::kInt64)}},
            "sums to 4 tokens");
    refused({{"text_tokens", torch::randn({4, kWidth})}}, "needs \"text_len\"");
    refused({{"text_emb", text}, {"text_tokens", torch::randn({4, kWidth})}}, "both");
    refused({{"text_len", torch::tensor({1, 1}, torch::kInt64)}}, "no \"text_emb\"");
    auto nan_text = text.clone();
    nan_text[1][2][3] = std::numeric_limits<float>::quiet_NaN();
    refused({{"text_emb", nan_text}}, "non-finite");
    refused({{"text_emb", torch::randn({3, 3, kWidth})}}, "[N, L, D]");
}
