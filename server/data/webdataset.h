// webdataset tar shards of precomputed latents and caption features → one Tessera shard
// (safetensors bytes, captions packed). For untrusted bytes; no I/O, no torch.
//
// A tar's files are grouped into samples by key, as webdataset does: the name up to the first
// dot of its last path component (directories included); the rest, lowercased, is the
// extension that says what the file holds:
//
//   KEY.latent.npy | KEY.latents.npy             float16/float32 [C, H, W]   required
//   KEY.text_emb.npy | KEY.t5.npy | KEY.clip.npy float16/float32 [L, D]      the caption's features
//   KEY.mask.npy | KEY.attention_mask.npy        bool/integer [L], 1s then 0s  optional
//   KEY.txt | KEY.caption.txt                    UTF-8 caption text           optional
//   KEY.cls                                      ASCII decimal label          optional, default 0
//   KEY.npz                                      arrays named like the .npy files above
//
// Every sample has one latent, all of one shape and dtype; either every sample or none has a
// caption feature, all of one width D (L may differ); a caption's tokens are the mask's ones
// (all L without a mask). Either every sample or none has a caption text. Other extensions
// are skipped (and counted). The shard holds `latents` (as stored), `labels` (I64), and with
// captions `text_tokens` (F16 [T, D], each caption's own tokens back to back), `text_len` (I64
// [N]) and `captions` (U8 [N, W], zero-padded). See docs/dataset_format.md "import".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bytes.h"
#include "result.h"

namespace tessera::data {

struct WebDatasetLimits {
    std::uint64_t max_output_bytes = std::uint64_t{2} << 30;  // the shard written, and .npz contents
    std::size_t max_samples = std::size_t{1} << 20;
    std::size_t max_caption_text_bytes = 16 * 1024;
};

struct WebDatasetShard {
    common::Bytes safetensors;  // the shard, uncompressed
    std::int64_t samples = 0;
    std::int64_t caption_tokens = 0;              // T, summed over the samples
    std::size_t skipped_files = 0;                // files of other extensions
    std::vector<std::string> skipped_extensions;  // their distinct extensions, sorted
};

// Named errors (naming the sample's key) for a bad member, a missing or doubled field, a wrong
// dtype or shape, a mask that is not ones then zeros or not the features' length, a non-finite
// value, a feature past f16's range, or samples that disagree in shape or dtype.
common::Result<WebDatasetShard> webdataset_to_shard(common::ByteView tar, const WebDatasetLimits& limits = {});

}  // namespace tessera::data
