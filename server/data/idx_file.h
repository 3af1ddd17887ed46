// Reader for the gzipped IDX files of MNIST-style datasets (the Debian package
// dataset-fashion-mnist): magic 0x00 0x00 0x08 <ndims>, big-endian u32 dimensions, u8 data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "bytes.h"
#include "result.h"

namespace tessera::data {

struct IdxArray {
    std::vector<std::int64_t> dims;
    common::Bytes values;  // row-major u8
};

// Reads a gzipped (or plain) IDX file of unsigned bytes; every size is checked against the
// header and the limit of 256 MiB.
common::Result<IdxArray> read_idx_file(const std::filesystem::path& path);

}  // namespace tessera::data
