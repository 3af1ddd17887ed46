// The caption texts a shard may carry beside its caption embeddings (docs/dataset_format.md,
// "Captions"): `captions`, U8 [N, W], each row a caption's UTF-8 bytes padded with zeros. Read
// without torch, for the dashboard's labels.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bytes.h"
#include "result.h"

namespace tessera::common {

// The largest shard read for its captions (compressed, and again decompressed): as training's.
inline constexpr std::uint64_t kMaxCaptionShardBytes = std::uint64_t{2} << 30;

// Well-formed UTF-8 (RFC 3629): no overlong forms, surrogates or code points past U+10FFFF.
bool is_valid_utf8(std::string_view text);

// The first `count` captions of a shard's bytes (zstd-compressed or not); empty when the shard
// has no `captions`. Named errors for a malformed tensor or invalid UTF-8.
Result<std::vector<std::string>> read_caption_texts(ByteView shard, std::size_t count);

}  // namespace tessera::common
