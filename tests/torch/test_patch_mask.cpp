// Patch masking (MicroDiT's deferred masking, the unit's `patch_mask`): off it changes nothing;
// on, each sample keeps the specified count of tokens drawn from its own stream, the masked
// model trains, units stay reproducible, and the cnn and bad ratios are refused.
#include <torch/torch.h>

#include "doctest_after_torch.h"
#include "protocol.h"
#include "torch/model_state.h"
#include "torch/models/dit.h"
#include "torch/rectified_flow.h"
#include "torch/shard_data.h"
#include "torch/trainer.h"
#include "torch/workload.h"
#include "unit_random.h"

using namespace tessera::common;

namespace {

constexpr std::int64_t kRows = 64;
constexpr std::int64_t kSide = 8;  // 4×8×8 latents: 16 tokens of 2×2 patches

// A small learnable set: each class is a fixed latent pattern plus a little noise.
ShardData patterned_data() {
    torch::manual_seed(21);
    auto patterns = torch::randn({4, 4, kSide, kSide});
    ShardData data;
    data.labels = torch::arange(kRows, torch::kInt64) % 4;
    data.inputs = patterns.index_select(0, data.labels) + 0.1 * torch::randn({kRows, 4, kSide, kSide});
    return data;
}

TrainConfig small_config(double patch_mask) {
    TrainConfig config;
    config.steps = 40;
    config.batch_size = 16;
    config.lr = 4e-3;
    config.warmup_steps = 5;
    config.seed = 1234567;
    config.patch_mask = patch_mask;
    return config;
}

TorchTensorMap initial_weights(const std::string& preset, const ShardData& data) {
    return state_of(*make_workload(preset, data_shape_of(data, 10), 3).value()->module());
}

double max_difference(const TorchTensorMap& a, const TorchTensorMap& b) {
    double most = 0;
    for (const auto& [name, tensor] : a) most = std::max(most, (tensor - b.at(name)).abs().max().item<double>());
    return most;
}

std::vector<std::int64_t> values_of(const torch::Tensor& t) {
    auto flat = t.to(torch::kInt64).contiguous();
    return {flat.data_ptr<std::int64_t>(), flat.data_ptr<std::int64_t>() + flat.numel()};
}

}  // namespace

TEST_CASE("the kept count is max(1, floor((1 - r) * N + 0.5))") {
    CHECK(kept_token_count(16, 0.75) == 4);
    CHECK(kept_token_count(256, 0.75) == 64);
    CHECK(kept_token_count(10, 0.9) == 1);    // (1 − 0.9)·10 is 0.99999… in double: rounded, not cut
    CHECK(kept_token_count(10, 0.7) == 3);
    CHECK(kept_token_count(16, 0.99) == 1);   // never fewer than one
    CHECK(kept_token_count(16, 0.5) == 8);
    CHECK(kept_token_count(6, 0.25) == 5);    // 4.5 rounds up
    CHECK(kept_token_count(16, 0.0) == 16);
}

TEST_CASE("each sample keeps the first K of its own Fisher-Yates permutation, ascending") {
    UnitStream stream(1234567, DrawPurpose::PatchMask, 3);
    auto kept = unit_kept_tokens(stream, 3, 16, 4);
    REQUIRE(kept.size() == 12);
    for (std::int64_t row = 0; row < 3; ++row) {
        // Sample r's permutation uses words r·15 … r·15 + 14, as unit_permutation does words 0 … 14.
        std::vector<std::int64_t> order(16);
        for (std::int64_t i = 0; i < 16; ++i) order[static_cast<std::size_t>(i)] = i;
        for (std::uint64_t k = 0; k < 15; ++k) {
            auto i = 15 - k;
            auto j = (static_cast<unsigned __int128>(stream.word(static_cast<std::uint64_t>(row) * 15 + k)) * (i + 1)) >> 64;
            std::swap(order[i], order[static_cast<std::size_t>(j)]);
        }
        std::vector<std::int64_t> expected(order.begin(), order.begin() + 4);
        std::sort(expected.begin(), expected.end());
        std::vector<std::int64_t> got(kept.begin() + row * 4, kept.begin() + row * 4 + 4);
        CHECK(got == expected);
    }
    // Row 0 is unit_permutation's own first four; another row is another draw.
    auto first = unit_permutation(stream, 16);
    std::vector<std::int64_t> head(first.begin(), first.begin() + 4);
    std::sort(head.begin(), head.end());
    CHECK(std::vector<std::int64_t>(kept.begin(), kept.begin() + 4) == head);
    CHECK(std::vector<std::int64_t>(kept.begin() + 4, kept.begin() + 8) != head);
}

TEST_CASE("with r = 0 a DiT draws and computes its loss as before; with r > 0 the draws hold the kept tokens") {
    auto data = patterned_data();
    auto workload = make_workload("dit-tiny", data_shape_of(data, 10), 3).value();
    Batch batch{data.inputs.slice(0, 0, 16), data.labels.slice(0, 0, 16), {}, {}, {}};
    workload->draw(batch, 99, 5);
    // r = 0: the three draws of draw_flow and the full-grid loss, bit for bit.
    REQUIRE(batch.draws.size() == 3);
    auto flow = draw_flow(batch.inputs, 99, 5);
    CHECK(torch::equal(batch.draws[1], flow.noise));
    auto& dit = *dit_of(*workload);
    auto expected = flow_matching_loss_at(dit, batch.inputs, dit->dropped(condition_of(batch), flow.drop), flow.t,
                                          flow.noise);
    CHECK(workload->loss(batch).item<float>() == expected.item<float>());

    // r = 0.75: a fourth draw, (B, K) with K = 4 of 16 tokens, ascending, from the PatchMask stream.
    workload->set_patch_mask(0.75);
    Batch masked{batch.inputs, batch.labels, {}, {}, {}};
    workload->draw(masked, 99, 5);
    REQUIRE(masked.draws.size() == 4);
    const auto& keep = masked.draws[3];
    CHECK(keep.sizes() == torch::IntArrayRef({16, 4}));
    CHECK(values_of(keep) == unit_kept_tokens(UnitStream(99, DrawPurpose::PatchMask, 5), 16, 16, 4));
    CHECK(keep.diff(1, 1).gt(0).all().item<bool>());
    // The other draws do not move: the mask has its own stream.
    CHECK(torch::equal(masked.draws[1], batch.draws[1]));
    CHECK(workload->loss(masked).item<float>() != expected.item<float>());
}

TEST_CASE("the masked model computes only the kept patches, and they match the full grid's where masking is a no-op") {
    torch::manual_seed(4);
    DitConfig config;
    config.hidden = 32;
    config.depth = 3;
    config.heads = 2;
    config.mixer_depth = 1;
    Dit dit(config);
    {
        torch::NoGradGuard no_grad;
        for (auto& p : dit->parameters()) p.add_(torch::randn_like(p) * 0.05);
    }
    auto x = torch::randn({2, 4, 8, 8});
    auto t = torch::tensor({0.3f, 0.8f});
    DitCondition condition{torch::tensor({1, 2}, torch::kInt64), {}, {}};
    auto full = dit->patchify(dit->forward(x, t, condition));
    // Keeping every token is the unmasked model, patch for patch.
    auto all = torch::arange(16, torch::kInt64).unsqueeze(0).expand({2, 16}).contiguous();
    CHECK((dit->forward_kept(x, t, condition, all) - full).abs().max().item<double>() < 1e-5);
    // Keeping four: (B, 4, P), different from the full grid's (the blocks after the mixer lost context).
    auto keep = torch::tensor({{0, 5, 10, 15}, {1, 2, 3, 4}}, torch::kInt64);
    auto kept = dit->forward_kept(x, t, condition, keep);
    CHECK(kept.sizes() == torch::IntArrayRef({2, 4, 16}));
    auto same_places = full.gather(1, keep.unsqueeze(-1).expand({2, 4, 16}));
    CHECK((kept - same_places).abs().max().item<double>() > 1e-4);
    // A dropped patch reaches the kept ones through the mixer only: without one (naive masking)
    // changing it changes nothing, with the mixer it does.
    auto x2 = x.clone();
    x2.index_put_({0, torch::indexing::Slice(), 0, 2}, 5.0);  // token 1 of sample 0, dropped there
    CHECK((dit->forward_kept(x2, t, condition, keep) - kept).abs().max().item<double>() > 1e-6);
    config.mixer_depth = 0;
    Dit naive(config);
    REQUIRE(load_state(*naive, state_of(*dit)).ok());
    auto naive_kept = naive->forward_kept(x, t, condition, keep);
    CHECK((naive->forward_kept(x2, t, condition, keep) - naive_kept).abs().max().item<double>() == 0.0);
}

TEST_CASE("a masked unit trains, is reproducible from its seed, and differs from the unmasked one") {
    auto data = patterned_data();
    for (const std::string preset : {"dit-tiny", "dit-tiny-text"}) {
        CAPTURE(preset);
        auto unit_data = data;
        if (preset.ends_with("-text")) {
            // Captions of 3 tokens × 8, one per class, packed.
            torch::manual_seed(5);
            auto words = torch::randn({4, 3, 8});
            unit_data.text_len = torch::full({kRows}, 3, torch::kInt64);
            unit_data.text_start = torch::arange(kRows, torch::kInt64) * 3;
            unit_data.text_tokens = words.index_select(0, data.labels).reshape({kRows * 3, 8});
        }
        auto theta0 = initial_weights(preset, unit_data);
        auto config = small_config(0.75);
        auto masked = train(preset, theta0, unit_data, config).value();
        MESSAGE(preset << " masked loss " << masked.stats.loss_start << " -> " << masked.stats.loss_end);
        CHECK(masked.stats.loss_end < 0.8 * masked.stats.loss_start);
        auto again = train(preset, theta0, unit_data, config).value();
        CHECK(max_difference(masked.delta, again.delta) == 0.0);
        config.seed += 1;
        auto other_seed = train(preset, theta0, unit_data, config).value();
        CHECK(max_difference(masked.delta, other_seed.delta) > 1e-4);
        auto plain = train(preset, theta0, unit_data, small_config(0)).value();
        CHECK(max_difference(masked.delta, plain.delta) > 1e-4);
        // Micro-batches split the batch's kept tokens by rows: a step's update is the whole batch's
        // to rounding.
        config.seed -= 1;
        config.steps = 1;
        auto whole = train(preset, theta0, unit_data, config).value();
        config.micro_batch = 4;
        auto micro = train(preset, theta0, unit_data, config).value();
        for (const auto& [name, delta] : whole.delta)
            CHECK(torch::allclose(delta, micro.delta.at(name), 1e-4, 1e-6));
    }
}

TEST_CASE("patch masking is refused for the cnn and outside [0, 1)") {
    ShardData pixels;
    pixels.inputs = torch::randn({8, 1, 28, 28});
    pixels.labels = torch::zeros({8}, torch::kInt64);
    auto theta0 = initial_weights("cnn", pixels);
    auto config = small_config(0.5);
    config.steps = 1;
    auto refused = train("cnn", theta0, pixels, config);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.message().find("DiT") != std::string::npos);

    auto data = patterned_data();
    auto dit_theta0 = initial_weights("dit-tiny", data);
    for (double bad : {1.0, -0.1}) {
        config.patch_mask = bad;
        auto out = train("dit-tiny", dit_theta0, data, config);
        REQUIRE_FALSE(out.ok());
        CHECK(out.message().find("[0, 1)") != std::string::npos);
    }
    // The unit's field: written only when set, read back, and 1 refused by the reader's bound.
    Hyperparameters hyper{.local_steps = 1, .batch_size = 1, .lr = 1e-3, .seed = 1};
    CHECK(train_config_for(hyper).patch_mask == 0.0);
    hyper.patch_mask = 0.75;
    CHECK(train_config_for(hyper).patch_mask == 0.75);
    CHECK(kMaxPatchMask < 1.0);
}
