// The soak's simulated volunteers: one schedule of due actions, worked off by request threads.
#include "soak_fleet.h"

#include <boost/json.hpp>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <random>
#include <thread>

#include "bytes.h"
#include "checkpoint.h"
#include "delta_codec.h"
#include "file_io.h"
#include "http_client.h"
#include "result_upload.h"
#include "server_api.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

enum class Role { Honest, Hostile, Churner };

struct HeldUnit {
    common::WorkUnit unit;
    bool leaves = false;  // a churner that drops this unit instead of returning it
};

struct SoakVolunteer {
    common::SigningKey key = common::SigningKey::generate();
    std::unique_ptr<client::ServerApi> api;
    Role role = Role::Honest;
    bool registered = false;
    std::optional<HeldUnit> held;
};

// Volunteers by the time their next action is due; each volunteer is in it at most once.
class Schedule {
public:
    void at(Clock::time_point when, std::size_t volunteer) {
        {
            std::lock_guard lock(mutex_);
            queue_.push({when, volunteer});
        }
        changed_.notify_one();
    }
    // The next due volunteer, or none once `end` has passed.
    std::optional<std::size_t> next(Clock::time_point end) {
        std::unique_lock lock(mutex_);
        while (true) {
            auto now = Clock::now();
            if (now >= end) return std::nullopt;
            if (!queue_.empty() && queue_.top().first <= now) {
                auto volunteer = queue_.top().second;
                queue_.pop();
                return volunteer;
            }
            auto wake = queue_.empty() ? end : std::min(end, queue_.top().first);
            changed_.wait_until(lock, wake);
        }
    }

private:
    using Entry = std::pair<Clock::time_point, std::size_t>;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
};

std::string outcome_of(const client::ApiFailure& failure) {
    switch (failure.kind) {
        case client::FailureKind::NoAnswer: return "no_answer";
        case client::FailureKind::ServerBusy: return "busy " + std::to_string(failure.http_status);
        case client::FailureKind::Refused:
            return "refused " + std::to_string(failure.http_status) + (failure.code.empty() ? "" : " " + failure.code);
        default: return "failed";
    }
}

// The task's model, read once from the first unit's model blob: the layout of made-up deltas.
class ModelLayout {
public:
    common::Result<const common::NamedTensors*> of(const client::HttpClient& http, const client::Url& server,
                                                   const common::WorkUnit& unit) {
        std::lock_guard lock(mutex_);
        if (model_) return &*model_;
        auto file = std::filesystem::temp_directory_path() / ("tessera-soak-model-" + unit.model_blob.sha256);
        std::filesystem::remove(file);
        auto fetched = http.download(server, "/blobs/" + unit.model_blob.sha256, file,
                                     static_cast<std::uint64_t>(unit.model_blob.bytes));
        if (!fetched) return common::make_error("model blob: " + fetched.message());
        auto bytes = common::read_file(file, 4 * common::kGiB);
        std::filesystem::remove(file);
        if (!bytes) return bytes.error();
        auto model = common::read_checkpoint(*bytes);
        if (!model) return model.error();
        model_ = std::move(*model);
        return &*model_;
    }

private:
    std::mutex mutex_;
    std::optional<common::NamedTensors> model_;
};

class SoakFleet {
public:
    SoakFleet(const SoakLoadOptions& options, SoakRecord& record) : options_(options), record_(record) {
        client::HttpOptions http;
        http.timeout = std::chrono::seconds(30);
        http_ = std::make_unique<client::HttpClient>(http);
    }

    common::Status run() {
        std::vector<client::Url> urls;
        for (const auto& text : options_.servers) {
            auto url = client::parse_url(text);
            if (!url) return url.error();
            urls.push_back(*url);
        }
        if (urls.empty()) return common::make_error("no server to soak");
        std::mt19937_64 rng(options_.seed);
        std::uniform_real_distribution<double> unit(0, 1);
        volunteers_.resize(static_cast<std::size_t>(options_.volunteers));
        auto start = Clock::now();
        // Arrivals spread over the first unit time, not all in the first second.
        auto spread = std::min(options_.unit_seconds, 60.0);
        for (std::size_t i = 0; i < volunteers_.size(); ++i) {
            auto& v = volunteers_[i];
            v = std::make_unique<SoakVolunteer>();
            v->api = std::make_unique<client::ServerApi>(urls[i % urls.size()], *http_, v->key);
            double draw = unit(rng);
            v->role = draw < options_.hostile_share                          ? Role::Hostile
                      : draw < options_.hostile_share + options_.churn_share ? Role::Churner
                                                                             : Role::Honest;
            schedule_.at(start + std::chrono::duration_cast<Clock::duration>(Seconds(unit(rng) * spread)), i);
        }
        end_ = start + std::chrono::duration_cast<Clock::duration>(Seconds(options_.minutes * 60));
        std::vector<std::thread> threads;
        for (int t = 0; t < options_.connections; ++t)
            threads.emplace_back([this, t] {
                std::mt19937_64 thread_rng(options_.seed * 1000003 + static_cast<std::uint64_t>(t));
                while (auto i = schedule_.next(end_)) act(*i, thread_rng);
            });
        for (auto& thread : threads) thread.join();
        return common::Status{};
    }

private:
    // One due action of volunteer i, which then goes back on the schedule.
    void act(std::size_t i, std::mt19937_64& rng) {
        auto& v = *volunteers_[i];
        double wait_s;
        if (!v.registered)
            wait_s = register_volunteer(v, rng);
        else if (!v.held)
            wait_s = ask_for_work(v, rng);
        else if (v.held->leaves)
            wait_s = leave(v, rng);
        else
            wait_s = upload(v, rng);
        schedule_.at(Clock::now() + std::chrono::duration_cast<Clock::duration>(Seconds(wait_s)), i);
    }

    double uniform(std::mt19937_64& rng, double low, double high) {
        return std::uniform_real_distribution<double>(low, high)(rng);
    }

    template <class Call>
    auto timed(const std::string& route, Call call) {
        auto started = Clock::now();
        auto answer = call();
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
        if (answer)
            record_.request(route, ms, "ok");
        else
            record_.request(route, ms, outcome_of(answer.error()), answer.error().message);
        return answer;
    }

    double register_volunteer(SoakVolunteer& v, std::mt19937_64& rng) {
        auto answer = timed("register", [&] { return v.api->register_client("soak volunteer", "soak"); });
        if (!answer) return uniform(rng, 5, 15);
        v.api->set_client_id(answer->client_id);
        v.registered = true;
        return uniform(rng, 0, 2);
    }

    double ask_for_work(SoakVolunteer& v, std::mt19937_64& rng) {
        common::WorkRequest request;
        request.client_id = v.api->client_id();
        request.device = {"cpu", "soak volunteer", 8 * common::kGiB, 1};
        request.samples_per_s = 1000;
        auto answer = timed("work", [&] { return v.api->request_work(request); });
        if (!answer) return uniform(rng, 5, 20);
        if (!answer->has_work) return uniform(rng, 10, 30);
        auto unit = common::parse_message<common::WorkUnit>(answer->work_unit.payload);
        if (!unit) {
            record_.count("work: unreadable unit");
            return uniform(rng, 10, 30);
        }
        bool leaves = v.role == Role::Churner && uniform(rng, 0, 1) < 0.5;
        v.held = HeldUnit{std::move(*unit), leaves};
        // Exponential compute times, as a fleet of mixed machines gives.
        double compute_s = std::exponential_distribution<double>(1.0 / options_.unit_seconds)(rng);
        return leaves ? compute_s / 2 : compute_s;
    }

    // A churner drops its unit mid-way: half say so (abandon), half vanish until the deadline.
    // Either way it is away for a while, then comes back with the same key.
    double leave(SoakVolunteer& v, std::mt19937_64& rng) {
        if (uniform(rng, 0, 1) < 0.5) {
            auto answer = timed("abandon", [&] { return v.api->abandon(v.held->unit.wu_id); });
            record_.count(answer ? "churn: abandoned" : "churn: abandon failed");
        } else {
            record_.count("churn: vanished mid-unit");
        }
        v.held.reset();
        return uniform(rng, 2, 5) * options_.unit_seconds;
    }

    double upload(SoakVolunteer& v, std::mt19937_64& rng) {
        const auto& unit = v.held->unit;
        auto model = layout_.of(*http_, v.api->server(), unit);
        if (!model) {
            record_.count("upload: " + model.message());
            v.held.reset();
            return uniform(rng, 10, 30);
        }
        double attack = v.role == Role::Hostile ? uniform(rng, 0, 1) : 1;
        if (attack < 0.2) return send_forged(v, rng);
        if (attack < 0.4) return send_garbage(v, rng);
        // Honest deltas are small and different every time; a hostile one is 1000× too large.
        float scale = v.role == Role::Hostile ? 1.0f : 1e-3f;
        auto packed = made_up_upload(**model, unit, scale, rng);
        if (!packed) {
            record_.count("upload: " + packed.message());
            v.held.reset();
            return 1;
        }
        auto answer = timed("upload", [&] { return v.api->upload_result(*packed); });
        if (answer) {
            record_.acknowledged(unit.wu_id, unit.client_id,
                                 v.role == Role::Hostile ? SenderRole::Hostile : SenderRole::Honest);
            v.held.reset();
            return uniform(rng, 0, 2);
        }
        // A transient failure is retried while the unit's deadline allows, as the client does.
        if (answer.error().transient() && client::unix_now() < unit.deadline) return uniform(rng, 5, 20);
        v.held.reset();
        return uniform(rng, 5, 20);
    }

    common::Result<std::string> made_up_upload(const common::NamedTensors& model, const common::WorkUnit& unit,
                                               float scale, std::mt19937_64& rng) {
        common::NamedTensors delta = model;
        std::normal_distribution<float> normal(0, scale);
        for (auto& tensor : delta)
            for (auto& value : tensor.values) value = normal(rng);
        auto encoded = common::encode_delta(delta, unit.encoding);
        if (!encoded) return encoded.error();
        auto samples = unit.hyper.local_steps * unit.hyper.batch_size;
        common::TrainMetrics metrics{1.0, 0.9, samples, 1.0, static_cast<double>(samples)};
        auto packed = common::pack_result_of(unit, unit.client_id, encoded->bytes, metrics, "cpu:soak volunteer");
        return std::string(packed.begin(), packed.end());
    }

    // Signed with a key that is not the volunteer's: the server must refuse it (401).
    double send_forged(SoakVolunteer& v, std::mt19937_64& rng) {
        client::ServerApi forger(v.api->server(), *http_, forger_key_);
        forger.set_client_id(v.api->client_id());
        auto answer = timed("forged upload", [&] { return forger.upload_result("forged"); });
        if (answer) record_.count("forged upload: ACCEPTED");
        v.held.reset();
        return uniform(rng, 0, 2);
    }

    // Correctly signed bytes that are no upload: the server must refuse them (400).
    double send_garbage(SoakVolunteer& v, std::mt19937_64& rng) {
        auto answer = timed("garbage upload", [&] { return v.api->upload_result(std::string(4096, '\x7f')); });
        if (answer) record_.count("garbage upload: ACCEPTED");
        v.held.reset();
        return uniform(rng, 0, 2);
    }

    const SoakLoadOptions& options_;
    SoakRecord& record_;
    std::unique_ptr<client::HttpClient> http_;
    std::vector<std::unique_ptr<SoakVolunteer>> volunteers_;
    Schedule schedule_;
    ModelLayout layout_;
    common::SigningKey forger_key_ = common::SigningKey::generate();
    Clock::time_point end_;
};

}  // namespace

common::Status run_soak_fleet(const SoakLoadOptions& options, SoakRecord& record) {
    if (options.volunteers < 1 || options.connections < 1 || !(options.minutes > 0) || !(options.unit_seconds > 0))
        return common::make_error("--volunteers, --connections, --minutes and --unit-seconds must be positive");
    SoakFleet fleet(options, record);
    return fleet.run();
}

}  // namespace tessera::bench
