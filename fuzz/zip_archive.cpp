// .npz (zip) archives inside webdataset tars an operator imports, inflated under a cap.
#include "../server/data/zip_reader.h"
#include "../tests/support/webdataset_files.h"
#include "fuzz_target.h"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    tessera::data::ZipLimits limits;
    limits.max_total_bytes = 16 << 20;
    (void)tessera::data::read_zip({data, size}, limits);
    return 0;
}

std::vector<common::Bytes> fuzz_seeds() {
    auto array = testing::npy<float>("<f4", {2, 2}, {1, 2, 3, 4});
    return {
        testing::zip({{"latent.npy", array}, {"t5.npy", array}}, false),
        testing::zip({{"latent.npy", array}, {"mask.npy", testing::npy<std::uint8_t>("|u1", {2}, {1, 0})}}, true),
    };
}
