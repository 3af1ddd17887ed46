// zstd frames from peers, decompressed under a cap on the output.
#include "fuzz_target.h"
#include "zstd_codec.h"

using namespace tessera::common;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    (void)zstd_decompress({data, size}, 4 << 20);
    return 0;
}

std::vector<Bytes> fuzz_seeds() {
    std::vector<Bytes> seeds;
    Bytes text(10'000);
    for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<std::uint8_t>(i % 7 == 0 ? i : 'a');
    for (int level : {1, 3, 19})
        if (auto frame = zstd_compress(text, level)) seeds.push_back(*frame);
    return seeds;
}
