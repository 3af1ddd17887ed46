// Whole webdataset tars an operator imports, converted to a shard under a small output cap.
#include "../server/data/webdataset.h"
#include "../tests/support/webdataset_files.h"
#include "fuzz_target.h"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    tessera::data::WebDatasetLimits limits;
    limits.max_output_bytes = 16 << 20;
    limits.max_samples = 1 << 12;
    (void)tessera::data::webdataset_to_shard({data, size}, limits);
    return 0;
}

std::vector<common::Bytes> fuzz_seeds() {
    using testing::npy;
    auto latent = npy<std::uint16_t>("<f2", {1, 2, 2}, {0x3c00, 0, 0xbc00, 0x3800});
    auto feature = npy<float>("<f4", {3, 2}, {1, 2, 3, 4, 5, 6});
    auto mask = npy<std::int64_t>("<i8", {3}, {1, 1, 0});
    return {
        testing::tar({{"a.latent.npy", latent},
                      {"a.t5.npy", feature},
                      {"a.mask.npy", mask},
                      {"a.txt", testing::bytes_of("a red cube")},
                      {"a.cls", testing::bytes_of("2")},
                      {"b.latents.npy", latent},
                      {"b.t5.npy", feature},
                      {"b.txt", testing::bytes_of("two spheres")},
                      {"b.jpg", testing::bytes_of("not read")}}),
        testing::tar({{"c.npz", testing::zip({{"latent.npy", latent}, {"clip.npy", feature}}, true)}}),
    };
}
