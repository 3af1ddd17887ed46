// The prompt-fidelity rules: which quadrants hold the items, whether they are the named
// classes, where A stands to B, and whether a named attribute is drawn.
#include "prompt_fidelity.h"

#include <algorithm>

namespace tessera::bench {
namespace {

constexpr std::int64_t kLeftOf = 0, kAbove = 1, kRightOf = 2, kBelow = 3;

double share(std::int64_t part, std::int64_t whole) {
    return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : -1;
}

// Whether quadrant `a` stands to quadrant `b` as `relation` says (both in one row or column).
bool stands(std::int64_t a, std::int64_t b, std::int64_t relation) {
    auto row_a = a / 2, col_a = a % 2, row_b = b / 2, col_b = b % 2;
    switch (relation) {
        case kLeftOf: return row_a == row_b && col_a == 0 && col_b == 1;
        case kRightOf: return row_a == row_b && col_a == 1 && col_b == 0;
        case kAbove: return col_a == col_b && row_a == 0 && row_b == 1;
        case kBelow: return col_a == col_b && row_a == 1 && row_b == 0;
        default: return false;
    }
}

}  // namespace

void FidelityCounts::add(const std::array<QuadrantReading, 4>& quadrants, const CaptionTruth& truth) {
    ++canvases;
    for (auto attribute : truth.attributes) attributes_named += attribute != 0 ? 1 : 0;
    // The two quadrants least likely empty, in quadrant order when tied.
    std::array<std::int64_t, 4> order{0, 1, 2, 3};
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int64_t a, std::int64_t b) { return quadrants[a].empty < quadrants[b].empty; });
    auto first = order[0], second = order[1];
    std::int64_t where_a = -1, where_b = -1;
    if (quadrants[first].item_class == truth.classes[0] && quadrants[second].item_class == truth.classes[1]) {
        where_a = first;
        where_b = second;
    } else if (quadrants[second].item_class == truth.classes[0] && quadrants[first].item_class == truth.classes[1]) {
        where_a = second;
        where_b = first;
    } else {
        return;
    }
    ++objects;
    if (stands(where_a, where_b, truth.relation)) ++relations;
    std::array<std::int64_t, 2> where{where_a, where_b};
    for (int k = 0; k < 2; ++k)
        if (truth.attributes[k] != 0 && quadrants[where[k]].attribute == truth.attributes[k]) ++attributes_right;
}

PromptFidelity fidelity_of(const FidelityCounts& seen, const FidelityCounts& heldout) {
    PromptFidelity f;
    f.object = share(seen.objects, seen.canvases);
    f.relation = share(seen.relations, seen.canvases);
    f.attribute = share(seen.attributes_right, seen.attributes_named);
    f.heldout = share(heldout.relations, heldout.canvases);
    f.heldout_object = share(heldout.objects, heldout.canvases);
    return f;
}

}  // namespace tessera::bench
