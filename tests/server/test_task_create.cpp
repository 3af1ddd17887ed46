// `tessera-server task create` as an operator runs it: what a new task gets when a flag is not
// given (docs/operations.md, "Defaults and why"), and the schedule flags' named errors; and
// `tessera-server run` refusing an upload pace out of range before it serves anything; diloco's
// outer steps that diverge on late pseudo-gradients refused.
#include <doctest/doctest.h>

#include "expert_clusters.h"
#include "file_io.h"
#include "server_process.h"
#include "shell_run.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// The stored configuration of task `id`.
server::TaskConfig stored_config(const PreparedState& prepared, const std::string& id) {
    auto store = server::Store::connect(prepared.state().database_url(), false).value();
    auto task = store->task(id).value();
    REQUIRE(task.has_value());
    return server::parse_task_config(task->config_json).value();
}

int create(const PreparedState& prepared, const std::string& id, std::vector<std::string> flags = {}) {
    flags.insert(flags.begin(), {"task", "create", "--data", (prepared.dir() / "data").string(), "--id", id});
    return server_command(flags, prepared);
}

}  // namespace

TEST_CASE("a new task: kept moments, a cosine over four passes at the model's rate for it, units for 20 rounds") {
    PreparedState prepared;  // 512 training samples
    REQUIRE(create(prepared, "plain", {"--local-steps", "4", "--batch", "16"}) == 0);
    auto plain = stored_config(prepared, "plain");
    CHECK(plain.model == "dit-tiny");
    CHECK(plain.inner_optimizer == common::InnerOptimizer::Kept);
    CHECK(plain.lr == doctest::Approx(1.1e-2));
    REQUIRE(plain.lr_schedule.has_value());
    CHECK(plain.lr_schedule->kind == common::LrSchedule::Kind::Cosine);
    CHECK(plain.lr_schedule->warmup_samples == 2 * 4 * 16);
    CHECK(plain.lr_schedule->total_samples == 4 * 512);
    CHECK(plain.lr_schedule->final_lr_ratio == doctest::Approx(0.1));
    CHECK(plain.min_rounds == 20);

    // Four passes no longer than the warm-up (H 50, B 64): a constant rate, the model's for it.
    REQUIRE(create(prepared, "few") == 0);
    auto few = stored_config(prepared, "few");
    CHECK(few.lr == doctest::Approx(4e-3));
    REQUIRE(few.lr_schedule.has_value());
    CHECK(few.lr_schedule->kind == common::LrSchedule::Kind::Constant);
    CHECK(few.lr_schedule->total_samples == 0);
    CHECK(few.min_rounds == 0);  // nothing to divide without the run's samples

    // The warm-up follows the unit's size; the run's samples set the cosine's span.
    REQUIRE(create(prepared, "sized", {"--local-steps", "10", "--batch", "16", "--schedule-samples", "100000"}) == 0);
    auto sized = stored_config(prepared, "sized");
    REQUIRE(sized.lr_schedule.has_value());
    CHECK(sized.lr_schedule->kind == common::LrSchedule::Kind::Cosine);
    CHECK(sized.lr_schedule->warmup_samples == 2 * 10 * 16);
    CHECK(sized.lr_schedule->total_samples == 100000);
    CHECK(sized.min_rounds == 20);

    // A constant rate by name keeps the constant's rate; an --lr is kept whatever the schedule.
    REQUIRE(create(prepared, "constant", {"--lr-schedule", "constant", "--local-steps", "4", "--batch", "16"}) == 0);
    CHECK(stored_config(prepared, "constant").lr == doctest::Approx(4e-3));
    REQUIRE(create(prepared, "rate", {"--lr", "2e-3", "--local-steps", "4", "--batch", "16"}) == 0);
    CHECK(stored_config(prepared, "rate").lr == doctest::Approx(2e-3));

    // Every default can still be set, and the per-unit warm-up asked for by name.
    REQUIRE(create(prepared, "older", {"--lr-schedule", "none", "--inner-optimizer", "fresh", "--lr", "3e-4"}) == 0);
    auto older = stored_config(prepared, "older");
    CHECK_FALSE(older.lr_schedule.has_value());
    CHECK(older.inner_optimizer == common::InnerOptimizer::Fresh);
    CHECK(older.lr == doctest::Approx(3e-4));
    REQUIRE(create(prepared, "told", {"--schedule-samples", "100000", "--min-rounds", "5", "--warmup-samples", "0"}) ==
            0);
    auto told = stored_config(prepared, "told");
    CHECK(told.min_rounds == 5);
    CHECK(told.lr_schedule->warmup_samples == 0);
}

TEST_CASE("the schedule flags that contradict each other are refused, and no task is made") {
    PreparedState prepared;
    CHECK(create(prepared, "a", {"--lr-schedule", "none", "--warmup-samples", "100"}) == 1);
    // A cosine asked for by name or by its final ratio over four passes of 512 samples: no longer
    // than its warm-up (H 50, B 64), refused rather than made constant.
    CHECK(create(prepared, "b", {"--final-lr-ratio", "0.2"}) == 1);
    CHECK(create(prepared, "c", {"--lr-schedule", "cosine"}) == 1);
    CHECK(create(prepared, "f", {"--lr-schedule", "constant", "--final-lr-ratio", "0.2"}) == 1);
    CHECK(create(prepared, "d", {"--lr-schedule", "linear"}) == 1);
    CHECK(create(prepared, "e", {"--lr-schedule", "none", "--min-rounds", "20"}) == 1);
    auto store = server::Store::connect(prepared.state().database_url(), false).value();
    for (const char* id : {"a", "b", "c", "d", "e", "f"}) CHECK_FALSE(store->task(id).value().has_value());
}

TEST_CASE("task create --experts: a task per cluster and a router, weighted by the clusters' sizes") {
    PreparedState prepared;
    auto clusters = prepared.dir() / "experts";
    auto clustered = run_tool("cluster --data " + (prepared.dir() / "data").string() + " --out " + clusters.string() +
                              " --experts 2 --seed 3");
    REQUIRE_MESSAGE(clustered.status == 0, clustered.output);
    auto manifest = common::load_cluster_manifest(clusters / "clusters.json").value();
    auto experts = [&](std::vector<std::string> flags) {
        flags.insert(flags.begin(), {"task", "create", "--experts", clusters.string()});
        return server_command(flags, prepared);
    };
    REQUIRE(experts({"--id", "g", "--local-steps", "4", "--batch", "16", "--patch-mask", "0.5"}) == 0);

    auto store = server::Store::connect(prepared.state().database_url(), false).value();
    auto total = static_cast<double>(manifest.sizes[0] + manifest.sizes[1]);
    for (int k = 0; k < 2; ++k) {
        auto id = "g-e" + std::to_string(k);
        auto expert = stored_config(prepared, id);
        CHECK(expert.model == "dit-tiny");
        CHECK(expert.expert_group == "g");
        CHECK(expert.expert_index == k);
        CHECK(expert.patch_mask == 0.5);
        CHECK(std::filesystem::path(expert.data_dir).filename() == manifest.expert_dirs[k]);
        CHECK(store->task(id).value()->weight == doctest::Approx(manifest.sizes[k] / total));
    }
    auto router = stored_config(prepared, "g-router");
    CHECK(router.model == "router");
    CHECK(router.expert_index == server::kRouterIndex);
    CHECK(router.num_classes == 2);
    CHECK(router.patch_mask == 0);  // no patches to mask
    CHECK(router.local_steps == 4);
    CHECK(router.expert_class_counts == manifest.class_counts);  // for routing by the class
    CHECK_FALSE(router.expert_class_counts.empty());
    CHECK(router.expert_caption_clusters.empty());  // clustered on the latents, not captions
    CHECK(store->task("g-router").value()->weight == doctest::Approx(0.5));

    // Again: every id is taken, so nothing is made; both sources at once, or a damaged
    // clusters.json, are refused the same way.
    auto tasks_before = store->tasks().value().size();
    CHECK(experts({"--id", "g"}) == 1);
    CHECK(server_command({"task", "create", "--experts", clusters.string(), "--data",
                          (prepared.dir() / "data").string(), "--id", "h"},
                         prepared) == 1);
    REQUIRE(common::write_file_atomic(clusters / "clusters.json", common::as_bytes("{\"format\":")).ok());
    CHECK(experts({"--id", "h"}) == 1);
    CHECK(store->tasks().value().size() == tasks_before);
}

TEST_CASE("diloco's outer step that diverges on late pseudo-gradients is refused; its defaults are not") {
    PreparedState prepared;
    // DiLoCo's synchronous η 0.7, μ 0.9: above the delayed-step limit (docs/operations.md).
    CHECK(create(prepared, "old", {"--policy", "diloco", "--server-lr", "0.7", "--momentum", "0.9"}) == 1);
    CHECK(create(prepared, "edge", {"--policy", "diloco", "--server-lr", "0.4", "--momentum", "0.9"}) == 1);
    REQUIRE(create(prepared, "safe", {"--policy", "diloco", "--server-lr", "0.3", "--momentum", "0.9"}) == 0);
    REQUIRE(create(prepared, "defaults", {"--policy", "diloco"}) == 0);
    auto defaults = stored_config(prepared, "defaults");
    CHECK(defaults.merge.server_lr == doctest::Approx(0.5));
    CHECK(defaults.merge.momentum == doctest::Approx(0.5));
    CHECK(server::check_async_stability(defaults.merge).ok());
    auto store = server::Store::connect(prepared.state().database_url(), false).value();
    CHECK_FALSE(store->task("old").value().has_value());
    CHECK_FALSE(store->task("edge").value().has_value());
}

TEST_CASE("run refuses an upload pace out of range and serves nothing") {
    PreparedState prepared;
    auto run = [&](std::vector<std::string> flags) {
        flags.insert(flags.begin(), {"run", "--listen", "127.0.0.1:0"});
        return server_command(flags, prepared);
    };
    CHECK(run({"--upload-idle-timeout", "0"}) != 0);
    CHECK(run({"--upload-idle-timeout", "100000"}) != 0);
    CHECK(run({"--upload-min-rate", "2000000"}) != 0);
    CHECK(run({"--upload-min-rate", "-1"}) != 0);
}
