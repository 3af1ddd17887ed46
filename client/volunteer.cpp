// The volunteer loop and its steps.
#include "volunteer.h"

#include <boost/json.hpp>

#include <iostream>
#include <set>
#include <thread>

#include "backoff.h"
#include "file_io.h"
#include "blob_cache.h"
#include "progress_bar.h"
#include "server_api.h"
#include "signed_envelope.h"
#include "text_encoding.h"
#include "training/work_runner.h"
#include "result_upload.h"
#include "sha256.h"

namespace tessera::client {
namespace {

constexpr const char* kClientVersion = "0.1.0";

// Thrown from the training progress callback when the volunteer asks to abandon the unit.
struct Interrupted {};

class Logger {
public:
    explicit Logger(const VolunteerOptions& options) : quiet_(options.quiet), json_(options.json_logs) {}
    void info(const std::string& event, const std::string& text, boost::json::object fields = {}) const {
        if (json_) {
            fields["event"] = event;
            fields["message"] = text;
            fields["time"] = unix_now();
            std::cout << boost::json::serialize(fields) << std::endl;
        } else if (!quiet_) {
            std::cout << text << std::endl;
        }
    }
    void error(const std::string& text) const {
        if (json_) info("error", text);
        else std::cerr << "tessera-client: " << text << std::endl;
    }
    bool quiet() const { return quiet_ || json_; }

private:
    bool quiet_;
    bool json_;
};

// Repeats `call` with backoff while it fails on the network or the server answers 5xx.
template <class Call>
common::Result<ApiReply> with_retries(Call&& call, const VolunteerControl& control, const Logger& log,
                                      const std::string& what) {
    Backoff backoff;
    for (;;) {
        auto reply = call();
        if (reply && reply->status < 500) return reply;
        auto why = reply ? "HTTP " + std::to_string(reply->status) + ": " + reply->error_message() : reply.message();
        auto wait = backoff.next();
        log.error(what + " failed (" + why + "); retrying in " + std::to_string(wait.count() / 1000.0).substr(0, 4) + " s");
        for (auto slept = std::chrono::milliseconds(0); slept < wait; slept += std::chrono::milliseconds(100)) {
            if (control.abandon_now) return common::make_error(what + ": stopped");
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
}

struct Session {
    const VolunteerOptions& options;
    VolunteerControl& control;
    Logger log;
    ClientState state;
    HttpClient http;
    Url server;
    std::unique_ptr<common::SigningKey> key;
    std::unique_ptr<ServerApi> api;
    std::unique_ptr<common::VerifyKey> server_key;
    std::unique_ptr<BlobCache> cache;
    std::set<std::string> shards_seen;  // blobs that came as shards (the rest are model versions)
    double measured_speed = 0;
};

// The cached shards, for locality scheduling: model versions are left out (a new one comes
// with nearly every unit, so they would only grow the request), and the list is capped.
std::vector<std::string> cached_shards(const Session& s) {
    std::vector<std::string> shards;
    for (auto& hash : s.cache->held())
        if (s.shards_seen.count(hash) > 0 && shards.size() < common::kMaxCachedShards) shards.push_back(std::move(hash));
    return shards;
}

// Registers (idempotent: the same key keeps its id) and pins the server's key on first
// contact. A reason to stop, or nullopt to go on.
std::optional<StopReason> connect(Session& s, std::string& message) {
    auto key = s.state.load_or_create_key();
    if (!key) return message = key.message(), StopReason::Error;
    s.key = std::make_unique<common::SigningKey>(std::move(*key));
    s.api = std::make_unique<ServerApi>(s.server, s.http, *s.key);
    auto reply = with_retries([&] { return s.api->register_client(s.options.name, kClientVersion); }, s.control, s.log,
                              "registering with " + s.options.server);
    if (!reply) return message = reply.message(), StopReason::Requested;
    if (reply->status != 200) return message = "registration refused: " + reply->error_message(), StopReason::Error;
    auto response = common::parse_message<common::RegisterResponse>(reply->body);
    if (!response) return message = "bad registration answer: " + response.message(), StopReason::Error;
    auto pinned = s.state.load_identity();
    if (!pinned) return message = pinned.message(), StopReason::Error;
    if (*pinned && (*pinned)->server_public_key != response->server_public_key)
        return message = "the server's key (" + response->server_key_id + ") is not the one pinned at first registration (" +
                         (*pinned)->server_key_id + "): refusing to work for it. If the operator really changed keys, "
                         "remove " + (s.state.root() / "identity.json").string(),
               StopReason::Untrusted;
    Identity identity{s.options.server, response->client_id,
                      *pinned ? (*pinned)->server_public_key : response->server_public_key, response->server_key_id};
    if (!*pinned)
        if (auto status = s.state.save_identity(identity); !status) return message = status.message(), StopReason::Error;
    auto raw = common::from_base64(identity.server_public_key);
    auto verify = raw ? common::VerifyKey::from_raw(*raw) : common::Result<common::VerifyKey>(raw.error());
    if (!verify) return message = "pinned server key unreadable: " + verify.message(), StopReason::Error;
    s.server_key = std::make_unique<common::VerifyKey>(std::move(*verify));
    s.api->set_client_id(response->client_id);
    s.log.info("registered", "registered with " + s.options.server + " as " + response->client_id + " (server key " +
                                 identity.server_key_id + ")",
               {{"client_id", response->client_id}});
    return std::nullopt;
}

// Verifies a work unit's envelope against the pinned key before anything else reads it.
common::Result<common::WorkUnit> open_work_unit(const Session& s, const common::SignedEnvelope& envelope) {
    auto payload = common::open_envelope(envelope, common::kWorkUnitPurpose, *s.server_key);
    if (!payload) return payload.error();
    auto unit = common::parse_message<common::WorkUnit>(*payload);
    if (!unit) return unit.error();
    if (unit->client_id != s.api->client_id()) return common::make_error("the work unit is for another volunteer");
    return unit;
}

common::Result<std::vector<std::filesystem::path>> fetch_blobs(Session& s, const common::WorkUnit& unit,
                                                               std::filesystem::path& model_path) {
    auto base = s.server;
    base.path += "/blobs";
    if (!unit.blob_base_url.empty()) {
        auto parsed = parse_url(unit.blob_base_url);
        if (!parsed) return parsed.error();
        base = *parsed;
    }
    std::vector<common::BlobRef> blobs{unit.model_blob};
    blobs.insert(blobs.end(), unit.shards.begin(), unit.shards.end());
    std::vector<std::filesystem::path> paths;
    for (const auto& blob : blobs) {
        common::ProgressBar bar("fetch " + blob.sha256.substr(0, 8), blob.bytes);
        Backoff backoff;
        for (;;) {
            auto path = s.cache->ensure(blob, s.http, base, [&](std::uint64_t done, std::uint64_t) {
                if (!s.log.quiet()) bar.update(static_cast<std::int64_t>(done));
            });
            if (path) {
                if (!s.log.quiet()) bar.finish(std::to_string(blob.bytes) + " bytes");
                paths.push_back(*path);
                break;
            }
            if (s.control.abandon_now) return path.error();
            auto wait = backoff.next();
            s.log.error("download of " + blob.sha256.substr(0, 12) + " failed (" + path.message() + "); retrying");
            std::this_thread::sleep_for(wait);
        }
    }
    model_path = paths.front();
    paths.erase(paths.begin());
    return paths;
}

// Validation usually settles within a second: wait that long for the verdict to print it.
common::ResultStatus await_outcome(Session& s, const std::string& wu_id) {
    common::ResultStatus status{wu_id, "returned", "", 0};
    auto body = boost::json::serialize(common::to_json(common::WorkUnitRef{s.api->client_id(), wu_id}));
    for (int i = 0; i < 20; ++i) {
        auto reply = s.api->post("result", body);
        if (!reply || reply->status != 200) break;
        auto parsed = common::parse_message<common::ResultStatus>(reply->body);
        if (!parsed) break;
        status = *parsed;
        if (status.state != "returned") break;
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return status;
}

std::string describe(const common::ResultStatus& status) {
    if (status.state == "merged" || status.state == "accepted" || status.state == "confirmed")
        return "accepted, credit " + std::to_string(status.credit).substr(0, 6);
    if (status.state == "rejected") return "rejected (" + status.reason + ")";
    if (status.state == "validated") return "valid, waiting for its replica";
    return "uploaded, validation pending";
}

// One work unit from its verified envelope to an acknowledged upload.
StopReason compute(Session& s, const common::WorkUnit& unit, const std::string& envelope_json, std::string& message) {
    s.log.info("work", "work unit " + unit.wu_id + ": model " + unit.model + " v" + std::to_string(unit.base_version) +
                           ", " + std::to_string(unit.hyper.local_steps) + " steps × " +
                           std::to_string(unit.hyper.batch_size),
               {{"wu_id", unit.wu_id}});
    if (auto status = s.state.save_current({envelope_json, unit.wu_id, "training"}); !status)
        return message = status.message(), StopReason::Error;
    std::filesystem::path model_path;
    auto shards = fetch_blobs(s, unit, model_path);
    if (!shards) return message = shards.message(), StopReason::Error;

    RunOptions run;
    run.device = s.options.device;
    run.threads = s.options.threads;
    run.max_gpu_memory_gb = s.options.max_gpu_memory_gb;
    common::ProgressBar bar("train " + unit.wu_id, unit.hyper.local_steps);
    run.progress = [&](std::int64_t step, std::int64_t, double loss, double speed) {
        if (s.control.abandon_now) throw Interrupted();
        if (!s.log.quiet()) bar.update(step, "loss " + std::to_string(loss).substr(0, 6) +
                                                                             ", " + std::to_string(static_cast<int>(speed)) + " samples/s");
    };
    std::optional<common::Result<RunOutput>> ran;
    try {
        ran.emplace(run_work_unit(unit, model_path, *shards, run));
    } catch (const Interrupted&) {
        auto reply = s.api->abandon(unit.wu_id);
        s.state.clear_current();
        s.log.info("abandoned", unit.wu_id + ": abandoned on request" +
                                    (reply ? " (HTTP " + std::to_string(reply->status) + ")" : std::string()));
        return StopReason::Requested;
    }
    auto& output = *ran;
    if (!s.log.quiet()) bar.finish(output ? "done" : "failed");
    if (!output) {
        s.log.error("training failed: " + output.message() + "; abandoning " + unit.wu_id);
        (void)s.api->abandon(unit.wu_id);
        s.state.clear_current();
        return StopReason::Requested;
    }
    s.measured_speed = output->metrics.samples_per_s;

    common::ResultManifest manifest;
    manifest.wu_id = unit.wu_id;
    manifest.client_id = s.api->client_id();
    manifest.base_version = unit.base_version;
    manifest.delta_blob = {common::sha256_hex(output->delta), static_cast<std::int64_t>(output->delta.size())};
    manifest.encoding = unit.encoding;
    manifest.metrics = output->metrics;
    manifest.device = output->device.substr(0, 128);
    auto body = common::pack_result_upload(boost::json::serialize(common::to_json(manifest)), output->delta);
    if (auto status = common::write_file_atomic(s.state.delta_file(), body); !status)
        return message = status.message(), StopReason::Error;
    if (auto status = s.state.save_current({envelope_json, unit.wu_id, "uploading"}); !status)
        return message = status.message(), StopReason::Error;
    std::string text(body.begin(), body.end());
    auto reply = with_retries([&] { return s.api->post("results", text); }, s.control, s.log, "uploading " + unit.wu_id);
    if (!reply) return message = reply.message(), StopReason::Requested;
    s.state.clear_current();
    if (reply->status == 200) {
        auto outcome = await_outcome(s, unit.wu_id);
        s.log.info("result", unit.wu_id + ": " + describe(outcome) + "; loss " +
                                 std::to_string(output->metrics.loss_start).substr(0, 6) + " → " +
                                 std::to_string(output->metrics.loss_end).substr(0, 6) + ", " +
                                 std::to_string(static_cast<int>(output->metrics.samples_per_s)) + " samples/s, " +
                                 std::to_string(output->delta.size()) + " bytes",
                   {{"wu_id", unit.wu_id}, {"state", outcome.state}, {"reason", outcome.reason},
                    {"credit", outcome.credit}, {"bytes", static_cast<std::int64_t>(output->delta.size())},
                    {"samples_per_s", output->metrics.samples_per_s}, {"device", output->device}});
    } else
        s.log.info("refused", unit.wu_id + ": the server refused the result: " + reply->error_message(),
                   {{"wu_id", unit.wu_id}, {"status", reply->status}});
    return StopReason::OnceDone;
}

// A unit left by a previous run: upload a finished delta, otherwise give the unit back.
void resume_or_abandon(Session& s) {
    auto current = s.state.load_current();
    if (!current || !*current) return;
    const auto& work = **current;
    std::error_code error;
    if (work.phase == "uploading" && std::filesystem::exists(s.state.delta_file(), error)) {
        auto body = common::read_file(s.state.delta_file(), std::uint64_t{8} << 30);
        if (body) {
            auto reply = with_retries([&] { return s.api->post("results", std::string(body->begin(), body->end())); },
                                      s.control, s.log, "uploading " + work.wu_id);
            if (reply) s.log.info("resumed", work.wu_id + ": uploaded the result left by the last run (HTTP " +
                                                 std::to_string(reply->status) + ")");
        }
    } else {
        auto reply = s.api->abandon(work.wu_id);
        s.log.info("abandoned", work.wu_id + ": the last run stopped while training; abandoned" +
                                    (reply ? " (HTTP " + std::to_string(reply->status) + ")" : std::string()));
    }
    s.state.clear_current();
}

}  // namespace

StopReason run_volunteer(const VolunteerOptions& options, VolunteerControl& control, std::string& message) {
    Session s{options, control, Logger(options), ClientState(options.state_dir), HttpClient({std::chrono::seconds(60), 16 << 20, options.ca_file}),
              {}, nullptr, nullptr, nullptr, nullptr, {}, 0};
    auto server = parse_url(options.server);
    if (!server) return message = server.message(), StopReason::Error;
    s.server = *server;
    s.cache = std::make_unique<BlobCache>(s.state.cache_dir(), options.cache_quota_bytes);
    auto probed = probe_device(options.device, options.threads);
    if (!probed) return message = probed.message(), StopReason::Error;
    common::DeviceInfo device = *probed;
    device.name = device.name.substr(0, 128);
    s.log.info("device", "device: " + describe_device(options.device, options.threads),
               {{"kind", device.kind}, {"name", device.name}, {"memory_bytes", device.memory_bytes}});
    if (auto reason = connect(s, message)) return *reason;
    resume_or_abandon(s);

    while (!control.stop_after_unit && !control.abandon_now) {
        common::WorkRequest request;
        request.client_id = s.api->client_id();
        request.device = device;
        request.samples_per_s = s.measured_speed;
        request.cached_shards = cached_shards(s);
        auto body = boost::json::serialize(common::to_json(request));
        auto reply = with_retries([&] { return s.api->post("work", body); }, control, s.log, "asking for work");
        if (!reply) break;
        if (reply->status != 200) return message = "work request refused: " + reply->error_message(), StopReason::Error;
        auto response = common::parse_message<common::WorkResponse>(reply->body);
        if (!response) return message = "bad work answer: " + response.message(), StopReason::Error;
        if (!response->has_work) {
            s.log.info("no_work", "no work; asking again in " + std::to_string(response->retry_after_s) + " s");
            for (int i = 0; i < response->retry_after_s * 10 && !control.stop_after_unit; ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            continue;
        }
        auto unit = open_work_unit(s, response->work_unit);
        if (!unit) {
            // Unsigned or forged work never runs. Give the unit back so it is not lost.
            auto parsed = common::parse_message<common::WorkUnit>(response->work_unit.payload);
            if (parsed) (void)s.api->abandon(parsed->wu_id);
            message = "refused a work unit: " + unit.message() + " (checked against the server key pinned in " +
                      (s.state.root() / "identity.json").string() + ")";
            return StopReason::Untrusted;
        }
        auto envelope_json = boost::json::serialize(common::envelope_to_json(response->work_unit));
        auto reason = compute(s, *unit, envelope_json, message);
        if (reason == StopReason::Error || reason == StopReason::Untrusted) return reason;
        std::set<std::string> keep{unit->model_blob.sha256};
        for (const auto& shard : unit->shards) {
            keep.insert(shard.sha256);
            s.shards_seen.insert(shard.sha256);
        }
        s.cache->evict(keep);
        if (options.once && reason == StopReason::OnceDone) return StopReason::OnceDone;
    }
    return StopReason::Requested;
}

}  // namespace tessera::client
