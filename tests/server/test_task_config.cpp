// A task's settings: every bound is checked when the task is created, and is the bound it is
// stored and loaded with, so a task that was created can always be served again; settings
// that tasks created before them lack get their defaults.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <functional>
#include <optional>

#include "dataset_manifest.h"
#include "expert_clusters.h"
#include "task_config.h"
#include "trust.h"

using namespace tessera;
using namespace tessera::server;

namespace {

TaskConfig valid_task() {
    TaskConfig config;
    config.task_id = "t";
    config.model = "dit-tiny";
    config.data_dir = "/data";
    config.data_kind = "latents";
    config.sample_shape = {4, 8, 8};
    return config;
}

}  // namespace

TEST_CASE("a setting past the bound it is stored with is refused at creation, not when the task is loaded") {
    // Each was once accepted by `task create` and then refused by every load of the task.
    const std::vector<std::pair<const char*, std::function<void(TaskConfig&)>>> past_bounds = {
        {"max_failures", [](TaskConfig& c) { c.max_failures = 5000; }},
        {"max_in_flight", [](TaskConfig& c) { c.max_in_flight = 1001; }},
        {"norm_bound", [](TaskConfig& c) { c.norm_bound = 2e9; }},
        {"quarantine_rejections", [](TaskConfig& c) { c.quarantine_rejections = 100001; }},
        {"warmup_steps", [](TaskConfig& c) { c.warmup_steps = 100001; }},
        {"grad_clip", [](TaskConfig& c) { c.grad_clip = 2e6; }},
        {"target_seconds", [](TaskConfig& c) { c.target_seconds = 2e9; }},
        {"replica_tolerance", [](TaskConfig& c) { c.replica_tolerance = 101; }},
        {"loss_tolerance", [](TaskConfig& c) { c.loss_tolerance = 101; }},
        {"check_samples", [](TaskConfig& c) { c.check_samples = (1 << 24) + 1; }},
        {"eval_samples", [](TaskConfig& c) { c.eval_samples = (1 << 24) + 1; }},
        {"num_classes", [](TaskConfig& c) { c.num_classes = common::kMaxClasses + 1; }},
        {"text_dim", [](TaskConfig& c) { c.text_dim = common::kMaxTextDim + 1; }},  // the manifest's bound too
        {"min_device_memory_gb", [](TaskConfig& c) { c.min_device_memory_gb = 2e6; }},
    };
    REQUIRE(validate_task_config(valid_task()).ok());
    for (const auto& [name, change] : past_bounds) {
        CAPTURE(name);
        auto config = valid_task();
        change(config);
        auto status = validate_task_config(config);
        REQUIRE_FALSE(status.ok());
        CHECK(status.message().find(std::string("field \"") + name + "\"") != std::string::npos);
        CHECK(status.message().find("out of the bounds a task is stored with") == 0);
    }
}

TEST_CASE("a task at the top of every bound is created and loads back unchanged") {
    auto config = valid_task();
    config.max_failures = 1000;
    config.max_in_flight = 1000;
    config.norm_bound = 1e9;
    config.quarantine_rejections = 100000;
    config.warmup_steps = 100000;
    config.check_samples = 1 << 24;
    config.eval_samples = 1 << 24;
    // A dataset the manifest reader accepts (common/dataset_manifest.h) makes a task that loads:
    // its shape, text size and classes at the manifest's bounds (a dimension over 4096 once did not).
    config.sample_shape = {4, common::kMaxSampleDim, common::kMaxSampleDim};
    config.text_dim = common::kMaxTextDim;
    config.num_classes = common::kMaxClasses;
    REQUIRE(validate_task_config(config).ok());
    auto back = task_config_from_json(to_json(config));
    REQUIRE_MESSAGE(back.ok(), back.message());
    CHECK(back->max_failures == 1000);
    CHECK(back->max_in_flight == 1000);
    CHECK(back->quarantine_rejections == 100000);
    CHECK(back->eval_samples == (1 << 24));
    CHECK(back->sample_shape == config.sample_shape);
    CHECK(back->text_dim == common::kMaxTextDim);
    CHECK(back->num_classes == common::kMaxClasses);
}

TEST_CASE("min_rounds and units_end_together: checked, stored, absent in older tasks") {
    auto config = valid_task();
    config.min_rounds = 20;
    auto refused = validate_task_config(config);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.message().find("min rounds needs an lr schedule") != std::string::npos);
    config.lr_schedule = common::LrSchedule{common::LrSchedule::Kind::Constant, 0, 240000, 0.1};
    config.units_end_together = true;
    REQUIRE(validate_task_config(config).ok());

    auto json = to_json(config);
    auto back = task_config_from_json(json);
    REQUIRE(back.ok());
    CHECK(back->min_rounds == 20);
    CHECK(back->units_end_together);

    json.as_object().erase("min_rounds");
    json.as_object().erase("units_end_together");
    auto older = task_config_from_json(json);
    REQUIRE(older.ok());
    CHECK(older->min_rounds == 0);
    CHECK_FALSE(older->units_end_together);

    json.as_object()["min_rounds"] = -1;
    CHECK_FALSE(task_config_from_json(json).ok());
}

TEST_CASE("audit: a fraction, stored, none in older tasks, kNewTaskAudit for new ones, 10x for untrusted volunteers") {
    auto config = valid_task();
    CHECK(config.audit == 0);
    apply_new_task_defaults(config);
    CHECK(config.audit == doctest::Approx(kNewTaskAudit));
    auto json = to_json(config);
    auto back = task_config_from_json(json);
    REQUIRE(back.ok());
    CHECK(back->audit == doctest::Approx(kNewTaskAudit));
    json.as_object().erase("audit");
    auto older = task_config_from_json(json);
    REQUIRE(older.ok());
    CHECK(older->audit == 0);
    json.as_object()["audit"] = 1.5;
    CHECK_FALSE(task_config_from_json(json).ok());
    config.audit = -0.1;
    CHECK(validate_task_config(config).message().find("audit fraction") != std::string::npos);

    config.audit = 0.02;
    ClientRecord client;
    client.valid_streak = config.trust_streak;
    CHECK(audit_chance(config, client) == doctest::Approx(0.02));
    client.valid_streak = 0;  // new
    CHECK(audit_chance(config, client) == doctest::Approx(0.2));
    client.valid_streak = config.trust_streak;
    client.quarantined = true;
    CHECK(audit_chance(config, client) == doctest::Approx(0.2));
    config.audit = 0.5;
    CHECK(audit_chance(config, client) == 1.0);
    config.audit = 0;
    CHECK(audit_chance(config, client) == 0);
}

TEST_CASE("check_by: the server unless told, volunteers stored and read back, anything else refused") {
    auto config = valid_task();
    CHECK(config.check_by == "server");
    auto json = to_json(config);
    json.as_object().erase("check_by");  // a task stored before loss-check units
    REQUIRE(task_config_from_json(json).ok());
    CHECK(task_config_from_json(json)->check_by == "server");
    config.check_by = "volunteers";
    REQUIRE(validate_task_config(config).ok());
    CHECK(task_config_from_json(to_json(config))->check_by == "volunteers");
    json.as_object()["check_by"] = "anyone";
    CHECK_FALSE(task_config_from_json(json).ok());
    config.check_by = "anyone";
    CHECK(validate_task_config(config).message().find("check by") != std::string::npos);
}

TEST_CASE("audit_by: the server unless told, volunteers stored and read back, anything else refused") {
    auto config = valid_task();
    CHECK(config.audit_by == "server");
    auto json = to_json(config);
    json.as_object().erase("audit_by");  // a task stored before audit twins
    REQUIRE(task_config_from_json(json).ok());
    CHECK(task_config_from_json(json)->audit_by == "server");
    config.audit_by = "volunteers";
    REQUIRE(validate_task_config(config).ok());
    CHECK(task_config_from_json(to_json(config))->audit_by == "volunteers");
    json.as_object()["audit_by"] = "anyone";
    CHECK_FALSE(task_config_from_json(json).ok());
    config.audit_by = "anyone";
    CHECK(validate_task_config(config).message().find("audit by") != std::string::npos);
}

TEST_CASE(
    "new tasks' defaults: kept moments and each model's rate for its schedule; a stored task without them keeps the "
    "older meaning") {
    auto rate_of = [](const std::string& model, std::optional<common::LrSchedule::Kind> kind) {
        auto config = valid_task();
        config.model = model;
        if (kind) config.lr_schedule = common::LrSchedule{*kind, 100, 1000, 0.1};
        apply_new_task_defaults(config);
        CHECK(config.inner_optimizer == common::InnerOptimizer::Kept);
        return config.lr;
    };
    constexpr auto cosine = common::LrSchedule::Kind::Cosine, constant = common::LrSchedule::Kind::Constant;
    CHECK(rate_of("dit-tiny", cosine) == doctest::Approx(1.1e-2));
    CHECK(rate_of("dit-tiny-text", cosine) == doctest::Approx(8e-3));
    CHECK(rate_of("dit-tiny", constant) == doctest::Approx(4e-3));
    CHECK(rate_of("dit-tiny", std::nullopt) == doctest::Approx(4e-3));  // a warm-up per unit: constant
    CHECK(rate_of("cnn", cosine) == doctest::Approx(4e-3));
    CHECK(rate_of("cnn", constant) == doctest::Approx(1e-3));
    CHECK(rate_of("dit-s", cosine) == doctest::Approx(3e-4));  // not measured: the older default
    CHECK(rate_of("dit-b", constant) == doctest::Approx(3e-4));

    auto config = valid_task();
    config.local_steps = 25;
    config.batch_size = 32;
    LrScheduleFlags defaults;
    defaults.train_samples = 60000;
    auto schedule = lr_schedule_from_flags(defaults, config);
    REQUIRE(schedule.ok());
    REQUIRE(schedule->has_value());
    CHECK((*schedule)->kind == common::LrSchedule::Kind::Cosine);
    CHECK((*schedule)->warmup_samples == 2 * 25 * 32);
    CHECK((*schedule)->total_samples == kDefaultScheduleEpochs * 60000);
    CHECK((*schedule)->final_lr_ratio == doctest::Approx(0.1));
    config.lr_schedule = *schedule;
    CHECK(default_min_rounds(config) == 20);
    config.lr_schedule->kind = common::LrSchedule::Kind::Constant;
    config.lr_schedule->total_samples = 0;
    CHECK(default_min_rounds(config) == 0);

    // A dataset of a few units: four passes do not pass the warm-up, so the default is constant.
    defaults.train_samples = 300;
    schedule = lr_schedule_from_flags(defaults, config);
    REQUIRE(schedule.ok());
    CHECK((*schedule)->kind == common::LrSchedule::Kind::Constant);
    CHECK((*schedule)->total_samples == 0);

    // A task stored before these defaults: no inner_optimizer, no schedule → fresh, per-unit warm-up.
    apply_new_task_defaults(config);
    auto json = to_json(config);
    json.as_object().erase("inner_optimizer");
    json.as_object()["lr_schedule"] = nullptr;
    json.as_object()["min_rounds"] = 0;
    auto older = task_config_from_json(json);
    REQUIRE(older.ok());
    CHECK(older->inner_optimizer == common::InnerOptimizer::Fresh);
    CHECK_FALSE(older->lr_schedule.has_value());
}

TEST_CASE("schedule flags: the default schedule, what overrides it, and flags that contradict each other") {
    auto config = valid_task();
    config.local_steps = 25;
    config.batch_size = 32;
    auto flags = [](std::string name, std::optional<std::int64_t> warmup = {}, std::optional<std::int64_t> total = {},
                    std::optional<double> ratio = {}) {
        LrScheduleFlags given;
        given.name = std::move(name);
        given.warmup_samples = warmup;
        given.total_samples = total;
        given.final_lr_ratio = ratio;
        return given;
    };
    auto plain = lr_schedule_from_flags(flags("constant"), config);
    REQUIRE(plain.ok());
    REQUIRE(plain->has_value());
    CHECK((*plain)->kind == common::LrSchedule::Kind::Constant);
    CHECK((*plain)->warmup_samples == 2 * 25 * 32);
    CHECK((*plain)->total_samples == 0);

    auto none = lr_schedule_from_flags(flags("none"), config);
    REQUIRE(none.ok());
    CHECK_FALSE(none->has_value());

    auto cosine = lr_schedule_from_flags(flags("cosine", 800, 96000, 0.05), config);
    REQUIRE(cosine.ok());
    CHECK((*cosine)->kind == common::LrSchedule::Kind::Cosine);
    CHECK((*cosine)->warmup_samples == 800);
    CHECK((*cosine)->total_samples == 96000);
    CHECK((*cosine)->final_lr_ratio == doctest::Approx(0.05));

    auto message = [&](const LrScheduleFlags& given) {
        auto schedule = lr_schedule_from_flags(given, config);
        return schedule.ok() ? std::string() : schedule.error().message;
    };
    CHECK(message(flags("none", 800)).find("none takes no") != std::string::npos);
    CHECK(message(flags("linear")).find("constant, cosine or none") != std::string::npos);
    CHECK(message(flags("constant", {}, {}, 0.1)).find("for --lr-schedule cosine") != std::string::npos);
    CHECK(message(flags("cosine")).find("needs --schedule-samples") != std::string::npos);  // no dataset
    CHECK(message(flags("cosine", {}, 1600)).find("must exceed warmup_samples") != std::string::npos);
    CHECK(message(flags("constant", -1)).find("--lr-schedule") != std::string::npos);
}

TEST_CASE("patch_mask: in [0, 1), DiT presets only, stored, absent in older tasks, sent in every unit's hyper") {
    auto config = valid_task();
    config.patch_mask = 0.75;
    REQUIRE(validate_task_config(config).ok());
    auto hyper = inner_loop_of(config, 10, 3);
    CHECK(hyper.patch_mask == 0.75);
    auto json = to_json(config);
    auto back = task_config_from_json(json);
    REQUIRE(back.ok());
    CHECK(back->patch_mask == 0.75);
    json.as_object().erase("patch_mask");
    auto older = task_config_from_json(json);
    REQUIRE(older.ok());
    CHECK(older->patch_mask == 0.0);
    CHECK(inner_loop_of(*older, 10, 3).patch_mask == 0.0);

    for (double bad : {1.0, -0.25}) {
        config.patch_mask = bad;
        auto refused = validate_task_config(config);
        REQUIRE_FALSE(refused.ok());
        CHECK(refused.message().find("patch mask must be in [0, 1)") != std::string::npos);
    }
    config.patch_mask = 0.5;
    config.model = "cnn";
    config.data_kind = "pixels";
    config.sample_shape = {1, 28, 28};
    auto cnn = validate_task_config(config);
    REQUIRE_FALSE(cnn.ok());
    CHECK(cnn.message().find("needs a DiT preset") != std::string::npos);
}

TEST_CASE("catch_up_states: needs patches, stored, absent in older tasks; the patches' top-k is kept") {
    auto config = valid_task();
    config.catch_up_states = 64;
    config.patches = common::DeltaEncoding{common::DeltaDType::Int2, 0.02};
    REQUIRE(validate_task_config(config).ok());
    auto json = to_json(config);
    auto back = task_config_from_json(json);
    REQUIRE(back.ok());
    CHECK(back->catch_up_states == 64);
    CHECK(back->patches->topk_fraction == 0.02);
    json.as_object().erase("catch_up_states");
    auto older = task_config_from_json(json);
    REQUIRE(older.ok());
    CHECK(older->catch_up_states == 0);

    config.catch_up_states = -1;
    CHECK(validate_task_config(config).message().find("catch-up states must be in 0..") != std::string::npos);
    config.catch_up_states = kMaxCatchUpStates + 1;
    CHECK_FALSE(validate_task_config(config).ok());
    config.catch_up_states = 8;
    config.patches.reset();
    CHECK(validate_task_config(config).message().find("need a patch codec") != std::string::npos);
}

TEST_CASE("expert_group and expert_index: stored, absent in older tasks, the router alone on the router preset") {
    auto config = valid_task();
    config.expert_group = "g";
    config.expert_index = 2;
    REQUIRE(validate_task_config(config).ok());
    auto json = to_json(config);
    auto back = task_config_from_json(json);
    REQUIRE(back.ok());
    CHECK(back->expert_group == "g");
    CHECK(back->expert_index == 2);
    json.as_object().erase("expert_group");
    json.as_object().erase("expert_index");
    auto older = task_config_from_json(json);
    REQUIRE(older.ok());
    CHECK(older->expert_group.empty());
    CHECK(older->expert_index == kRouterIndex);

    config.expert_index = kRouterIndex;  // the router, but on a DiT
    CHECK(validate_task_config(config).message().find("router preset") != std::string::npos);
    config.model = "router";
    CHECK(validate_task_config(config).ok());
    config.expert_index = 0;  // an expert on the router preset
    CHECK_FALSE(validate_task_config(config).ok());
    config.model = "dit-tiny";
    config.expert_index = common::kMaxExperts;
    CHECK(validate_task_config(config).message().find("expert index") != std::string::npos);
    config.expert_group.clear();
    config.expert_index = 1;
    CHECK(validate_task_config(config).message().find("needs an expert group") != std::string::npos);
}

TEST_CASE("expert_class_counts: the router's alone, a row per expert, stored and read back") {
    auto config = valid_task();
    config.expert_group = "g";
    config.expert_index = kRouterIndex;
    config.model = "router";
    config.num_classes = 2;  // the router's classes are the experts
    config.expert_class_counts = {{5, 0, 1}, {0, 7, 2}};
    REQUIRE(validate_task_config(config).ok());
    auto json = to_json(config);
    auto back = task_config_from_json(json);
    REQUIRE(back.ok());
    CHECK(back->expert_class_counts == config.expert_class_counts);
    json.as_object().erase("expert_class_counts");  // a task from before the counts
    CHECK(task_config_from_json(json).value().expert_class_counts.empty());
    json.as_object()["expert_class_counts"] = boost::json::parse("[[1,-2],[3,4]]");
    CHECK(task_config_from_json(json).message().find("negative") != std::string::npos);

    config.expert_class_counts = {{5, 0, 1}};  // one row for two experts
    CHECK(validate_task_config(config).message().find("a row per expert") != std::string::npos);
    config.expert_class_counts = {{5, 0, 1}, {0, 7}};
    CHECK(validate_task_config(config).message().find("same classes") != std::string::npos);
    config.expert_class_counts = {{5, 0, 1}, {0, 7, 2}};
    config.model = "dit-tiny";
    config.expert_index = 0;  // an expert holds none
    CHECK(validate_task_config(config).message().find("only a group's router") != std::string::npos);
}

TEST_CASE("expert_caption_clusters: the router's alone, a centre and a size per expert, stored and read back") {
    auto config = valid_task();
    config.expert_group = "g";
    config.expert_index = kRouterIndex;
    config.model = "router";
    config.num_classes = 2;
    config.expert_caption_clusters = {{{0.5, -1.0, 2.0}, {1.5, 0.0, -0.25}}, {30, 10}, 12.5};
    REQUIRE(validate_task_config(config).ok());
    auto json = to_json(config);
    auto back = task_config_from_json(json);
    REQUIRE(back.ok());
    CHECK(back->expert_caption_clusters.centres == config.expert_caption_clusters.centres);
    CHECK(back->expert_caption_clusters.sizes == config.expert_caption_clusters.sizes);
    CHECK(back->expert_caption_clusters.inertia == 12.5);
    json.as_object().erase("expert_caption_clusters");  // a task from before they were kept
    CHECK(task_config_from_json(json).value().expert_caption_clusters.empty());
    json.as_object()["expert_caption_clusters"] = nullptr;  // none
    CHECK(task_config_from_json(json).value().expert_caption_clusters.empty());
    json.as_object()["expert_caption_clusters"] =
        boost::json::parse(R"({"centres":[[1,"x"]],"sizes":[1],"inertia":1})");
    CHECK(task_config_from_json(json).message().find("finite numbers") != std::string::npos);
    json.as_object()["expert_caption_clusters"] = boost::json::parse(R"({"centres":[[1]],"sizes":[-1],"inertia":1})");
    CHECK(task_config_from_json(json).message().find("non-negative") != std::string::npos);
    json.as_object()["expert_caption_clusters"] = boost::json::parse(R"({"centres":[[1]],"sizes":[1]})");
    CHECK(task_config_from_json(json).message().find("inertia") != std::string::npos);

    auto refused = [&](auto change, const char* why) {
        auto bad = config;
        change(bad.expert_caption_clusters);
        auto message = validate_task_config(bad).message();
        CHECK_MESSAGE(message.find(why) != std::string::npos, message);
    };
    refused([](auto& c) { c.centres.pop_back(); }, "a centre and a size per expert");
    refused([](auto& c) { c.centres[1].pop_back(); }, "one width");
    refused([](auto& c) { c.sizes[0] = 0; }, "cluster 0 is empty");
    refused([](auto& c) { c.inertia = 0; }, "inertia must be positive");
    config.model = "dit-tiny";
    config.expert_index = 0;  // an expert holds none
    CHECK(validate_task_config(config).message().find("only a group's router") != std::string::npos);
    config.expert_group.clear();
    config.expert_index = kRouterIndex;
    CHECK(validate_task_config(config).message().find("caption clusters need an expert group") != std::string::npos);
}
