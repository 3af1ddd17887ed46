// LEB128 gap coding of sparse indices.
#include "index_gaps.h"

#include <string>

namespace tessera::common {

Bytes encode_index_gaps(std::span<const std::int32_t> indices) {
    Bytes out;
    out.reserve(indices.size() + indices.size() / 4);
    std::int64_t previous = -1;
    for (auto index : indices) {
        auto gap = static_cast<std::uint32_t>(index - previous - 1);
        while (gap >= 0x80) {
            out.push_back(static_cast<std::uint8_t>(gap | 0x80));
            gap >>= 7;
        }
        out.push_back(static_cast<std::uint8_t>(gap));
        previous = index;
    }
    return out;
}

Result<std::vector<std::int32_t>> decode_index_gaps(ByteView gaps, std::uint64_t limit) {
    std::vector<std::int32_t> indices;
    std::int64_t previous = -1;
    std::size_t at = 0;
    while (at < gaps.size()) {
        std::uint64_t gap = 0;
        int length = 0;
        std::uint8_t byte = 0;
        do {
            if (at == gaps.size()) return make_error("index gaps: the last varint is cut short");
            if (length == 5) return make_error("index gaps: a varint longer than 5 bytes");
            byte = gaps[at++];
            gap |= static_cast<std::uint64_t>(byte & 0x7f) << (7 * length++);
        } while (byte & 0x80);
        if (length > 1 && byte == 0) return make_error("index gaps: a varint with a needless trailing byte");
        auto index = static_cast<std::uint64_t>(previous + 1) + gap;
        if (index >= limit || index > static_cast<std::uint64_t>(INT32_MAX))
            return make_error("index gaps: index " + std::to_string(index) + " is outside the tensor (" +
                              std::to_string(limit) + " entries)");
        indices.push_back(static_cast<std::int32_t>(index));
        previous = static_cast<std::int64_t>(index);
    }
    return indices;
}

}  // namespace tessera::common
