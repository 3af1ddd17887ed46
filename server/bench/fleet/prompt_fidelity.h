// Prompt fidelity of a captioned-canvas model (docs/fleet_simulator.md, "Prompt fidelity"):
// the rules that turn what a judge reads in each quadrant of a canvas into the four figures,
// object, relation, attribute and held-out combination. Plain data, torch-free.
#pragma once

#include <array>
#include <cstdint>

namespace tessera::bench {

// What a caption asks for (the canvases' ground truth, docs/dataset_format.md).
struct CaptionTruth {
    std::array<std::int64_t, 2> classes{};     // A's (named first) and B's nouns
    std::int64_t relation = 0;                 // A's place relative to B: 0 left of, 1 above, 2 right of, 3 below
    std::array<std::int64_t, 2> attributes{};  // A's and B's: 0 plain (no adjective), 1 dark, 2 light
};

// What the judge reads in one quadrant (0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right).
struct QuadrantReading {
    std::int64_t item_class = 0;  // the class cnn's answer
    std::int64_t attribute = 0;   // the attribute cnn's answer among plain, dark, light
    double empty = 1;             // its probability that the quadrant is empty
};

// Counts over canvases. An item's place is read off the two quadrants least likely empty.
struct FidelityCounts {
    std::int64_t canvases = 0;
    std::int64_t objects = 0;           // both named nouns read, one in each item quadrant
    std::int64_t relations = 0;         // ...and A stands to B as the caption says
    std::int64_t attributes_named = 0;  // items whose caption names dark or light
    std::int64_t attributes_right = 0;  // ...read in the quadrant of that item, with that attribute

    void add(const std::array<QuadrantReading, 4>& quadrants, const CaptionTruth& truth);
};

// Shares in [0, 1]; -1 where nothing was scored.
struct PromptFidelity {
    double object = -1;
    double relation = -1;
    double attribute = -1;  // of the items whose caption names an attribute
    double heldout = -1;    // relation (so object too) on the held-out scenes' captions
    double heldout_object = -1;
};

// `seen` scored on seen scenes' captions, `heldout` on the held-out ones'.
PromptFidelity fidelity_of(const FidelityCounts& seen, const FidelityCounts& heldout);

}  // namespace tessera::bench
