// The protocol messages' fields as JSON (protocol_fields.h). Limits here must match
// schemas/*.json; tests/schemas checks both against the same valid and invalid examples.
#include "protocol_fields.h"

#include "ed25519.h"
#include "lr_schedule_json.h"
#include "sha256.h"
#include "text_encoding.h"

namespace tessera::common::protocol_fields {
namespace {

bool is_printable_ascii(std::string_view text) {
    for (char c : text)
        if (c < 0x20 || c > 0x7e) return false;
    return true;
}

// The run-wide schedule and the span the unit covers: all three fields or none.
void read_schedule(JsonObjectReader& reader, Hyperparameters& hyper) {
    const bool any = reader.has("schedule") || reader.has("schedule_from") || reader.has("schedule_to");
    if (!any) return;
    hyper.schedule = read_lr_schedule(reader, "schedule");
    hyper.schedule_from = reader.integer("schedule_from", 0, kMaxSafeInteger);
    hyper.schedule_to = reader.integer("schedule_to", 0, kMaxSafeInteger);
    if (!reader.failed() && hyper.schedule_to < hyper.schedule_from)
        reader.fail("field \"schedule_to\": must not be below schedule_from");
}

}  // namespace

// An id field: 1–64 characters of [A-Za-z0-9_-].
std::string read_identifier(JsonObjectReader& reader, std::string_view key) {
    auto text = reader.string(key, 1, kMaxIdentifier);
    if (!reader.failed() && !is_identifier(text))
        reader.fail("field \"" + std::string(key) + "\": expected 1 to 64 characters of A-Z a-z 0-9 _ -");
    return text;
}

// An optional array of at most `max` identifiers; empty when absent.
std::vector<std::string> read_identifiers(JsonObjectReader& reader, std::string_view key, std::size_t max) {
    std::vector<std::string> names;
    const auto* field = reader.has(key) ? reader.field(key) : nullptr;
    if (field == nullptr) return names;
    const auto* array = field->if_array();
    if (array == nullptr || array->size() > max) {
        reader.fail("field \"" + std::string(key) + "\": expected an array of at most " + std::to_string(max) +
                    " names");
        return names;
    }
    for (const auto& item : *array) {
        const auto* text = item.if_string();
        if (text == nullptr || !is_identifier(std::string_view(text->data(), text->size()))) {
            reader.fail("field \"" + std::string(key) + "\": expected names of 1 to 64 characters of A-Z a-z 0-9 _ -");
            return {};
        }
        names.emplace_back(text->data(), text->size());
    }
    return names;
}

boost::json::array identifiers_to_json(const std::vector<std::string>& names) {
    boost::json::array array;
    for (const auto& name : names) array.push_back(boost::json::string(name));
    return array;
}

std::string read_printable(JsonObjectReader& reader, std::string_view key, std::size_t min, std::size_t max) {
    auto text = reader.string(key, min, max);
    if (!reader.failed() && !is_printable_ascii(text))
        reader.fail("field \"" + std::string(key) + "\": expected printable ASCII");
    return text;
}

std::string read_public_key(JsonObjectReader& reader, std::string_view key) {
    auto text = reader.string(key, kEd25519PublicKeyBase64Length, kEd25519PublicKeyBase64Length);
    if (reader.failed()) return text;
    auto raw = from_base64(text);
    if (!raw || raw->size() != kEd25519PublicKeyBytes)
        reader.fail("field \"" + std::string(key) + "\": expected a 32-byte key in base64");
    return text;
}

// "" or an http(s) URL of printable ASCII without a trailing slash (docs/protocol.md).
std::string read_blob_base_url(JsonObjectReader& reader) {
    auto text = reader.string("blob_base_url", 0, 512);
    if (reader.failed() || text.empty()) return text;
    bool scheme_ok = text.starts_with("http://") || text.starts_with("https://");
    bool chars_ok = is_printable_ascii(text) && text.find(' ') == std::string::npos;
    if (!scheme_ok || !chars_ok || text.back() == '/')
        reader.fail("field \"blob_base_url\": expected \"\" or an http(s) URL without a trailing slash");
    return text;
}

boost::json::value blob_to_json(const BlobRef& blob) { return {{"sha256", blob.sha256}, {"bytes", blob.bytes}}; }

BlobRef read_blob(const boost::json::value& json, const std::string& path, JsonObjectReader& parent) {
    JsonObjectReader reader(json, path);
    BlobRef blob;
    blob.sha256 = reader.lower_hex("sha256", kSha256HexLength);
    blob.bytes = reader.integer("bytes", 0, kMaxSafeInteger);
    parent.absorb(reader.finish());
    return blob;
}

BlobRef read_blob_field(JsonObjectReader& parent, std::string_view key) {
    const auto* json = parent.field(key);
    return json ? read_blob(*json, parent.path_of(key), parent) : BlobRef{};
}

// An optional field holding "" or a SHA-256 hex digest; absent reads as "".
std::string read_optional_sha256(JsonObjectReader& reader, std::string_view key) {
    if (!reader.has(key)) return {};
    auto text = reader.string(key, 0, kSha256HexLength);
    if (!reader.failed() && !text.empty() && !is_lower_hex(text, kSha256HexLength))
        reader.fail("field \"" + std::string(key) + "\": expected \"\" or 64 lowercase hex digits");
    return text;
}

// An optional array of at most `max` blobs; absent reads as empty.
std::vector<BlobRef> read_blob_list(JsonObjectReader& reader, std::string_view key, std::size_t max) {
    std::vector<BlobRef> blobs;
    if (!reader.has(key)) return blobs;
    const auto* json = reader.field(key);
    const auto* array = json ? json->if_array() : nullptr;
    if (array == nullptr || array->size() > max) {
        reader.fail("field \"" + std::string(key) + "\": expected an array of at most " + std::to_string(max) +
                    " blobs");
        return blobs;
    }
    for (std::size_t i = 0; i < array->size(); ++i)
        blobs.push_back(read_blob((*array)[i], reader.path_of(key) + "[" + std::to_string(i) + "]", reader));
    return blobs;
}

// "residual" is written only when held, so a unit without it keeps the bytes older clients read.
boost::json::value encoding_to_json(const DeltaEncoding& encoding) {
    boost::json::object json{{"dtype", delta_dtype_name(encoding.dtype)}, {"topk_fraction", encoding.topk_fraction}};
    if (!encoding.carry_residual) json["residual"] = "held";
    return json;
}

DeltaEncoding read_encoding(JsonObjectReader& parent, std::string_view key) {
    DeltaEncoding encoding;
    const auto* json = parent.field(key);
    if (json == nullptr) return encoding;
    JsonObjectReader reader(*json, parent.path_of(key));
    auto dtype = reader.one_of("dtype", {"f32", "bf16", "int8", "int4", "int2"});
    encoding.topk_fraction = reader.number("topk_fraction", 0.0, 1.0);
    if (!reader.failed() && encoding.topk_fraction <= 0.0) reader.fail("field \"topk_fraction\": must be above 0");
    if (!reader.failed()) encoding.dtype = *delta_dtype_from_name(dtype);
    if (reader.has("residual")) encoding.carry_residual = reader.one_of("residual", {"carried", "held"}) != "held";
    parent.absorb(reader.finish());
    return encoding;
}

// The optional fields are written only when set, so a unit without them keeps the bytes
// older clients sign and read.
boost::json::object hyper_to_json(const Hyperparameters& h) {
    boost::json::object json{{"local_steps", h.local_steps},
                             {"batch_size", h.batch_size},
                             {"lr", h.lr},
                             {"warmup_steps", h.warmup_steps},
                             {"weight_decay", h.weight_decay},
                             {"grad_clip", h.grad_clip},
                             {"seed", h.seed}};
    if (h.optimizer != InnerOptimizer::Fresh) json["optimizer"] = inner_optimizer_name(h.optimizer);
    if (h.schedule) {
        json["schedule"] = lr_schedule_to_json(*h.schedule);
        json["schedule_from"] = h.schedule_from;
        json["schedule_to"] = h.schedule_to;
    }
    if (h.caption_drop) json["caption_drop"] = *h.caption_drop;
    if (h.patch_mask > 0) json["patch_mask"] = h.patch_mask;
    return json;
}

Hyperparameters read_hyper(JsonObjectReader& parent, std::string_view key) {
    Hyperparameters hyper;
    const auto* json = parent.field(key);
    if (json == nullptr) return hyper;
    JsonObjectReader reader(*json, parent.path_of(key));
    hyper.local_steps = reader.integer("local_steps", 1, 1000000);
    hyper.batch_size = reader.integer("batch_size", 1, 65536);
    hyper.lr = reader.number("lr", 0.0, 10.0);
    hyper.warmup_steps = reader.integer("warmup_steps", 0, 1000000);
    hyper.weight_decay = reader.number("weight_decay", 0.0, 10.0);
    hyper.grad_clip = reader.number("grad_clip", 0.0, 1e6);
    hyper.seed = reader.integer("seed", 0, kMaxSafeInteger);
    if (reader.has("optimizer"))
        hyper.optimizer =
            inner_optimizer_from_name(reader.one_of("optimizer", {"fresh", "kept"})).value_or(InnerOptimizer::Fresh);
    read_schedule(reader, hyper);
    if (reader.has("caption_drop")) hyper.caption_drop = reader.number("caption_drop", 0.0, 1.0);
    if (reader.has("patch_mask")) hyper.patch_mask = reader.number("patch_mask", 0.0, kMaxPatchMask);
    parent.absorb(reader.finish());
    return hyper;
}

TrainMetrics read_metrics(JsonObjectReader& parent, std::string_view key) {
    TrainMetrics metrics;
    const auto* json = parent.field(key);
    if (json == nullptr) return metrics;
    JsonObjectReader reader(*json, parent.path_of(key));
    metrics.loss_start = reader.number("loss_start", -1e30, 1e30);
    metrics.loss_end = reader.number("loss_end", -1e30, 1e30);
    metrics.samples = reader.integer("samples", 0, kMaxSafeInteger);
    metrics.seconds = reader.number("seconds", 0.0, 1e9);
    metrics.samples_per_s = reader.number("samples_per_s", 0.0, 1e12);
    parent.absorb(reader.finish());
    return metrics;
}

}  // namespace tessera::common::protocol_fields
