// Canvases of two Fashion-MNIST items with relational captions, for `prepare canvases`: the
// geometry, the caption grammar and vocabulary, the held-out rule and the seeded draws.
// Captions name six nouns, not the ten classes: the four upper-body classes (t-shirt,
// pullover, coat, shirt) are one "top" and sandals and sneakers one "shoe", so that a small
// judge can read the item a caption names off a decoded canvas (docs/dataset_format.md).
// A canvas is 64×64 pixels, four 32×32 quadrants (0 top-left, 1 top-right, 2 bottom-left,
// 3 bottom-right); its two items, each a 28×28 image padded by 2 as the autoencoder sees
// them, fill two quadrants of one row ("A left of B", "A right of B") or of one column
// ("A above B", "A below B"). Spec in docs/dataset_format.md, "prepare canvases".
#pragma once

#include <torch/types.h>

#include <array>
#include <string>
#include <vector>

#include "result.h"

namespace tessera::data {

constexpr std::int64_t kCanvasSide = 64;
constexpr std::int64_t kCellSide = 32;  // a quadrant
constexpr std::int64_t kItemSide = 28;
constexpr std::int64_t kItemOffset = (kCellSide - kItemSide) / 2;
constexpr std::int64_t kCaptionBytes = 64;  // `captions` rows: UTF-8, zero-padded
constexpr std::int64_t kItemClasses = 10;   // Fashion-MNIST's
constexpr std::int64_t kNouns = 6;          // the captions' (each names one or more classes)
constexpr std::int64_t kHeldoutScenes = 6;  // of the 60 scenes (first noun, second noun, axis)
constexpr std::uint64_t kHeldoutSeed = 20261;  // fixed: every canvases dataset holds out the same scenes

// Stored as I64 in `relation`: how the first-named item (A) stands to the second (B).
enum class Relation : std::int64_t { LeftOf = 0, Above = 1, RightOf = 2, Below = 3 };
// Stored as I64 in `attributes`: an item's intensity and its adjective (none when plain).
enum class Attribute : std::int64_t { Plain = 0, Dark = 1, Light = 2 };

// The captions' words: the ids the stand-in text encoder is made with, in this order.
const std::vector<std::string>& canvas_vocabulary();
// The captions' nouns in id order: top, trouser, dress, shoe, bag, boot.
const std::array<const char*, kNouns>& noun_words();
// The noun that names a Fashion-MNIST class (0 … 9).
std::int64_t noun_of_class(std::int64_t item_class);

struct CanvasSpec {
    std::array<std::int64_t, 2> nouns{};    // A's (named first) and B's
    Relation relation = Relation::LeftOf;   // A `relation` B
    std::array<Attribute, 2> attributes{Attribute::Plain, Attribute::Plain};
    std::int64_t line = 0;                 // the row (left/right of) or column (above/below), 0 or 1
    std::array<std::int64_t, 2> images{};  // A's and B's rows in the split's images

    // A's and B's quadrants.
    std::array<std::int64_t, 2> quadrants() const;
};

// "a [dark|light] NOUN (left of|right of|above|below) a [dark|light] NOUN".
std::string caption_of(const CanvasSpec& spec);

// What the picture shows, whichever way the caption puts it: the noun on the left (or top),
// the noun on the right (or bottom), and whether the pair stands in a column.
struct Scene {
    std::int64_t first = 0;
    std::int64_t second = 0;
    bool vertical = false;
    auto operator<=>(const Scene&) const = default;
};
Scene scene_of(const CanvasSpec& spec);

// The kHeldoutScenes scenes no training canvas shows: the first kHeldoutScenes of a seeded
// (kHeldoutSeed) shuffle of all 60 whose mirror (second, first, same axis) is not already
// held out, so the held-out canvases ask for pairs training shows the other way round.
const std::vector<Scene>& heldout_scenes();
bool is_heldout(const Scene& scene);

// An item's pixels under an attribute (u8 → u8): plain as is, dark p·0.4, light
// 255·(p/255)^0.4, each rounded to the nearest integer.
std::uint8_t attribute_pixel(Attribute attribute, std::uint8_t pixel);

// u8 (N, 1, 64, 64) canvases of `specs` from `images`, u8 (M, 1, 28, 28); background 0.
torch::Tensor compose_canvases(const std::vector<CanvasSpec>& specs, const torch::Tensor& images);

// u8 (M, 1, 28, 28) images under a seeded attribute each (plain 1/2, dark 1/4, light 1/4):
// the autoencoder's training items.
torch::Tensor items_with_attributes(const torch::Tensor& images, std::uint64_t seed);

// `count` canvases of the images of a split (labels i64 (M)), each scene drawn uniformly from
// the held-out scenes (`heldout`) or from the others, then its phrasing, line, attributes
// (as above) and an image of each noun (uniform over the images of its classes). Seeded by
// (seed, stream). Fails when a noun has no image.
common::Result<std::vector<CanvasSpec>> draw_canvases(std::int64_t count, const torch::Tensor& labels, bool heldout,
                                                      std::uint64_t seed, std::uint64_t stream);

}  // namespace tessera::data
