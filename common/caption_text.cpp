// Caption texts from a shard's `captions` tensor.
#include "caption_text.h"

#include <algorithm>

#include "safetensors.h"
#include "zstd_codec.h"

namespace tessera::common {

bool is_valid_utf8(std::string_view text) {
    static constexpr std::uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};  // by continuation bytes
    std::size_t i = 0;
    while (i < text.size()) {
        auto lead = static_cast<unsigned char>(text[i]);
        if (lead < 0x80) {
            ++i;
            continue;
        }
        std::size_t extra = (lead >> 5) == 0x6 ? 1 : (lead >> 4) == 0xE ? 2 : (lead >> 3) == 0x1E ? 3 : 0;
        if (extra == 0 || i + extra >= text.size()) return false;
        std::uint32_t code = lead & (0x3Fu >> extra);
        for (std::size_t k = 1; k <= extra; ++k) {
            auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xC0) != 0x80) return false;
            code = (code << 6) | (next & 0x3Fu);
        }
        if (code < kSmallest[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
        i += extra + 1;
    }
    return true;
}

namespace {

Result<std::vector<std::string>> captions_of(ByteView bytes, std::size_t count) {
    auto file = parse_safetensors(bytes);
    if (!file) return file.error();
    const auto* captions = file->find("captions");
    if (captions == nullptr) return std::vector<std::string>{};
    if (captions->dtype != DType::U8 || captions->shape.size() != 2)
        return make_error("shard \"captions\" must be U8 of shape [N, W]");
    auto rows = static_cast<std::size_t>(captions->shape[0]), width = static_cast<std::size_t>(captions->shape[1]);
    std::vector<std::string> texts;
    for (std::size_t i = 0; i < std::min(rows, count); ++i) {
        const auto* row = captions->data.data() + i * width;
        auto end = std::find(row, row + width, std::uint8_t{0});
        std::string text(row, end);
        if (!is_valid_utf8(text)) return make_error("shard caption " + std::to_string(i) + " is not UTF-8");
        texts.push_back(std::move(text));
    }
    return texts;
}

}  // namespace

Result<std::vector<std::string>> read_caption_texts(ByteView shard, std::size_t count) {
    if (!is_zstd_frame(shard)) return captions_of(shard, count);
    auto raw = zstd_decompress(shard, kMaxCaptionShardBytes);
    if (!raw) return raw.error();
    return captions_of(*raw, count);
}

}  // namespace tessera::common
