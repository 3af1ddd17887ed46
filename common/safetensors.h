// Safetensors tensor files (docs/tensor_format.md): a bounds-checked reader for untrusted
// bytes that returns zero-copy views, and a writer.
//
// Layout: u64 little-endian N | N bytes of JSON header | data. The header maps each tensor
// name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data
// section) and may hold "__metadata__": {string: string}. The reader accepts a file only
// if the tensors tile the data section exactly: no gaps, no overlaps, nothing after.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bytes.h"
#include "result.h"
#include "tensor_format.h"

namespace tessera::common {

// The largest model file, or dense delta of one, any program reads: 8 GiB.
inline constexpr std::uint64_t kMaxModelBytes = std::uint64_t{8} << 30;

using TensorMetadata = std::map<std::string, std::string>;

// A tensor inside a buffer the caller keeps alive. `data` may be unaligned.
struct TensorView {
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    ByteView data;

    std::int64_t numel() const;
};

struct ReadLimits {
    std::uint64_t max_header_bytes = 16 << 20;
    std::size_t max_tensors = 1 << 16;
};

// Parsed views over one safetensors buffer. Copyable; views stay valid while the buffer is.
class TensorFile {
public:
    const std::vector<TensorView>& tensors() const { return tensors_; }
    const TensorMetadata& metadata() const { return metadata_; }
    // nullptr when no tensor has that name.
    const TensorView* find(std::string_view name) const;

private:
    friend Result<TensorFile> parse_safetensors(ByteView, const ReadLimits&);
    std::vector<TensorView> tensors_;  // in data-offset order
    TensorMetadata metadata_;
};

Result<TensorFile> parse_safetensors(ByteView buffer, const ReadLimits& limits = {});

// Reads any floating-point view (F32, F16, BF16) as f32 values.
Result<std::vector<float>> read_as_f32(const TensorView& view);

// Serialises tensors, sorted by name, with the header padded to 8 bytes. Fails on duplicate
// or reserved names and on data whose size does not match dtype × shape.
Result<Bytes> write_safetensors(const std::vector<TensorView>& tensors, const TensorMetadata& metadata = {});

}  // namespace tessera::common
