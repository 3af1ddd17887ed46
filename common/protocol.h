// Protocol messages (docs/protocol.md; JSON Schemas in schemas/): C++ structs, their JSON
// form, and strict parsers in which a missing, unknown or ill-typed field is a named error.
#pragma once

#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commitments.h"
#include "delta_codec.h"
#include "lr_schedule.h"
#include "result.h"
#include "signed_envelope.h"
#include "unit_random.h"

namespace tessera::common {

constexpr std::int64_t kMaxSafeInteger = 9007199254740991;  // 2^53 − 1: exact in JSON everywhere
constexpr std::size_t kMaxShardsPerWorkUnit = 256;
constexpr std::size_t kMaxCachedShards = 512;  // 512 hashes ≈ 34 KiB, within the 64 KiB request cap
constexpr std::size_t kMaxTaskChoices = 64;    // names in a work request's "tasks" or "exclude_tasks"
constexpr std::size_t kMaxPatchChain = 64;     // patches a work unit may chain
constexpr std::size_t kMaxIdentifier = 64;
constexpr std::size_t kMaxDeviceName = 128;  // a device's name as a volunteer reports it
constexpr double kMaxPatchMask = 0x1.fffffffffffffp-1;  // the largest double below 1: `patch_mask` is in [0, 1)

// An id field's text (a task, unit, client or model preset name): 1–64 of [A-Za-z0-9_-].
bool is_identifier(std::string_view text);

// A content-addressed blob: SHA-256 of its bytes, and its size.
struct BlobRef {
    std::string sha256;
    std::int64_t bytes = 0;
};

// Whether a unit's inner AdamW starts afresh or from the volunteer's kept moments.
enum class InnerOptimizer { Fresh, Kept };

// The largest `samples` a loss-check unit asks for: its report (loss_report.h) stays well
// inside the 1 MiB a strict JSON message may take.
constexpr std::int64_t kMaxCheckSamples = 4096;

// What a loss-check unit asks (docs/protocol.md, "Loss-check units"): it trains nothing. The
// volunteer evaluates `result`, another volunteer's uploaded delta file for a unit with this
// unit's base, shards and hyperparameters, by per-sample losses before and after it: on the
// first `samples` rows of `held_out` (a data shard), and on the last `samples` rows of the
// unit's first epoch (the rows its steps drew first, as the checked unit drew them).
struct LossCheck {
    BlobRef result;
    BlobRef held_out;
    std::int64_t samples = 0;
};
std::string_view inner_optimizer_name(InnerOptimizer optimizer);  // "fresh", "kept"
std::optional<InnerOptimizer> inner_optimizer_from_name(std::string_view name);

struct Hyperparameters {
    std::int64_t local_steps = 0;
    std::int64_t batch_size = 0;
    double lr = 0;
    std::int64_t warmup_steps = 0;
    double weight_decay = 0;
    double grad_clip = 0;  // 0: no clipping
    std::int64_t seed = 0;
    // Optional on the wire (absent: fresh, and the per-unit warm-up above).
    // kept: the volunteer starts from the AdamW moments its last unit of the task left (and
    // skips the warm-up when it has them); fresh: from zero moments, its kept ones untouched.
    InnerOptimizer optimizer = InnerOptimizer::Fresh;
    // One learning-rate schedule over the task's run (lr_schedule.h), multiplied by the unit's
    // warm-up: the unit spans positions schedule_from → schedule_to (samples merged).
    std::optional<LrSchedule> schedule{};
    std::int64_t schedule_from = 0;
    std::int64_t schedule_to = 0;
    // Text DiTs: a caption is replaced by the model's null caption where the unit's
    // CaptionDrop stream's uniform is below this (docs/protocol.md). Set by the server for
    // text tasks only; absent: 0.1.
    std::optional<double> caption_drop{};
    // DiTs: the fraction of each sample's patches dropped after the patch mixer (MicroDiT's
    // deferred masking; docs/protocol.md). 0 (absent on the wire): every patch trains.
    double patch_mask = 0;
};

// What a volunteer is asked to compute. Travels inside a SignedEnvelope.
struct WorkUnit {
    std::string wu_id;
    std::string task_id;
    std::string client_id;
    std::string model;  // preset name
    std::int64_t base_version = 0;
    BlobRef model_blob;  // the base version's published model, in full
    // Optional, instead of downloading model_blob: the model blob the volunteer holds
    // (`patch_from`) plus these patches, applied in order, give model_blob's bytes
    // (docs/tensor_format.md, "Model patches"). Empty when the unit offers none.
    std::string patch_from;
    std::vector<BlobRef> patches;
    std::vector<BlobRef> shards;
    // An audit twin of a kept unit (docs/protocol.md, "Moments for a twin"): the AdamW moments
    // the audited volunteer's unit resumed, as an optimizer-state file. The unit resumes these
    // (no warm-up) in place of the volunteer's own kept moments, which it leaves untouched. Only
    // with `optimizer: kept`; absent otherwise.
    std::optional<BlobRef> moments;
    // A loss-check unit's question; absent on a unit that trains.
    std::optional<LossCheck> check;
    // Where to fetch blobs: "<base>/<sha256>". Empty: the server's own /blobs.
    std::string blob_base_url;
    Hyperparameters hyper;
    // How every random draw of the unit is made (docs/protocol.md, "Randomness"); a client
    // refuses a unit whose specification it does not implement.
    std::string random = kUnitRandomSpec;
    DeltaEncoding encoding;
    std::int64_t issued_at = 0;  // unix seconds
    std::int64_t deadline = 0;   // unix seconds
};

struct TrainMetrics {
    double loss_start = 0;
    double loss_end = 0;
    std::int64_t samples = 0;
    double seconds = 0;
    double samples_per_s = 0;
};

// What a volunteer returns with its delta blob.
struct ResultManifest {
    std::string wu_id;
    std::string client_id;
    std::int64_t base_version = 0;
    BlobRef delta_blob;
    DeltaEncoding encoding;
    TrainMetrics metrics;
    std::string device;
    // What the volunteer commits to of its unit's trajectory (commitments.h); optional, absent
    // from the JSON when not sent.
    std::optional<Commitments> commitments;
};

struct RegisterRequest {
    std::string public_key;  // base64 of the raw 32-byte Ed25519 key
    std::string name;
    std::string client_version;
};

struct RegisterResponse {
    std::string client_id;
    std::string server_public_key;  // base64 of the raw 32-byte Ed25519 key
    std::string server_key_id;
};

struct DeviceInfo {
    std::string kind;  // "cpu" or "cuda"
    std::string name;
    std::int64_t memory_bytes = 0;
    std::int64_t threads = 1;
};

struct WorkRequest {
    std::string client_id;
    DeviceInfo device;
    double samples_per_s = 0;
    std::vector<std::string> cached_shards;  // SHA-256 hex of shards already held
    std::string held_model;                  // SHA-256 hex of the model checkpoint held, or ""
    // The volunteer's choice among a server's tasks, each a task id or a model preset: only
    // these (empty: any), and never these. Absent from the JSON when empty.
    std::vector<std::string> only_tasks;
    std::vector<std::string> exclude_tasks;
};

// Either a signed work unit, or "no work, ask again after retry_after_s seconds".
struct WorkResponse {
    bool has_work = false;
    SignedEnvelope work_unit;
    std::int64_t retry_after_s = 0;
};

// Names one of the volunteer's work units: the body of heartbeat and abandon requests.
struct WorkUnitRef {
    std::string client_id;
    std::string wu_id;
};

// The answer to a heartbeat: keep computing (with the deadline), or stop (the unit timed out,
// was retired or is no longer this volunteer's).
struct HeartbeatResponse {
    bool keep_working = false;
    std::int64_t deadline = 0;  // unix seconds; 0 when keep_working is false
};

// Where an uploaded result stands: its lifecycle state (in_progress, returned, validated,
// accepted, confirmed, merged, rejected, timed_out, abandoned), the rejection reason if any,
// and the credit granted.
struct ResultStatus {
    std::string wu_id;
    std::string state;
    std::string reason;  // "" unless rejected
    double credit = 0;
    // Returned and held for a replay audit that needs the moments its unit started from
    // (docs/protocol.md, "Moments for an audit"); written only when true.
    bool moments_wanted = false;
};

// The envelope purpose under which the server signs work units.
constexpr std::string_view kWorkUnitPurpose = "work_unit";

boost::json::value to_json(const WorkUnit& message);
boost::json::value to_json(const ResultManifest& message);
boost::json::value to_json(const RegisterRequest& message);
boost::json::value to_json(const RegisterResponse& message);
boost::json::value to_json(const WorkRequest& message);
boost::json::value to_json(const WorkResponse& message);
boost::json::value to_json(const WorkUnitRef& message);
boost::json::value to_json(const HeartbeatResponse& message);
boost::json::value to_json(const ResultStatus& message);
boost::json::value to_json(const LossCheck& check);

Result<WorkUnit> work_unit_from_json(const boost::json::value& json);
Result<LossCheck> loss_check_from_json(const boost::json::value& json);
Result<ResultManifest> result_manifest_from_json(const boost::json::value& json);
Result<RegisterRequest> register_request_from_json(const boost::json::value& json);
Result<RegisterResponse> register_response_from_json(const boost::json::value& json);
Result<WorkRequest> work_request_from_json(const boost::json::value& json);
Result<WorkResponse> work_response_from_json(const boost::json::value& json);
Result<WorkUnitRef> work_unit_ref_from_json(const boost::json::value& json);
Result<HeartbeatResponse> heartbeat_response_from_json(const boost::json::value& json);
Result<ResultStatus> result_status_from_json(const boost::json::value& json);

// Strict-parses `text` (parse_json_strict) and then reads it as message type T.
template <class T>
Result<T> parse_message(std::string_view text);

}  // namespace tessera::common
