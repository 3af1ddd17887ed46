// The fleet simulator's run (fleet_sim.h): a server in process and its volunteers, driven by
// events in virtual-time order. fleet_sim.cpp holds the event loop and the volunteers' side;
// fleet_sim_curve.cpp what the run measures (the loss curve, the guard's evaluations, the
// units' fates).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "fleet_accounting.h"
#include "fleet_sim.h"
#include "in_process_server.h"
#include "virtual_clock.h"
#include "volunteer_uploads.h"

namespace tessera::bench {

enum class EventKind { Request, Finish, Leave, Return, Tick };

struct Event {
    double time = 0;
    std::uint64_t sequence = 0;  // ties keep the order events were scheduled in
    EventKind kind = EventKind::Tick;
    std::size_t volunteer = 0;
    std::uint64_t epoch = 0;  // a Finish from before a departure is void
    bool operator>(const Event& other) const {
        return time != other.time ? time > other.time : sequence > other.sequence;
    }
};

class Simulation {
public:
    Simulation(const server::TaskConfig& config, const std::vector<SimVolunteer>& fleet, const SimSettings& settings);

    common::Result<RunResult> run(const std::filesystem::path& work_dir);

private:
    void schedule(double time, EventKind kind, std::size_t volunteer, std::uint64_t epoch = 0);

    // Every volunteer left for good: only ticks would remain.
    bool fleet_gone() const;

    void schedule_departure(std::size_t i, double now);

    common::Status handle(const Event& event);

    // A unit's download: its model (scaled), or patches from the model last trained when offered,
    // and the shards the volunteer has not fetched before.
    std::pair<double, double> download_of(const VolunteerState& v, const common::WorkUnit& unit);

    // A unit computed and delivered: its transfers' share of the volunteers' time, and the part
    // of them not hidden behind training.
    void count_unit_time(double transfer_s, double unhidden_s, double compute_s);

    common::Status request(std::size_t i);
    // The server's answer to volunteer i's request (`ahead`: made while it holds a unit); none
    // when it has no work, with the next request scheduled as the client would make it.
    common::Result<std::optional<common::WorkUnit>> ask_for_work(std::size_t i, bool ahead);
    // After issuing a unit that trains from `train_start` to `train_end` with a download of
    // `download_s`: the look-ahead's request for the next one, at the time the client makes it.
    void schedule_look_ahead(std::size_t i, const HeldUnit& held, double download_s);

    common::Status finish(std::size_t i, std::uint64_t epoch);

    // Results whose fate is known add their samples once merged; evaluations follow the samples.
    common::Status settle(std::int64_t version_before);

    std::int64_t next_milestone() const;

    // The equal-samples figures: this point of the curve, and the model on the whole set.
    common::Status evaluate_budget_point();

    common::Status evaluate_point();

    // As the server's loss curve: a new version is evaluated at most once per eval_interval_s,
    // and the divergence guard judges it (and acts) before the simulation goes on.
    common::Status guard_check();

    // The divergence events of the run, and the statistical flags the server settled by a
    // replay that agreed (audit_passed naming a flag), for the report: one pass over the events.
    common::Status guard_actions();

    common::Status leave(std::size_t i);

    common::Status come_back(std::size_t i);

    common::Status tick();

    // Online time up to the end and the units still held; then every unit's fate.
    common::Status account();

    server::TaskConfig config_;
    SimSettings settings_;
    VirtualClock clock_;
    std::unique_ptr<server::InProcessServer> server_;
    std::unique_ptr<UploadMaker> uploads_;
    std::vector<VolunteerState> volunteers_;
    std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
    std::uint64_t next_sequence_ = 0;
    std::map<std::string, Issued> issued_;
    std::vector<std::string> unsettled_;
    std::int64_t merged_samples_ = 0;
    std::int64_t milestones_passed_ = 0;
    std::int64_t round_outstanding_ = 0;
    std::int64_t staleness_merged_ = 0;
    double staleness_total_ = 0;
    std::int64_t guard_version_ = -1;  // the divergence guard's last evaluation: its version, when, the best loss
    double guard_at_ = -1;
    double guard_best_ = 0;
    bool budget_reached_ = false;
    bool done_ = false;
    RunResult result_;
    DeltaProbe probe_;
};

}  // namespace tessera::bench
