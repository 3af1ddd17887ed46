// The volunteer's plumbing against a real in-process server: URL parsing, the blob cache
// (download, resume with Range, a corrupt partial file discarded, LRU eviction within the
// quota), the state files, the backoff schedule, and the bandwidth caps.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <fstream>
#include <vector>

#include "backoff.h"
#include "blob_cache.h"
#include "client_state.h"
#include "named_tensor_file.h"
#include "rate_limiter.h"
#include "training/optimizer_state.h"
#include "server_fixture.h"
#include "url.h"

using namespace tessera;
using namespace tessera::testing;
using client::BlobCache;
using client::HttpClient;

TEST_CASE("server URLs") {
    auto plain = client::parse_url("http://127.0.0.1:8080/").value();
    CHECK(!plain.tls);
    CHECK(plain.host == "127.0.0.1");
    CHECK(plain.port == 8080);
    CHECK(plain.path.empty());
    auto tls = client::parse_url("https://tessera.example.org/run1/").value();
    CHECK(tls.tls);
    CHECK(tls.port == 443);
    CHECK(tls.path == "/run1");
    auto v6 = client::parse_url("http://[::1]:9000").value();
    CHECK(v6.host == "::1");
    CHECK(v6.port == 9000);
    for (const char* bad : {"ftp://x", "http://", "http://host:0", "http://host:99999", "http://host:x", "host:80"})
        CHECK_MESSAGE(!client::parse_url(bad).ok(), bad);
}

TEST_CASE("the blob cache downloads, resumes with Range, refuses corrupt bytes and evicts") {
    TestServer server;
    TestVolunteer volunteer(server);
    auto wu = volunteer.request_work().value();
    TempDir dir;
    BlobCache cache(dir / "cache", std::uint64_t{1} << 30);
    HttpClient http;
    auto base = client::parse_url("http://127.0.0.1:" + std::to_string(server.port()) + "/blobs").value();

    // A download cut short at 1000 bytes resumes from there.
    auto whole = http_get(server.port(), "/blobs/" + wu.model_blob.sha256).body;
    std::filesystem::create_directories(dir / "cache");
    std::ofstream(dir / "cache" / (wu.model_blob.sha256 + ".part"), std::ios::binary).write(whole.data(), 1000);
    std::uint64_t first_report = 0;
    auto path = cache.ensure(wu.model_blob, http, base, [&](std::uint64_t done, std::uint64_t) {
        if (first_report == 0) first_report = done;
    });
    REQUIRE(path.ok());
    CHECK(first_report > 1000);  // counting started after the bytes already held
    CHECK(common::sha256_file_hex(*path).value() == wu.model_blob.sha256);
    CHECK(!std::filesystem::exists(dir / "cache" / (wu.model_blob.sha256 + ".part")));

    // A partial file with wrong bytes yields a hash mismatch and is thrown away.
    auto shard = wu.shards.at(0);
    std::string junk(100, 'x');
    std::ofstream(dir / "cache" / (shard.sha256 + ".part"), std::ios::binary).write(junk.data(), 100);
    auto bad = cache.ensure(shard, http, base);
    REQUIRE(!bad.ok());
    CHECK(bad.message().find("discarded") != std::string::npos);
    CHECK(!std::filesystem::exists(dir / "cache" / (shard.sha256 + ".part")));
    auto good = cache.ensure(shard, http, base);
    REQUIRE(good.ok());
    auto held = cache.held();
    CHECK(held.size() == 2);

    // A blob the server does not have is an error, not a file.
    common::BlobRef missing{std::string(64, '0'), 10};
    CHECK(!cache.ensure(missing, http, base).ok());

    // Over the quota, the least recently used blob goes; kept ones stay.
    BlobCache small(dir / "cache", 1);
    small.evict({shard.sha256});
    CHECK(std::filesystem::exists(*good));
    CHECK(!std::filesystem::exists(*path));
}

TEST_CASE(
    "client state: the key is created once with mode 0600; identity, current work and the unit fetched ahead "
    "round-trip") {
    TempDir dir;
    client::ClientState state(dir / "volunteer");
    auto key = state.load_or_create_key().value();
    auto again = state.load_or_create_key().value();
    CHECK(key.verify_key().key_id() == again.verify_key().key_id());
    auto mode = std::filesystem::status(dir / "volunteer" / "client_key.pem").permissions();
    CHECK((mode & (std::filesystem::perms::group_all | std::filesystem::perms::others_all)) ==
          std::filesystem::perms::none);

    CHECK(!state.load_identity().value().has_value());
    client::Identity identity{"http://127.0.0.1:1", "c-1", std::string(43, 'A') + "=", "0123456789abcdef"};
    REQUIRE(state.save_identity(identity));
    CHECK(state.load_identity().value()->client_id == "c-1");
    REQUIRE(state.save_current({"{}", "a-1", "uploading"}));
    CHECK(state.load_current().value()->phase == "uploading");
    state.clear_current();
    CHECK(!state.load_current().value().has_value());
    REQUIRE(common::write_file_atomic(dir / "volunteer" / "current.json", common::as_bytes("{\"wu_id\": 3}")));
    CHECK(!state.load_current().ok());  // a damaged state file is an error, not a crash

    // The unit fetched ahead is kept apart from the current one.
    CHECK(!state.load_next().value().has_value());
    REQUIRE(state.save_next({"{}", "a-2", "ahead"}));
    CHECK(state.load_next().value()->wu_id == "a-2");
    CHECK(!state.load_current().ok());
    state.clear_next();
    CHECK(!state.load_next().value().has_value());
}

TEST_CASE("the kept optimizer state file round-trips, an empty state removes it, and a bad one is a named error") {
    TempDir dir;
    const auto file = client::ClientState(dir.path()).optimizer_file();
    CHECK(client::load_optimizer_state(file).value().empty());  // none yet: fresh
    client::KeptOptimizerState state{"t-1", "dit-tiny", 150, {}, {}};
    state.exp_avg = {{"a.weight", {2, 2}, {0.1f, -0.2f, 0.3f, 0.0f}}, {"b", {1}, {1e-8f}}};
    state.exp_avg_sq = {{"a.weight", {2, 2}, {0.01f, 0.04f, 0.09f, 0.0f}}, {"b", {1}, {1e-16f}}};
    CHECK(client::optimizer_state_bytes(state) == 40);
    REQUIRE(client::save_optimizer_state(file, state));
    auto loaded = client::load_optimizer_state(file).value();
    CHECK(loaded.task_id == "t-1");
    CHECK(loaded.model == "dit-tiny");
    CHECK(loaded.steps == 150);
    REQUIRE(loaded.exp_avg.size() == 2);
    CHECK(loaded.exp_avg[0].name == "a.weight");
    CHECK(loaded.exp_avg[0].values == state.exp_avg[0].values);
    CHECK(loaded.exp_avg_sq[1].values == state.exp_avg_sq[1].values);

    // Files a volunteer must not train from: each refused with what is wrong.
    auto error_for = [&](const common::NamedTensors& tensors, const common::TensorMetadata& metadata) {
        REQUIRE(common::write_file_atomic(file, common::write_named_tensors(tensors, metadata).value()));
        auto bad = client::load_optimizer_state(file);
        return bad.ok() ? std::string() : bad.message();
    };
    const common::TensorMetadata good{{"format", "tessera.optimizer_state"}, {"task", "t-1"}, {"model", "m"},
                                      {"steps", "3"}};
    const common::NamedTensors pair{{"exp_avg/w", {1}, {0.5f}}, {"exp_avg_sq/w", {1}, {0.25f}}};
    CHECK(error_for(pair, good).empty());
    auto no_steps = good;
    no_steps["steps"] = "3x";
    CHECK(error_for(pair, no_steps).find("metadata 'steps' must be a whole number above 0") != std::string::npos);
    auto other_format = good;
    other_format["format"] = "tessera.error_feedback";
    CHECK(error_for(pair, other_format).find("not an optimizer-state file") != std::string::npos);
    CHECK(error_for({{"exp_avg/w", {1}, {0.5f}}, {"exp_avg_sq/v", {1}, {0.25f}}}, good).find("no exp_avg_sq") !=
          std::string::npos);
    CHECK(error_for({pair[0], pair[1], {"extra", {1}, {1.0f}}}, good).find("exp_avg/<parameter>") !=
          std::string::npos);
    CHECK(error_for({pair[0], {"exp_avg_sq/w", {1}, {-1.0f}}}, good).find("not finite and non-negative") !=
          std::string::npos);
    CHECK(error_for({{"exp_avg/w", {1}, {std::nanf("")}}, pair[1]}, good).find("is not finite") != std::string::npos);
    REQUIRE(common::write_file_atomic(file, common::as_bytes("not safetensors")));
    CHECK(!client::load_optimizer_state(file).ok());

    REQUIRE(client::save_optimizer_state(file, {}));  // an empty state removes the file
    CHECK(!std::filesystem::exists(file));
}

TEST_CASE("backoff grows exponentially, stays under the cap, and resets") {
    client::Backoff backoff(std::chrono::milliseconds(100), std::chrono::milliseconds(1000), 7);
    std::vector<long long> ceilings;
    for (int i = 0; i < 6; ++i) {
        ceilings.push_back(backoff.ceiling().count());
        auto wait = backoff.next();
        CHECK(wait.count() >= 0);
        CHECK(wait.count() <= ceilings.back());
    }
    CHECK(ceilings == std::vector<long long>{100, 200, 400, 800, 1000, 1000});  // doubles, then the cap
    for (int i = 0; i < 44; ++i) backoff.next();
    CHECK(backoff.attempts() == 50);
    CHECK(backoff.ceiling().count() == 1000);
    backoff.reset();
    CHECK(backoff.attempts() == 0);
    CHECK(backoff.ceiling().count() == 100);
}

TEST_CASE("backoff waits are spread over the whole range (full jitter)") {
    // The third wait (ceiling 400 ms) drawn 2000 times: uniform on [0, 400] has mean 200 and
    // puts about a quarter of the draws in each quarter of the range.
    double sum = 0;
    std::array<int, 4> quarters{};
    for (std::uint64_t seed = 0; seed < 2000; ++seed) {
        client::Backoff backoff(std::chrono::milliseconds(100), std::chrono::milliseconds(1000), seed);
        backoff.next();
        backoff.next();
        auto wait = backoff.next().count();
        sum += static_cast<double>(wait);
        ++quarters[static_cast<std::size_t>(std::min<long long>(3, wait / 100))];
    }
    CHECK(sum / 2000 == doctest::Approx(200).epsilon(0.05));
    for (int count : quarters) CHECK(count > 400);
}

TEST_CASE("the rate limiter keeps a stream under its rate, saves up at most a second, starts empty, and stops "
          "waiting when the transfer is interrupted") {
    auto now = std::chrono::steady_clock::time_point{};
    std::chrono::nanoseconds slept{};
    client::RateLimiter limiter(
        1000, [&] { return now; },
        [&](std::chrono::nanoseconds wait) {
            slept += wait;
            now += wait;
        });
    limiter.spend(500);  // nothing saved up yet: half a second
    CHECK(slept == std::chrono::milliseconds(500));
    limiter.spend(2000);
    CHECK(slept == std::chrono::milliseconds(2500));
    now += std::chrono::seconds(10);  // idle: a second's worth saved, not ten
    limiter.spend(1000);
    CHECK(slept == std::chrono::milliseconds(2500));
    limiter.spend(1000);
    CHECK(slept == std::chrono::milliseconds(3500));
    CHECK(client::RateLimiter::bytes_per_second_of_mbps(8) == 1e6);

    int looks = 0;
    CHECK_FALSE(limiter.spend(5000, [&] { return ++looks > 3; }));  // three slices slept, then stopped
    CHECK(slept == std::chrono::milliseconds(3500) + 3 * client::RateLimiter::kSlice);
    CHECK(limiter.spend(0));  // the next transfer pays what was not slept
    CHECK(std::chrono::abs(slept - std::chrono::milliseconds(8500)) < std::chrono::microseconds(1));
    CHECK(limiter.spend(0, [] { return true; }));  // nothing owed: no wait to interrupt
}

TEST_CASE("a download and an upload under a cap take at least their bytes over the rate") {
    TestServer server;
    TestVolunteer volunteer(server);
    auto wu = volunteer.request_work().value();
    auto origin = client::parse_url("http://127.0.0.1:" + std::to_string(server.port())).value();
    auto target = "/blobs/" + wu.model_blob.sha256;
    constexpr double kRate = 400'000;  // bytes per second
    client::HttpOptions capped;
    capped.download_limit = std::make_shared<client::RateLimiter>(kRate);
    capped.upload_limit = std::make_shared<client::RateLimiter>(kRate);
    HttpClient http(capped);
    TempDir dir;
    auto started = std::chrono::steady_clock::now();
    REQUIRE(http.download(origin, target, dir / "model", static_cast<std::uint64_t>(wu.model_blob.bytes)).ok());
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    INFO(wu.model_blob.bytes << " bytes in " << seconds << " s");
    REQUIRE(wu.model_blob.bytes > 100'000);
    CHECK(seconds >= 0.95 * static_cast<double>(wu.model_blob.bytes) / kRate);  // a lower bound: slowness cannot fail it
    CHECK(common::sha256_file_hex(dir / "model").value() == wu.model_blob.sha256);

    // Under the 64 KiB a small request may have; any answer will do: what is timed is the writing.
    constexpr double kUploadRate = 50'000;
    capped.upload_limit = std::make_shared<client::RateLimiter>(kUploadRate);
    std::string body(60'000, 'x');
    started = std::chrono::steady_clock::now();
    auto answer = HttpClient(capped).request(origin, "POST", "/api/v1/does-not-exist", body);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    INFO("upload of " << body.size() << " bytes in " << seconds << " s");
    REQUIRE(answer.ok());
    CHECK(answer->status == 404);
    CHECK(seconds >= 0.95 * static_cast<double>(body.size()) / kUploadRate);
}

TEST_CASE("quit stops a capped download or upload in progress; a request of one chunk still goes through") {
    TestServer server;
    TestVolunteer volunteer(server);
    auto wu = volunteer.request_work().value();
    auto origin = client::parse_url("http://127.0.0.1:" + std::to_string(server.port())).value();
    constexpr double kRate = 20'000;  // bytes per second: the model takes over 5 s
    REQUIRE(wu.model_blob.bytes > 100'000);
    client::HttpOptions capped;
    capped.download_limit = std::make_shared<client::RateLimiter>(kRate);
    capped.upload_limit = std::make_shared<client::RateLimiter>(kRate);
    auto quit_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    capped.interrupted = [&] { return std::chrono::steady_clock::now() >= quit_at; };
    TempDir dir;
    auto download = HttpClient(capped).download(origin, "/blobs/" + wu.model_blob.sha256, dir / "model",
                                                static_cast<std::uint64_t>(wu.model_blob.bytes));
    REQUIRE_FALSE(download.ok());
    CHECK(download.error().kind == client::FailureKind::Stopped);
    auto kept = std::filesystem::file_size(dir / "model");  // what arrived stays, for a resume
    CHECK(kept > 0);
    CHECK(kept < static_cast<std::uintmax_t>(wu.model_blob.bytes));

    quit_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    auto upload = HttpClient(capped).request(origin, "POST", "/api/v1/does-not-exist", std::string(200'000, 'x'));
    REQUIRE_FALSE(upload.ok());
    CHECK(upload.error().kind == client::FailureKind::Stopped);

    // After quit, a small request (giving the unit back) is not cut.
    auto give_back = HttpClient(capped).request(origin, "POST", "/api/v1/does-not-exist", std::string(1000, 'x'));
    REQUIRE(give_back.ok());
    CHECK(give_back->status == 404);
}
