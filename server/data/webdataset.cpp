// webdataset → shard: members grouped by key, each field parsed and checked, then the
// tensors assembled in sample order with the captions packed to f16.
#include "webdataset.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <list>
#include <map>
#include <optional>
#include <set>

#include "caption_text.h"
#include "half.h"
#include "npy_reader.h"
#include "safetensors.h"
#include "tar_reader.h"
#include "zip_reader.h"

namespace tessera::data {
namespace {

using common::make_error;

enum class Field { Latent, Feature, Mask, Text, Label, Npz };

struct Extension {
    std::string_view name;
    Field field;
};

constexpr std::array<Extension, 11> kExtensions{{
    {"latent.npy", Field::Latent},
    {"latents.npy", Field::Latent},
    {"text_emb.npy", Field::Feature},
    {"t5.npy", Field::Feature},
    {"clip.npy", Field::Feature},
    {"mask.npy", Field::Mask},
    {"attention_mask.npy", Field::Mask},
    {"txt", Field::Text},
    {"caption.txt", Field::Text},
    {"cls", Field::Label},
    {"npz", Field::Npz},
}};

std::optional<Field> field_of(std::string_view extension) {
    for (const auto& e : kExtensions)
        if (e.name == extension) return e.field;
    return std::nullopt;
}

// One field's bytes and the name they came from (for messages).
struct Source {
    std::string from;
    common::ByteView bytes;
};

struct Sample {
    std::string key;
    std::optional<Source> latent, feature, mask, text, label;
};

std::string lowercase(std::string_view text) {
    std::string out(text);
    for (auto& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

common::Status assign(Sample& sample, Field field, Source source) {
    std::optional<Source>* slot = field == Field::Latent    ? &sample.latent
                                  : field == Field::Feature ? &sample.feature
                                  : field == Field::Mask    ? &sample.mask
                                  : field == Field::Text    ? &sample.text
                                                            : &sample.label;
    if (*slot)
        return make_error("sample \"" + sample.key + "\" has two of a kind: " + (*slot)->from + " and " + source.from);
    *slot = std::move(source);
    return {};
}

// Well-formed UTF-8 without NUL bytes (the shard pads captions with zeros).
bool is_caption_utf8(std::string_view text) {
    return text.find('\0') == std::string_view::npos && common::is_valid_utf8(text);
}

std::string_view trim(std::string_view text) {
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (!text.empty() && space(text.front())) text.remove_prefix(1);
    while (!text.empty() && space(text.back())) text.remove_suffix(1);
    return text;
}

float float_at(const NpyArray& a, std::size_t i) {
    if (a.type == NpyType::F16) {
        std::uint16_t bits;
        std::memcpy(&bits, a.data.data() + 2 * i, 2);
        return common::f16_to_f32(bits);
    }
    float value;
    std::memcpy(&value, a.data.data() + 4 * i, 4);
    return value;
}

// Integer and bool arrays' values (only compared with 0 and 1).
std::uint64_t bits_at(const NpyArray& a, std::size_t i) {
    std::uint64_t value = 0;
    auto size = npy_type_size(a.type);
    std::memcpy(&value, a.data.data() + size * i, size);
    return value;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
    std::string out = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
    return out + "]";
}

common::Result<NpyArray> float_array(const Source& source, std::size_t rank, const char* dims) {
    auto array = parse_npy(source.bytes);
    if (!array) return common::with_context(source.from, array.error());
    if (array->type != NpyType::F16 && array->type != NpyType::F32)
        return make_error(source.from + ": dtype " + std::string(npy_type_name(array->type)) +
                          " where float16 or float32 is needed");
    if (array->shape.size() != rank || array->numel() == 0)
        return make_error(source.from + ": shape " + shape_text(array->shape) + " where " + dims + " is needed");
    return array;
}

// A caption's token count from its mask: 0/1 values, ones then zeros, at least one one, as
// many entries as the features have tokens.
common::Result<std::int64_t> mask_length(const Source& source, std::int64_t tokens) {
    auto mask = parse_npy(source.bytes);
    if (!mask) return common::with_context(source.from, mask.error());
    if (mask->type == NpyType::F16 || mask->type == NpyType::F32 || mask->type == NpyType::F64)
        return make_error(source.from + ": a mask must be bool or integer, not " +
                          std::string(npy_type_name(mask->type)));
    if (mask->shape.size() != 1) return make_error(source.from + ": a mask must have shape [L]");
    if (mask->shape[0] != tokens)
        return make_error(source.from + ": mask of " + std::to_string(mask->shape[0]) + " entries for " +
                          std::to_string(tokens) + " caption tokens");
    std::int64_t ones = 0;
    for (std::int64_t i = 0; i < tokens; ++i) {
        auto v = bits_at(*mask, static_cast<std::size_t>(i));
        if (v > 1) return make_error(source.from + ": mask holds values other than 0 and 1");
        if (v == 1 && ones != i) return make_error(source.from + ": mask is not ones followed by zeros");
        ones += static_cast<std::int64_t>(v);
    }
    if (ones == 0) return make_error(source.from + ": mask has no ones (a caption of no tokens)");
    return ones;
}

common::Result<std::int64_t> parse_label(const Source& source) {
    auto text = trim(common::as_string_view(source.bytes));
    if (text.empty() || text.size() > 9 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return make_error(source.from + ": not a non-negative decimal label below 10^9");
    std::int64_t value = 0;
    for (char c : text) value = value * 10 + (c - '0');
    return value;
}

// Groups the tar's members into samples, in order of each key's first file; .npz members are
// read into `owned`, which keeps their bytes alive.
common::Result<std::vector<Sample>> group(const std::vector<TarMember>& members, const WebDatasetLimits& limits,
                                          std::list<common::Bytes>& owned, WebDatasetShard& shard) {
    std::vector<Sample> samples;
    std::map<std::string, std::size_t> index;
    std::set<std::string> skipped;
    std::uint64_t inflated = 0;
    for (const auto& member : members) {
        auto slash = member.name.rfind('/');
        auto dot = member.name.find('.', slash == std::string::npos ? 0 : slash + 1);
        auto base = slash == std::string::npos ? 0 : slash + 1;
        auto extension = dot == std::string::npos ? std::string() : lowercase(member.name.substr(dot + 1));
        auto field = dot == std::string::npos || dot == base ? std::nullopt : field_of(extension);
        if (!field) {
            ++shard.skipped_files;
            skipped.insert(extension.empty() ? "(none)" : extension);
            continue;
        }
        auto key = member.name.substr(0, dot);
        auto [it, added] = index.try_emplace(key, samples.size());
        if (added) {
            if (samples.size() == limits.max_samples)
                return make_error("tar holds more than " + std::to_string(limits.max_samples) + " samples");
            samples.push_back(Sample{key, {}, {}, {}, {}, {}});
        }
        auto& sample = samples[it->second];
        if (*field != Field::Npz) {
            if (auto ok = assign(sample, *field, {member.name, member.data}); !ok) return ok.error();
            continue;
        }
        ZipLimits zip_limits;
        zip_limits.max_total_bytes = limits.max_output_bytes - inflated;
        auto arrays = read_zip(member.data, zip_limits);
        if (!arrays) return common::with_context(member.name, arrays.error());
        for (auto& array : *arrays) {
            inflated += array.data.size();
            auto inner = field_of(lowercase(array.name));
            auto from = member.name + ":" + array.name;
            if (!inner || *inner == Field::Text || *inner == Field::Label || *inner == Field::Npz) {
                ++shard.skipped_files;
                skipped.insert("npz:" + array.name);
                continue;
            }
            owned.push_back(std::move(array.data));
            if (auto ok = assign(sample, *inner, {from, owned.back()}); !ok) return ok.error();
        }
    }
    shard.skipped_extensions.assign(skipped.begin(), skipped.end());
    if (samples.empty()) return make_error("tar holds no samples (no KEY.latent.npy, KEY.npz, ... files)");
    return samples;
}

// Room for `bytes` more in the shard, or an error.
common::Status reserve(std::uint64_t& used, std::uint64_t bytes, const WebDatasetLimits& limits) {
    if (bytes > limits.max_output_bytes - used)
        return make_error("the shard would exceed " + std::to_string(limits.max_output_bytes) +
                          " bytes: split the tar");
    used += bytes;
    return {};
}

// The shard's columns as samples are added to it.
struct Columns {
    std::uint64_t used = 0;  // bytes, against WebDatasetLimits::max_output_bytes
    common::Bytes latents, tokens;
    std::vector<std::int64_t> labels, lengths, latent_shape;
    std::vector<std::string> caption_texts;
    std::optional<NpyType> latent_type;
    std::int64_t width = 0;  // of the caption features
};

// A sample has the same fields as the first one.
common::Status check_fields(const Sample& s, const Sample& first) {
    auto named = [&](const std::string& what) { return make_error("sample \"" + s.key + "\" " + what); };
    bool captions = first.feature.has_value(), texts = first.text.has_value();
    if (!s.latent) return named("has no latent (" + s.key + ".latent.npy)");
    if (s.feature.has_value() != captions)
        return named(captions ? "has no caption feature (.t5.npy, .clip.npy or .text_emb.npy) but others do"
                              : "has a caption feature but \"" + first.key + "\" has none");
    if (s.mask && !s.feature) return named("has a mask but no caption feature");
    if (s.text.has_value() != texts)
        return named(texts ? "has no caption text but others do"
                           : "has a caption text but \"" + first.key + "\" has none");
    return {};
}

common::Status add_latent(Columns& c, const Sample& s, const std::string& first_key, const WebDatasetLimits& limits) {
    auto named = [&](const std::string& what) { return make_error("sample \"" + s.key + "\" " + what); };
    auto latent = float_array(*s.latent, 3, "[C, H, W]");
    if (!latent) return latent.error();
    if (!c.latent_type) {
        c.latent_type = latent->type;
        c.latent_shape = latent->shape;
    } else if (latent->type != *c.latent_type || latent->shape != c.latent_shape) {
        return named("latent is " + std::string(npy_type_name(latent->type)) + " " + shape_text(latent->shape) +
                     " but \"" + first_key + "\"'s is " + std::string(npy_type_name(*c.latent_type)) + " " +
                     shape_text(c.latent_shape));
    }
    for (std::size_t i = 0; i < static_cast<std::size_t>(latent->numel()); ++i)
        if (!std::isfinite(float_at(*latent, i))) return named("latent holds a non-finite value");
    if (auto ok = reserve(c.used, latent->data.size(), limits); !ok) return ok;
    c.latents.insert(c.latents.end(), latent->data.begin(), latent->data.end());
    return {};
}

common::Status add_caption_text(Columns& c, const Source& text_field, const WebDatasetLimits& limits) {
    auto text = trim(common::as_string_view(text_field.bytes));
    if (text.size() > limits.max_caption_text_bytes)
        return make_error(text_field.from + ": caption text longer than " +
                          std::to_string(limits.max_caption_text_bytes) + " bytes");
    if (!is_caption_utf8(text)) return make_error(text_field.from + ": caption text is not UTF-8 (or holds NUL)");
    c.caption_texts.emplace_back(text);
    return {};
}

// The caption's tokens up to its mask's length, as float16.
common::Status add_caption_feature(Columns& c, const Sample& s, const std::string& first_key,
                                   const WebDatasetLimits& limits, WebDatasetShard& shard) {
    auto named = [&](const std::string& what) { return make_error("sample \"" + s.key + "\" " + what); };
    auto feature = float_array(*s.feature, 2, "[L, D]");
    if (!feature) return feature.error();
    auto l = feature->shape[0], d = feature->shape[1];
    if (c.width == 0) c.width = d;
    if (d != c.width)
        return named("caption feature is " + std::to_string(d) + " wide but \"" + first_key + "\"'s is " +
                     std::to_string(c.width));
    std::int64_t length = l;
    if (s.mask) {
        auto from_mask = mask_length(*s.mask, l);
        if (!from_mask) return from_mask.error();
        length = *from_mask;
    }
    c.lengths.push_back(length);
    shard.caption_tokens += length;
    auto values = static_cast<std::size_t>(length * d);
    if (auto ok = reserve(c.used, values * 2, limits); !ok) return ok;
    c.tokens.resize(c.tokens.size() + values * 2);
    auto* out = c.tokens.data() + c.tokens.size() - values * 2;
    for (std::size_t i = 0; i < values; ++i) {
        float v = float_at(*feature, i);
        if (!std::isfinite(v)) return named("caption feature holds a non-finite value");
        auto half = common::f32_to_f16(v);
        if ((half & 0x7c00u) == 0x7c00u)
            return named("caption feature value " + std::to_string(v) + " is past float16's range");
        std::memcpy(out + 2 * i, &half, 2);
    }
    return {};
}

// The columns as one safetensors shard.
common::Status write_columns(Columns& c, bool captions, bool texts, const WebDatasetLimits& limits,
                             WebDatasetShard& shard) {
    auto n = static_cast<std::int64_t>(c.labels.size());
    auto i64_bytes = [](const std::vector<std::int64_t>& v) {
        return common::ByteView(reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * sizeof(std::int64_t));
    };
    std::vector<common::TensorView> views;
    auto shape = c.latent_shape;
    shape.insert(shape.begin(), n);
    views.push_back(
        {"latents", *c.latent_type == NpyType::F16 ? common::DType::F16 : common::DType::F32, shape, c.latents});
    views.push_back({"labels", common::DType::I64, {n}, i64_bytes(c.labels)});
    if (captions) {
        views.push_back({"text_tokens", common::DType::F16, {shard.caption_tokens, c.width}, c.tokens});
        views.push_back({"text_len", common::DType::I64, {n}, i64_bytes(c.lengths)});
    }
    common::Bytes text_bytes;
    if (texts) {
        std::size_t longest = 1;
        for (const auto& t : c.caption_texts) longest = std::max(longest, t.size());
        if (auto ok = reserve(c.used, longest * c.caption_texts.size(), limits); !ok) return ok;
        text_bytes.assign(longest * c.caption_texts.size(), 0);
        for (std::size_t i = 0; i < c.caption_texts.size(); ++i)
            std::memcpy(text_bytes.data() + i * longest, c.caption_texts[i].data(), c.caption_texts[i].size());
        views.push_back({"captions", common::DType::U8, {n, static_cast<std::int64_t>(longest)}, text_bytes});
    }
    auto bytes = common::write_safetensors(views, {{"format", "pt"}, {"source", "webdataset"}});
    if (!bytes) return bytes.error();
    shard.safetensors = std::move(bytes).value();
    shard.samples = n;
    return {};
}

}  // namespace

common::Result<WebDatasetShard> webdataset_to_shard(common::ByteView tar, const WebDatasetLimits& limits) {
    WebDatasetShard shard;
    auto members = read_tar(tar);
    if (!members) return members.error();
    std::list<common::Bytes> owned;
    auto grouped = group(*members, limits, owned, shard);
    if (!grouped) return grouped.error();
    const auto& samples = *grouped;
    const auto& first = samples.front();
    bool captions = first.feature.has_value(), texts = first.text.has_value();
    Columns columns;
    for (const auto& s : samples) {
        if (auto ok = check_fields(s, first); !ok) return ok.error();
        if (auto ok = add_latent(columns, s, first.key, limits); !ok) return ok.error();
        std::int64_t label = 0;
        if (s.label) {
            auto parsed = parse_label(*s.label);
            if (!parsed) return parsed.error();
            label = *parsed;
        }
        columns.labels.push_back(label);
        if (s.text)
            if (auto ok = add_caption_text(columns, *s.text, limits); !ok) return ok.error();
        if (captions)
            if (auto ok = add_caption_feature(columns, s, first.key, limits, shard); !ok) return ok.error();
    }
    if (auto ok = write_columns(columns, captions, texts, limits, shard); !ok) return ok.error();
    return shard;
}

}  // namespace tessera::data
