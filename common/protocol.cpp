// JSON forms of the protocol messages. Field names and limits here must match schemas/*.json;
// tests/schemas checks both against the same valid and invalid examples.
#include "protocol.h"

#include <cctype>

#include "commitments_json.h"
#include "json_strict.h"
#include "protocol_fields.h"
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

using namespace protocol_fields;

std::string_view inner_optimizer_name(InnerOptimizer optimizer) {
    return optimizer == InnerOptimizer::Kept ? "kept" : "fresh";
}

std::optional<InnerOptimizer> inner_optimizer_from_name(std::string_view name) {
    if (name == "fresh") return InnerOptimizer::Fresh;
    if (name == "kept") return InnerOptimizer::Kept;
    return std::nullopt;
}

namespace {

LossCheck read_loss_check(const boost::json::value& json, const std::string& path, JsonObjectReader& parent) {
    JsonObjectReader reader(json, path);
    LossCheck check;
    check.result = read_blob_field(reader, "result");
    check.held_out = read_blob_field(reader, "held_out");
    check.samples = reader.integer("samples", 1, kMaxCheckSamples);
    parent.absorb(reader.finish());
    return check;
}

}  // namespace

boost::json::value to_json(const LossCheck& check) {
    return boost::json::object{
        {"result", blob_to_json(check.result)}, {"held_out", blob_to_json(check.held_out)}, {"samples", check.samples}};
}

Result<LossCheck> loss_check_from_json(const boost::json::value& json) {
    JsonObjectReader parent(json, "check");  // only for its first error
    auto check = read_loss_check(json, "check", parent);
    if (parent.failed()) return parent.finish().error();
    return check;
}

boost::json::value to_json(const WorkUnit& m) {
    boost::json::array shards;
    for (const auto& shard : m.shards) shards.push_back(blob_to_json(shard));
    boost::json::array patches;
    for (const auto& patch : m.patches) patches.push_back(blob_to_json(patch));
    boost::json::object json{{"wu_id", m.wu_id},
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
    // Written only when set, so a unit without it keeps the bytes older clients read.
    if (m.moments) json["moments"] = blob_to_json(*m.moments);
    if (m.check) json["check"] = to_json(*m.check);
    return json;
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
    if (reader.has("moments")) {
        m.moments = read_blob_field(reader, "moments");
        if (!reader.failed() && m.hyper.optimizer != InnerOptimizer::Kept)
            reader.fail("field \"moments\": only a unit with optimizer \"kept\" resumes moments");
    }
    if (const auto* check = reader.has("check") ? reader.field("check") : nullptr) {
        m.check = read_loss_check(*check, reader.path_of("check"), reader);
        if (!reader.failed() && m.moments) reader.fail("field \"check\": a loss-check unit resumes no moments");
    }
    return finish(reader, std::move(m));
}

boost::json::value to_json(const ResultManifest& m) {
    const auto& x = m.metrics;
    boost::json::object json = {{"wu_id", m.wu_id},
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
    if (m.commitments) json["commitments"] = commitments_to_json(*m.commitments);
    return json;
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
    m.device = read_printable(reader, "device", 1, kMaxDeviceName);
    if (reader.has("commitments")) m.commitments = read_commitments(reader, "commitments");
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
        m.device.name = read_printable(d, "name", 1, kMaxDeviceName);
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
    boost::json::object json{{"wu_id", m.wu_id}, {"state", m.state}, {"reason", m.reason}, {"credit", m.credit}};
    if (m.moments_wanted) json["moments_wanted"] = true;
    return json;
}

Result<ResultStatus> result_status_from_json(const boost::json::value& json) {
    JsonObjectReader reader(json, "result_status");
    ResultStatus m;
    m.wu_id = read_identifier(reader, "wu_id");
    m.state = reader.one_of("state", {"in_progress", "returned", "validated", "accepted", "confirmed", "merged",
                                      "rejected", "timed_out", "abandoned"});
    m.reason = reader.string("reason", 0, 64);
    m.credit = reader.number("credit", 0, 1e15);
    if (reader.has("moments_wanted")) m.moments_wanted = reader.boolean("moments_wanted");
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
