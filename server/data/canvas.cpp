// Canvas geometry, captions, the held-out scenes and the seeded draws of `prepare canvases`.
#include "canvas.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "seeded_draws.h"

namespace tessera::data {
namespace {

constexpr double kDarkScale = 0.4;
constexpr double kLightGamma = 0.4;
constexpr std::uint64_t kHeldoutStream = 1;
constexpr std::uint64_t kAttributeStream = 2;

// Plain half the time, dark and light a quarter each.
Attribute draw_attribute(SeededDraws& draws) {
    switch (draws.below(4)) {
        case 2: return Attribute::Dark;
        case 3: return Attribute::Light;
        default: return Attribute::Plain;
    }
}

const char* relation_words(Relation relation) {
    switch (relation) {
        case Relation::LeftOf: return "left of";
        case Relation::Above: return "above";
        case Relation::RightOf: return "right of";
        case Relation::Below: return "below";
    }
    return "";
}

std::array<std::uint8_t, 256> attribute_table(Attribute attribute) {
    std::array<std::uint8_t, 256> table{};
    for (int p = 0; p < 256; ++p) table[p] = attribute_pixel(attribute, static_cast<std::uint8_t>(p));
    return table;
}

std::vector<Scene> all_scenes() {
    std::vector<Scene> scenes;
    for (bool vertical : {false, true})
        for (std::int64_t first = 0; first < kNouns; ++first)
            for (std::int64_t second = 0; second < kNouns; ++second)
                if (first != second) scenes.push_back({first, second, vertical});
    return scenes;
}

}  // namespace

const std::vector<std::string>& canvas_vocabulary() {
    static const std::vector<std::string> words = {"a",     "left", "right",   "of",    "above", "below", "dark",
                                                   "light", "top",  "trouser", "dress", "shoe",  "bag",   "boot"};
    return words;
}

const std::array<const char*, kNouns>& noun_words() {
    static const std::array<const char*, kNouns> words = {"top", "trouser", "dress", "shoe", "bag", "boot"};
    return words;
}

std::int64_t noun_of_class(std::int64_t item_class) {
    // t-shirt, trouser, pullover, dress, coat, sandal, shirt, sneaker, bag, boot
    static constexpr std::array<std::int64_t, kItemClasses> nouns = {0, 1, 0, 2, 0, 3, 0, 3, 4, 5};
    return nouns.at(static_cast<std::size_t>(item_class));
}

std::array<std::int64_t, 2> CanvasSpec::quadrants() const {
    // Row r holds quadrants 2r (left) and 2r + 1 (right); column c holds c (top) and 2 + c.
    switch (relation) {
        case Relation::LeftOf: return {2 * line, 2 * line + 1};
        case Relation::RightOf: return {2 * line + 1, 2 * line};
        case Relation::Above: return {line, 2 + line};
        case Relation::Below: return {2 + line, line};
    }
    return {0, 1};
}

std::string caption_of(const CanvasSpec& spec) {
    auto item = [&](int k) {
        std::string words = "a ";
        if (spec.attributes[k] == Attribute::Dark) words += "dark ";
        if (spec.attributes[k] == Attribute::Light) words += "light ";
        return words + noun_words()[spec.nouns[k]];
    };
    return item(0) + " " + relation_words(spec.relation) + " " + item(1);
}

Scene scene_of(const CanvasSpec& spec) {
    bool vertical = spec.relation == Relation::Above || spec.relation == Relation::Below;
    bool a_first = spec.relation == Relation::LeftOf || spec.relation == Relation::Above;
    return a_first ? Scene{spec.nouns[0], spec.nouns[1], vertical} : Scene{spec.nouns[1], spec.nouns[0], vertical};
}

const std::vector<Scene>& heldout_scenes() {
    static const std::vector<Scene> held = [] {
        auto scenes = all_scenes();
        SeededDraws draws(kHeldoutSeed, kHeldoutStream);
        for (auto i = static_cast<std::int64_t>(scenes.size()) - 1; i > 0; --i)
            std::swap(scenes[i], scenes[draws.below(i + 1)]);
        std::vector<Scene> chosen;
        for (const auto& s : scenes) {
            if (static_cast<std::int64_t>(chosen.size()) == kHeldoutScenes) break;
            Scene mirror{s.second, s.first, s.vertical};
            if (std::find(chosen.begin(), chosen.end(), mirror) == chosen.end()) chosen.push_back(s);
        }
        std::sort(chosen.begin(), chosen.end());
        return chosen;
    }();
    return held;
}

bool is_heldout(const Scene& scene) {
    const auto& held = heldout_scenes();
    return std::binary_search(held.begin(), held.end(), scene);
}

std::uint8_t attribute_pixel(Attribute attribute, std::uint8_t pixel) {
    double p = pixel;
    switch (attribute) {
        case Attribute::Dark: return static_cast<std::uint8_t>(std::lround(p * kDarkScale));
        case Attribute::Light: return static_cast<std::uint8_t>(std::lround(255.0 * std::pow(p / 255.0, kLightGamma)));
        case Attribute::Plain: break;
    }
    return pixel;
}

torch::Tensor compose_canvases(const std::vector<CanvasSpec>& specs, const torch::Tensor& images) {
    const std::array<std::array<std::uint8_t, 256>, 3> tables = {
        attribute_table(Attribute::Plain), attribute_table(Attribute::Dark), attribute_table(Attribute::Light)};
    TORCH_CHECK(images.scalar_type() == torch::kUInt8 && images.dim() == 4 && images.size(2) == kItemSide &&
                    images.size(3) == kItemSide,
                "canvas items must be u8 (M, 1, 28, 28)");
    auto source = images.contiguous();
    auto n = static_cast<std::int64_t>(specs.size());
    auto canvases = torch::zeros({n, 1, kCanvasSide, kCanvasSide}, torch::kUInt8);
    const auto* in = source.data_ptr<std::uint8_t>();
    auto* out = canvases.data_ptr<std::uint8_t>();
    for (std::int64_t i = 0; i < n; ++i) {
        const auto& spec = specs[static_cast<std::size_t>(i)];
        auto quadrants = spec.quadrants();
        for (int k = 0; k < 2; ++k) {
            TORCH_CHECK(spec.images[k] >= 0 && spec.images[k] < source.size(0) && spec.line >= 0 && spec.line < 2 &&
                            tables.size() > static_cast<std::size_t>(spec.attributes[k]),
                        "canvas ", i, " names an image, line or attribute that does not exist");
            const auto& table = tables[static_cast<std::size_t>(spec.attributes[k])];
            const auto* item = in + spec.images[k] * kItemSide * kItemSide;
            auto top = (quadrants[k] / 2) * kCellSide + kItemOffset,
                 left = (quadrants[k] % 2) * kCellSide + kItemOffset;
            auto* canvas = out + i * kCanvasSide * kCanvasSide;
            for (std::int64_t y = 0; y < kItemSide; ++y)
                for (std::int64_t x = 0; x < kItemSide; ++x)
                    canvas[(top + y) * kCanvasSide + left + x] = table[item[y * kItemSide + x]];
        }
    }
    return canvases;
}

torch::Tensor items_with_attributes(const torch::Tensor& images, std::uint64_t seed) {
    auto out = images.contiguous().clone();
    auto* pixels = out.data_ptr<std::uint8_t>();
    SeededDraws draws(seed, kAttributeStream);
    for (std::int64_t i = 0; i < out.size(0); ++i) {
        auto table = attribute_table(draw_attribute(draws));
        for (std::int64_t p = 0; p < kItemSide * kItemSide; ++p)
            pixels[i * kItemSide * kItemSide + p] = table[pixels[i * kItemSide * kItemSide + p]];
    }
    return out;
}

common::Result<std::vector<CanvasSpec>> draw_canvases(std::int64_t count, const torch::Tensor& labels, bool heldout,
                                                      std::uint64_t seed, std::uint64_t stream) {
    std::array<std::vector<std::int64_t>, kNouns> by_noun;
    auto values = labels.contiguous();
    for (std::int64_t i = 0; i < values.size(0); ++i) {
        auto c = values.data_ptr<std::int64_t>()[i];
        if (c < 0 || c >= kItemClasses) return common::make_error("an image's class is outside 0 … 9");
        by_noun[static_cast<std::size_t>(noun_of_class(c))].push_back(i);
    }
    for (std::int64_t n = 0; n < kNouns; ++n)
        if (by_noun[static_cast<std::size_t>(n)].empty())
            return common::make_error(std::string("no image of a \"") + noun_words()[n] + "\" to draw canvases from");
    std::vector<Scene> scenes;
    for (const auto& s : all_scenes())
        if (is_heldout(s) == heldout) scenes.push_back(s);
    SeededDraws draws(seed, stream);
    std::vector<CanvasSpec> specs(static_cast<std::size_t>(count));
    for (auto& spec : specs) {
        const auto& scene = scenes[static_cast<std::size_t>(draws.below(static_cast<std::int64_t>(scenes.size())))];
        bool mirrored = draws.below(2) == 1;  // "B right of A" rather than "A left of B"
        spec.nouns = mirrored ? std::array{scene.second, scene.first} : std::array{scene.first, scene.second};
        spec.relation = scene.vertical ? (mirrored ? Relation::Below : Relation::Above)
                                       : (mirrored ? Relation::RightOf : Relation::LeftOf);
        spec.line = draws.below(2);
        for (int k = 0; k < 2; ++k) spec.attributes[k] = draw_attribute(draws);
        for (int k = 0; k < 2; ++k) {
            const auto& pool = by_noun[static_cast<std::size_t>(spec.nouns[k])];
            spec.images[k] = pool[static_cast<std::size_t>(draws.below(static_cast<std::int64_t>(pool.size())))];
        }
    }
    return specs;
}

}  // namespace tessera::data
