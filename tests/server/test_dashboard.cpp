// The dashboard's routes in process over loopback: the embedded page and assets, the run
// overview, the charts' history (buckets, staleness), sample images rendered once per version
// in the background, and /metrics, which promtool (Prometheus's own parser) must accept.
#include <doctest/doctest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "child_process.h"
#include "png.h"
#include "server_fixture.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

boost::json::object get_json(TestServer& server, const std::string& target) {
    auto reply = http_get(server.port(), target);
    if (reply.status != 200)
        throw std::runtime_error(target + ": HTTP " + std::to_string(reply.status) + " " + reply.body);
    return boost::json::parse(reply.body).as_object();
}

// Uploads a made-up Δ of `scale` (0: all zeros, rejected) and waits for its verdict and merge.
void deliver(TestServer& server, TestVolunteer& volunteer, const common::WorkUnit& wu, float scale) {
    REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, scale)).status == 200);
    server.app().wait_idle();
}

// One accepted result on a new unit, merged before it returns.
void accepted_result(TestServer& server, TestVolunteer& volunteer) {
    deliver(server, volunteer, volunteer.request_work().value(), 1e-3f);
}

// Draws a PNG whose first pixel is the version, and counts its calls.
class CountingRenderer : public SampleRenderer {
public:
    explicit CountingRenderer(std::shared_ptr<std::atomic<int>> calls) : calls_(std::move(calls)) {}
    common::Result<common::Bytes> render(const common::NamedTensors& weights) override {
        ++*calls_;
        if (weights.empty()) return common::make_error("no weights");
        std::vector<std::uint8_t> pixels(16 * 8, 200);
        return common::encode_png_gray(16, 8, common::ByteView(pixels.data(), pixels.size()));
    }

private:
    std::shared_ptr<std::atomic<int>> calls_;
};

std::string promtool() {
    const char* path = std::getenv("TESSERA_PROMTOOL");
    if (path == nullptr) throw std::runtime_error("TESSERA_PROMTOOL is not set: install the prometheus package");
    return path;
}

// promtool's verdict on a metrics page: its exit status (0 = parses and passes the lint).
int promtool_check(const TempDir& dir, const std::string& page) {
    auto file = dir / "metrics.txt";
    std::ofstream(file) << page;
    ChildProcess check({"/bin/sh", "-c", "\"$0\" check metrics < \"$1\"", promtool(), file.string()});
    while (!check.read_line().empty()) {
    }
    return check.wait();
}

std::int64_t metric_value(const std::string& page, const std::string& series) {
    auto at = page.find("\n" + series + " ");
    if (at == std::string::npos) throw std::runtime_error("no series " + series);
    return std::stoll(page.substr(at + series.size() + 2));
}

}  // namespace

TEST_CASE("the page and its assets come from the binary: no CDN, revalidated by ETag") {
    TestServer server;
    auto page = http_get(server.port(), "/");
    REQUIRE(page.status == 200);
    CHECK(page.headers["content-type"] == "text/html; charset=utf-8");
    CHECK(page.headers["content-security-policy"].find("default-src 'self'") != std::string::npos);
    for (const char* asset :
         {"/assets/dashboard.js", "/assets/dashboard.css", "/assets/uPlot.iife.min.js", "/assets/uPlot.min.css"}) {
        CAPTURE(asset);
        CHECK(page.body.find(asset) != std::string::npos);
        auto reply = http_get(server.port(), asset);
        CHECK(reply.status == 200);
        CHECK(reply.body.size() > 500);
        auto etag = reply.headers["etag"];
        REQUIRE(!etag.empty());
        auto again = http_get(server.port(), asset, {{"If-None-Match", etag}});
        CHECK(again.status == 304);
        CHECK(again.body.empty());
    }
    // Everything the page loads is on this server.
    CHECK(page.body.find("src=\"http") == std::string::npos);
    CHECK(page.body.find("href=\"http") == std::string::npos);
    CHECK(http_get(server.port(), "/assets/uPlot.iife.min.js").body.find("uPlot") != std::string::npos);
    CHECK(http_get(server.port(), "/assets/uPlot.iife.min.js").headers["content-type"].starts_with("text/javascript"));

    auto missing = http_get(server.port(), "/assets/nothing.js");
    CHECK(missing.status == 404);
    CHECK(boost::json::parse(missing.body).at("error").as_string() == "not_found");
    CHECK(http_post(server.port(), "/", "{}").status == 405);
    CHECK(http_get(server.port(), "/assets/../api/v1/stats").status == 404);
}

TEST_CASE("overview and history: results by minute, rejections, staleness, throughput") {
    TestServer server;
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    // Both start on version 0; bob's result is merged after alice's, one version behind.
    auto first = alice.request_work().value();
    auto second = bob.request_work().value();
    deliver(server, alice, first, 1e-3f);
    deliver(server, bob, second, 1e-3f);
    REQUIRE(server.version() == 2);
    // Two minutes later, an all-zero delta is rejected.
    server.advance(120);
    auto third = alice.request_work().value();
    deliver(server, alice, third, 0.0f);
    REQUIRE(rejection_of(server, third.wu_id) == "empty_delta");

    auto unit_samples = server.config().local_steps * server.config().batch_size;
    auto stats = get_json(server, "/api/v1/stats");
    CHECK(stats.at("samples_trained").as_int64() == 2 * unit_samples);
    CHECK(stats.at("task").at("parameters").as_int64() > 100000);  // dit-tiny
    CHECK(stats.at("task").at("model").as_string() == "dit-tiny");
    CHECK(stats.at("uptime_s").as_int64() == 120);
    const auto& state_bytes = stats.at("state_bytes").as_object();
    CHECK(state_bytes.at("blobs").as_int64() > 600000);
    CHECK(state_bytes.at("total").as_int64() == state_bytes.at("blobs").as_int64() +
                                                    state_bytes.at("results").as_int64() +
                                                    state_bytes.at("database").as_int64());
    CHECK(stats.at("last_event_id").as_int64() > 0);
    CHECK(stats.at("work_units").at("rejected").as_int64() == 1);
    auto& throughput = stats.at("throughput").as_object();
    auto window = throughput.at("window_s").as_int64();
    CHECK(window == 600);  // the task is older than the window
    CHECK(throughput.at("samples_per_s").as_double() == doctest::Approx(2.0 * unit_samples / window));
    CHECK(throughput.at("work_units_per_hour").as_double() == doctest::Approx(2.0 * 3600 / window));

    auto history = get_json(server, "/api/v1/history?bucket=60&buckets=10");
    CHECK(history.at("bucket_s").as_int64() == 60);
    auto& buckets = history.at("buckets").as_array();
    // From the first result's minute to the current one, with the empty minute in between.
    REQUIRE(buckets.size() == 3);
    auto start = buckets[0].at("start").as_int64();
    CHECK(start == kStartTime / 60 * 60);
    CHECK(buckets[1].at("start").as_int64() == start + 60);
    CHECK(buckets[0].at("accepted").as_int64() == 2);
    CHECK(buckets[0].at("samples").as_int64() == 2 * unit_samples);
    CHECK(buckets[0].at("train_loss").as_double() == doctest::Approx(0.9));  // what the volunteers reported
    CHECK(buckets[1].at("accepted").as_int64() == 0);
    CHECK(buckets[1].at("train_loss").is_null());
    CHECK(buckets[2].at("rejected").as_int64() == 1);
    CHECK(buckets[2].at("accepted").as_int64() == 0);
    auto& staleness = history.at("staleness").as_array();
    REQUIRE(staleness.size() == 2);
    CHECK(staleness[0].at("staleness").as_int64() == 0);
    CHECK(staleness[0].at("count").as_int64() == 1);
    CHECK(staleness[1].at("staleness").as_int64() == 1);
    CHECK(staleness[1].at("count").as_int64() == 1);

    auto hourly = get_json(server, "/api/v1/history?bucket=3600");
    REQUIRE(hourly.at("buckets").as_array().size() >= 1);
    std::int64_t accepted = 0, rejected = 0;
    for (const auto& b : hourly.at("buckets").as_array()) {
        accepted += b.at("accepted").as_int64();
        rejected += b.at("rejected").as_int64();
    }
    CHECK(accepted == 2);
    CHECK(rejected == 1);

    // Bad parameters fall back to the defaults rather than failing.
    CHECK(get_json(server, "/api/v1/history?bucket=abc").at("bucket_s").as_int64() == 60);
    CHECK(get_json(server, "/api/v1/history?bucket=1").at("bucket_s").as_int64() == 10);

    auto volunteers = get_json(server, "/api/v1/volunteers");
    CHECK(volunteers.at("volunteers").as_array().at(0).at("valid_streak").is_int64());
}

TEST_CASE("the curve says which validation samples it uses and covers the whole set periodically") {
    // 64 of the synthetic dataset's 128 validation samples; whole set every 300 s. The manual
    // clock jumps that far: the aggregator's lease must outlast the jumps.
    TestServer server({}, PolicyKind::FedAsync,
                      [](ServerOptions& options) { options.aggregator_lease_s = std::int64_t{1} << 30; });
    TestVolunteer volunteer(server, "alice");
    server.app().wait_idle();  // version 0's start-up evaluation
    auto stats = get_json(server, "/api/v1/stats");
    CHECK(stats.at("evaluated_version").as_int64() == 0);
    CHECK(stats.at("validation_samples").as_int64() == 64);  // start-up point: the cheap sample
    CHECK(!stats.at("validation_full").as_bool());
    CHECK(stats.at("validation_set_samples").as_int64() == 128);
    CHECK(stats.at("full_validation").is_null());
    CHECK(stats.at("task").at("eval_samples").as_int64() == 64);
    CHECK(stats.at("task").at("eval_full_interval_s").as_int64() == server.config().eval_full_interval_s);

    server.advance(server.config().eval_full_interval_s);
    accepted_result(server, volunteer);  // version 1, evaluated once merging pauses
    stats = get_json(server, "/api/v1/stats");
    CHECK(stats.at("evaluated_version").as_int64() == 1);
    CHECK(stats.at("validation_full").as_bool());
    CHECK(stats.at("validation_samples").as_int64() == 128);
    CHECK(stats.at("full_validation").at("version").as_int64() == 1);
    CHECK(stats.at("full_validation").at("loss").as_double() == stats.at("validation_loss").as_double());

    server.advance(server.config().eval_interval_s);  // a curve point is due, the whole set is not
    accepted_result(server, volunteer);
    auto versions = get_json(server, "/api/v1/versions").at("versions").as_array();
    REQUIRE(versions.size() == 3);
    CHECK(versions[2].at("validation_samples").as_int64() == 64);
    CHECK(!versions[2].at("validation_full").as_bool());
    CHECK(versions[1].at("validation_full").as_bool());
    stats = get_json(server, "/api/v1/stats");
    CHECK(stats.at("full_validation").at("version").as_int64() == 1);  // the newest whole-set figure stays
}

// Answers at once and counts its evaluations.
class CountingProbe : public ModelProbe {
public:
    explicit CountingProbe(std::shared_ptr<std::atomic<int>> calls) : calls_(std::move(calls)) {}
    common::Result<ProbeResult> evaluate(const common::NamedTensors&, std::int64_t) override {
        ++*calls_;
        return ProbeResult{1.0, std::nullopt, 64, SampleLosses(64, 1.0)};
    }
    common::Result<SampleLosses> check_losses(const common::NamedTensors&, std::int64_t,
                                              const std::vector<std::int64_t>&) override {
        return SampleLosses{1.0};  // the loss checks are off in these tests
    }
    common::Result<std::int64_t> held_out_rows() override { return 64; }
    common::Result<std::int64_t> assigned_rows(const AssignedSamples&) override { return 0; }
    common::Result<std::vector<SampleLosses>> losses_on_assigned(const std::vector<const common::NamedTensors*>& weights,
                                                                 const AssignedSamples&) override {
        return std::vector<SampleLosses>(weights.size(), SampleLosses{1.0});  // the loss checks are off in these tests
    }
    common::Result<double> opening_loss(const common::NamedTensors&, const AssignedSamples&,
                                        const common::Hyperparameters&) override {
        return common::make_error("these tests send no commitments");
    }
    common::Result<common::Commitments> replay(const common::NamedTensors&, const AssignedSamples&,
                                               const common::Hyperparameters&, const ReplayMoments*) override {
        return common::make_error("these tests send no commitments");
    }

private:
    std::shared_ptr<std::atomic<int>> calls_;
};

TEST_CASE("a stream of results is not evaluated version by version; the curve ends at the newest") {
    auto calls = std::make_shared<std::atomic<int>>(0);
    TestServer server({}, PolicyKind::FedAsync, [calls](ServerOptions& options) {
        options.probe_factory = [calls](const TaskConfig&) -> common::Result<ModelProbeFactory> {
            return ModelProbeFactory([calls]() -> common::Result<std::unique_ptr<ModelProbe>> {
                return std::unique_ptr<ModelProbe>(std::make_unique<CountingProbe>(calls));
            });
        };
    });
    server.app().wait_idle();
    REQUIRE(calls->load() == 1);  // version 0 at start-up
    std::vector<std::unique_ptr<TestVolunteer>> volunteers;
    std::vector<std::pair<TestVolunteer*, common::WorkUnit>> units;
    for (int i = 0; i < 6; ++i) {
        volunteers.push_back(std::make_unique<TestVolunteer>(server, "v" + std::to_string(i)));
        for (int j = 0; j < 2; ++j)
            units.emplace_back(volunteers.back().get(), volunteers.back()->request_work().value());
    }
    // Back to back (the clock stands still, so no evaluation is due by its interval): the merge
    // queue empties between results, which must not count as merging having paused.
    for (auto& [volunteer, unit] : units)
        REQUIRE(volunteer->upload(unit, volunteer->made_up_delta(unit, 1e-3f)).status == 200);
    server.app().wait_idle();
    CHECK(server.version() == 12);
    CHECK(get_json(server, "/api/v1/stats").at("evaluated_version").as_int64() == 12);
    CHECK(calls->load() <= 3);  // start-up, the newest, and at most one pause on a slow machine
}

TEST_CASE("samples: each new version is drawn once, in the background, and kept as an immutable PNG") {
    auto calls = std::make_shared<std::atomic<int>>(0);
    TestServer server({}, PolicyKind::FedAsync, [calls](ServerOptions& options) {
        options.sample_renderer = [calls](const TaskConfig&) -> std::optional<SampleRendererFactory> {
            return SampleRendererFactory([calls]() -> common::Result<std::unique_ptr<SampleRenderer>> {
                return std::unique_ptr<SampleRenderer>(std::make_unique<CountingRenderer>(calls));
            });
        };
    });
    auto first = get_json(server, "/api/v1/samples");
    CHECK(first.at("kind").as_string() == "images");
    CHECK(first.at("current_version").as_int64() == 0);
    CHECK(first.at("classes").as_array().size() == 10);
    server.app().wait_idle();
    auto drawn = get_json(server, "/api/v1/samples");
    CHECK(drawn.at("version").as_int64() == 0);
    CHECK(drawn.at("rendering").as_bool() == false);
    REQUIRE(drawn.at("url").as_string() == "/api/v1/samples/0.png");
    auto png = http_get(server.port(), "/api/v1/samples/0.png");
    REQUIRE(png.status == 200);
    CHECK(png.headers["content-type"] == "image/png");
    CHECK(png.headers["cache-control"].find("immutable") != std::string::npos);
    CHECK(png.body.substr(1, 3) == "PNG");
    server.app().wait_idle();
    CHECK(calls->load() == 1);  // asking again for the same version draws nothing new

    TestVolunteer volunteer(server);
    accepted_result(server, volunteer);
    auto stale = get_json(server, "/api/v1/samples");
    CHECK(stale.at("current_version").as_int64() == 1);
    // The gallery rests 3× a drawing's time after each (microseconds here): ask until drawn.
    for (int attempt = 0; attempt < 100 && get_json(server, "/api/v1/samples").at("version").as_int64() != 1;
         ++attempt) {
        server.app().wait_idle();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(get_json(server, "/api/v1/samples").at("version").as_int64() == 1);
    CHECK(calls->load() == 2);
    CHECK(http_get(server.port(), "/api/v1/samples/1.png").status == 200);

    CHECK(http_get(server.port(), "/api/v1/samples/9.png").status == 404);
    CHECK(http_get(server.port(), "/api/v1/samples/x.png").status == 404);
    CHECK(http_get(server.port(), "/api/v1/samples/1").status == 404);
}

TEST_CASE("samples: a classifier shows its accuracy instead of images") {
    TestServer server({}, PolicyKind::FedAsync, {}, SyntheticKind::Pixels);
    auto samples = get_json(server, "/api/v1/samples");
    CHECK(samples.at("kind").as_string() == "accuracy");
    CHECK(http_get(server.port(), "/api/v1/samples/0.png").status == 404);
    server.app().wait_idle();  // version 0's evaluation
    auto stats = get_json(server, "/api/v1/stats");
    CHECK(stats.at("task").at("model").as_string() == "cnn");
    REQUIRE(stats.at("validation_accuracy").is_double());
    auto accuracy = stats.at("validation_accuracy").as_double();
    CHECK(accuracy >= 0.0);
    CHECK(accuracy <= 1.0);
}

TEST_CASE("samples: a DiT without a decoder says so; a failed drawing is reported, not retried") {
    SUBCASE("no decoder in the synthetic dataset") {
        TestServer server;
        auto samples = get_json(server, "/api/v1/samples");
        CHECK(samples.at("kind").as_string() == "none");
        CHECK(samples.at("message").as_string().size() > 0);
        CHECK(http_get(server.port(), "/api/v1/samples/0.png").status == 404);
    }
    SUBCASE("a renderer that fails") {
        auto made = std::make_shared<std::atomic<int>>(0);
        TestServer server({}, PolicyKind::FedAsync, [made](ServerOptions& options) {
            options.sample_renderer = [made](const TaskConfig&) -> std::optional<SampleRendererFactory> {
                return SampleRendererFactory([made]() -> common::Result<std::unique_ptr<SampleRenderer>> {
                    ++*made;
                    return common::make_error("decoder file is corrupt");
                });
            };
        });
        get_json(server, "/api/v1/samples");
        server.app().wait_idle();
        auto failed = get_json(server, "/api/v1/samples");
        CHECK(failed.at("version").is_null());
        CHECK(failed.at("error").as_string().find("decoder file is corrupt") != std::string::npos);
        server.app().wait_idle();
        CHECK(made->load() == 1);
    }
}

TEST_CASE("/metrics: rejections by reason, latency histogram, bytes, merge time; promtool accepts it") {
    TestServer server;
    TestVolunteer volunteer(server, "alice");
    accepted_result(server, volunteer);
    deliver(server, volunteer, volunteer.request_work().value(), 0.0f);

    auto reply = http_get(server.port(), "/metrics");
    REQUIRE(reply.status == 200);
    CHECK(reply.headers["content-type"] == "text/plain; version=0.0.4");
    const auto& page = reply.body;
    CHECK(metric_value(page, "tessera_model_version") == 1);
    CHECK(metric_value(page, "tessera_work_units{state=\"merged\"}") == 1);
    CHECK(metric_value(page, "tessera_rejections_total{reason=\"empty_delta\"}") == 1);
    CHECK(metric_value(page, "tessera_rejections_total{reason=\"norm_too_large\"}") == 0);
    CHECK(metric_value(page, "tessera_rejections_total{reason=\"misaligned\"}") == 0);
    CHECK(metric_value(page, "tessera_merge_duration_seconds_count") == 1);
    CHECK(metric_value(page, "tessera_merge_duration_seconds_bucket{le=\"+Inf\"}") == 1);
    // register + 2 × work + 2 × results, each timed, and the two uploads' bytes received.
    CHECK(metric_value(page, "tessera_http_request_duration_seconds_count{route=\"volunteer\"}") == 5);
    CHECK(metric_value(page, "tessera_http_request_duration_seconds_bucket{route=\"volunteer\",le=\"+Inf\"}") == 5);
    // Two dit-tiny deltas in int4: 154 k values at half a byte each.
    CHECK(metric_value(page, "tessera_http_received_bytes_total") > 2 * 70000);
    CHECK(metric_value(page, "tessera_http_sent_bytes_total") > 0);
    // The state directory: the initial checkpoint and the shards at least; the database.
    auto usage = state_usage(server.state());
    CHECK(metric_value(page, "tessera_state_bytes{part=\"blobs\"}") > 600000);  // dit-tiny's checkpoint
    CHECK(metric_value(page, "tessera_state_bytes{part=\"database\"}") > 0);
    CHECK(metric_value(page, "tessera_state_bytes{part=\"blobs\"}") == static_cast<std::int64_t>(usage.blobs));

    TempDir dir;
    CHECK(promtool_check(dir, page) == 0);
    // The check can fail: a page with a malformed sample line does not pass.
    CHECK(promtool_check(dir, page + "tessera_broken{state=\"x\" 1\n") != 0);
}
