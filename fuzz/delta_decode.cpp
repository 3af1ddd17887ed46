// Delta files as a volunteer uploads them (dense, low-bit, top-k with index gaps, zstd).
#include "delta_codec.h"
#include "fuzz_target.h"
#include "zstd_codec.h"

using namespace tessera::common;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    DeltaDecodeLimits limits;
    limits.max_elements = 1 << 20;
    (void)decode_delta({data, size}, limits);
    return 0;
}

std::vector<Bytes> fuzz_seeds() {
    NamedTensors delta{{"blocks.0.weight", {4, 33}, std::vector<float>(132)}, {"bias", {7}, std::vector<float>(7)}};
    for (auto& tensor : delta)
        for (std::size_t i = 0; i < tensor.values.size(); ++i)
            tensor.values[i] = static_cast<float>((i * 37 % 19) - 9) * 1e-3f;
    std::vector<Bytes> seeds;
    for (auto dtype : {DeltaDType::F32, DeltaDType::BF16, DeltaDType::Int8, DeltaDType::Int4, DeltaDType::Int2})
        for (double fraction : {1.0, 0.1}) {
            auto encoded = encode_delta(delta, {dtype, fraction});
            if (!encoded) continue;
            seeds.push_back(encoded->bytes);
            if (!is_zstd_frame(encoded->bytes))
                if (auto compressed = zstd_compress(encoded->bytes)) seeds.push_back(*compressed);
        }
    return seeds;
}
