// Decentralized experts end to end, as an operator runs them (docs/experts.md): tessera-data
// prepares Fashion-MNIST latents and clusters them in two; `task create --experts` makes an
// expert task per cluster and a router task on a real tessera-server; three real tessera-client
// volunteers over loopback, one per member (`--tasks`), train them; every member merges versions
// of its own, the experts' losses and the router's cross-entropy fall, the router learns the
// clusters, and each volunteer's units are all of its member; `export --group` writes the
// members and routing.json, from which the routed sampler draws. A text group's router task
// draws the group for its experts' first captions.
#include <torch/torch.h>

#include <boost/json.hpp>

#include "doctest_after_torch.h"

#include <map>
#include <numeric>

#include "caption_text.h"
#include "child_process.h"
#include "dataset_manifest.h"
#include "expert_clusters.h"
#include "file_io.h"
#include "safetensors.h"
#include "torch/expert_sampling.h"
#include "torch/model_state.h"
#include "torch/tensor_convert.h"
#include "torch/workload.h"
#include "http_client.h"
#include "polling.h"
#include "shell_run.h"
#include "state_dir.h"
#include "store.h"
#include "temp_dir.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

constexpr std::int64_t kVersions = 6;  // merged versions each member trains to

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The task's versions as the public route lists them, oldest first.
boost::json::array versions_of(std::uint16_t port, const std::string& task) {
    auto reply = http_get(port, "/api/v1/tasks/" + task + "/versions");
    return reply.status == 200 ? boost::json::parse(reply.body).at("versions").as_array() : boost::json::array{};
}

// The newest evaluated version's validation loss and accuracy (−1 when it has none), if any is.
std::optional<std::pair<double, double>> newest_evaluation(const boost::json::array& versions) {
    for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
        const auto& v = it->as_object();
        if (!v.at("validation_loss").is_double()) continue;
        auto accuracy = v.at("validation_accuracy").is_double() ? v.at("validation_accuracy").as_double() : -1.0;
        return std::pair{v.at("validation_loss").as_double(), accuracy};
    }
    return std::nullopt;
}

// The task's /samples answer once it names a drawn grid (an empty object if none within 2 min).
boost::json::object drawn_samples(std::uint16_t port, const std::string& task) {
    boost::json::object samples;
    wait_for(
        [&] {
            auto reply = http_get(port, "/api/v1/tasks/" + task + "/samples");
            samples = reply.status == 200 ? boost::json::parse(reply.body).as_object() : boost::json::object{};
            return samples.contains("url") && samples.at("url").is_string();
        },
        std::chrono::seconds(120));
    return samples;
}

// A PNG's width and height from its IHDR chunk.
std::pair<std::uint32_t, std::uint32_t> png_size(const std::string& png) {
    auto be32 = [&](std::size_t at) {
        std::uint32_t v = 0;
        for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(png[at + i]);
        return v;
    };
    return {be32(16), be32(20)};
}

}  // namespace

TEST_CASE("an expert group and its router trained by real volunteers, each on its own member") {
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist")) {
        MESSAGE("skipped: no /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist)");
        return;
    }
    TempDir dir;
    auto data = dir / "data", experts = dir / "experts", state = dir / "server";
    auto prepared = run_tool("prepare fashion-mnist --out " + data.string() +
                             " --limit 2000 --shard-size 500 --autoencoder-steps 100 --threads 1");
    REQUIRE_MESSAGE(prepared.status == 0, prepared.output);
    auto clustered =
        run_tool("cluster --data " + data.string() + " --out " + experts.string() + " --experts 2 --seed 0");
    REQUIRE_MESSAGE(clustered.status == 0, clustered.output);

    REQUIRE(ChildProcess({required_env("TESSERA_SERVER"), "init", "--state", state.string()}).wait() == 0);
    ChildProcess create({required_env("TESSERA_SERVER"),
                         "task",
                         "create",
                         "--state",
                         state.string(),
                         "--experts",
                         experts.string(),
                         "--id",
                         "g",
                         "--local-steps",
                         "10",
                         "--batch",
                         "32",
                         "--target-seconds",
                         "0",
                         "--deadline",
                         "60s",
                         "--eval-interval",
                         "1",
                         "--replication",
                         "0",
                         "--loss-check",
                         "0"});
    std::string created;
    for (auto line = create.read_line(); !line.empty(); line = create.read_line()) created += line + "\n";
    REQUIRE_MESSAGE(create.wait() == 0, created);
    CHECK(has(created, "expert group g: 2 experts and a router"));
    const std::vector<std::string> members{"g-e0", "g-e1", "g-router"};

    ChildProcess server(
        {required_env("TESSERA_SERVER"), "run", "--state", state.string(), "--listen", "127.0.0.1:0", "--tick", "1"});
    auto line = server.read_line();
    REQUIRE_MESSAGE(has(line, "listening"), line);
    auto port = static_cast<std::uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
    std::map<std::string, std::pair<double, double>> first;  // member → version 0's loss, accuracy
    for (const auto& member : members) {
        REQUIRE(wait_for([&] { return newest_evaluation(versions_of(port, member)).has_value(); },
                         std::chrono::seconds(60)));
        first[member] = *newest_evaluation(versions_of(port, member));
    }

    std::vector<std::unique_ptr<ChildProcess>> volunteers;
    for (const auto& member : members)
        volunteers.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
            required_env("TESSERA_CLIENT"), "--server", "http://127.0.0.1:" + std::to_string(port), "--state",
            (dir / member).string(), "--device", "cpu", "--threads", "1", "--name", member, "--tasks", member,
            "--quiet"}));
    auto trained = wait_for(
        [&] {
            for (const auto& member : members)
                if (static_cast<std::int64_t>(versions_of(port, member).size()) <= kVersions) return false;
            return true;
        },
        std::chrono::seconds(300));
    for (auto& v : volunteers) v->signal(SIGINT);
    for (auto& v : volunteers) CHECK(v->wait() == 0);
    REQUIRE(trained);

    // Each member's newest evaluation against its version 0: the experts' flow loss and the
    // router's cross-entropy fall, and the router routes most (sample, t) pairs right.
    for (const auto& member : members) {
        std::optional<std::pair<double, double>> now;
        REQUIRE(wait_for(
            [&] {
                auto versions = versions_of(port, member);
                now = newest_evaluation(versions);
                return now && versions.back().at("validation_loss").is_double();
            },
            std::chrono::seconds(60)));
        MESSAGE(member << ": loss " << first[member].first << " -> " << now->first << ", accuracy "
                       << first[member].second << " -> " << now->second);
        CHECK(now->first < first[member].first);
        if (member == "g-router") CHECK(now->second > 0.75);
    }
    // The router's gallery draws the group through the router: a row per class of the experts.
    auto samples = drawn_samples(port, "g-router");
    REQUIRE(samples.contains("url"));
    CHECK(samples.at("kind").as_string() == "images");
    CHECK(samples.at("classes").as_array().size() == 10);
    CHECK(samples.at("classes").as_array().front().as_string() == "T-shirt/top");
    CHECK_FALSE(samples.contains("error"));
    auto png = http_get(port, std::string(samples.at("url").as_string()));
    REQUIRE(png.status == 200);
    REQUIRE(png.body.size() > 24);
    auto [width, height] = png_size(png.body);
    CHECK(width == 8 * 32);    // IHDR width: eight samples a row, decoded at 32 × 32
    CHECK(height == 10 * 32);  // height: a row per class
    server.signal(SIGTERM);
    CHECK(server.wait() == 0);

    // Nothing crossed between members: each was given to its one volunteer alone.
    auto store = server::Store::connect(server::StateDir(state).database_url(), false).value();
    for (const auto& member : members) CHECK(store->task_volunteers(member, 0).value() == 1);

    // The group exported as one folder, and sampled as one model from it.
    auto exported = dir / "export";
    REQUIRE(ChildProcess({required_env("TESSERA_SERVER"), "export", "--state", state.string(), "--group", "g", "--out",
                          exported.string(), "--weights", "model", "--routing", "top2-class"})
                .wait() == 0);
    auto routing =
        boost::json::parse(common::as_string_view(common::read_file(exported / "routing.json", 1 << 20).value()))
            .as_object();
    CHECK(routing.at("rule").as_string() == "top2");
    CHECK(routing.at("by_class").as_bool());
    // Without --routing, the group's own rule: top-1 by the class too, as it knows the class counts.
    REQUIRE(ChildProcess({required_env("TESSERA_SERVER"), "export", "--state", state.string(), "--group", "g", "--out",
                          (dir / "default").string()})
                .wait() == 0);
    auto defaults =
        boost::json::parse(common::as_string_view(common::read_file(dir / "default" / "routing.json", 1 << 20).value()))
            .as_object();
    CHECK(defaults.at("rule").as_string() == "top1");
    CHECK(defaults.at("by_class").as_bool());
    // An unknown rule or group is refused before anything is written.
    for (const auto& [group, rule] : {std::pair<std::string, std::string>{"g", "top3-class"},
                                      {"g", "top1-caption"},  // class experts: no caption to route by
                                      {"nobody", "top2"}}) {
        auto refused = dir / ("refused-" + group);
        CHECK(ChildProcess({required_env("TESSERA_SERVER"), "export", "--state", state.string(), "--group", group,
                            "--out", refused.string(), "--routing", rule})
                  .wait() != 0);
        CHECK_FALSE(std::filesystem::exists(refused));
    }
    // The class counts are the clusters' (each expert's training samples per class).
    std::vector<std::vector<std::int64_t>> class_counts;
    for (const auto& row : routing.at("class_counts").as_array())
        class_counts.push_back(boost::json::value_to<std::vector<std::int64_t>>(row));
    auto clusters = common::load_cluster_manifest(experts / "clusters.json").value();
    REQUIRE(class_counts.size() == 2);
    CHECK(class_counts == clusters.class_counts);
    for (std::size_t k = 0; k < 2; ++k)
        CHECK(std::accumulate(class_counts[k].begin(), class_counts[k].end(), std::int64_t{0}) == clusters.sizes[k]);
    REQUIRE(routing.at("experts").as_array().size() == 2);
    std::vector<std::unique_ptr<common::Workload>> models;
    auto load = [&](const boost::json::object& entry, std::int64_t classes) {
        auto bytes = common::read_file(exported / std::string(entry.at("file").as_string()), common::kMaxModelBytes);
        auto weights = common::to_torch_map(common::parse_safetensors(bytes.value()).value()).value();
        auto model = common::make_workload(std::string(entry.at("model").as_string()), {4, 8, classes, 0}, 0).value();
        REQUIRE(common::load_state(*model->module(), weights).ok());
        models.push_back(std::move(model));
    };
    for (const auto& expert : routing.at("experts").as_array()) load(expert.as_object(), 10);
    load(routing.at("router").as_object(), 2);
    common::SampleOptions options;
    options.steps = 10;
    auto latents =
        common::euler_sample_experts({common::dit_of(*models[0]), common::dit_of(*models[1])},
                                     *common::router_of(*models[2]), {torch::arange(10, torch::kInt64), {}, {}},
                                     options, common::RoutingRule::Top2, common::class_evidence(class_counts));
    CHECK(latents.sizes() == torch::IntArrayRef({10, 4, 8, 8}));
    CHECK(torch::isfinite(latents).all().item<bool>());
}

TEST_CASE("a text group's gallery: a row per expert's first captions, drawn through the router") {
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist")) {
        MESSAGE("skipped: no /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist)");
        return;
    }
    TempDir dir;
    auto data = dir / "canvases", experts = dir / "experts", state = dir / "server";
    auto prepared =
        run_tool("prepare canvases --out " + data.string() + " --limit 600 --shard-size 300 --autoencoder-steps 20");
    REQUIRE_MESSAGE(prepared.status == 0, prepared.output);
    auto clustered =
        run_tool("cluster --data " + data.string() + " --out " + experts.string() + " --experts 2 --seed 0");
    REQUIRE_MESSAGE(clustered.status == 0, clustered.output);
    CHECK(has(clustered.output, "by text"));
    REQUIRE(ChildProcess({required_env("TESSERA_SERVER"), "init", "--state", state.string()}).wait() == 0);
    REQUIRE(ChildProcess({required_env("TESSERA_SERVER"), "task", "create", "--state", state.string(), "--experts",
                          experts.string(), "--id", "t", "--model", "dit-nano-text"})
                .wait() == 0);
    ChildProcess server(
        {required_env("TESSERA_SERVER"), "run", "--state", state.string(), "--listen", "127.0.0.1:0", "--tick", "1"});
    auto line = server.read_line();
    REQUIRE_MESSAGE(has(line, "listening"), line);
    auto port = static_cast<std::uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));

    auto samples = drawn_samples(port, "t-router");
    REQUIRE(samples.contains("url"));
    CHECK_FALSE(samples.contains("error"));
    // Four captions of each expert's validation shard (eight rows over two experts), as texts.
    const auto& rows = samples.at("classes").as_array();
    REQUIRE(rows.size() == 8);
    auto expert_rows = [&](const std::string& expert) {
        auto file = common::load_dataset_manifest(experts / expert / "dataset.json").value().validation.file;
        auto texts = common::read_caption_texts(common::read_file(experts / expert / file, 1 << 30).value(), 4);
        return texts.value();
    };
    auto first = expert_rows("expert-0"), second = expert_rows("expert-1");
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(rows[i].as_string() == first[i]);
        CHECK(rows[4 + i].as_string() == second[i]);
    }
    auto png = http_get(port, std::string(samples.at("url").as_string()));
    REQUIRE(png.status == 200);
    REQUIRE(png.body.size() > 24);
    auto [width, height] = png_size(png.body);
    CHECK(width == 8 * 64);                              // eight samples a row, canvases decoded at 64 × 64
    CHECK(height == 8 * 64);                             // a row per caption
    CHECK(samples.at("routing").as_string() == "top1-caption");  // the clusters were made on captions
    server.signal(SIGTERM);
    CHECK(server.wait() == 0);

    // Exported routed by the caption, with the clusters' centres, sizes and variance as clusters.json
    // has them; routing by the class is refused for caption experts.
    REQUIRE(ChildProcess({required_env("TESSERA_SERVER"), "export", "--state", state.string(), "--group", "t", "--out",
                          (dir / "export").string()})
                .wait() == 0);
    auto routing =
        boost::json::parse(common::as_string_view(common::read_file(dir / "export" / "routing.json", 1 << 20).value()))
            .as_object();
    CHECK(routing.at("rule").as_string() == "top1");
    CHECK(routing.at("by_caption").as_bool());
    CHECK_FALSE(routing.at("by_class").as_bool());
    auto clusters = common::load_cluster_manifest(experts / "clusters.json").value();
    const auto& caption_clusters = routing.at("caption_clusters").as_object();
    REQUIRE(caption_clusters.at("centres").as_array().size() == 2);
    for (std::size_t k = 0; k < 2; ++k)
        CHECK(boost::json::value_to<std::vector<double>>(caption_clusters.at("centres").as_array()[k]) ==
              clusters.centres[k]);
    CHECK(boost::json::value_to<std::vector<std::int64_t>>(caption_clusters.at("sizes")) == clusters.sizes);
    auto samples_total = static_cast<double>(clusters.sizes[0] + clusters.sizes[1]);
    CHECK(caption_clusters.at("variance").to_number<double>() ==
          doctest::Approx(clusters.inertia / (samples_total * static_cast<double>(clusters.feature_dim))));
    CHECK(ChildProcess({required_env("TESSERA_SERVER"), "export", "--state", state.string(), "--group", "t", "--out",
                        (dir / "by-class").string(), "--routing", "top1-class"})
              .wait() != 0);
    CHECK_FALSE(std::filesystem::exists(dir / "by-class"));
}
