// The event loop of the fleet simulator: requests, finished units, departures and returns of
// volunteers and transitioner ticks, in virtual-time order.
#include "fleet_simulation.h"

#include <algorithm>
#include <random>

#include "bytes.h"
#include "calibration.h"
#include "protocol.h"
#include "signed_envelope.h"
#include "validator.h"

namespace tessera::bench {
namespace {

double exponential(std::mt19937_64& rng, double mean) { return std::exponential_distribution<double>(1.0 / mean)(rng); }

}  // namespace

Simulation::Simulation(const server::TaskConfig& config, const std::vector<SimVolunteer>& fleet,
                       const SimSettings& settings)
    : config_(config), settings_(settings), probe_(std::max<std::size_t>(1, fleet.size() - 1)) {
    for (std::size_t i = 0; i < fleet.size(); ++i) {
        VolunteerState v;
        v.spec = fleet[i];
        v.rng.seed(settings.seed * 1000003 + i);
        volunteers_.push_back(std::move(v));
    }
    result_.name = settings.run_name;
    result_.fleet = settings.fleet_name;
    result_.volunteers = static_cast<std::int64_t>(fleet.size());
}

common::Result<RunResult> Simulation::run(const std::filesystem::path& work_dir) {
    auto server = server::InProcessServer::create(server::StateDir(work_dir / "server"), config_, clock_.as_clock(),
                                                  settings_.seed);
    if (!server) return server.error();
    server_ = std::move(*server);
    uploads_ = std::make_unique<UploadMaker>(*server_, settings_, probe_);
    for (std::size_t i = 0; i < volunteers_.size(); ++i) {
        auto client = server_->register_volunteer(volunteers_[i].spec.name);
        if (!client) return client.error();
        volunteers_[i].client_id = client->id;
        schedule(0, EventKind::Request, i, volunteers_[i].epoch);
        schedule_departure(i, 0);
    }
    schedule(settings_.tick_s, EventKind::Tick, 0);
    if (auto status = evaluate_point(); !status) return status.error();
    if (auto status = guard_check(); !status) return status.error();

    std::int64_t unit_samples = std::max<std::int64_t>(1, config_.local_steps * config_.batch_size / 8);
    std::int64_t max_units = 50 * (settings_.sample_budget / unit_samples) + 1000;
    while (!events_.empty() && !done_) {
        auto event = events_.top();
        events_.pop();
        if (event.time > settings_.max_virtual_s) break;
        if (auto status = clock_.advance_to(event.time); !status) return status.error();
        if (auto status = handle(event); !status) return status.error();
        if (result_.units_issued > max_units || fleet_gone()) break;
    }
    result_.budget_reached = budget_reached_;
    if (!budget_reached_) {  // ran out of volunteers, time or units: the figures where it stopped
        if (result_.curve.back().samples != merged_samples_)
            if (auto status = evaluate_point(); !status) return status.error();
        if (auto status = evaluate_budget_point(); !status) return status.error();
    }
    if (auto status = account(); !status) return status.error();
    if (auto status = guard_actions(); !status) return status.error();
    result_.probes = probe_.deltas();
    result_.server_cost.training_s += uploads_->training_seconds();  // real seconds
    result_.server_cost.audit_twin_s += uploads_->audit_twin_seconds();
    result_.server_cost.check_unit_s += uploads_->check_unit_seconds();
    result_.server_cost.replica_s += uploads_->replica_seconds();
    const auto& costs = server_->check_costs();
    result_.server_cost.check_s = costs.decode + costs.cheap + costs.copy + costs.held_out + costs.own_samples +
                                  costs.commitments + costs.audit + costs.spot;
    result_.server_cost.commitment_s = costs.commitments;
    result_.server_cost.audit_s = costs.audit;
    result_.server_cost.loss_check_s = costs.held_out + costs.own_samples + costs.spot;
    result_.server_cost.audited = costs.audited.load();
    result_.server_cost.unauditable = costs.unauditable.load();
    result_.server_cost.merge_s = server_->merge_seconds();
    result_.server_cost.checked = costs.results.load();
    result_.server_cost.loss_checked = costs.loss_checked.load();
    auto calibration = server::load_calibration(server_->store(), server_->config().task_id);
    if (calibration && *calibration) result_.server_cost.calibration_gain = (*calibration)->gain_per_step;
    return std::move(result_);
}

void Simulation::schedule(double time, EventKind kind, std::size_t volunteer, std::uint64_t epoch) {
    events_.push({time, next_sequence_++, kind, volunteer, epoch});
}

bool Simulation::fleet_gone() const {
    for (const auto& v : volunteers_)
        if (v.online || v.returning) return false;
    return true;
}

void Simulation::schedule_departure(std::size_t i, double now) {
    auto& v = volunteers_[i];
    if (v.spec.churn.mean_online_s <= 0) return;
    v.next_leave = now + exponential(v.rng, v.spec.churn.mean_online_s);
    schedule(v.next_leave, EventKind::Leave, i);
}

common::Status Simulation::handle(const Event& event) {
    switch (event.kind) {
        case EventKind::Request:  // one from before a departure is void
            return event.epoch == volunteers_[event.volunteer].epoch ? request(event.volunteer) : common::Status{};
        case EventKind::Finish: return finish(event.volunteer, event.epoch);
        case EventKind::Leave: return leave(event.volunteer);
        case EventKind::Return: return come_back(event.volunteer);
        case EventKind::Tick: return tick();
    }
    return {};
}

std::pair<double, double> Simulation::download_of(const VolunteerState& v, const common::WorkUnit& unit) {
    double model_bytes = unit.model_blob.sha256 == v.cached_model ? 0.0 : static_cast<double>(unit.model_blob.bytes);
    if (!unit.patches.empty() && unit.patch_from == v.cached_model) {
        model_bytes = 0;
        for (const auto& patch : unit.patches) model_bytes += static_cast<double>(patch.bytes);
        ++result_.units_on_patches;
    }
    double shard_bytes = 0;
    for (const auto& shard : unit.shards)
        if (!v.cached_shards.count(shard.sha256)) shard_bytes += static_cast<double>(shard.bytes);
    return {model_bytes * settings_.payload_scale, shard_bytes};
}

void Simulation::count_unit_time(double transfer_s, double unhidden_s, double compute_s) {
    result_.transfer_s += transfer_s;
    result_.unit_s += transfer_s + compute_s;
    result_.unhidden_s += unhidden_s;
    result_.trained_s += compute_s;
}

common::Result<std::optional<common::WorkUnit>> Simulation::ask_for_work(std::size_t i, bool ahead) {
    auto& v = volunteers_[i];
    common::WorkRequest request;
    request.client_id = v.client_id;
    request.device = {"cuda", v.spec.group, 8 * common::kGiB, 1};
    request.samples_per_s = v.measured_speed;
    request.cached_shards.assign(v.cached_shards.begin(), v.cached_shards.end());
    request.held_model = v.cached_model;
    auto response = server_->request_work(request);
    if (!response) return response.error();
    double now = clock_.now();
    if (!response->has_work) {  // a look-ahead without work: the client asks again once the unit is trained
        bool training = ahead && now < v.held.back().train_end;
        if (!settings_.synchronous)
            schedule(training ? v.held.back().train_end : now + static_cast<double>(response->retry_after_s),
                     EventKind::Request, i, v.epoch);
        return std::optional<common::WorkUnit>();
    }
    auto payload = common::open_envelope(response->work_unit, common::kWorkUnitPurpose, server_->verify_key());
    if (!payload) return payload.error();
    auto unit = common::parse_message<common::WorkUnit>(*payload);
    if (!unit) return unit.error();
    return std::optional(std::move(*unit));
}

namespace {

// The virtual seconds a volunteer computes `wu`: its training, or a loss-check unit's four
// evaluations of its rows at a third of a training step each.
double compute_seconds(const common::WorkUnit& wu, double samples_per_s) {
    if (wu.check)
        return 4.0 * static_cast<double>(wu.check->samples) /
               (server::Validator::kForwardPassesPerSample * samples_per_s);
    return static_cast<double>(wu.hyper.local_steps * wu.hyper.batch_size) / samples_per_s;
}

// The attack a volunteer makes of `wu`: a lying checker lies in loss-check units and trains
// honestly; the others attack training units on their turn (no turn taken by a check).
Attack attack_on(VolunteerState& v, const common::WorkUnit& wu) {
    const bool lies = v.spec.attack == Attack::LyingChecker;
    if (wu.check) return lies ? Attack::LyingChecker : Attack::None;
    return lies ? Attack::None : v.next_attack();
}

// How the run counts `wu`: by its attack (an honest loss-check unit by its label), and its samples.
Issued issued_of(const common::WorkUnit& wu, Attack attack, Attack volunteers_attack) {
    if (wu.check)
        return {attack == Attack::None ? std::string(kLossCheckLabel) : std::string(attack_name(attack)),
                0,
                wu.hyper.local_steps,
                0,
                "",
                wu.base_version};
    return {unit_label(attack, volunteers_attack),
            wu.hyper.local_steps * wu.hyper.batch_size,
            wu.hyper.local_steps,
            0,
            "",
            wu.base_version};
}

}  // namespace

common::Status Simulation::request(std::size_t i) {
    auto& v = volunteers_[i];
    bool ahead = !v.held.empty();  // asked while a unit trains (or uploads): the look-ahead
    if (!v.online || (ahead && clock_.now() < v.held.back().train_start)) return {};
    if (v.held.size() >= 2) {  // the unit before is still going up: the server would say its two are in flight
        v.ask_after_upload = true;
        return {};
    }
    auto unit = ask_for_work(i, ahead);
    if (!unit) return unit.error();
    if (!*unit) return {};
    const auto& wu = **unit;
    double now = clock_.now();
    ++result_.units_issued;
    ++round_outstanding_;

    auto [model_bytes, shard_bytes] = download_of(v, wu);
    double down_bytes = model_bytes + shard_bytes;
    double download_s = transfer_seconds(down_bytes, v.spec.down_mbit);
    double compute_s = compute_seconds(wu, v.spec.samples_per_s);
    auto attack = attack_on(v, wu);
    auto issued = issued_of(wu, attack, v.spec.attack);
    HeldUnit held;
    held.unit = wu;
    held.issued = now;
    // Training starts once the download is in and the unit before (if any) is trained; its upload
    // follows that unit's (one at a time) while the next trains.
    double before_trained = ahead ? v.held.back().train_end : v.uploaded_at == now ? v.uploaded_trained_at : now;
    double before_uploaded = ahead ? v.held.back().finish : now;
    held.train_start = std::max(now + download_s, ahead ? before_trained : now);
    held.train_end = held.train_start + compute_s;
    double upload_bytes = 0;
    // A volunteer that will have left before the unit is done never computes it.
    bool leaves_first = v.next_leave < held.train_end;
    if (!leaves_first) {
        auto upload = uploads_->compute(v, wu, attack);
        if (!upload) return upload.error();
        held.upload = std::move(*upload);
        auto delta = static_cast<double>(held.upload.delta_bytes);
        upload_bytes = static_cast<double>(held.upload.body.size()) + delta * (settings_.payload_scale - 1);
    }
    held.upload_s = transfer_seconds(upload_bytes, v.spec.up_mbit);
    held.finish = std::max(held.train_end, before_uploaded) + held.upload_s;
    issued.seconds = held.finish - now;
    result_.bytes_down += down_bytes;
    result_.bytes_down_shards += shard_bytes;
    result_.bytes_up += upload_bytes;
    held.download_s = download_s;
    held.unhidden_s = held.train_start - before_trained;
    for (const auto& shard : wu.shards) v.cached_shards.insert(shard.sha256);
    v.cached_model = wu.model_blob.sha256;
    issued_.emplace(wu.wu_id, issued);
    v.held.push_back(std::move(held));
    schedule(v.held.back().finish, EventKind::Finish, i, v.epoch);
    if (download_s + v.held.back().upload_s >= settings_.look_ahead_share * compute_s)
        schedule_look_ahead(i, v.held.back(), download_s);
    return {};
}

void Simulation::schedule_look_ahead(std::size_t i, const HeldUnit& held, double download_s) {
    if (settings_.look_ahead_s <= 0 || settings_.synchronous) return;
    // The client looks from its second training step on, once the training left is within the lead.
    double lead = settings_.look_ahead_s + 2 * download_s;
    schedule(std::max(held.train_start, held.train_end - lead), EventKind::Request, i, volunteers_[i].epoch);
}

common::Status Simulation::finish(std::size_t i, std::uint64_t epoch) {
    auto& v = volunteers_[i];
    if (epoch != v.epoch || v.held.empty()) return {};
    auto held = std::move(v.held.front());
    v.held.pop_front();
    v.uploaded_at = clock_.now();
    v.uploaded_trained_at = held.train_end;
    count_unit_time(held.download_s + held.upload_s, held.unhidden_s, held.train_end - held.train_start);
    auto version_before = server_->version();
    const auto* moments = held.upload.moments_in ? &*held.upload.moments_in : nullptr;
    auto outcome = server_->upload(v.client_id, held.upload.body, held.unit.wu_id, moments);
    if (!outcome) return outcome.error();
    uploads_->delivered(v.client_id, held.upload);
    auto& attack = result_.attacks[issued_[held.unit.wu_id].attack];
    ++attack.returned;
    unsettled_.push_back(held.unit.wu_id);
    if (auto status = settle(version_before); !status) return status;
    if (auto status = guard_check(); !status) return status;
    --round_outstanding_;
    if (settings_.synchronous) {
        // The round ends when its slowest volunteer is back: everyone asks again now.
        if (round_outstanding_ == 0)
            for (std::size_t j = 0; j < volunteers_.size(); ++j)
                schedule(clock_.now(), EventKind::Request, j, volunteers_[j].epoch);
    } else if (v.held.empty()) {
        schedule(clock_.now(), EventKind::Request, i, v.epoch);  // nothing fetched ahead: ask now
    } else if (v.ask_after_upload) {  // the look-ahead came while this was going up: ask once trained
        v.ask_after_upload = false;
        schedule(std::max(clock_.now(), v.held.front().train_end), EventKind::Request, i, v.epoch);
    }
    return {};
}

common::Status Simulation::leave(std::size_t i) {
    auto& v = volunteers_[i];
    if (!v.online) return {};
    double now = clock_.now();
    v.online = false;
    ++v.epoch;
    result_.online_s += now - v.online_since;
    for (const auto& held : v.held) {
        auto& issued = issued_[held.unit.wu_id];
        issued.fate = "left_mid_unit";
        issued.seconds = now - held.issued;
        --round_outstanding_;
    }
    v.held.clear();
    v.returning = std::uniform_real_distribution<double>(0, 1)(v.rng) >= v.spec.churn.never_return;
    if (v.returning)
        schedule(now + exponential(v.rng, std::max(1e-3, v.spec.churn.mean_offline_s)), EventKind::Return, i);
    return {};
}

common::Status Simulation::come_back(std::size_t i) {
    auto& v = volunteers_[i];
    v.online = true;
    v.returning = false;
    v.online_since = clock_.now();
    schedule_departure(i, clock_.now());
    return request(i);
}

common::Status Simulation::tick() {
    auto version_before = server_->version();
    auto report = server_->tick();
    if (!report) return report.error();
    if (auto status = settle(version_before); !status) return status;
    schedule(clock_.now() + settings_.tick_s, EventKind::Tick, 0);
    return {};
}

double transfer_seconds(double bytes, double mbit) { return mbit > 0 ? bytes * 8.0 / (mbit * 1e6) : 0.0; }

common::Result<RunResult> simulate_fleet(const server::TaskConfig& config, const std::vector<SimVolunteer>& fleet,
                                         const SimSettings& settings, const std::filesystem::path& work_dir) {
    if (fleet.empty()) return common::make_error("the fleet has no volunteers");
    if (settings.sample_budget < 1) return common::make_error("the samples budget must be positive");
    Simulation simulation(config, fleet, settings);
    return simulation.run(work_dir);
}

}  // namespace tessera::bench
