// The safetensors writer: header JSON with sorted names, padded to 8 bytes, then the data.
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cstring>

#include "safetensors.h"

namespace tessera::common {

Result<Bytes> write_safetensors(const std::vector<TensorView>& tensors, const TensorMetadata& metadata) {
    std::vector<const TensorView*> sorted;
    for (const auto& tensor : tensors) sorted.push_back(&tensor);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });

    boost::json::object header;
    std::uint64_t offset = 0;
    for (std::size_t i = 0; i < sorted.size(); ++i) {
        const auto& t = *sorted[i];
        if (t.name.empty() || t.name == kMetadataKey || t.name.size() > kMaxTensorNameBytes)
            return make_error("safetensors writer: invalid tensor name \"" + t.name + "\"");
        if (i > 0 && sorted[i - 1]->name == t.name)
            return make_error("safetensors writer: duplicate tensor name \"" + t.name + "\"");
        if (t.shape.size() > kMaxRank)
            return make_error("safetensors writer: tensor \"" + t.name + "\" has rank above " +
                              std::to_string(kMaxRank));
        boost::json::array shape;
        for (auto dim : t.shape) {
            if (dim < 0) return make_error("safetensors writer: tensor \"" + t.name + "\" has a negative dimension");
            shape.push_back(dim);
        }
        auto expected = static_cast<std::uint64_t>(t.numel()) * dtype_size(t.dtype);
        if (expected != t.data.size())
            return make_error("safetensors writer: tensor \"" + t.name + "\" has " + std::to_string(t.data.size()) +
                              " bytes, dtype and shape need " + std::to_string(expected));
        header[t.name] = {{"dtype", dtype_name(t.dtype)},
                          {"shape", std::move(shape)},
                          {"data_offsets", {offset, offset + t.data.size()}}};
        offset += t.data.size();
    }
    if (!metadata.empty()) {
        boost::json::object meta;
        for (const auto& [key, value] : metadata) meta[key] = value;
        header[kMetadataKey] = std::move(meta);
    }

    std::string header_text = boost::json::serialize(header);
    header_text.append((kHeaderAlignment - header_text.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
    std::uint64_t header_length = header_text.size();

    Bytes out(kHeaderLengthBytes + header_text.size() + offset);
    std::memcpy(out.data(), &header_length, kHeaderLengthBytes);
    std::memcpy(out.data() + kHeaderLengthBytes, header_text.data(), header_text.size());
    std::uint8_t* cursor = out.data() + kHeaderLengthBytes + header_text.size();
    for (const auto* t : sorted) {
        if (!t->data.empty()) std::memcpy(cursor, t->data.data(), t->data.size());
        cursor += t->data.size();
    }
    return out;
}

}  // namespace tessera::common
