// Tar archives (webdataset shards an operator imports): every member's view is read.
#include "../server/data/tar_reader.h"
#include "../tests/support/webdataset_files.h"
#include "fuzz_target.h"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    tessera::data::TarLimits limits;
    limits.max_members = 1 << 12;
    if (auto members = tessera::data::read_tar({data, size}, limits)) {
        std::uint8_t sum = 0;
        for (const auto& m : *members)
            for (auto b : m.data) sum = static_cast<std::uint8_t>(sum + b);
        (void)sum;
    }
    return 0;
}

std::vector<common::Bytes> fuzz_seeds() {
    using testing::TarEntry;
    std::string long_name(150, 'k');
    auto pax = testing::bytes_of(testing::pax_record("path", "dir/" + long_name + ".txt") +
                                 testing::pax_record("mtime", "1700000000.5"));
    return {
        testing::tar({{"0001.txt", testing::bytes_of("a caption")}, {"0001.cls", testing::bytes_of("3")}}),
        testing::tar({{"dir", {}, '5'}, {long_name + ".cls", testing::bytes_of("7\n")}}, true),
        testing::tar({{"PaxHeader", pax, 'x'}, {"short", testing::bytes_of(std::string(700, 'x'))}}),
    };
}
