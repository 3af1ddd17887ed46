// Prints metadata, per tensor dtype, shape and value statistics, and for a captioned shard
// its bytes per sample with the captions' share.
#include "inspect_command.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>

#include "bytes.h"
#include "caption_tensors.h"
#include "file_io.h"
#include "safetensors.h"
#include "zstd_codec.h"

namespace tessera::data {
namespace {

constexpr std::uint64_t kMaxFileBytes = 2 * common::kGiB;

// Values of any dtype as doubles (for statistics only).
std::vector<double> as_doubles(const common::TensorView& view) {
    std::vector<double> out;
    auto n = static_cast<std::size_t>(view.numel());
    if (auto floats = common::read_as_f32(view)) {
        out.assign(floats->begin(), floats->end());
        return out;
    }
    const auto* p = view.data.data();
    for (std::size_t i = 0; i < n; ++i) {
        switch (view.dtype) {
            case common::DType::I8: out.push_back(static_cast<std::int8_t>(p[i])); break;
            case common::DType::U8: out.push_back(p[i]); break;
            case common::DType::I32: {
                std::int32_t v;
                std::memcpy(&v, p + 4 * i, 4);
                out.push_back(v);
                break;
            }
            case common::DType::I64: {
                std::int64_t v;
                std::memcpy(&v, p + 8 * i, 8);
                out.push_back(static_cast<double>(v));
                break;
            }
            default: break;
        }
    }
    return out;
}

// A shard with captions: bytes per sample decompressed and compressed (the file's own zstd
// frame, or what import would store), and the captions' share of each. The compressed share
// is estimated by compressing the caption tensors and the rest apart.
void print_sample_sizes(const common::TensorFile& file, common::ByteView raw, std::uint64_t zstd_bytes,
                        std::ostream& out) {
    const auto* labels = file.find("labels");
    if (labels == nullptr || labels->shape.size() != 1 || labels->shape[0] <= 0) return;
    if (file.find("text_emb") == nullptr && file.find("text_tokens") == nullptr) return;
    auto n = static_cast<std::uint64_t>(labels->shape[0]);
    common::Bytes captions, rest;
    for (const auto& t : file.tensors()) {
        auto& to = is_caption_tensor(t.name) ? captions : rest;
        to.insert(to.end(), t.data.begin(), t.data.end());
    }
    if (zstd_bytes == 0) {
        auto packed = common::zstd_compress(raw, 9);
        if (!packed) return;
        zstd_bytes = packed->size();
    }
    auto packed_captions = common::zstd_compress(captions), packed_rest = common::zstd_compress(rest);
    if (!packed_captions || !packed_rest) return;
    auto percent = [](double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; };
    out << std::fixed << std::setprecision(1) << "  per sample: " << raw.size() / n << " bytes (captions "
        << percent(static_cast<double>(captions.size()), static_cast<double>(raw.size())) << "%), compressed "
        << zstd_bytes / n << " bytes (captions ~"
        << percent(static_cast<double>(packed_captions->size()),
                   static_cast<double>(packed_captions->size() + packed_rest->size()))
        << "%)\n"
        << std::defaultfloat;
}

}  // namespace

common::Status inspect_tensor_file(const std::filesystem::path& path, std::ostream& out) {
    auto bytes = common::read_file(path, kMaxFileBytes);
    if (!bytes) return bytes.error();
    bool compressed = common::is_zstd_frame(*bytes);
    std::uint64_t zstd_bytes = compressed ? bytes->size() : 0;
    if (compressed) {
        auto raw = common::zstd_decompress(*bytes, kMaxFileBytes);
        if (!raw) return common::with_context(path.string(), raw.error());
        bytes = std::move(raw).value();
    }
    auto file = common::parse_safetensors(*bytes);
    if (!file) return common::with_context(path.string(), file.error());
    out << path.string() << (compressed ? " (zstd)" : "") << ": " << file->tensors().size() << " tensors\n";
    for (const auto& [key, value] : file->metadata()) out << "  metadata " << key << " = " << value << "\n";
    for (const auto& t : file->tensors()) {
        out << "  " << t.name << "  " << common::dtype_name(t.dtype) << " [";
        for (std::size_t i = 0; i < t.shape.size(); ++i) out << (i ? ", " : "") << t.shape[i];
        out << "]";
        auto values = as_doubles(t);
        if (!values.empty()) {
            auto [lo, hi] = std::minmax_element(values.begin(), values.end());
            double mean = 0, var = 0;
            for (double v : values) mean += v;
            mean /= static_cast<double>(values.size());
            for (double v : values) var += (v - mean) * (v - mean);
            out << std::setprecision(4) << "  min " << *lo << " max " << *hi << " mean " << mean << " std "
                << std::sqrt(var / static_cast<double>(values.size()));
        }
        out << "\n";
    }
    print_sample_sizes(*file, *bytes, zstd_bytes, out);
    return {};
}

}  // namespace tessera::data
