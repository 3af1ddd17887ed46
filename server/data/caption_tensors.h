// The tensors of a shard that carry its captions (docs/dataset_format.md "Captions"), so that
// import and inspect count the same bytes as the captions' share of a sample.
#pragma once

#include <algorithm>
#include <array>
#include <string_view>

namespace tessera::data {

// The caption features in either layout, their lengths or mask, and the caption texts.
inline constexpr std::array<std::string_view, 5> kCaptionTensors{"text_emb", "text_tokens", "text_len", "text_mask",
                                                                 "captions"};

inline bool is_caption_tensor(std::string_view name) {
    return std::find(kCaptionTensors.begin(), kCaptionTensors.end(), name) != kCaptionTensors.end();
}

}  // namespace tessera::data
