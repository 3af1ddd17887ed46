// Prints metadata and, per tensor, dtype, shape and value statistics.
#include "inspect_command.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>

#include "bytes.h"
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

}  // namespace

common::Status inspect_tensor_file(const std::filesystem::path& path, std::ostream& out) {
    auto bytes = common::read_file(path, kMaxFileBytes);
    if (!bytes) return bytes.error();
    bool compressed = common::is_zstd_frame(*bytes);
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
    return {};
}

}  // namespace tessera::data
