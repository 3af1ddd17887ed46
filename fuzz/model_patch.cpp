// Model patches a volunteer applies to the model it holds to get the unit's.
#include "fuzz_target.h"
#include "model_patch.h"

using namespace tessera::common;

namespace {

// Sorted by name, as models are.
NamedTensors published_model() {
    return {{"bias", {5}, std::vector<float>(5, -1.0f)}, {"blocks.0.weight", {4, 8}, std::vector<float>(32, 0.25f)}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto model = published_model();
    (void)apply_patch(model, {data, size});
    return 0;
}

std::vector<Bytes> fuzz_seeds() {
    std::vector<Bytes> seeds;
    for (auto dtype : {DeltaDType::F32, DeltaDType::Int8, DeltaDType::Int4}) {
        auto target = published_model();
        for (auto& tensor : target)
            for (std::size_t i = 0; i < tensor.values.size(); ++i)
                tensor.values[i] += static_cast<float>(i % 5) * 0.01f;
        auto published = published_model();
        if (auto patch = make_patch(target, published, {dtype, 1.0})) seeds.push_back(*patch);
    }
    return seeds;
}
