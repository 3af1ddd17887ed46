// An in-process tessera-server on a loopback port with a manual clock, on a synthetic task,
// and a test volunteer that registers, asks for work and uploads deltas it makes up.
#pragma once

#include <boost/json.hpp>

#include <atomic>
#include <functional>
#include <random>

#include "checkpoint.h"
#include "http_client.h"
#include "protocol.h"
#include "result_upload.h"
#include "server_app.h"
#include "sha256.h"
#include "signed_envelope.h"
#include "synthetic_dataset.h"
#include "task_setup.h"
#include "temp_dir.h"
#include "tessera_version.h"
#include "text_encoding.h"

namespace tessera::testing {

using namespace tessera::server;

constexpr std::int64_t kStartTime = 1'800'000'000;

// dit-tiny (or `model`) on the synthetic dataset with small units; no loss check, no replication,
// no alignment check.
inline TaskConfig small_task_config(const std::filesystem::path& data_dir, PolicyKind policy,
                                    const std::string& model = "dit-tiny") {
    auto config = default_task_config(data_dir, policy, model).value();
    config.loss_check = 0;      // tests that want it turn it on
    config.audit = 0;           // and the replay audits
    config.trust_streak = 0;    // every volunteer trusted from the start, so loss_check decides
    config.min_alignment = -1;  // made-up deltas are mutually orthogonal noise (misaligned)
    config.replication = 0;
    config.eval_samples = 64;
    config.local_steps = 4;
    config.batch_size = 8;
    config.target_seconds = 0;
    return config;
}

class TestServer {
public:
    // SyntheticKind::Pixels makes it a cnn task on random 28×28 images.
    explicit TestServer(const std::function<void(TaskConfig&)>& adjust = {}, PolicyKind policy = PolicyKind::FedAsync,
                        std::function<void(ServerOptions&)> adjust_options = {},
                        SyntheticKind data = SyntheticKind::Latents)
        : state_(dir_.path() / "state"), adjust_options_(std::move(adjust_options)) {
        write_synthetic_dataset(dir_.path() / "data", 2, data);
        token_ = initialize_state(state_).value();
        auto store = Store::open(state_.database(), false).value();
        auto config =
            small_task_config(dir_.path() / "data", policy, data == SyntheticKind::Pixels ? "cnn" : "dit-tiny");
        if (adjust) adjust(config);
        config_ = config;
        create_task(state_, *store, config).value();
        start();
    }

    void start() {
        ServerOptions options;
        options.state = state_;
        options.http.address = "127.0.0.1";
        options.http.port = 0;
        options.tick_interval_s = 0;     // tests tick the transitioner themselves
        options.validation_poll_ms = 0;  // and poll the validation stage
        options.work_threads = 2;
        options.clock = [this] { return now_.load(); };
        if (adjust_options_) adjust_options_(options);
        auto app = ServerApp::start(std::move(options));
        if (!app) throw std::runtime_error("server start: " + app.message());
        app_ = std::move(*app);
    }
    void stop() { app_.reset(); }

    std::uint16_t port() const { return app_->port(); }
    Store& store() { return app_->store(); }
    ServerApp& app() { return *app_; }
    std::int64_t now() const { return now_.load(); }
    void advance(std::int64_t seconds) { now_ += seconds; }
    const std::string& token() const { return token_; }
    const StateDir& state() const { return state_; }
    const TaskConfig& config() const { return config_; }
    std::int64_t version() { return store().current_task().value()->version; }

private:
    TempDir dir_;
    StateDir state_;
    std::string token_;
    TaskConfig config_;
    std::function<void(ServerOptions&)> adjust_options_;
    std::atomic<std::int64_t> now_{kStartTime};
    std::unique_ptr<ServerApp> app_;
};

// A volunteer that makes up its deltas: Δ = scale × N(0, 1) for every weight.
class TestVolunteer {
public:
    // Registered as a client of `version` (this build's unless told).
    TestVolunteer(TestServer& server, std::string name = "test volunteer", std::string version = common::kVersion)
        : TestVolunteer([&server] { return server.port(); }, [&server] { return server.now(); }, std::move(name),
                        std::move(version)) {}

    // For a server in another process: its port and the wall clock.
    TestVolunteer(std::function<std::uint16_t()> port, std::function<std::int64_t()> now, std::string name,
                  std::string version = common::kVersion)
        : port_(std::move(port)), now_(std::move(now)), key_(common::SigningKey::generate()) {
        common::RegisterRequest request{common::to_base64(key_.verify_key().raw()), std::move(name),
                                        std::move(version)};
        auto reply = http_post(port_(), "/api/v1/register", boost::json::serialize(common::to_json(request)));
        if (reply.status != 200) throw std::runtime_error("register: " + reply.body);
        auto response = common::parse_message<common::RegisterResponse>(reply.body).value();
        id_ = response.client_id;
        server_key_ = common::VerifyKey::from_raw(common::from_base64(response.server_public_key).value()).value();
    }

    const std::string& id() const { return id_; }
    const common::SigningKey& key() const { return key_; }

    HttpReply post(const std::string& target, const std::string& body) {
        return http_post(port_(), target, body, signed_headers(target, body, id_, key_, now_()));
    }

    // Asks for work, holding the model `held_model` (for patches), taking only the tasks
    // `only` names (empty: any) and none `exclude` names; the verified work unit, or nullopt
    // for "no work".
    std::optional<common::WorkUnit> request_work(const std::string& held_model = "", std::vector<std::string> only = {},
                                                 std::vector<std::string> exclude = {}) {
        common::WorkRequest request;
        request.client_id = id_;
        request.device = {"cpu", "test cpu", 1 << 30, 2};
        request.held_model = held_model;
        request.only_tasks = std::move(only);
        request.exclude_tasks = std::move(exclude);
        auto reply = post("/api/v1/work", boost::json::serialize(common::to_json(request)));
        if (reply.status != 200) throw std::runtime_error("work: " + std::to_string(reply.status) + " " + reply.body);
        auto response = common::parse_message<common::WorkResponse>(reply.body).value();
        if (!response.has_work) return std::nullopt;
        auto payload = common::open_envelope(response.work_unit, common::kWorkUnitPurpose, *server_key_).value();
        return common::parse_message<common::WorkUnit>(payload).value();
    }

    // The base model's tensors, fetched from /blobs.
    common::NamedTensors base_model(const common::WorkUnit& wu) {
        auto reply = http_get(port_(), "/blobs/" + wu.model_blob.sha256);
        return common::read_checkpoint(common::as_bytes(reply.body)).value();
    }

    // Seeded by the unit's seed unless `seed` is given: replicas of a unit make the same delta,
    // different units different ones (identical deltas for two units would be a copy).
    common::NamedTensors made_up_delta(const common::WorkUnit& wu, float scale,
                                       std::optional<std::uint32_t> seed = {}) {
        auto delta = base_model(wu);
        std::mt19937 rng(seed.value_or(static_cast<std::uint32_t>(wu.hyper.seed)));
        std::normal_distribution<float> normal;
        for (auto& t : delta)
            for (auto& v : t.values) v = scale * normal(rng);
        return delta;
    }

    common::ResultManifest manifest_for(const common::WorkUnit& wu, const common::Bytes& delta) {
        common::TrainMetrics metrics{1.0, 0.9, wu.hyper.local_steps * wu.hyper.batch_size, 1.0, 100.0};
        return common::result_manifest_of(wu, id_, delta, metrics, "cpu:test");
    }

    HttpReply upload_bytes(const common::ResultManifest& manifest, const common::Bytes& delta) {
        auto body = common::pack_result_upload(boost::json::serialize(common::to_json(manifest)), delta);
        return post("/api/v1/results", std::string(body.begin(), body.end()));
    }

    HttpReply upload(const common::WorkUnit& wu, const common::NamedTensors& delta) {
        auto encoded = common::encode_delta(delta, wu.encoding).value().bytes;
        return upload_bytes(manifest_for(wu, encoded), encoded);
    }

private:
    std::function<std::uint16_t()> port_;
    std::function<std::int64_t()> now_;
    common::SigningKey key_;
    std::string id_;
    std::optional<common::VerifyKey> server_key_;
};

// The assignment's state name, as stored.
inline std::string state_of(TestServer& server, const std::string& wu_id) {
    auto a = server.store().assignment(wu_id).value();
    return a ? std::string(assignment_state_name(a->state)) : "(none)";
}

// The newest stored rejection reason for an assignment, or "".
inline std::string rejection_of(TestServer& server, const std::string& wu_id) {
    auto rejection = server.store().rejection_of(wu_id).value();
    return rejection ? rejection->reason : "";
}

// The newest stored rejection as "<reason>: <detail>" (what a failed check should print), or "".
inline std::string refusal_of(TestServer& server, const std::string& wu_id) {
    auto rejection = server.store().rejection_of(wu_id).value();
    return rejection ? rejection->reason + ": " + rejection->detail : "";
}

}  // namespace tessera::testing
