// Rows of the server's database (schemas/db.sql) as plain structs, and the assignment
// states of the work-unit lifecycle (docs/operations.md, "Work-unit lifecycle").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::server {

// At most `max` new volunteers from one address since `since`; max 0: no limit.
struct RegistrationLimit {
    std::int64_t max = 0;
    std::int64_t since = 0;
};

// A process's claim on a lease: its name ("aggregator:<task id>") and the process.
struct LeaseClaim {
    std::string name;
    std::string holder;
};

// A claim on a result (to validate it, or to accept it alone) lapses this long after it was
// taken (seconds).
constexpr std::int64_t kValidationClaimS = 60;

// A process's claim on a result (validation_stage.h, transitioner.h): the process and the
// time the claim lapses at. An empty holder: nobody's.
struct ResultClaim {
    std::string holder;
    std::int64_t until = 0;
};

struct LeaseRecord {
    std::string name;
    std::string holder;
    std::int64_t expires_at = 0;
};

struct ClientRecord {
    std::string id;
    std::string public_key;  // base64 raw key
    std::string name;
    std::string client_version;
    std::int64_t registered_at = 0;
    std::int64_t last_seen = 0;
    std::string device;
    double samples_per_s = 0;
    std::int64_t valid_streak = 0;
    std::int64_t accepted = 0;
    std::int64_t rejected = 0;
    double credit = 0;
    bool banned = false;
    bool quarantined = false;  // its results are checked and kept, not merged nor credited
    std::string address;       // the network address it registered from
};

enum class TaskState { Active, Paused, Finished };
std::string_view task_state_name(TaskState state);
std::optional<TaskState> task_state_from_name(std::string_view name);

struct TaskRecord {
    std::string id;
    std::string config_json;
    TaskState state = TaskState::Active;
    std::int64_t created_at = 0;
    std::int64_t version = 0;
    double weight = 1;  // the operator's share of work among the running tasks
};

struct ShardRecord {
    std::string sha256;
    std::int64_t bytes = 0;
    std::int64_t samples = 0;
    std::int64_t uses = 0;
};

struct VersionRecord {
    std::string task_id;
    std::int64_t version = 0;
    std::string blob_sha256;
    std::int64_t blob_bytes = 0;
    std::optional<std::string> optimizer_sha256;
    // With downlink patches: the aggregator's true model, which the published one (blob_sha256)
    // approaches by error feedback; and the patch from the previous version's published model.
    std::optional<std::string> state_sha256;
    std::optional<std::string> patch_sha256;
    std::int64_t patch_bytes = 0;
    // A restart point: the true model, the published one and the policy's state were written in
    // full (schemas/db.sql). Without patches every version is one.
    bool checkpoint = true;
    bool pinned = false;  // kept by retention
    std::int64_t created_at = 0;
    std::int64_t merged_results = 0;
    std::optional<double> validation_loss;
    std::optional<double> validation_accuracy;
    std::optional<std::int64_t> validation_samples;  // the sample the figures come from
    bool validation_full = false;                    // the whole validation set
};

// One evaluation of a version on (part of) the validation set.
struct ValidationResult {
    double loss = 0;
    std::optional<double> accuracy;  // classifiers only
    std::int64_t samples = 0;
    bool full = false;
};

enum class WorkUnitState { Open, Done, Retired };

struct WorkUnitRecord {
    std::string id;
    std::string task_id;
    std::int64_t base_version = 0;
    std::vector<std::string> shards;  // hashes
    std::int64_t local_steps = 0;
    std::int64_t seed = 0;
    std::int64_t replicas = 1;
    WorkUnitState state = WorkUnitState::Open;
    std::int64_t failures = 0;
    std::int64_t created_at = 0;
    // An audit twin (docs/operations.md, "Audit twins"): its further replicas go to trusted
    // volunteers only.
    bool trusted_only = false;
    // An audit twin of a kept unit: the moments blob its replicas resume ("" none; schema 16).
    std::string moments_sha256{};
    std::int64_t moments_bytes = 0;
    // A loss-check unit (docs/operations.md, "Loss-check units"; schema 17): the assignment whose
    // result it evaluates, that assignment's volunteer, and the unit's `check` field as JSON
    // (common::LossCheck) ("" all three for a unit that trains).
    std::string checks{};
    std::string checks_client{};
    std::string check_spec{};
};

enum class AssignmentState {
    InProgress,
    Returned,
    Validated,
    Accepted,
    Confirmed,
    Rejected,
    Merged,
    TimedOut,
    Abandoned
};
std::string_view assignment_state_name(AssignmentState state);
std::optional<AssignmentState> assignment_state_from_name(std::string_view name);
std::vector<AssignmentState> all_assignment_states();

// What the validator measured of a result that passed its checks.
struct CheckFigures {
    double norm = 0;                      // ‖Δ‖
    std::optional<double> gain_per_step;  // relative loss drop on its own samples per step, when checked
    std::optional<double> alignment;      // cosine with the consensus of other units' results, when checked
    // The unit's steps weighted by their share of the task's learning rate (common::full_rate_steps):
    // what the norm and the gain are "per step" of. None: its plain steps.
    std::optional<double> full_rate_steps;
};

struct AssignmentRecord {
    std::string id;
    std::string work_unit_id;
    std::string client_id;
    AssignmentState state = AssignmentState::InProgress;
    std::int64_t issued_at = 0;
    std::int64_t deadline = 0;
    std::string envelope_json;
    std::optional<std::int64_t> returned_at;
    std::optional<std::string> delta_sha256;
    std::optional<std::int64_t> delta_bytes;
    std::optional<double> delta_norm;
    std::optional<std::string> metrics_json;
    double credit = 0;
    std::optional<std::int64_t> merged_version;
    // From the work unit, for convenience.
    std::string task_id;
    std::int64_t base_version = 0;
    std::optional<double> gain_per_step;  // proof of training, when it was checked
    std::optional<double> alignment;      // the alignment check's cosine, when it ran
    // Volunteers working on the task when it was accepted for merging (schema 9; none before):
    // the concurrency the `conc` staleness and fedasync's concurrency_exponent measure against.
    std::optional<std::int64_t> concurrency;
    std::optional<double> full_rate_steps;  // when checked (schema 10)

    CheckFigures figures() const { return {delta_norm.value_or(0), gain_per_step, alignment, full_rate_steps}; }
};

// An accepted result not yet merged, as the aggregator's queue takes it: in acceptance order.
struct AcceptedResult {
    std::string assignment_id;
    std::int64_t seq = 0;  // assignments.accepted_seq: the order of acceptance, over every task
    std::int64_t base_version = 0;
    std::int64_t concurrency = 1;  // the task's volunteers when it was accepted
};

// A task's merges and one check's refusals since the last merge (the stall guard's figures).
struct StallFigures {
    std::optional<std::int64_t> last_merge_at;  // return time of the newest result accepted for merging
    std::int64_t refusals = 0;                  // on the reason asked, since then
    std::int64_t volunteers = 0;                // distinct volunteers among those refusals
    std::optional<std::int64_t> first_refusal_at;
    std::optional<std::int64_t> first_return_at;  // the earliest result returned since then, whatever its fate
};

struct RejectionRecord {
    std::int64_t id = 0;
    std::string assignment_id;
    std::string client_id;
    std::string reason;
    std::string detail;
    std::int64_t at = 0;
};

struct EventRecord {
    std::int64_t id = 0;
    std::int64_t at = 0;
    std::string kind;
    std::string detail_json;
};

// What /api/v1/stats reports from the database.
// A task's results in one time bucket (the dashboard's charts). Accepted results count by
// the time they came back; rejections by the time of the verdict.
struct HistoryBucket {
    std::int64_t start = 0;     // unix seconds, a multiple of the bucket width
    std::int64_t accepted = 0;  // accepted, merged or confirmed (a replica's twin)
    std::int64_t rejected = 0;
    std::int64_t samples = 0;          // samples trained by results accepted for merging
    std::optional<double> train_loss;  // mean of the final training loss volunteers reported
};

// Where a task's run stands (the scheduler's run-wide schedule and concurrency): the local
// steps of its results accepted for merging — from the work units, never the volunteers'
// reports — and the distinct volunteers issued one of its units recently.
struct RunProgress {
    std::int64_t steps_merged = 0;
    std::int64_t volunteers = 0;
    double fastest_samples_per_s = 0;  // the fastest of those volunteers, as last reported
};

// A task's results since some time: totals for the overview and the throughput figures.
struct ActivityTotals {
    std::int64_t accepted = 0;  // accepted for merging (replica twins not counted)
    std::int64_t samples = 0;   // samples trained in them
};

// A volunteer seen this recently counts as active (the dashboard, /metrics).
inline constexpr std::int64_t kVolunteerActiveWindowS = 600;

struct StoreCounts {
    std::map<std::string, std::int64_t> assignments;  // by state name
    std::map<std::string, std::int64_t> work_units;   // by state name
    std::int64_t clients = 0;
    std::int64_t clients_active = 0;  // seen since the given time
    std::int64_t clients_quarantined = 0;
    std::int64_t rejections = 0;
};

}  // namespace tessera::server
