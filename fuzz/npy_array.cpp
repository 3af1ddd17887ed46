// .npy arrays inside webdataset tars an operator imports.
#include "../server/data/npy_reader.h"
#include "../tests/support/webdataset_files.h"
#include "fuzz_target.h"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (auto array = tessera::data::parse_npy({data, size})) {
        std::uint8_t sum = 0;
        for (auto b : array->data) sum = static_cast<std::uint8_t>(sum + b);
        (void)sum;
        (void)array->numel();
    }
    return 0;
}

std::vector<common::Bytes> fuzz_seeds() {
    return {
        testing::npy<float>("<f4", {2, 3}, {1, 2, 3, 4, 5, 6}),
        testing::npy<std::uint16_t>("<f2", {3}, {0x3c00, 0, 0xbc00}),
        testing::npy<std::uint8_t>("|b1", {4}, {1, 1, 0, 0}),
        testing::npy<std::int64_t>("<i8", {}, {42}),
        testing::npy_raw("{'shape': (2,), 'fortran_order': False, 'descr': '<i4'}", {1, 0, 0, 0, 2, 0, 0, 0}, 2),
    };
}
