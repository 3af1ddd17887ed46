// safetensors files: checkpoints and named-tensor files a volunteer downloads or the server
// reads back (every tensor's values are read, within the limits).
#include "checkpoint.h"
#include "fuzz_target.h"
#include "named_tensor_file.h"
#include "safetensors.h"

using namespace tessera::common;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    ByteView bytes{data, size};
    ReadLimits limits;
    limits.max_header_bytes = 1 << 20;
    limits.max_tensors = 1 << 10;
    if (auto file = parse_safetensors(bytes, limits))
        for (const auto& tensor : file->tensors()) (void)read_as_f32(tensor);
    (void)read_named_tensors(bytes);
    (void)read_checkpoint(bytes);
    return 0;
}

std::vector<Bytes> fuzz_seeds() {
    NamedTensors tensors{{"w", {2, 3}, {1, 2, 3, 4, 5, 6}}, {"b", {3}, {0.5f, -1, 2}}};
    std::vector<Bytes> seeds;
    if (auto checkpoint = write_checkpoint(tensors, {"task", "dit-tiny", 3})) seeds.push_back(*checkpoint);
    if (auto named = write_named_tensors(tensors, {{"format", "tessera.error_feedback"}})) seeds.push_back(*named);
    return seeds;
}
