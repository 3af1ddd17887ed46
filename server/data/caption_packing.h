// Rewrites a shard's captions in the packed layout (docs/dataset_format.md "Captions"):
// `text_tokens` F16 [T, D], only each caption's own tokens, and `text_len` I64 [N], whatever
// layout they came in; every other tensor and the metadata are copied unchanged.
#pragma once

#include "bytes.h"
#include "result.h"
#include "torch/shard_data.h"

namespace tessera::data {

// `raw` is an uncompressed safetensors shard and `shard` what load_shard made of it (its
// captions checked). Fails when a caption value is past float16's range (|x| > 65504).
common::Result<common::Bytes> pack_captions(common::ByteView raw, const common::ShardData& shard);

}  // namespace tessera::data
