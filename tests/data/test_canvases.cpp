// `tessera-data prepare canvases`: the dataset loads as training loads it; captions, their
// embeddings and the ground truth agree; the stand-in text encoder hears word order and
// refuses unknown words; held-out scenes stay out of training; canvases put the items where
// the caption says; the optional manifest entries; reuse.
#include <torch/torch.h>

#include <sys/wait.h>

#include <cstdio>
#include <memory>
#include <set>

#include "canvas.h"
#include "dataset_manifest.h"
#include "doctest_after_torch.h"
#include "fashion_mnist.h"
#include "file_io.h"
#include "shell_run.h"
#include "prepare.h"
#include "safetensors.h"
#include "shard_writer.h"
#include "stand_in_text_encoder.h"
#include "temp_dir.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "zstd_codec.h"

using namespace tessera::common;
using namespace tessera::data;
using tessera::testing::TempDir;

namespace {

constexpr std::int64_t kCanvases = 600;  // → 6 training shards of 100, 100 validation, 100 held out
// Training the autoencoder is the slow part (about 0.2 s a step on 2 cores); 40 steps already
// place the items (the decoded-placement check below) at a canvas MSE of about 0.07.
constexpr std::int64_t kAutoencoderSteps = 40;

// Prepared once per test process, as tests/support/small_dataset.h does.
const std::filesystem::path& canvas_dataset() {
    static std::unique_ptr<TempDir> dir;
    if (!dir) {
        dir = std::make_unique<TempDir>();
        PrepareOptions options;
        options.out = dir->path();
        options.limit = kCanvases;
        options.shard_size = 100;
        options.autoencoder_steps = kAutoencoderSteps;
        auto status = prepare_canvases(options);
        if (!status) throw std::runtime_error("preparing the canvases failed: " + status.message());
    }
    return dir->path();
}

// Every tensor of a shard, including those load_shard() ignores.
TorchTensorMap raw_shard(const std::filesystem::path& path) {
    auto bytes = read_file(path, kMaxShardBytes).value();
    auto raw = zstd_decompress(bytes, kMaxShardBytes).value();
    return to_torch_map(parse_safetensors(raw).value()).value();
}

std::string caption_at(const torch::Tensor& captions, std::int64_t i) {
    auto row = captions[i];
    std::string text;
    for (std::int64_t b = 0; b < row.size(0) && row[b].item<std::uint8_t>() != 0; ++b)
        text += static_cast<char>(row[b].item<std::uint8_t>());
    return text;
}

Scene scene_at(TorchTensorMap& shard, std::int64_t i) {
    CanvasSpec spec;
    spec.nouns = {shard["slot_classes"][i][0].item<std::int64_t>(), shard["slot_classes"][i][1].item<std::int64_t>()};
    spec.relation = static_cast<Relation>(shard["relation"][i].item<std::int64_t>());
    return scene_of(spec);
}

std::vector<std::filesystem::path> shard_paths(const std::filesystem::path& dir, const DatasetManifest& manifest) {
    std::vector<std::filesystem::path> paths;
    for (const auto& f : manifest.train) paths.push_back(dir / f.file);
    paths.push_back(dir / manifest.validation.file);
    paths.push_back(dir / manifest.heldout.file);
    return paths;
}

using tessera::testing::Run;
using tessera::testing::run_tool;

}  // namespace

TEST_CASE("prepare canvases writes a complete dataset that training loads") {
    const auto& dir = canvas_dataset();
    auto manifest = load_dataset_manifest(dir / "dataset.json");
    REQUIRE(manifest.ok());
    CHECK(manifest->name == "canvases");
    CHECK(manifest->kind == "latents");
    CHECK(manifest->sample_shape == std::vector<std::int64_t>{4, 16, 16});
    CHECK(manifest->text_dim == kStandInTextDim);
    CHECK(manifest->classes == std::vector<std::string>(noun_words().begin(), noun_words().end()));
    CHECK(manifest->train.size() == 6);
    CHECK(manifest->validation.samples == kCanvases / 6);
    CHECK(manifest->heldout.file == "heldout.safetensors.zst");
    CHECK(manifest->heldout.samples == kCanvases / 6);
    CHECK(manifest->text_encoder.file == kTextEncoderFile);
    CHECK(verify_dataset_files(dir, *manifest).ok());
    CHECK(std::filesystem::exists(dir / "preview.png"));
    // 40 steps reconstruct far better than an untrained autoencoder (about 0.9 on canvases);
    // the full 2000-step run is in docs/dataset_format.md.
    CHECK(manifest->reconstruction_mse > 0);
    CHECK(manifest->reconstruction_mse < 0.12);

    std::vector<ShardData> shards;
    for (const auto& path : shard_paths(dir, *manifest)) {
        auto shard = load_shard_file(path);
        REQUIRE_MESSAGE(shard.ok(), shard.message());
        CHECK(shard->inputs.sizes() == torch::IntArrayRef{shard->size(), 4, 16, 16});
        REQUIRE(shard->has_captions());
        CHECK(shard->text_dim() == kStandInTextDim);
        CHECK(shard->text_len.min().item<std::int64_t>() >= 5);  // "a bag above a top"
        CHECK(shard->text_len.max().item<std::int64_t>() <= 8);  // "a dark bag left of a light top"
        CHECK(shard->labels.max().item<std::int64_t>() < kNouns);
        shards.push_back(std::move(shard).value());
    }
    shards.resize(manifest->train.size());
    auto training = concat_shards(shards).value();
    CHECK(training.size() == kCanvases);
    CHECK(training.inputs.std().item<double>() == doctest::Approx(1.0).epsilon(0.05));
}

TEST_CASE("each canvas's caption, embedding and ground truth agree") {
    const auto& dir = canvas_dataset();
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    auto encoder = StandInTextEncoder::load(dir / kTextEncoderFile);
    REQUIRE_MESSAGE(encoder.ok(), encoder.message());
    std::set<std::int64_t> relations, lengths;
    for (const auto& path : shard_paths(dir, manifest)) {
        auto shard = raw_shard(path);
        auto n = shard["labels"].size(0);
        CHECK((shard["captions"].scalar_type() == torch::kUInt8));
        CHECK(shard["captions"].sizes() == torch::IntArrayRef{n, kCaptionBytes});
        CHECK(shard["slot_classes"].sizes() == torch::IntArrayRef{n, 2});
        CHECK(shard["attributes"].sizes() == torch::IntArrayRef{n, 2});
        CHECK((shard["text_tokens"].scalar_type() == torch::kFloat16));
        CHECK(torch::equal(shard["labels"], shard["slot_classes"].select(1, 0)));
        auto ends = shard["text_len"].cumsum(0);
        for (std::int64_t i = 0; i < n; ++i) {
            auto caption = caption_at(shard["captions"], i);
            CanvasSpec spec;
            spec.nouns = {shard["slot_classes"][i][0].item<std::int64_t>(),
                          shard["slot_classes"][i][1].item<std::int64_t>()};
            spec.relation = static_cast<Relation>(shard["relation"][i].item<std::int64_t>());
            spec.attributes = {static_cast<Attribute>(shard["attributes"][i][0].item<std::int64_t>()),
                               static_cast<Attribute>(shard["attributes"][i][1].item<std::int64_t>())};
            CHECK(caption == caption_of(spec));
            // The stored quadrants are those of one of the relation's two lines.
            auto quadrants = std::array{shard["quadrants"][i][0].item<std::int64_t>(),
                                        shard["quadrants"][i][1].item<std::int64_t>()};
            spec.line = 0;
            auto line0 = spec.quadrants();
            spec.line = 1;
            CHECK((quadrants == line0 || quadrants == spec.quadrants()));

            auto embedded = encoder->embed_caption(caption);
            REQUIRE_MESSAGE(embedded.ok(), embedded.message());
            auto len = shard["text_len"][i].item<std::int64_t>(), end = ends[i].item<std::int64_t>();
            CHECK(embedded->size(0) == len);
            CHECK(torch::equal(embedded->to(torch::kFloat16), shard["text_tokens"].slice(0, end - len, end)));
            relations.insert(static_cast<std::int64_t>(spec.relation));
            lengths.insert(len);
        }
    }
    CHECK(relations.size() == 4);
    CHECK(lengths.size() == 4);  // 5 to 8 words
}

TEST_CASE("the stand-in text encoder hears word order and refuses words it does not know") {
    auto encoder = StandInTextEncoder::load(canvas_dataset() / kTextEncoderFile).value();
    CHECK(encoder.vocabulary() == canvas_vocabulary());
    auto ab = encoder.embed_caption("a bag left of a top").value();
    auto ba = encoder.embed_caption("a top left of a bag").value();
    CHECK(ab.sizes() == torch::IntArrayRef{6, kStandInTextDim});
    CHECK(ba.sizes() == ab.sizes());
    CHECK((ab - ba).abs().max().item<double>() > 0.5);
    CHECK(torch::equal(encoder.embed_caption("A  bag left of a top.").value(), ab));
    // A token knows its neighbours: "bag" before "above" is not "bag" before "below", but a token
    // two words from the change is untouched.
    CHECK(encoder.contextual());
    auto above = encoder.embed_caption("a bag above a top").value();
    auto below = encoder.embed_caption("a bag below a top").value();
    CHECK((above[1] - below[1]).abs().max().item<double>() > 0.5);
    CHECK(torch::equal(above[0], below[0]));
    CHECK(torch::equal(above[4], below[4]));

    auto unknown = encoder.embed_caption("a zebra left of a bag");
    REQUIRE_FALSE(unknown.ok());
    CHECK(unknown.message().find("\"zebra\"") != std::string::npos);
    CHECK(encoder.embed_caption("a bag left of a\x01").message().find("\"a?\"") != std::string::npos);
    CHECK_FALSE(encoder.embed_caption("  . ").ok());
    std::string long_prompt;
    for (int i = 0; i <= kMaxCaptionWords; ++i) long_prompt += "a ";
    CHECK(encoder.embed_caption(long_prompt).message().find("at most") != std::string::npos);

    // The file is the encoder: written, parsed back, the same; the same seed makes the same one.
    auto again = StandInTextEncoder::parse(encoder.to_safetensors().value()).value();
    CHECK(torch::equal(again.embed_caption("a dark boot below a light top").value(),
                       encoder.embed_caption("a dark boot below a light top").value()));
    auto fresh = StandInTextEncoder::create(canvas_vocabulary(), kStandInTextDim, 0);
    CHECK(torch::equal(fresh.embed_caption("a bag above a top").value(),
                       encoder.embed_caption("a bag above a top").value()));
    CHECK(StandInTextEncoder::parse(to_safetensors({{"word_embeddings", torch::zeros({2, 4})}}).value())
              .message()
              .find("not a tessera.stand-in-text-encoder") != std::string::npos);
}

TEST_CASE("a stand-in text encoder file without context matrices embeds word plus position") {
    auto bytes = StandInTextEncoder::create(canvas_vocabulary(), kStandInTextDim, 0).to_safetensors().value();
    auto parsed = parse_safetensors(bytes).value();
    auto tensors = to_torch_map(parsed).value();
    TensorMetadata metadata = parsed.metadata();
    auto without = [&](std::initializer_list<const char*> names) {
        auto kept = tensors;
        for (const auto* name : names) kept.erase(name);
        return StandInTextEncoder::parse(to_safetensors(kept, metadata).value());
    };
    auto old = without({"context_left", "context_right"});
    REQUIRE_MESSAGE(old.ok(), old.message());
    CHECK_FALSE(old->contextual());
    auto tokens = old->embed_caption("a bag above a top").value();
    auto ids = old->tokenize("a bag above a top").value();
    auto expected =
        tensors["word_embeddings"].index_select(0, torch::tensor(ids)) + tensors["position_codes"].slice(0, 0, 5);
    CHECK(torch::equal(tokens, expected));

    CHECK(without({"context_right"}).message().find("or neither") != std::string::npos);
    auto wrong = tensors;
    wrong["context_left"] = torch::zeros({kStandInTextDim, 3});
    CHECK(StandInTextEncoder::parse(to_safetensors(wrong, metadata).value()).message().find("[D, D]") !=
          std::string::npos);
    wrong = tensors;
    wrong["context_right"][0][0] = std::nanf("");
    CHECK(StandInTextEncoder::parse(to_safetensors(wrong, metadata).value()).message().find("non-finite") !=
          std::string::npos);
}

TEST_CASE("held-out scenes appear in the held-out shard only") {
    const auto& held = heldout_scenes();
    REQUIRE(held.size() == static_cast<std::size_t>(kHeldoutScenes));
    // The list in docs/dataset_format.md, "prepare canvases": first, last, and "shoe left of bag".
    CHECK(held.front() == Scene{0, 1, true});
    CHECK(held.back() == Scene{3, 4, false});
    CHECK(is_heldout(Scene{3, 4, false}));
    CHECK_FALSE(is_heldout(Scene{4, 3, false}));
    for (const auto& s : held) {
        CHECK(s.first != s.second);
        CHECK_FALSE(is_heldout(Scene{s.second, s.first, s.vertical}));  // training shows it mirrored
    }
    const auto& dir = canvas_dataset();
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    for (const auto& path : shard_paths(dir, manifest)) {
        bool heldout_shard = path.filename() == manifest.heldout.file;
        auto shard = raw_shard(path);
        std::int64_t held_out = 0, n = shard["labels"].size(0);
        for (std::int64_t i = 0; i < n; ++i) held_out += is_heldout(scene_at(shard, i)) ? 1 : 0;
        CHECK_MESSAGE(held_out == (heldout_shard ? n : 0), path.filename().string());
    }
    // The scene is the picture's, however the caption phrases it.
    CanvasSpec left{{3, 4}, Relation::LeftOf, {}, 0, {}};
    CanvasSpec right{{4, 3}, Relation::RightOf, {}, 0, {}};
    CHECK(scene_of(left) == scene_of(right));
    CHECK(scene_of(left) != scene_of(CanvasSpec{{4, 3}, Relation::LeftOf, {}, 0, {}}));
    CHECK(scene_of(left) != scene_of(CanvasSpec{{3, 4}, Relation::Above, {}, 0, {}}));
}

TEST_CASE("a canvas puts its items where its caption says") {
    // Two flat items, 200 and 100, so each pixel says which item it came from.
    auto images = torch::stack({torch::full({1, kItemSide, kItemSide}, 200, torch::kUInt8),
                                torch::full({1, kItemSide, kItemSide}, 100, torch::kUInt8)});
    for (auto relation : {Relation::LeftOf, Relation::Above, Relation::RightOf, Relation::Below})
        for (std::int64_t line = 0; line < 2; ++line) {
            CanvasSpec spec{{3, 4}, relation, {Attribute::Dark, Attribute::Plain}, line, {0, 1}};
            auto canvas = compose_canvases({spec}, images)[0][0];
            auto where = spec.quadrants();
            // Item centres (row, column) in pixels, from the pixels themselves.
            auto centre = [&](std::uint8_t value) {
                auto at = (canvas == value).nonzero().to(torch::kFloat64);
                REQUIRE(at.size(0) == kItemSide * kItemSide);
                return std::pair{at.select(1, 0).mean().item<double>(), at.select(1, 1).mean().item<double>()};
            };
            auto a = centre(attribute_pixel(Attribute::Dark, 200)), b = centre(100);
            CHECK(attribute_pixel(Attribute::Dark, 200) == 80);
            switch (relation) {
                case Relation::LeftOf: CHECK((a.second < b.second && a.first == b.first)); break;
                case Relation::RightOf: CHECK((a.second > b.second && a.first == b.first)); break;
                case Relation::Above: CHECK((a.first < b.first && a.second == b.second)); break;
                case Relation::Below: CHECK((a.first > b.first && a.second == b.second)); break;
            }
            // A is centred in its quadrant; nothing else is drawn.
            CHECK(a.first == doctest::Approx((where[0] / 2) * kCellSide + kCellSide / 2.0 - 0.5));
            CHECK(a.second == doctest::Approx((where[0] % 2) * kCellSide + kCellSide / 2.0 - 0.5));
            CHECK((canvas != 0).sum().item<std::int64_t>() == 2 * kItemSide * kItemSide);
        }
    CHECK(caption_of({{3, 4}, Relation::LeftOf, {Attribute::Dark, Attribute::Plain}, 0, {}}) ==
          "a dark shoe left of a bag");
    CHECK(caption_of({{4, 0}, Relation::Below, {Attribute::Plain, Attribute::Light}, 1, {}}) ==
          "a bag below a light top");
    // Six nouns over the ten classes: the upper-body classes are tops, sandals and sneakers shoes.
    CHECK(noun_of_class(0) == 0);
    CHECK(noun_of_class(2) == 0);
    CHECK(noun_of_class(4) == 0);
    CHECK(noun_of_class(6) == 0);
    CHECK(noun_of_class(5) == noun_of_class(7));
    CHECK(std::string(noun_words()[noun_of_class(9)]) == "boot");
    CHECK(attribute_pixel(Attribute::Light, 0) == 0);
    CHECK(attribute_pixel(Attribute::Light, 100) > 100);

    // What the decoder makes of the stored latents is bright where the shard says the items are.
    const auto& dir = canvas_dataset();
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    auto shard = raw_shard(dir / manifest.validation.file);
    auto ae = load_autoencoder(dir).value();
    torch::NoGradGuard no_grad;
    auto decoded = ae.decoder->forward(shard["latents"].to(torch::kFloat32) / manifest.scale_factor);
    // (N, 4): each quadrant's mean brightness.
    auto quadrant_means = decoded.view({-1, 2, kCellSide, 2, kCellSide}).mean({2, 4}).flatten(1);
    auto brightest = std::get<0>(std::get<1>(quadrant_means.topk(2, 1)).sort(1));
    auto expected = std::get<0>(shard["quadrants"].sort(1));
    auto placed = (brightest == expected).all(1).sum().item<std::int64_t>();
    CHECK(placed >= shard["labels"].size(0) * 9 / 10);  // 98 of 100 with these 40 steps
}

TEST_CASE("dataset.json's heldout and text_encoder entries are optional") {
    TempDir dir;
    DatasetManifest manifest;
    manifest.name = "fashion-mnist";
    manifest.sample_shape = {4, 8, 8};
    manifest.classes = {"a"};
    manifest.train = {{"train-000.safetensors.zst", std::string(64, 'a'), 10, 1}};
    manifest.validation = {"validation.safetensors.zst", std::string(64, 'b'), 10, 1};
    REQUIRE(save_dataset_manifest(dir / "old.json", manifest).ok());
    auto text = read_file(dir / "old.json", 1 << 20).value();
    CHECK(std::string(text.begin(), text.end()).find("heldout") == std::string::npos);
    auto old = load_dataset_manifest(dir / "old.json").value();
    CHECK(old.heldout.file.empty());
    CHECK(old.text_encoder.file.empty());

    manifest.heldout = {"heldout.safetensors.zst", std::string(64, 'c'), 10, 1};
    manifest.text_encoder = {"text_encoder.safetensors", std::string(64, 'd'), 10, 0};
    REQUIRE(save_dataset_manifest(dir / "new.json", manifest).ok());
    auto loaded = load_dataset_manifest(dir / "new.json").value();
    CHECK(loaded.heldout.file == "heldout.safetensors.zst");
    CHECK(loaded.heldout.samples == 1);
    CHECK(loaded.text_encoder.sha256 == std::string(64, 'd'));
    // Listed files are checked like the others.
    auto missing = verify_dataset_files(dir.path(), loaded);
    REQUIRE_FALSE(missing.ok());

    auto bad = std::string(text.begin(), text.end());
    bad.insert(bad.rfind('}'), ",\"heldout\":{\"file\":\"../x\",\"sha256\":\"\",\"bytes\":0,\"samples\":0}");
    REQUIRE(write_file_atomic(dir / "bad.json", as_bytes(bad)).ok());
    CHECK(load_dataset_manifest(dir / "bad.json").message().find("plain file name") != std::string::npos);
}

TEST_CASE("a second prepare reuses the canvases; a damaged set is prepared again") {
    const auto& dir = canvas_dataset();
    PrepareOptions options;
    options.out = dir;
    options.limit = kCanvases;
    options.shard_size = 100;
    options.autoencoder_steps = kAutoencoderSteps;
    auto first = std::filesystem::last_write_time(dir / "heldout.safetensors.zst");
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    REQUIRE(prepare_canvases(options).ok());
    CHECK(std::filesystem::last_write_time(dir / "heldout.safetensors.zst") == first);

    // Everything is seeded: prepared again (reusing the saved autoencoder), the shards are the same bytes.
    REQUIRE(write_file_atomic(dir / "heldout.safetensors.zst", as_bytes("damaged")).ok());
    REQUIRE(prepare_canvases(options).ok());
    auto again = load_dataset_manifest(dir / "dataset.json").value();
    CHECK(verify_dataset_files(dir, again).ok());
    CHECK(again.heldout.sha256 == manifest.heldout.sha256);
    CHECK(again.train[0].sha256 == manifest.train[0].sha256);

    // A dataset whose nouns were the ten classes (prepared before the six nouns) is stale.
    again.classes = {"t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"};
    REQUIRE(save_dataset_manifest(dir / "dataset.json", again).ok());
    REQUIRE(prepare_canvases(options).ok());
    auto remade = load_dataset_manifest(dir / "dataset.json").value();
    CHECK(remade.classes == manifest.classes);
    CHECK(remade.heldout.sha256 == manifest.heldout.sha256);

    // So is one whose text encoder ignores context (prepared before the neighbour mix).
    auto encoder_bytes = read_file(dir / kTextEncoderFile, 1 << 20).value();
    auto encoder_file = parse_safetensors(encoder_bytes).value();
    auto tensors = to_torch_map(encoder_file).value();
    tensors.erase("context_left");
    tensors.erase("context_right");
    auto old_encoder = to_safetensors(tensors, encoder_file.metadata()).value();
    remade.text_encoder = write_dataset_file(dir, kTextEncoderFile, old_encoder, 0).value();
    REQUIRE(save_dataset_manifest(dir / "dataset.json", remade).ok());
    REQUIRE(prepare_canvases(options).ok());
    CHECK(StandInTextEncoder::load(dir / kTextEncoderFile).value().contextual());
    CHECK(load_dataset_manifest(dir / "dataset.json").value().text_encoder.sha256 == manifest.text_encoder.sha256);

    options.pixels = true;
    CHECK(prepare_canvases(options).message().find("--pixels") != std::string::npos);
    auto unknown = run_tool("prepare cifar10 --out /nonexistent");
    CHECK(unknown.status == 1);
    CHECK(unknown.output.find("canvases") != std::string::npos);
}
