// The volunteer's state machine, its first phases: starting, registering (the server's key
// pinned), resuming what the last run left; and the turn among several servers.
#include "volunteer_loop.h"

#include "file_io.h"
#include "safetensors.h"
#include "tessera_version.h"
#include "text_encoding.h"
#include "version_number.h"

namespace tessera::client {
namespace detail {
namespace {

// The volunteer's HTTP settings, with its bandwidth caps (among several servers, one pair for
// all of them); `quit` stops a transfer in progress.
HttpOptions http_options_of(const VolunteerOptions& options, const SharedMachine* shared,
                            const VolunteerControl& control) {
    HttpOptions http;
    http.ca_file = options.ca_file;
    http.interrupted = [&control] { return control.abandon_now.load(); };
    if (shared) {
        http.download_limit = shared->download_limit;
        http.upload_limit = shared->upload_limit;
        return http;
    }
    if (options.max_download_mbps > 0)
        http.download_limit =
            std::make_shared<RateLimiter>(RateLimiter::bytes_per_second_of_mbps(options.max_download_mbps));
    if (options.max_upload_mbps > 0)
        http.upload_limit = std::make_shared<RateLimiter>(RateLimiter::bytes_per_second_of_mbps(options.max_upload_mbps));
    return http;
}

}  // namespace

Volunteer::Volunteer(const VolunteerOptions& options, VolunteerControl& control, const SharedMachine* shared)
    : options_(options), control_(control), shared_(shared ? std::optional(*shared) : std::nullopt),
      status_(shared ? *shared->status : control.status),
      log_("tessera-client", options.quiet, options.json_logs, shared ? shared->source : ""), state_(options.state_dir),
      http_(http_options_of(options, shared, control)), cache_(state_.cache_dir(), options.cache_quota_bytes) {}

const char* Volunteer::phase_name(Phase phase) {
    switch (phase) {
        case Phase::Start: return "starting";
        case Phase::Connect: return "registering";
        case Phase::Resume: return "resuming";
        case Phase::AskForWork: return "asking for work";
        case Phase::Fetch: return "downloading";
        case Phase::Train: return "training";
        case Phase::Upload: return "uploading";
        case Phase::Report: return "waiting for the verdict";
    }
    return "?";
}

Volunteer::Next Volunteer::step(Phase phase) {
    status_.set_phase(phase_name(phase));
    switch (phase) {
        case Phase::Start: return start();
        case Phase::Connect: return connect();
        case Phase::Resume: return resume();
        case Phase::AskForWork: return ask_for_work();
        case Phase::Fetch: return fetch();
        case Phase::Train: return unit_->unit.check ? check() : train();
        case Phase::Upload: return upload();
        case Phase::Report: return report();
    }
    return Stop{StopReason::Error, "unknown phase"};
}

Volunteer::Next Volunteer::start() {
    auto server = parse_url(options_.server);
    if (!server) return Stop{StopReason::Error, server.message()};
    server_ = *server;
    auto probed = probe_device(options_.device, options_.threads);
    if (!probed) return Stop{StopReason::Error, probed.message()};
    device_ = *probed;
    device_.name = device_.name.substr(0, common::kMaxDeviceName);
    log_.info("device", "device: " + describe_device(options_.device, options_.threads),
              {{"kind", device_.kind}, {"name", device_.name}, {"memory_bytes", device_.memory_bytes}});
    auto remembered = state_.load_remembered();
    if (!remembered)
        log_.error(remembered.message() + "; starting without what earlier runs remembered");
    else {
        known_shards_.insert(remembered->shards.begin(), remembered->shards.end());
        samples_per_s_ = remembered->samples_per_s;
        held_model_ = remembered->model;
    }
    std::vector<std::string> problems;
    carried_ = load_carried_state(state_, problems);
    for (const auto& problem : problems) log_.error(problem);
    watch_preferences();
    return Phase::Connect;
}

bool Volunteer::hold_turn(bool renew) {
    if (!shared_) return true;
    if (turn_ && !renew) return true;
    status_.set_phase("waiting for its turn");
    auto give_up = [this] { return stop_requested() || waiting(); };
    bool got = turn_ ? turn_->renew(give_up) : shared_->turns->take(shared_->index, give_up);
    if (got && !turn_) turn_.emplace(*shared_->turns, shared_->index);
    if (got && waiting()) got = false;  // paused just as the turn came
    if (!got) turn_.reset();
    status_.set_worked_seconds(shared_->turns->worked_seconds()[shared_->index]);
    return got;
}

bool Volunteer::turn_for_training() {
    if (!shared_ || turn_) return true;
    status_.set_phase("waiting for its turn");
    if (!shared_->turns->take(shared_->index, abandoning())) return false;
    turn_.emplace(*shared_->turns, shared_->index);
    return true;
}

Volunteer::Next Volunteer::connect() {
    auto key = state_.load_or_create_key();
    if (!key) return Stop{StopReason::Error, key.message()};
    key_ = std::make_unique<common::SigningKey>(std::move(*key));
    api_ = std::make_unique<ServerApi>(server_, http_, *key_);
    auto response = with_retries([&] { return api_->register_client(options_.name, common::kVersion); }, stopping(),
                                 log_, "registering with " + options_.server, options_.retry);
    if (!response) return stop_for(response.error());
    auto pinned = state_.load_identity();
    if (!pinned) return Stop{StopReason::Error, pinned.message()};
    if (*pinned && (*pinned)->server_public_key != response->server_public_key)
        return Stop{StopReason::Untrusted, "the server's key (" + response->server_key_id +
                                               ") is not the one pinned at first registration (" +
                                               (*pinned)->server_key_id +
                                               "): refusing to work for it. If the operator really changed "
                                               "keys, remove " +
                                               (state_.root() / "identity.json").string()};
    Identity identity{options_.server, response->client_id,
                      *pinned ? (*pinned)->server_public_key : response->server_public_key, response->server_key_id};
    if (!*pinned)
        if (auto saved = state_.save_identity(identity); !saved) return Stop{StopReason::Error, saved.message()};
    auto raw = common::from_base64(identity.server_public_key);
    auto verify = raw ? common::VerifyKey::from_raw(*raw) : common::Result<common::VerifyKey>(raw.error());
    if (!verify) return Stop{StopReason::Error, "pinned server key unreadable: " + verify.message()};
    server_key_ = std::make_unique<common::VerifyKey>(std::move(*verify));
    api_->set_client_id(response->client_id);
    status_.set_identity(options_.server, response->client_id,
                         device_.kind == device_.name ? device_.name : device_.kind + " " + device_.name);
    log_.info("registered",
              "registered with " + options_.server + " as " + response->client_id + " (server key " +
                  identity.server_key_id + ")",
              {{"client_id", response->client_id}});
    advise_update();
    return Phase::Resume;
}

void Volunteer::advise_update() const {
    auto info = api_->server_info();
    if (!info || !common::version_older(common::kVersion, info->recommended_client_version)) return;
    log_.info("update",
              std::string("this server recommends tessera-client ") + info->recommended_client_version +
                  " or newer; this one is " + common::kVersion + ": install a newer one when you can",
              {{"recommended", info->recommended_client_version}});
}

Volunteer::Next Volunteer::resume() {
    if (auto next = state_.load_next(); next && *next) {
        auto abandoned = api_->abandon((*next)->wu_id);
        log_.info("abandoned", (*next)->wu_id + ": fetched ahead by the last run, not trained; given back" +
                                   (abandoned ? "" : " (" + abandoned.message() + ")"));
    }
    state_.clear_next();
    // A result that was uploading in the background, then the unit in hand.
    auto uploading = state_.load_uploading();
    if (!uploading) log_.error(uploading.message() + "; ignoring the result the last run left uploading");
    if (uploading && *uploading) {
        if (auto stop = resume_unit(**uploading, state_.uploading_delta_file())) return *stop;
    }
    state_.clear_uploading();
    auto current = state_.load_current();
    if (!current) log_.error(current.message() + "; ignoring the unit the last run left");
    if (current && *current) {
        if (auto stop = resume_unit(**current, state_.delta_file())) return *stop;
    }
    state_.clear_current();
    return Phase::AskForWork;
}

std::optional<Stop> Volunteer::resume_unit(const CurrentWork& work, const std::filesystem::path& delta) {
    std::error_code error;
    auto body = work.phase == "uploading" && std::filesystem::exists(delta, error)
                    ? common::read_file(delta, common::kMaxModelBytes)
                    : common::Result<common::Bytes>(common::make_error("no finished result"));
    if (!body) {
        auto abandoned = api_->abandon(work.wu_id);
        log_.info("abandoned", work.wu_id + ": the last run left no finished result; given back" +
                                   (abandoned ? "" : " (" + abandoned.message() + ")"));
        return std::nullopt;
    }
    Delivery delivery{work.wu_id, std::string(body->begin(), body->end()), {}, "", 0, 0, 0};
    auto uploaded = upload_result(*api_, delivery, log_, {options_.retry, stopping(), {}, &state_});
    if (uploaded.how == Delivered::Stopped) return kept_for_later(work.wu_id, delta);
    if (uploaded.how == Delivered::Failed) return stop_for(uploaded.failure);
    log_.info("resumed", work.wu_id + ": the result left by the last run " +
                             (uploaded.how == Delivered::Uploaded ? std::string("is uploaded")
                                                                  : "was refused: " + uploaded.failure.message));
    return std::nullopt;
}

}  // namespace detail

std::unique_ptr<PreferenceWatcher> watch_preferences(const VolunteerOptions& options, VolunteerControl& control,
                                                     const common::Logger& log) {
    control.status.set_preferences(options.preferences.describe());
    auto sensors = options.sensors ? options.sensors : std::make_shared<SystemSensors>();
    return std::make_unique<PreferenceWatcher>(options.preferences, std::move(sensors), options.preference_interval,
                                               [&control, &log](const std::optional<std::string>& reason) {
                                                   control.held = reason.has_value();
                                                   control.status.set_waiting_because(reason.value_or(""));
                                                   if (reason)
                                                       log.info("waiting", "waiting: " + *reason, {{"reason", *reason}});
                                                   else
                                                       log.info("working", "the preferences let it work again");
                                               });
}

int exit_code(StopReason reason) {
    switch (reason) {
        case StopReason::Requested:
        case StopReason::OnceDone: return 0;
        case StopReason::Error: return 1;
        case StopReason::Untrusted: return 3;
    }
    return 1;
}

Stop run_volunteer(const VolunteerOptions& options, VolunteerControl& control, const SharedMachine* shared) {
    return detail::Volunteer(options, control, shared).run();
}

}  // namespace tessera::client
