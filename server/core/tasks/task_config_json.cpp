// A task's configuration as stored (tasks.config): written by to_json, read back field by
// field with each one's bounds. Fields added since the first tasks have their defaults when absent.
#include <boost/json.hpp>

#include <cmath>

#include "dataset_manifest.h"
#include "expert_clusters.h"
#include "json_strict.h"
#include "lr_schedule_json.h"
#include "protocol.h"
#include "task_config.h"

namespace tessera::server {

namespace {

// The router's caption clusters, or null.
boost::json::value caption_clusters_json(const CaptionClusters& clusters) {
    if (clusters.empty()) return nullptr;
    boost::json::array centres;
    for (const auto& centre : clusters.centres) centres.push_back(boost::json::array(centre.begin(), centre.end()));
    return boost::json::object{{"centres", std::move(centres)},
                               {"sizes", boost::json::array(clusters.sizes.begin(), clusters.sizes.end())},
                               {"inertia", clusters.inertia}};
}

// The model, data, merging, training and codec fields, in the stored order.
boost::json::object model_and_training_json(const TaskConfig& c) {
    boost::json::array shape(c.sample_shape.begin(), c.sample_shape.end());
    boost::json::array class_counts;
    for (const auto& row : c.expert_class_counts) class_counts.push_back(boost::json::array(row.begin(), row.end()));
    return {{"task_id", c.task_id},
            {"model", c.model},
            {"data_dir", c.data_dir},
            {"data_kind", c.data_kind},
            {"sample_shape", shape},
            {"num_classes", c.num_classes},
            {"text_dim", c.text_dim},
            {"init_seed", c.init_seed},
            {"expert_group", c.expert_group},
            {"expert_index", c.expert_index},
            {"expert_class_counts", std::move(class_counts)},
            {"expert_caption_clusters", caption_clusters_json(c.expert_caption_clusters)},
            {"policy", policy_name(c.merge.kind)},
            {"staleness", c.merge.staleness.to_string()},
            {"server_lr", c.merge.server_lr},
            {"clip_norm", c.merge.clip_norm},
            {"buffer_size", c.merge.buffer_size},
            {"trim_fraction", c.merge.trim_fraction},
            {"momentum", c.merge.momentum},
            {"concurrency_exponent", c.merge.concurrency_exponent},
            {"local_steps", c.local_steps},
            {"batch_size", c.batch_size},
            {"lr", c.lr},
            {"warmup_steps", c.warmup_steps},
            {"weight_decay", c.weight_decay},
            {"grad_clip", c.grad_clip},
            {"caption_drop", c.caption_drop},
            {"patch_mask", c.patch_mask},
            {"ema_decay", c.ema_decay},
            {"inner_optimizer", common::inner_optimizer_name(c.inner_optimizer)},
            {"lr_schedule", c.lr_schedule ? boost::json::value(common::lr_schedule_to_json(*c.lr_schedule))
                                          : boost::json::value(nullptr)},
            {"codec", common::delta_dtype_name(c.codec.dtype)},
            {"topk_fraction", c.codec.topk_fraction},
            {"patch_codec", c.patches ? common::delta_dtype_name(c.patches->dtype) : std::string_view("off")},
            {"patch_topk_fraction", c.patches ? c.patches->topk_fraction : 1.0},
            {"publish_every", c.publish_every},
            {"catch_up_states", c.catch_up_states}};
}

// How units are issued and results checked, and the loss curve's evaluations.
boost::json::object issuing_and_checks_json(const TaskConfig& c) {
    return {{"deadline_s", c.deadline_s},
            {"shards_per_unit", c.shards_per_unit},
            {"target_seconds", c.target_seconds},
            {"min_rounds", c.min_rounds},
            {"units_end_together", c.units_end_together},
            {"max_failures", c.max_failures},
            {"max_in_flight", c.max_in_flight},
            {"requires_device", c.requires_device},
            {"min_device_memory_gb", c.min_device_memory_gb},
            {"replication", c.replication},
            {"replica_tolerance", c.replica_tolerance},
            {"loss_check", c.loss_check},
            {"audit", c.audit},
            {"audit_by", c.audit_by},
            {"check_by", c.check_by},
            {"loss_tolerance", c.loss_tolerance},
            {"norm_bound", c.norm_bound},
            {"check_samples", c.check_samples},
            {"norm_floor", c.norm_floor},
            {"min_gain", c.min_gain},
            {"copy_similarity", c.copy_similarity},
            {"min_alignment", c.min_alignment},
            {"trust_streak", c.trust_streak},
            {"quarantine_rejections", c.quarantine_rejections},
            {"quarantine_window_s", c.quarantine_window_s},
            {"eval_samples", c.eval_samples},
            {"eval_interval_s", c.eval_interval_s},
            {"eval_full_interval_s", c.eval_full_interval_s}};
}

}  // namespace

boost::json::value to_json(const TaskConfig& c) {
    auto json = model_and_training_json(c);
    for (auto& [key, value] : issuing_and_checks_json(c)) json.emplace(key, std::move(value));
    return json;
}

namespace {

using common::JsonObjectReader;
constexpr std::int64_t kBig = common::kMaxSafeInteger;

// expert_class_counts: rows of non-negative integers (their shape is checked with the config).
void read_class_counts(JsonObjectReader& r, TaskConfig& c) {
    const auto* rows = r.field("expert_class_counts")->if_array();
    if (rows == nullptr || static_cast<std::int64_t>(rows->size()) > common::kMaxExperts)
        return r.fail("expert_class_counts must be an array of at most " + std::to_string(common::kMaxExperts) +
                      " rows");
    for (const auto& row : *rows) {
        const auto* counts = row.if_array();
        if (counts == nullptr || static_cast<std::int64_t>(counts->size()) > common::kMaxClasses)
            return r.fail("expert_class_counts rows must be arrays of counts");
        auto& out = c.expert_class_counts.emplace_back();
        std::int64_t n = 0;
        for (const auto& v : *counts)
            if (common::json_to_integer(v, 0, kBig, n))
                out.push_back(n);
            else
                return r.fail("expert_class_counts holds a negative or non-integer count");
    }
}

// A row of finite numbers of at most `max` values, or false.
bool read_numbers(const boost::json::value& value, std::size_t max, std::vector<double>& out) {
    const auto* array = value.if_array();
    if (array == nullptr || array->empty() || array->size() > max) return false;
    for (const auto& v : *array) {
        if (!v.is_number() || !std::isfinite(v.to_number<double>())) return false;
        out.push_back(v.to_number<double>());
    }
    return true;
}

// expert_caption_clusters: null, or the centres' rows, the sizes and the inertia (their shapes
// are checked with the config).
void read_caption_clusters(JsonObjectReader& r, TaskConfig& c) {
    const auto* value = r.field("expert_caption_clusters");
    if (value == nullptr || value->is_null()) return;
    JsonObjectReader nested(*value, r.path_of("expert_caption_clusters"));
    auto& out = c.expert_caption_clusters;
    out.inertia = nested.number("inertia", 0, 1e300);
    const auto* centres = nested.field("centres");
    if (centres != nullptr) {
        const auto* rows = centres->if_array();
        if (rows == nullptr || rows->empty() || static_cast<std::int64_t>(rows->size()) > common::kMaxExperts)
            nested.fail("centres must be an array of 1.." + std::to_string(common::kMaxExperts) + " rows");
        else
            for (const auto& row : *rows)
                if (!read_numbers(row, static_cast<std::size_t>(common::kMaxTextDim), out.centres.emplace_back()))
                    return r.fail(nested.path_of("centres") + ": rows must hold finite numbers");
    }
    if (const auto* sizes = nested.field("sizes"); sizes != nullptr) {
        const auto* array = sizes->if_array();
        std::int64_t n = 0;
        if (array == nullptr || static_cast<std::int64_t>(array->size()) > common::kMaxExperts)
            nested.fail("sizes must be an array of counts");
        else
            for (const auto& v : *array)
                if (common::json_to_integer(v, 0, kBig, n))
                    out.sizes.push_back(n);
                else
                    return r.fail(nested.path_of("sizes") + ": expected non-negative integers");
    }
    r.absorb(nested.finish());
}

void read_data_fields(JsonObjectReader& r, TaskConfig& c) {
    c.task_id = r.string("task_id", 1, common::kMaxIdentifier);
    c.model = r.string("model", 1, 64);
    c.data_dir = r.string("data_dir", 1);
    c.data_kind = r.one_of("data_kind", {"latents", "pixels"});
    if (const auto* shape = r.field("sample_shape"); shape && shape->is_array())
        for (const auto& d : shape->as_array()) {
            std::int64_t v = 0;
            if (!common::json_to_integer(d, 1, common::kMaxSampleDim, v))
                r.fail("sample_shape: expected positive integers");
            c.sample_shape.push_back(v);
        }
    c.num_classes = r.integer("num_classes", 0, common::kMaxClasses);
    c.text_dim = r.integer("text_dim", 0, common::kMaxTextDim);
    c.init_seed = r.integer("init_seed", 0, kBig);
    // Tasks created before expert groups existed are ordinary tasks.
    if (r.has("expert_group")) c.expert_group = r.string("expert_group", 0, common::kMaxIdentifier);
    if (r.has("expert_index")) c.expert_index = r.integer("expert_index", kRouterIndex, common::kMaxExperts - 1);
    if (r.has("expert_class_counts")) read_class_counts(r, c);
    if (r.has("expert_caption_clusters")) read_caption_clusters(r, c);
}

void read_merge_fields(JsonObjectReader& r, TaskConfig& c) {
    auto policy = policy_from_name(r.one_of("policy", {"fedasync", "fedbuff", "diloco", "diloco-dn"}));
    if (policy) c.merge.kind = *policy;
    auto staleness_text = r.string("staleness", 1, 64);
    if (!r.failed()) {
        auto staleness = parse_staleness(staleness_text);
        if (staleness)
            c.merge.staleness = *staleness;
        else
            r.fail(staleness.message());
    }
    c.merge.server_lr = r.number("server_lr", 0, 100);
    c.merge.clip_norm = r.number("clip_norm", 0, 1e12);
    c.merge.buffer_size = r.integer("buffer_size", 1, 100000);
    c.merge.trim_fraction = r.number("trim_fraction", 0, 0.5);
    c.merge.momentum = r.number("momentum", 0, 1);
    // Tasks created before it existed apply each result whole; those of 2026-11-26/27 stored
    // per_concurrency (a division by C, the exponent 1).
    if (r.has("concurrency_exponent"))
        c.merge.concurrency_exponent = r.number("concurrency_exponent", 0, 2);
    else if (r.has("per_concurrency") && r.boolean("per_concurrency"))
        c.merge.concurrency_exponent = 1;
}

void read_training_fields(JsonObjectReader& r, TaskConfig& c) {
    c.local_steps = r.integer("local_steps", 1, kMaxLocalSteps);
    c.batch_size = r.integer("batch_size", 1, kMaxBatchSize);
    c.lr = r.number("lr", 0, kMaxLr);
    c.warmup_steps = r.integer("warmup_steps", 0, 100000);
    c.weight_decay = r.number("weight_decay", 0, kMaxWeightDecay);
    c.grad_clip = r.number("grad_clip", 0, 1e6);
    if (r.has("caption_drop")) c.caption_drop = r.number("caption_drop", 0, 1);
    if (r.has("patch_mask")) c.patch_mask = r.number("patch_mask", 0, common::kMaxPatchMask);
    if (r.has("ema_decay")) c.ema_decay = r.number("ema_decay", 0, 1);
    // Tasks created before volunteers kept their optimizer state start it afresh.
    if (r.has("inner_optimizer"))
        c.inner_optimizer = common::inner_optimizer_from_name(r.one_of("inner_optimizer", {"fresh", "kept"}))
                                .value_or(common::InnerOptimizer::Fresh);
    // null or absent (tasks from before it existed): no run-wide schedule.
    if (const auto* schedule = r.has("lr_schedule") ? r.field("lr_schedule") : nullptr;
        schedule && !schedule->is_null())
        c.lr_schedule = common::read_lr_schedule(r, "lr_schedule");
}

// The deltas' and patches' codecs, and how units are cut and sized.
void read_transfer_fields(JsonObjectReader& r, TaskConfig& c) {
    auto dtype = common::delta_dtype_from_name(r.one_of("codec", {"f32", "bf16", "int8", "int4", "int2"}));
    if (dtype) c.codec.dtype = *dtype;
    c.codec.topk_fraction = r.number("topk_fraction", 0, 1);
    // Tasks created before downlink patches existed go on without them.
    c.patches.reset();
    if (r.has("patch_codec")) {
        auto patch_dtype =
            common::delta_dtype_from_name(r.one_of("patch_codec", {"off", "bf16", "int8", "int4", "int2"}));
        auto fraction = r.number("patch_topk_fraction", 0, 1);
        if (patch_dtype) c.patches = common::DeltaEncoding{*patch_dtype, fraction};
        c.publish_every = r.integer("publish_every", 1, kMaxPublishEvery);
    }
    if (r.has("catch_up_states")) c.catch_up_states = r.integer("catch_up_states", 0, kMaxCatchUpStates);
    c.deadline_s = r.integer("deadline_s", 1, kBig);
    c.shards_per_unit = r.integer("shards_per_unit", 1, static_cast<std::int64_t>(common::kMaxShardsPerWorkUnit));
    c.target_seconds = r.number("target_seconds", 0, 1e9);
    // Tasks created before units were sized to the fleet keep H and the time-based sizing.
    if (r.has("min_rounds")) c.min_rounds = r.integer("min_rounds", 0, kMaxMinRounds);
    if (r.has("units_end_together")) c.units_end_together = r.boolean("units_end_together");
}

// The volunteers' limits, the contribution checks and the evaluations.
void read_check_fields(JsonObjectReader& r, TaskConfig& c) {
    c.max_failures = r.integer("max_failures", 1, 1000);
    c.max_in_flight = r.integer("max_in_flight", 1, 1000);
    // Tasks created before several tasks ran at once take any volunteer.
    if (r.has("requires_device")) c.requires_device = r.one_of("requires_device", {"any", "cuda"});
    if (r.has("min_device_memory_gb")) c.min_device_memory_gb = r.number("min_device_memory_gb", 0, 1e6);
    c.replication = r.number("replication", 0, 1);
    c.replica_tolerance = r.number("replica_tolerance", 0, 100);
    c.loss_check = r.number("loss_check", 0, 1);
    if (r.has("audit")) c.audit = r.number("audit", 0, 1);  // tasks stored before audits: none
    if (r.has("audit_by")) c.audit_by = r.one_of("audit_by", {"server", "volunteers"});
    if (r.has("check_by")) c.check_by = r.one_of("check_by", {"server", "volunteers"});
    c.loss_tolerance = r.number("loss_tolerance", 0, 100);
    c.norm_bound = r.number("norm_bound", 0, 1e9);
    // Tasks created before the contribution checks existed get their defaults.
    if (r.has("check_samples")) c.check_samples = r.integer("check_samples", 1, 1 << 24);
    if (r.has("norm_floor")) c.norm_floor = r.number("norm_floor", 0, 1);
    if (r.has("min_gain")) c.min_gain = r.number("min_gain", 0, 1);
    if (r.has("copy_similarity")) c.copy_similarity = r.number("copy_similarity", 0, 1);
    if (r.has("min_alignment")) c.min_alignment = r.number("min_alignment", -1, 1);
    if (r.has("trust_streak")) c.trust_streak = r.integer("trust_streak", 0, kMaxTrustStreak);
    if (r.has("quarantine_rejections")) c.quarantine_rejections = r.integer("quarantine_rejections", 1, 100000);
    if (r.has("quarantine_window_s")) c.quarantine_window_s = r.integer("quarantine_window_s", 1, kBig);
    c.eval_samples = r.integer("eval_samples", 1, 1 << 24);
    c.eval_interval_s = r.integer("eval_interval_s", 0, kBig);
    // Tasks created before whole-set evaluations existed keep the default.
    if (r.has("eval_full_interval_s")) c.eval_full_interval_s = r.integer("eval_full_interval_s", 0, kBig);
}

}  // namespace

common::Result<TaskConfig> read_task_config(const boost::json::value& json) {
    JsonObjectReader r(json, "task");
    TaskConfig c;
    for (auto* read_fields :
         {read_data_fields, read_merge_fields, read_training_fields, read_transfer_fields, read_check_fields})
        read_fields(r, c);
    if (auto status = r.finish(); !status) return status.error();
    return c;
}

}  // namespace tessera::server
