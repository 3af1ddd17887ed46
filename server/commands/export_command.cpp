// `tessera-server export`: a model version's checkpoint, checked against its hash, as a
// safetensors file: the model, and where the task keeps one the EMA of its versions beside it
// (tensors named "ema/" + the model's names), or either alone under the model's names. With
// --group, every member of an expert group and routing.json into one folder (docs/experts.md).
#include <boost/json.hpp>
#include <cxxopts.hpp>

#include <algorithm>

#include "blob_store.h"
#include "checkpoint.h"
#include "command_line.h"
#include "command_support.h"
#include "expert_group.h"
#include "file_io.h"
#include "file_system.h"
#include "model_ema.h"
#include "safetensors.h"
#include "sha256.h"
#include "task_config.h"
#include "task_lookup.h"

namespace tessera::server {
namespace {

// The EMA saved with a checkpoint's policy state; empty when it has none.
common::Result<common::NamedTensors> ema_of(BlobStore& blobs, const VersionRecord& version) {
    if (!version.optimizer_sha256) return common::NamedTensors{};
    auto bytes = blobs.read(*version.optimizer_sha256, common::kMaxModelBytes);
    if (!bytes)
        return common::with_context("the policy state of version " + std::to_string(version.version), bytes.error());
    auto state = common::read_checkpoint(*bytes);
    if (!state) return state.error();
    return split_saved_state(std::move(*state)).ema;
}

// The task named by --task, else the newest one.
common::Result<TaskRecord> task_to_export(Store& store, const cxxopts::ParseResult& args) {
    std::optional<TaskRecord> task;
    if (args.count("task")) {
        auto found = store.task(args["task"].as<std::string>());
        if (!found) return found.error();
        task = *found;
    } else {
        auto tasks = store.tasks();
        if (!tasks) return tasks.error();
        if (!tasks->empty()) task = tasks->back();
    }
    if (!task) return common::make_error("no such task");
    return *task;
}

// The version named by --version, else the newest checkpoint. The true model is on disk at
// checkpoints only (every version without downlink patches; with them every --checkpoint-every
// versions and at the server's stop).
common::Result<VersionRecord> version_to_export(Store& store, const TaskRecord& task,
                                                const cxxopts::ParseResult& args) {
    auto version = args.count("version") ? store.version(task.id, args["version"].as<std::int64_t>())
                                         : store.last_checkpoint(task.id, task.version);
    if (!version) return version.error();
    if (!*version) return common::make_error("task " + task.id + " has no such version");
    if (!(*version)->checkpoint) {
        auto newest = store.last_checkpoint(task.id, task.version);
        return common::make_error("version " + std::to_string((*version)->version) +
                                  " is not a checkpoint (its true model is rebuilt only by the running server); "
                                  "the newest checkpoint is version " +
                                  (newest && *newest ? std::to_string((*newest)->version) : std::string("?")));
    }
    return **version;
}

// The file to write: the true model (not the published one the downlink patches approach),
// checked against its hash, with or as its EMA as `weights` asks. `has_ema`: whether it holds one.
common::Result<common::Bytes> exported_file(BlobStore& blobs, const std::string& task_id, const VersionRecord& version,
                                            const std::string& weights, bool& has_ema) {
    auto sha256 = version.state_sha256.value_or(version.blob_sha256);
    auto bytes = blobs.read(sha256, common::kMaxModelBytes);
    if (!bytes) return bytes.error();
    if (common::sha256_hex(*bytes) != sha256)
        return common::make_error("the stored checkpoint of version " + std::to_string(version.version) +
                                  " is damaged");
    auto ema = ema_of(blobs, version);
    if (!ema) return ema.error();
    has_ema = !ema->empty();
    if (weights == "ema" && !has_ema)
        return common::make_error("task " + task_id + " keeps no EMA (its --ema-decay is 0, or it predates EMAs)");
    if (weights == "model" || !has_ema) return bytes;
    auto model = common::read_checkpoint(*bytes);
    if (!model) return model.error();
    auto stored = common::parse_safetensors(*bytes);
    if (!stored) return stored.error();
    auto preset = stored->metadata().find("model");
    auto tensors = weights == "ema" ? std::move(*ema) : with_ema(std::move(*model), *ema);
    return common::write_checkpoint(
        tensors, {task_id, preset == stored->metadata().end() ? std::string() : preset->second, version.version});
}

constexpr std::int64_t kMaxSafeIndex = 1 << 30;
constexpr std::int64_t kRoutedSampleSteps = 30;  // common::SampleOptions' Euler steps
// routing.json's own statement of how the files combine (docs/experts.md, "Sampling as one model").
constexpr const char* kRoutingFormula =
    "p = softmax(router(x_t, t)); w = p (all), p's two largest renormalised (top2) or one-hot of its "
    "largest (top1); v_k = v_k,u + guidance * (v_k,c - v_k,u); v = sum_k w_k v_k; x <- x - dt * v, "
    "t from 1 to 0 in steps of dt = 1 / steps. by_class: before the rule, a row of class c adds "
    "log(p(k | c) / p(k)) to the router's logits, p(k | c) = class_counts[k][c] / sum_j class_counts[j][c], "
    "p(k) = sum_c class_counts[k][c] / sum of all counts (-inf where class_counts[k][c] = 0; 0 for a class "
    "no expert holds). by_caption: before the rule, a caption adds log(p(k | e) / p(k)), e the mean of its "
    "caption tokens (padding left out), p(k | e) proportional to p(k) exp(-|e - centres[k]|^2 / (2 variance)), "
    "p(k) = sizes[k] / sum(sizes)";

struct ExportedVersion {
    VersionRecord version;
    bool has_ema = false;
};

// Writes the task's version (--version, else its newest checkpoint) to `out`, pinned first.
common::Result<ExportedVersion> export_task(Store& store, BlobStore& blobs, const TaskRecord& task,
                                            const cxxopts::ParseResult& args, const std::string& weights,
                                            const std::filesystem::path& out) {
    auto version = version_to_export(store, task, args);
    if (!version) return common::with_context(task.id, version.error());
    // An exported version is pinned: retention keeps its files (docs/operations.md).
    if (auto pinned = store.set_pinned(task.id, version->version, true); !pinned) return pinned.error();
    bool has_ema = false;
    auto bytes = exported_file(blobs, task.id, *version, weights, has_ema);
    if (!bytes) return common::with_context(task.id, bytes.error());
    if (auto status = common::write_file_atomic(out, *bytes); !status) return status.error();
    return ExportedVersion{*version, has_ema};
}

// The group's members, experts by index and then the router, with their configs.
common::Result<std::vector<std::pair<TaskRecord, TaskConfig>>> group_members(Store& store, const std::string& group) {
    auto tasks = store.tasks();
    if (!tasks) return tasks.error();
    std::vector<std::pair<TaskRecord, TaskConfig>> members;
    for (auto& task : *tasks) {
        auto config = parse_task_config(task.config_json);
        if (!config) return common::with_context(task.id, config.error());
        if (config->expert_group == group) members.emplace_back(std::move(task), std::move(*config));
    }
    // Experts 0, 1, … first, the router (index −1) last.
    std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) {
        auto key = [](const TaskConfig& c) { return c.expert_index < 0 ? kMaxSafeIndex : c.expert_index; };
        return key(a.second) < key(b.second);
    });
    auto routers =
        std::count_if(members.begin(), members.end(), [](const auto& m) { return m.second.expert_index < 0; });
    if (members.empty()) return common::make_error("no task is in expert group " + group);
    if (routers != 1 || members.size() < 2)
        return common::make_error("expert group " + group + " needs its experts and one router task");
    return members;
}

// A routing name split into its rule and its condition's suffix ("class", "caption" or "").
struct GroupRouting {
    std::string rule;
    std::string prior;
};

GroupRouting split_routing(const std::string& routing) {
    for (std::string prior : {"class", "caption"})
        if (routing.ends_with("-" + prior)) return {routing.substr(0, routing.size() - prior.size() - 1), prior};
    return {routing, ""};
}

// Why `export --group` cannot sample `group` by `routing`, or "". `router`: the group's router.
std::string refused_group_routing(const std::string& group, const std::string& routing, const TaskConfig& expert,
                                  const TaskConfig& router) {
    auto [rule, prior] = split_routing(routing);
    if (rule != "top1" && rule != "top2" && rule != "all")
        return "--routing must be top1, top2 or all, with -class or -caption to route by the condition too";
    bool text = expert.text_dim > 0;
    if (prior == "class" && text)
        return "--routing " + routing + " routes by the class; group " + group + "'s experts take captions";
    if (prior == "caption" && !text)
        return "--routing " + routing + " routes by the caption; group " + group + "'s experts take classes";
    if (prior == "class" && router.expert_class_counts.empty())
        return "--routing " + routing + " needs the experts' class counts, which group " + group +
               " lacks (made from clusters without classes, or before they were counted)";
    if (prior == "caption" && router.expert_caption_clusters.empty())
        return "--routing " + routing + " needs the clusters made on the pooled captions, which group " + group +
               " lacks (clustered on other features, or made before they were kept)";
    return "";
}

// routing.json's record of the evidence the rule adds: the class counts, the caption clusters.
void add_group_evidence(boost::json::object& routing_json, const TaskConfig& router) {
    if (!router.expert_class_counts.empty()) {
        boost::json::array rows;
        for (const auto& row : router.expert_class_counts) rows.push_back(boost::json::array(row.begin(), row.end()));
        routing_json["class_counts"] = std::move(rows);
    }
    const auto& clusters = router.expert_caption_clusters;
    if (clusters.empty()) return;
    boost::json::array centres;
    for (const auto& centre : clusters.centres) centres.push_back(boost::json::array(centre.begin(), centre.end()));
    std::int64_t total = 0;
    for (auto n : clusters.sizes) total += n;
    auto width = static_cast<double>(clusters.centres.front().size());
    routing_json["caption_clusters"] = {{"centres", std::move(centres)},
                                        {"sizes", boost::json::array(clusters.sizes.begin(), clusters.sizes.end())},
                                        {"variance", clusters.inertia / (static_cast<double>(total) * width)}};
}

// `export --group G --out DIR`: DIR/<task>.safetensors for every member, then routing.json (last:
// its presence marks a complete export).
int export_group(Store& store, BlobStore& blobs, const cxxopts::ParseResult& args, const std::string& weights) {
    auto group = args["group"].as<std::string>();
    auto members = group_members(store, group);
    if (!members) return fail("export", members.message());
    const auto& router_config = members->back().second;
    const auto& expert = members->front().second;
    auto routing =
        args.count("routing") ? args["routing"].as<std::string>() : default_group_routing(router_config, expert);
    if (auto refused = refused_group_routing(group, routing, expert, router_config); !refused.empty())
        return fail("export", refused);
    auto [rule, prior] = split_routing(routing);
    std::filesystem::path out = args["out"].as<std::string>();
    if (auto made = posix_file_system().make_directories(out); !made) return fail("export", made.message());
    boost::json::array experts;
    boost::json::object router;
    for (const auto& [task, config] : *members) {
        auto file = task.id + ".safetensors";
        auto exported = export_task(store, blobs, task, args, weights, out / file);
        if (!exported) return fail("export", exported.message());
        boost::json::object entry{{"task", task.id},
                                  {"file", file},
                                  {"model", config.model},
                                  {"version", exported->version.version},
                                  {"ema", exported->has_ema && weights != "model"}};
        if (config.expert_index < 0) {
            router = std::move(entry);
        } else {
            entry["index"] = config.expert_index;
            experts.push_back(std::move(entry));
        }
        std::cout << "exported " << task.id << " version " << exported->version.version << " to "
                  << (out / file).string() << "\n";
    }
    boost::json::object routing_json{{"format", "tessera.experts"},
                                     {"version", 1},
                                     {"group", group},
                                     {"rule", rule},
                                     {"by_class", prior == "class"},
                                     {"by_caption", prior == "caption"},
                                     {"guidance", args["guidance"].as<double>()},
                                     {"steps", kRoutedSampleSteps},
                                     {"experts", std::move(experts)},
                                     {"router", std::move(router)},
                                     {"formula", kRoutingFormula}};
    add_group_evidence(routing_json, router_config);
    if (auto status = common::write_file_atomic(out / "routing.json",
                                                common::as_bytes(boost::json::serialize(routing_json) + "\n"));
        !status)
        return fail("export", status.message());
    std::cout << "expert group " << group << ": routing.json (" << routing << ") in " << out.string()
              << " (versions pinned: retention keeps them)\n";
    return 0;
}

}  // namespace

int export_command(int argc, char** argv) {
    cxxopts::Options options("tessera-server export", "Write a model version as safetensors");
    options.add_options()("state", "state directory", cxxopts::value<std::string>())(
        "task", "task id (default: the current task)", cxxopts::value<std::string>())(
        "version", "model version, a checkpoint (default: the newest checkpoint)", cxxopts::value<std::int64_t>())(
        "out", "output file", cxxopts::value<std::string>())(
        "weights", "model, ema, or both (the EMA's tensors prefixed ema/; the model alone without an EMA)",
        cxxopts::value<std::string>()->default_value("both"))(
        "group", "an expert group's id: every member into the folder --out, with routing.json",
        cxxopts::value<std::string>())(
        "routing",
        "with --group: the rule routing.json names, top1, top2 or all; -class or -caption also routes by "
        "the condition (default: top1-class or top1-caption where the group's router holds the class counts "
        "or caption clusters; else top1 for caption experts, top2 for class experts)",
        cxxopts::value<std::string>())("guidance", "with --group: the guidance scale routing.json names",
                                       cxxopts::value<double>()->default_value("3"));
    add_database_option(options);
    auto parsed = common::parse_command_line(options, argc, argv);
    if (!parsed) return parsed.exit_code;
    const auto& args = *parsed;
    if (!args.count("state") || !args.count("out")) return fail("export", "needs --state DIR and --out FILE");
    auto weights = args["weights"].as<std::string>();
    if (weights != "model" && weights != "ema" && weights != "both")
        return fail("export", "--weights must be model, ema or both");
    StateDir state = state_dir_of(args);
    auto store = Store::connect(state.database_url(), false);
    if (!store) return fail("export", store.message());
    BlobStore blobs(state.blobs());
    if (args.count("group")) {
        if (args.count("task") || args.count("version"))
            return fail("export", "--group exports each member's newest checkpoint: no --task or --version");
        return export_group(**store, blobs, args, weights);
    }
    auto task = task_to_export(**store, args);
    if (!task) return fail("export", task.message());
    auto exported = export_task(**store, blobs, *task, args, weights, args["out"].as<std::string>());
    if (!exported) return fail("export", exported.message());
    std::cout << "exported " << task->id << " version " << exported->version.version << " ("
              << (!exported->has_ema || weights == "model" ? "model"
                  : weights == "ema"                       ? "EMA"
                                                           : "model and EMA")
              << ") to " << args["out"].as<std::string>() << " (pinned: retention keeps it)\n";
    return 0;
}

}  // namespace tessera::server
