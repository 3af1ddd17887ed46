// JSON forms of the protocol messages. Field names and limits here must match schemas/*.json;
// tests/schemas checks both against the same valid and invalid examples.
#include "protocol.h"

#include <cctype>

#include "json_strict.h"
#include "lr_schedule_json.h"
#include "sha256.h"
#include "text_encoding.h"

namespace tessera::common {
bool is_identifier(std::string_view text) {
    if (text.empty() || text.size() > kMaxIdentifier) return false;
    for (char c : text)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
    return true;
}

namespace {

bool is_printable_ascii(std::string_view text) {
    for (char c : text)
        if (c < 0x20 || c > 0x7e) return false;
    return true;
}

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
    auto text = reader.string(key, 44, 44);
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

boost::json::value encoding_to_json(const DeltaEncoding& encoding) {
    return {{"dtype", delta_dtype_name(encoding.dtype)}, {"topk_fraction", encoding.topk_fraction}};
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
    parent.absorb(reader.finish());
    return encoding;
}

// The optional fields are written only when set, so a unit without them keeps the bytes
// older clients sign and read.
boost::json::object hyper_to_json(const Hyperparameters& h) {
    boost::json::object json{{"local_steps", h.local_steps},   {"batch_size", h.batch_size},
                             {"lr", h.lr},                     {"warmup_steps", h.warmup_steps},
                             {"weight_decay", h.weight_decay}, {"grad_clip", h.grad_clip},
                             {"seed", h.seed}};
    if (h.optimizer != InnerOptimizer::Fresh) json["optimizer"] = inner_optimizer_name(h.optimizer);
    if (h.schedule) {
        json["schedule"] = lr_schedule_to_json(*h.schedule);
        json["schedule_from"] = h.schedule_from;
        json["schedule_to"] = h.schedule_to;
    }
    return json;
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
        hyper.optimizer = inner_optimizer_from_name(reader.one_of("optimizer", {"fresh", "kept"}))
                              .value_or(InnerOptimizer::Fresh);
    read_schedule(reader, hyper);
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

template <class T>
Result<T> finish(JsonObjectReader& reader, T message) {
    if (auto status = reader.finish(); !status) return status.error();
    return message;
}

}  // namespace

std::string_view inner_optimizer_name(InnerOptimizer optimizer) {
    return optimizer == InnerOptimizer::Kept ? "kept" : "fresh";
}

std::optional<InnerOptimizer> inner_optimizer_from_name(std::string_view name) {
    if (name == "fresh") return InnerOptimizer::Fresh;
    if (name == "kept") return InnerOptimizer::Kept;
    return std::nullopt;
}

boost::json::value to_json(const WorkUnit& m) {
    boost::json::array shards;
    for (const auto& shard : m.shards) shards.push_back(blob_to_json(shard));
    boost::json::array patches;
    for (const auto& patch : m.patches) patches.push_back(blob_to_json(patch));
    return {{"wu_id", m.wu_id},
            {"task_id", m.task_id},
            {"client_id", m.client_id},
            {"model", m.model},
            {"base_version", m.base_version},
            {"model_blob", blob_to_json(m.model_blob)},
            {"patch_from", m.patch_from},
            {"patches", std::move(patches)},
            {"shards", std::move(shards)},
            {"blob_base_url", m.blob_base_url},
            {"hyper", hyper_to_json(m.hyper)},
            {"random", m.random},
            {"encoding", encoding_to_json(m.encoding)},
            {"issued_at", m.issued_at},
            {"deadline", m.deadline}};
}

Result<WorkUnit> work_unit_from_json(const boost::json::value& json) {
    JsonObjectReader reader(json, "work_unit");
    WorkUnit m;
    m.wu_id = read_identifier(reader, "wu_id");
    m.task_id = read_identifier(reader, "task_id");
    m.client_id = read_identifier(reader, "client_id");
    m.model = read_identifier(reader, "model");
    m.base_version = reader.integer("base_version", 0, kMaxSafeInteger);
    m.model_blob = read_blob_field(reader, "model_blob");
    m.patch_from = read_optional_sha256(reader, "patch_from");
    m.patches = read_blob_list(reader, "patches", kMaxPatchChain);
    if (!reader.failed() && m.patches.empty() != m.patch_from.empty())
        reader.fail("fields \"patch_from\" and \"patches\": both empty or neither");
    if (const auto* shards = reader.field("shards")) {
        const auto* array = shards->if_array();
        if (array == nullptr || array->empty() || array->size() > kMaxShardsPerWorkUnit)
            reader.fail("field \"shards\": expected an array of 1 to " + std::to_string(kMaxShardsPerWorkUnit) +
                        " blobs");
        else
            for (std::size_t i = 0; i < array->size(); ++i)
                m.shards.push_back(read_blob((*array)[i], "work_unit.shards[" + std::to_string(i) + "]", reader));
    }
    m.blob_base_url = read_blob_base_url(reader);
    m.hyper = read_hyper(reader, "hyper");
    m.random = reader.one_of("random", {kUnitRandomSpec});
    m.encoding = read_encoding(reader, "encoding");
    m.issued_at = reader.integer("issued_at", 0, kMaxSafeInteger);
    m.deadline = reader.integer("deadline", 0, kMaxSafeInteger);
    if (!reader.failed() && m.deadline <= m.issued_at) reader.fail("deadline must be after issued_at");
    return finish(reader, std::move(m));
}

boost::json::value to_json(const ResultManifest& m) {
    const auto& x = m.metrics;
    return {{"wu_id", m.wu_id},
            {"client_id", m.client_id},
            {"base_version", m.base_version},
            {"delta_blob", blob_to_json(m.delta_blob)},
            {"encoding", encoding_to_json(m.encoding)},
            {"metrics",
             {{"loss_start", x.loss_start},
              {"loss_end", x.loss_end},
              {"samples", x.samples},
              {"seconds", x.seconds},
              {"samples_per_s", x.samples_per_s}}},
            {"device", m.device}};
}

Result<ResultManifest> result_manifest_from_json(const boost::json::value& json) {
    JsonObjectReader reader(json, "result_manifest");
    ResultManifest m;
    m.wu_id = read_identifier(reader, "wu_id");
    m.client_id = read_identifier(reader, "client_id");
    m.base_version = reader.integer("base_version", 0, kMaxSafeInteger);
    m.delta_blob = read_blob_field(reader, "delta_blob");
    m.encoding = read_encoding(reader, "encoding");
    m.metrics = read_metrics(reader, "metrics");
    m.device = read_printable(reader, "device", 1, 128);
    return finish(reader, std::move(m));
}

boost::json::value to_json(const RegisterRequest& m) {
    return {{"public_key", m.public_key}, {"name", m.name}, {"client_version", m.client_version}};
}

Result<RegisterRequest> register_request_from_json(const boost::json::value& json) {
    JsonObjectReader reader(json, "register_request");
    RegisterRequest m;
    m.public_key = read_public_key(reader, "public_key");
    m.name = read_printable(reader, "name", 1, 64);
    m.client_version = read_printable(reader, "client_version", 1, 32);
    return finish(reader, std::move(m));
}

boost::json::value to_json(const RegisterResponse& m) {
    return {{"client_id", m.client_id}, {"server_public_key", m.server_public_key}, {"server_key_id", m.server_key_id}};
}

Result<RegisterResponse> register_response_from_json(const boost::json::value& json) {
    JsonObjectReader reader(json, "register_response");
    RegisterResponse m;
    m.client_id = read_identifier(reader, "client_id");
    m.server_public_key = read_public_key(reader, "server_public_key");
    m.server_key_id = reader.lower_hex("server_key_id", kKeyIdHexLength);
    return finish(reader, std::move(m));
}

boost::json::value to_json(const WorkRequest& m) {
    boost::json::array cached;
    for (const auto& hash : m.cached_shards) cached.push_back(boost::json::string(hash));
    boost::json::object json{{"client_id", m.client_id},
                             {"device",
                              {{"kind", m.device.kind},
                               {"name", m.device.name},
                               {"memory_bytes", m.device.memory_bytes},
                               {"threads", m.device.threads}}},
                             {"samples_per_s", m.samples_per_s},
                             {"cached_shards", std::move(cached)},
                             {"held_model", m.held_model}};
    if (!m.only_tasks.empty()) json["tasks"] = identifiers_to_json(m.only_tasks);
    if (!m.exclude_tasks.empty()) json["exclude_tasks"] = identifiers_to_json(m.exclude_tasks);
    return json;
}

Result<WorkRequest> work_request_from_json(const boost::json::value& json) {
    JsonObjectReader reader(json, "work_request");
    WorkRequest m;
    m.client_id = read_identifier(reader, "client_id");
    if (const auto* device = reader.field("device")) {
        JsonObjectReader d(*device, reader.path_of("device"));
        m.device.kind = d.one_of("kind", {"cpu", "cuda"});
        m.device.name = read_printable(d, "name", 1, 128);
        m.device.memory_bytes = d.integer("memory_bytes", 0, kMaxSafeInteger);
        m.device.threads = d.integer("threads", 1, 4096);
        reader.absorb(d.finish());
    }
    m.samples_per_s = reader.number("samples_per_s", 0.0, 1e12);
    if (const auto* cached = reader.field("cached_shards")) {
        const auto* array = cached->if_array();
        if (array == nullptr || array->size() > kMaxCachedShards) {
            reader.fail("field \"cached_shards\": expected an array of at most " + std::to_string(kMaxCachedShards) +
                        " hashes");
        } else {
            for (const auto& hash : *array) {
                const auto* text = hash.if_string();
                if (text == nullptr || !is_lower_hex(std::string_view(text->data(), text->size()), kSha256HexLength)) {
                    reader.fail("field \"cached_shards\": expected SHA-256 hashes as 64 lowercase hex digits");
                    break;
                }
                m.cached_shards.emplace_back(text->data(), text->size());
            }
        }
    }
    m.held_model = read_optional_sha256(reader, "held_model");
    m.only_tasks = read_identifiers(reader, "tasks", kMaxTaskChoices);
    m.exclude_tasks = read_identifiers(reader, "exclude_tasks", kMaxTaskChoices);
    return finish(reader, std::move(m));
}

boost::json::value to_json(const WorkResponse& m) {
    if (m.has_work) return {{"status", "work"}, {"work_unit", envelope_to_json(m.work_unit)}};
    return {{"status", "no_work"}, {"retry_after_s", m.retry_after_s}};
}

Result<WorkResponse> work_response_from_json(const boost::json::value& json) {
    JsonObjectReader reader(json, "work_response");
    WorkResponse m;
    auto status = reader.one_of("status", {"work", "no_work"});
    m.has_work = status == "work";
    if (m.has_work) {
        if (const auto* envelope = reader.field("work_unit")) {
            auto parsed = envelope_from_json(*envelope, reader.path_of("work_unit"));
            if (parsed)
                m.work_unit = std::move(parsed).value();
            else
                reader.absorb(parsed.error());
        }
    } else if (!reader.failed()) {
        m.retry_after_s = reader.integer("retry_after_s", 1, 86400);
    }
    return finish(reader, std::move(m));
}

boost::json::value to_json(const WorkUnitRef& m) { return {{"client_id", m.client_id}, {"wu_id", m.wu_id}}; }

Result<WorkUnitRef> work_unit_ref_from_json(const boost::json::value& json) {
    JsonObjectReader reader(json, "work_unit_ref");
    WorkUnitRef m;
    m.client_id = read_identifier(reader, "client_id");
    m.wu_id = read_identifier(reader, "wu_id");
    return finish(reader, std::move(m));
}

boost::json::value to_json(const HeartbeatResponse& m) {
    return {{"keep_working", m.keep_working}, {"deadline", m.deadline}};
}

Result<HeartbeatResponse> heartbeat_response_from_json(const boost::json::value& json) {
    JsonObjectReader reader(json, "heartbeat_response");
    HeartbeatResponse m;
    m.keep_working = reader.boolean("keep_working");
    m.deadline = reader.integer("deadline", 0, kMaxSafeInteger);
    return finish(reader, std::move(m));
}

boost::json::value to_json(const ResultStatus& m) {
    return {{"wu_id", m.wu_id}, {"state", m.state}, {"reason", m.reason}, {"credit", m.credit}};
}

Result<ResultStatus> result_status_from_json(const boost::json::value& json) {
    JsonObjectReader reader(json, "result_status");
    ResultStatus m;
    m.wu_id = read_identifier(reader, "wu_id");
    m.state = reader.one_of("state", {"in_progress", "returned", "validated", "accepted", "confirmed", "merged",
                                      "rejected", "timed_out", "abandoned"});
    m.reason = reader.string("reason", 0, 64);
    m.credit = reader.number("credit", 0, 1e15);
    return finish(reader, std::move(m));
}

template <class T>
Result<T> parse_message(std::string_view text) {
    auto json = parse_json_strict(text);
    if (!json) return json.error();
    if constexpr (std::is_same_v<T, WorkUnit>)
        return work_unit_from_json(*json);
    else if constexpr (std::is_same_v<T, ResultManifest>)
        return result_manifest_from_json(*json);
    else if constexpr (std::is_same_v<T, RegisterRequest>)
        return register_request_from_json(*json);
    else if constexpr (std::is_same_v<T, RegisterResponse>)
        return register_response_from_json(*json);
    else if constexpr (std::is_same_v<T, WorkRequest>)
        return work_request_from_json(*json);
    else if constexpr (std::is_same_v<T, WorkUnitRef>)
        return work_unit_ref_from_json(*json);
    else if constexpr (std::is_same_v<T, HeartbeatResponse>)
        return heartbeat_response_from_json(*json);
    else if constexpr (std::is_same_v<T, ResultStatus>)
        return result_status_from_json(*json);
    else
        return work_response_from_json(*json);
}

template Result<WorkUnit> parse_message<WorkUnit>(std::string_view);
template Result<ResultManifest> parse_message<ResultManifest>(std::string_view);
template Result<RegisterRequest> parse_message<RegisterRequest>(std::string_view);
template Result<RegisterResponse> parse_message<RegisterResponse>(std::string_view);
template Result<WorkRequest> parse_message<WorkRequest>(std::string_view);
template Result<WorkResponse> parse_message<WorkResponse>(std::string_view);
template Result<WorkUnitRef> parse_message<WorkUnitRef>(std::string_view);
template Result<HeartbeatResponse> parse_message<HeartbeatResponse>(std::string_view);
template Result<ResultStatus> parse_message<ResultStatus>(std::string_view);

}  // namespace tessera::common
