// Every HTTP route of the server, in process over loopback: the happy path and malformed,
// oversized, unauthenticated, replayed and forbidden requests, each with its JSON error.
#include <doctest/doctest.h>

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <functional>
#include <thread>

#include "model_cache.h"
#include "request_auth.h"
#include "raw_http.h"
#include "server_fixture.h"
#include "server_info.h"

using namespace tessera;
using namespace tessera::testing;
namespace http = boost::beast::http;

namespace {

std::string error_code_of(const HttpReply& reply) {
    auto json = boost::json::parse(reply.body);
    return std::string(json.at("error").as_string());
}

std::string work_request_body(const std::string& client_id) {
    common::WorkRequest request;
    request.client_id = client_id;
    request.device = {"cpu", "test cpu", 1 << 30, 2};
    return boost::json::serialize(common::to_json(request));
}

}  // namespace

TEST_CASE("public routes: stats, versions, volunteers, rejections, events, metrics") {
    TestServer server;
    TestVolunteer volunteer(server, "alice");
    auto wu = volunteer.request_work().value();
    REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f)).status == 200);
    server.app().wait_idle();

    auto stats = http_get(server.port(), "/api/v1/stats");
    REQUIRE(stats.status == 200);
    CHECK(stats.headers["content-type"] == "application/json");
    auto json = boost::json::parse(stats.body).as_object();
    CHECK(json.at("version").as_int64() == 1);
    CHECK(json.at("volunteers_active").as_int64() == 1);
    CHECK(json.at("work_units").at("merged").as_int64() == 1);
    CHECK(json.at("validation_loss").is_double());  // version 0 is evaluated at start

    auto versions = boost::json::parse(http_get(server.port(), "/api/v1/versions").body);
    CHECK(versions.at("versions").as_array().size() == 2);

    auto volunteers = boost::json::parse(http_get(server.port(), "/api/v1/volunteers").body);
    auto& first = volunteers.at("volunteers").as_array().at(0);
    CHECK(first.at("name").as_string() == "alice");
    CHECK(first.at("credit").as_double() > 0);
    CHECK(!first.as_object().contains("banned"));  // admin detail stays private

    auto rejections = http_get(server.port(), "/api/v1/rejections?limit=5");
    CHECK(rejections.status == 200);
    CHECK(boost::json::parse(rejections.body).at("rejections").as_array().empty());

    auto events = boost::json::parse(http_get(server.port(), "/api/v1/events?after=0&limit=100").body);
    auto& list = events.at("events").as_array();
    REQUIRE(list.size() >= 4);
    std::vector<std::string> kinds;
    for (const auto& e : list) kinds.emplace_back(e.at("kind").as_string());
    CHECK(std::find(kinds.begin(), kinds.end(), "client_registered") != kinds.end());
    CHECK(std::find(kinds.begin(), kinds.end(), "version_merged") != kinds.end());
    auto last_id = list.back().at("id").as_int64();
    auto later = boost::json::parse(http_get(server.port(), "/api/v1/events?after=" + std::to_string(last_id)).body);
    CHECK(later.at("events").as_array().empty());

    auto page = http_get(server.port(), "/");
    CHECK(page.status == 200);
    CHECK(page.headers["content-type"].starts_with("text/html"));
    CHECK(page.body.find("/api/v1/stats") != std::string::npos);

    auto metrics = http_get(server.port(), "/metrics");
    CHECK(metrics.status == 200);
    CHECK(metrics.body.find("tessera_model_version 1\n") != std::string::npos);
    CHECK(metrics.body.find("tessera_work_units{state=\"merged\"} 1") != std::string::npos);
    // The state directory's file system, for the "disk filling" alert (monitoring/).
    auto free_at = metrics.body.find("\ntessera_disk_free_bytes ");
    REQUIRE(free_at != std::string::npos);
    CHECK(std::stoll(metrics.body.substr(free_at + 25)) > 0);
    CHECK(metrics.body.find("\ntessera_disk_size_bytes ") != std::string::npos);
}

TEST_CASE("blobs: ETag, immutable caching, ranges, HEAD, 304, 404 and 416") {
    TestServer server;
    TestVolunteer volunteer(server);
    auto wu = volunteer.request_work().value();
    auto target = "/blobs/" + wu.model_blob.sha256;
    auto whole = http_get(server.port(), target);
    REQUIRE(whole.status == 200);
    CHECK(common::sha256_hex(common::as_bytes(whole.body)) == wu.model_blob.sha256);
    CHECK(whole.headers["etag"] == "\"" + wu.model_blob.sha256 + "\"");
    CHECK(whole.headers["cache-control"].find("immutable") != std::string::npos);
    CHECK(whole.headers["accept-ranges"] == "bytes");

    auto part = http_get(server.port(), target, {{"Range", "bytes=10-19"}});
    CHECK(part.status == 206);
    CHECK(part.body == whole.body.substr(10, 10));
    CHECK(part.headers["content-range"] == "bytes 10-19/" + std::to_string(whole.body.size()));
    // A range over several of the 64 KiB pieces the server reads the file in.
    REQUIRE(whole.body.size() > 300000);
    auto span = http_get(server.port(), target, {{"Range", "bytes=65000-300000"}});
    CHECK(span.status == 206);
    CHECK(span.body == whole.body.substr(65000, 235001));
    auto tail = http_get(server.port(), target, {{"Range", "bytes=-5"}});
    CHECK(tail.body == whole.body.substr(whole.body.size() - 5));
    auto open_ended =
        http_get(server.port(), target, {{"Range", "bytes=" + std::to_string(whole.body.size() - 3) + "-"}});
    CHECK(open_ended.body == whole.body.substr(whole.body.size() - 3));
    auto beyond = http_get(server.port(), target, {{"Range", "bytes=" + std::to_string(whole.body.size()) + "-"}});
    CHECK(beyond.status == 416);
    CHECK(beyond.headers["content-range"] == "bytes */" + std::to_string(whole.body.size()));

    auto head = http_call(server.port(), http::verb::head, target);
    CHECK(head.status == 200);
    CHECK(head.headers["content-length"] == std::to_string(whole.body.size()));
    CHECK(http_get(server.port(), target, {{"If-None-Match", "\"" + wu.model_blob.sha256 + "\""}}).status == 304);
    CHECK(http_get(server.port(), "/blobs/" + std::string(64, '0')).status == 404);
    CHECK(http_get(server.port(), "/blobs/../server.db").status == 400);
    CHECK(http_post(server.port(), target, "x").status == 405);
}

TEST_CASE("register: the same key keeps its id; malformed requests get 400 with a reason") {
    TestServer server;
    auto key = common::SigningKey::generate();
    common::RegisterRequest request{common::to_base64(key.verify_key().raw()), "carol", "0.1.0"};
    auto body = boost::json::serialize(common::to_json(request));
    auto first = http_post(server.port(), "/api/v1/register", body);
    auto second = http_post(server.port(), "/api/v1/register", body);
    REQUIRE(first.status == 200);
    auto response = common::parse_message<common::RegisterResponse>(first.body).value();
    CHECK(response.client_id == common::parse_message<common::RegisterResponse>(second.body).value().client_id);
    auto server_key = common::SigningKey::load_pem(server.state().signing_key()).value();
    CHECK(response.server_key_id == server_key.verify_key().key_id());

    for (const std::string bad :
         {"", "{", "[]", R"({"public_key":"AAAA","name":"x","client_version":"1"})", R"({"name":"x","name":"y"})"}) {
        auto reply = http_post(server.port(), "/api/v1/register", bad);
        CHECK_MESSAGE(reply.status == 400, bad);
        CHECK(error_code_of(reply) == "bad_request");
        CHECK(!boost::json::parse(reply.body).at("message").as_string().empty());
    }
    CHECK(http_get(server.port(), "/api/v1/register").status == 405);
    CHECK(http_get(server.port(), "/api/v1/nothing").status == 404);
    CHECK(error_code_of(http_get(server.port(), "/nowhere")) == "not_found");
}

TEST_CASE("GET /api/v1/server states key, clock and client releases; older clients than the minimum are refused") {
    TestServer server({}, PolicyKind::FedAsync, [](ServerOptions& options) {
        options.min_client_version = "0.2.0";
        options.recommended_client_version = "0.3.1";
    });
    auto reply = http_get(server.port(), "/api/v1/server");
    REQUIRE(reply.status == 200);
    auto info = common::parse_server_info(reply.body);
    REQUIRE_MESSAGE(info.ok(), reply.body);
    auto server_key = common::SigningKey::load_pem(server.state().signing_key()).value();
    CHECK(info->server_key_id == server_key.verify_key().key_id());
    CHECK(info->server_public_key == common::to_base64(server_key.verify_key().raw()));
    CHECK(info->time == server.now());
    CHECK(info->request_window_s == server::kRequestWindowS);
    CHECK(info->min_client_version == "0.2.0");
    CHECK(info->recommended_client_version == "0.3.1");
    CHECK(!info->version.empty());

    auto key = common::SigningKey::generate();
    auto register_as = [&](const std::string& version) {
        common::RegisterRequest request{common::to_base64(key.verify_key().raw()), "dave", version};
        return http_post(server.port(), "/api/v1/register", boost::json::serialize(common::to_json(request)));
    };
    for (const std::string old : {"0.1.9", "0.1.0", "garbage"}) {
        auto refused = register_as(old);
        CHECK_MESSAGE(refused.status == 403, old);
        CHECK(error_code_of(refused) == "client_too_old");
        CHECK(std::string(boost::json::parse(refused.body).at("message").as_string()).find("0.2.0 or newer") !=
              std::string::npos);
    }
    CHECK(register_as("0.2.0").status == 200);
    CHECK(register_as("1.0.0").status == 200);
}

TEST_CASE("signed routes refuse missing, forged, stale and replayed signatures") {
    TestServer server;
    TestVolunteer volunteer(server);
    auto body = work_request_body(volunteer.id());

    auto unsigned_reply = http_post(server.port(), "/api/v1/work", body);
    CHECK(unsigned_reply.status == 401);
    CHECK(error_code_of(unsigned_reply) == "unauthorized");

    auto other = common::SigningKey::generate();
    auto forged = http_post(server.port(), "/api/v1/work", body,
                            signed_headers("/api/v1/work", body, volunteer.id(), other, server.now()));
    CHECK(forged.status == 401);

    auto tampered_headers = signed_headers("/api/v1/work", body, volunteer.id(), volunteer.key(), server.now());
    CHECK(http_post(server.port(), "/api/v1/work", body + " ", tampered_headers).status == 401);

    auto stale = http_post(server.port(), "/api/v1/work", body,
                           signed_headers("/api/v1/work", body, volunteer.id(), volunteer.key(), server.now() - 3600));
    CHECK(stale.status == 401);
    CHECK(boost::json::parse(stale.body).at("message").as_string().find("clock") != std::string::npos);

    auto headers = signed_headers("/api/v1/work", body, volunteer.id(), volunteer.key(), server.now());
    CHECK(http_post(server.port(), "/api/v1/work", body, headers).status == 200);
    auto replay = http_post(server.port(), "/api/v1/work", body, headers);
    CHECK(replay.status == 401);
    CHECK(boost::json::parse(replay.body).at("message").as_string().find("replay") != std::string::npos);

    auto unknown = http_post(server.port(), "/api/v1/work", body,
                             signed_headers("/api/v1/work", body, "c-nobody", volunteer.key(), server.now()));
    CHECK(unknown.status == 401);

    // Signed by alice but naming someone else in the body.
    TestVolunteer bob(server, "bob");
    CHECK(volunteer.post("/api/v1/work", work_request_body(bob.id())).status == 403);
    CHECK(volunteer.post("/api/v1/work", "{not json").status == 400);
}

TEST_CASE("work, heartbeat, abandon and results guard their work units") {
    TestServer server([](TaskConfig& c) { c.max_in_flight = 1; });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    auto wu = alice.request_work().value();
    CHECK(wu.client_id == alice.id());
    CHECK(wu.blob_base_url.empty());
    CHECK(!alice.request_work().has_value());  // in-flight limit of 1

    auto ref = [](const std::string& client, const std::string& id) {
        return boost::json::serialize(common::to_json(common::WorkUnitRef{client, id}));
    };
    auto beat = alice.post("/api/v1/heartbeat", ref(alice.id(), wu.wu_id));
    REQUIRE(beat.status == 200);
    auto answer = common::parse_message<common::HeartbeatResponse>(beat.body).value();
    CHECK(answer.keep_working);
    CHECK(answer.deadline == wu.deadline);
    CHECK(bob.post("/api/v1/heartbeat", ref(bob.id(), wu.wu_id)).status == 404);
    CHECK(alice.post("/api/v1/heartbeat", ref(alice.id(), "a-unknown")).status == 404);
    CHECK(alice.post("/api/v1/heartbeat", "{}").status == 400);

    // Bob cannot upload for Alice's unit.
    auto bob_wu = bob.request_work().value();
    auto stolen = wu;
    auto encoded = common::encode_delta(alice.made_up_delta(wu, 1e-3f), wu.encoding).value().bytes;
    auto manifest = alice.manifest_for(stolen, encoded);
    manifest.client_id = bob.id();
    CHECK(bob.upload_bytes(manifest, encoded).status == 403);
    CHECK(state_of(server, wu.wu_id) == "in_progress");

    CHECK(alice.post("/api/v1/abandon", ref(alice.id(), wu.wu_id)).status == 200);
    CHECK(state_of(server, wu.wu_id) == "abandoned");
    CHECK(alice.post("/api/v1/abandon", ref(alice.id(), wu.wu_id)).status == 409);
    auto after = common::parse_message<common::HeartbeatResponse>(
                     alice.post("/api/v1/heartbeat", ref(alice.id(), wu.wu_id)).body)
                     .value();
    CHECK(!after.keep_working);
    auto late = alice.upload(wu, alice.made_up_delta(wu, 1e-3f));
    CHECK(late.status == 409);

    auto garbage = bob.post("/api/v1/results", "xy");
    CHECK(garbage.status == 400);
    CHECK(bob.upload(bob_wu, bob.made_up_delta(bob_wu, 1e-3f)).status == 200);
    auto twice = bob.upload(bob_wu, bob.made_up_delta(bob_wu, 1e-3f));
    CHECK(twice.status == 409);
}

TEST_CASE("concurrent work requests of one volunteer never take more units than its in-flight limit") {
    // No lock serialises the scheduler: each unit is claimed in the store's transaction, which
    // counts the volunteer's units in progress.
    TestServer server([](TaskConfig& c) {
        c.max_in_flight = 2;
        c.replication = 0;
    });
    TestVolunteer alice(server, "alice");
    constexpr int kRequests = 16;
    std::atomic<int> units{0};
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kRequests; ++i)
        threads.emplace_back([&] {
            try {
                if (alice.request_work()) ++units;
            } catch (const std::exception&) {
                ++failures;
            }
        });
    for (auto& thread : threads) thread.join();
    CHECK(failures.load() == 0);
    CHECK(units.load() == 2);
    CHECK(server.store().in_flight(alice.id()).value() == 2);
}

TEST_CASE("a work request listing the most cached shards allowed fits the route's body cap") {
    TestServer server;
    TestVolunteer volunteer(server);
    common::WorkRequest request;
    request.client_id = volunteer.id();
    request.device = {"cuda", std::string(128, 'G'), 1 << 30, 4096};
    for (std::size_t i = 0; i < common::kMaxCachedShards; ++i) {
        auto hash = common::sha256_hex(common::as_bytes(std::to_string(i)));
        request.cached_shards.push_back(hash);
    }
    auto largest = boost::json::serialize(common::to_json(request));
    CHECK(volunteer.post("/api/v1/work", largest).status == 200);
    request.cached_shards.push_back(request.cached_shards.front());
    auto reply = volunteer.post("/api/v1/work", boost::json::serialize(common::to_json(request)));
    CHECK(reply.status == 400);
    CHECK(error_code_of(reply) == "bad_request");
}

TEST_CASE("oversized bodies get 413 before they are read") {
    TestServer server;
    auto small_route = answer_to_header(server.port(), "/api/v1/register", 200 << 10);
    CHECK(small_route.starts_with("HTTP/1.1 413"));
    CHECK(small_route.find("\"too_large\"") != std::string::npos);
    auto upload = answer_to_header(server.port(), "/api/v1/results", std::size_t{1} << 40);
    CHECK(upload.starts_with("HTTP/1.1 413"));
    // Within the limit, a body that is too long for a small route is still refused in full.
    auto reply = http_post(server.port(), "/api/v1/register", std::string(100 << 10, ' '));
    CHECK(reply.status == 413);
    CHECK(http_get(server.port(), "/api/v1/stats").status == 200);  // still serving
}

TEST_CASE(
    "an upload from an unknown, banned or out-of-window signer is refused on its header, before its body is read") {
    TestServer server;
    TestVolunteer volunteer(server);
    constexpr std::size_t kLarge = 100 << 10;  // within the upload limit; never sent
    auto nobody = common::SigningKey::generate();
    auto unknown = answer_to_header(server.port(), "/api/v1/results", kLarge,
                                    signed_headers("/api/v1/results", "", "c-nobody", nobody, server.now()));
    CHECK(unknown.starts_with("HTTP/1.1 401"));
    CHECK(unknown.find("unknown client 'c-nobody'") != std::string::npos);
    CHECK(unknown.find("Connection: close") != std::string::npos);
    auto unsigned_upload = answer_to_header(server.port(), "/api/v1/results", kLarge);
    CHECK(unsigned_upload.starts_with("HTTP/1.1 401"));
    auto stale = answer_to_header(server.port(), "/api/v1/results", kLarge,
                                  signed_headers("/api/v1/results", "", volunteer.id(), volunteer.key(),
                                                 server.now() - 2 * server::kRequestWindowS));
    CHECK(stale.starts_with("HTTP/1.1 401"));

    std::map<std::string, std::string> operator_auth{{"Authorization", "Bearer " + server.token()}};
    REQUIRE(http_post(server.port(), "/api/v1/admin/clients/" + volunteer.id() + "/ban", "", operator_auth).status ==
            200);
    auto banned =
        answer_to_header(server.port(), "/api/v1/results", kLarge,
                         signed_headers("/api/v1/results", "", volunteer.id(), volunteer.key(), server.now()));
    CHECK(banned.starts_with("HTTP/1.1 403"));
    CHECK(banned.find("\"banned\"") != std::string::npos);
    CHECK(http_get(server.port(), "/api/v1/stats").status == 200);  // still serving
}

TEST_CASE("an upload is held to its own task's delta cap, not to the largest served task's") {
    TestServer server;
    auto dit = server.store().current_task().value().value().id;
    TempDir pixels;
    write_synthetic_dataset(pixels.path(), 2, SyntheticKind::Pixels);
    auto cnn = small_task_config(pixels.path(), PolicyKind::FedAsync, "cnn");
    cnn.task_id = "cnn";
    REQUIRE(create_task(server.state(), server.store(), cnn).ok());
    REQUIRE(server.app().refresh_tasks().ok());
    // One volunteer with a unit of each task, each its only unit in progress.
    auto holder_of = [&](const std::string& task, const std::string& other) {
        REQUIRE(server.store().set_task_weight(other, 0).ok());
        REQUIRE(server.store().set_task_weight(task, 1).ok());
        auto volunteer = std::make_unique<TestVolunteer>(server, task);
        auto unit = volunteer->request_work();
        REQUIRE(unit.has_value());
        REQUIRE(unit->task_id == task);
        auto cap = server::max_delta_bytes_for(server::value_count(volunteer->base_model(*unit)));
        return std::tuple(std::move(volunteer), *unit, cap);
    };
    auto a = holder_of(dit, "cnn");
    auto b = holder_of("cnn", dit);
    REQUIRE(std::get<2>(a) != std::get<2>(b));  // the two models differ in size
    auto& [small, small_unit, small_cap] = std::get<2>(a) < std::get<2>(b) ? a : b;
    auto& [large, large_unit, large_cap] = std::get<2>(a) < std::get<2>(b) ? b : a;

    // Announced past the small task's limit: refused on the header, though the large one's takes it.
    auto past_small = static_cast<std::size_t>(small_cap) + 4 + common::kMaxManifestBytes + 1;
    auto announced = answer_to_header(server.port(), "/api/v1/results", past_small,
                                      signed_headers("/api/v1/results", "", small->id(), small->key(), server.now()));
    CHECK(announced.starts_with("HTTP/1.1 413"));
    CHECK(announced.find("\"too_large\"") != std::string::npos);
    CHECK(state_of(server, small_unit.wu_id) == "in_progress");

    // A delta one byte past the small task's cap, within its body limit: refused for the small
    // task's unit, taken (for validation) for the large one's.
    common::Bytes oversized(static_cast<std::size_t>(small_cap) + 1, std::uint8_t{7});
    auto refused = small->upload_bytes(small->manifest_for(small_unit, oversized), oversized);
    CHECK(refused.status == 422);
    CHECK(error_code_of(refused) == "too_large");
    CHECK(rejection_of(server, small_unit.wu_id) == "too_large");
    CHECK(static_cast<std::int64_t>(oversized.size()) < large_cap);
    auto taken = large->upload_bytes(large->manifest_for(large_unit, oversized), oversized);
    CHECK(taken.status == 200);
}

TEST_CASE("a malformed request line or an oversized header closes the connection, nothing else") {
    TestServer server;
    std::vector<std::string> requests{"GARBAGE\r\n\r\n",
                                      "GET / HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n"};
    for (const auto& raw : requests) {
        boost::asio::io_context io;
        boost::asio::ip::tcp::socket socket(io);
        socket.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
        boost::system::error_code error;
        boost::asio::write(socket, boost::asio::buffer(raw), error);
        std::string answer;
        boost::asio::read(socket, boost::asio::dynamic_buffer(answer), error);
        CHECK(answer.empty());
    }
    CHECK(http_get(server.port(), "/api/v1/stats").status == 200);
}

TEST_CASE("admin routes need the operator token; pause stops work, bans refuse a volunteer") {
    TestServer server;
    TestVolunteer volunteer(server);
    std::map<std::string, std::string> operator_auth{{"Authorization", "Bearer " + server.token()}};
    CHECK(http_get(server.port(), "/api/v1/admin/volunteers").status == 401);
    CHECK(http_get(server.port(), "/api/v1/admin/volunteers", {{"Authorization", "Bearer wrong"}}).status == 401);
    auto full = http_get(server.port(), "/api/v1/admin/volunteers", operator_auth);
    REQUIRE(full.status == 200);
    CHECK(boost::json::parse(full.body).at("volunteers").as_array().at(0).as_object().contains("banned"));

    CHECK(http_post(server.port(), "/api/v1/admin/task/pause", "", operator_auth).status == 200);
    CHECK(!volunteer.request_work().has_value());
    CHECK(http_post(server.port(), "/api/v1/admin/task/resume", "", operator_auth).status == 200);
    CHECK(volunteer.request_work().has_value());

    CHECK(http_post(server.port(), "/api/v1/admin/clients/" + volunteer.id() + "/ban", "", operator_auth).status ==
          200);
    auto banned = volunteer.post("/api/v1/work", work_request_body(volunteer.id()));
    CHECK(banned.status == 403);
    CHECK(error_code_of(banned) == "banned");
    CHECK(http_post(server.port(), "/api/v1/admin/clients/c-nobody/ban", "", operator_auth).status == 404);
    CHECK(http_post(server.port(), "/api/v1/admin/clients/" + volunteer.id() + "/unban", "", operator_auth).status ==
          200);
    CHECK(volunteer.post("/api/v1/work", work_request_body(volunteer.id())).status == 200);
    CHECK(http_get(server.port(), "/api/v1/admin/task/pause", operator_auth).status == 405);
    CHECK(http_post(server.port(), "/api/v1/admin/nothing", "", operator_auth).status == 404);
}

TEST_CASE("admin routes per task: weight, pause, resume, finish; the task routes; device fit") {
    TestServer server([](TaskConfig& config) { config.max_in_flight = 100; });
    TestVolunteer volunteer(server);
    std::map<std::string, std::string> auth{{"Authorization", "Bearer " + server.token()}};
    auto id = server.store().current_task().value().value().id;
    auto admin = [&](const std::string& action) {
        return http_post(server.port(), "/api/v1/admin/tasks/" + id + "/" + action, "", auth);
    };
    CHECK(admin("weight?value=0").status == 200);  // no share: no units
    CHECK(!volunteer.request_work().has_value());
    CHECK(admin("weight?value=2").status == 200);
    CHECK(volunteer.request_work().has_value());
    CHECK(admin("weight?value=-1").status == 400);
    CHECK(admin("weight").status == 400);
    CHECK(admin("pause").status == 200);
    CHECK(!volunteer.request_work().has_value());
    CHECK(admin("resume").status == 200);
    CHECK(volunteer.request_work().has_value());
    CHECK(http_post(server.port(), "/api/v1/admin/tasks/absent/pause", "", auth).status == 404);
    CHECK(admin("nonsense").status == 404);
    CHECK(admin("finish").status == 200);
    CHECK(!volunteer.request_work().has_value());
    CHECK(admin("resume").status == 409);  // finished is final

    auto tasks = boost::json::parse(http_get(server.port(), "/api/v1/tasks").body).at("tasks").as_array();
    REQUIRE(tasks.size() == 1);
    CHECK(tasks[0].at("state").as_string() == "finished");
    CHECK(tasks[0].at("weight").as_double() == 2);
    CHECK(http_get(server.port(), "/api/v1/tasks/" + id + "/versions").status == 200);
    CHECK(http_get(server.port(), "/api/v1/tasks/" + id + "/nonsense").status == 404);
    CHECK(http_get(server.port(), "/api/v1/tasks/absent/history").status == 404);

    TaskConfig cuda_task = server.config();
    cuda_task.requires_device = "cuda";
    cuda_task.min_device_memory_gb = 8;
    CHECK(!Scheduler::device_fits(cuda_task, {"cpu", "a CPU", std::int64_t{64} << 30, 8}));
    CHECK(!Scheduler::device_fits(cuda_task, {"cuda", "a small GPU", std::int64_t{4} << 30, 1}));
    CHECK(Scheduler::device_fits(cuda_task, {"cuda", "a GPU", std::int64_t{24} << 30, 1}));
    CHECK(Scheduler::device_fits(server.config(), {"cpu", "a CPU", 0, 1}));
}
