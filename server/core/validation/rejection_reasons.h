// Why a result is refused: the reason codes stored in the rejections table and shown on the
// dashboard, cheapest check first (docs/operations.md, "Validation").
#pragma once

#include <array>
#include <string_view>

namespace tessera::server::reason {

// Checked when the upload arrives (before its 200).
constexpr std::string_view kDeadlinePassed = "deadline_passed";
constexpr std::string_view kWrongBaseVersion = "wrong_base_version";
constexpr std::string_view kEncodingMismatch = "encoding_mismatch";
constexpr std::string_view kTooLarge = "too_large";
constexpr std::string_view kHashMismatch = "hash_mismatch";
// A training result without commitments in a task with replay audits: it could be neither
// replayed nor have its opening loss checked.
constexpr std::string_view kCommitmentsMissing = "commitments_missing";
// Checked by the validator (encoding_mismatch again, against the file's own metadata).
constexpr std::string_view kUndecodable = "undecodable";
constexpr std::string_view kShapeMismatch = "shape_mismatch";
constexpr std::string_view kNonFinite = "non_finite";
constexpr std::string_view kEmptyDelta = "empty_delta";
// The commitments (common/commitments.h): the decoded delta breaks their identity; the opening
// loss the server computes is not the one they report; a replay audit of the unit disagrees
// with them (replay_audit.h); the moments its audit asked for never came.
constexpr std::string_view kCommitmentMismatch = "commitment_mismatch";
constexpr std::string_view kOpeningLossMismatch = "opening_loss_mismatch";
constexpr std::string_view kAuditFailed = "audit_failed";
constexpr std::string_view kMomentsWithheld = "moments_withheld";
// A loss-check unit's report that the server's own measurement of a sample of its rows
// contradicts, or that does not parse (docs/operations.md, "Loss-check units").
constexpr std::string_view kCheckMismatch = "check_mismatch";
constexpr std::string_view kNormTooLarge = "norm_too_large";
constexpr std::string_view kNormTooSmall = "norm_too_small";
constexpr std::string_view kCopied = "copied";
constexpr std::string_view kMisaligned = "misaligned";
constexpr std::string_view kNoImprovement = "no_improvement";
constexpr std::string_view kLossIncrease = "loss_increase";
constexpr std::string_view kReplicaMismatch = "replica_mismatch";
// Not a judgement of the delta (none counts towards quarantine): a disagreeing pair whose
// tie-break replica never came back, a unit retired before this result was validated, and a
// result older than the task's staleness function merges (`conc:M,A,R`).
constexpr std::string_view kReplicaUnresolved = "replica_unresolved";
constexpr std::string_view kWorkUnitRetired = "work_unit_retired";
constexpr std::string_view kTooStale = "too_stale";

// Every reason, in the order above.
// clang-format off
constexpr std::array<std::string_view, 25> kAll = {
    kDeadlinePassed, kWrongBaseVersion, kEncodingMismatch, kTooLarge, kHashMismatch, kCommitmentsMissing,
    kUndecodable, kShapeMismatch, kNonFinite, kEmptyDelta, kCommitmentMismatch, kOpeningLossMismatch, kAuditFailed,
    kMomentsWithheld, kCheckMismatch,
    kNormTooLarge, kNormTooSmall, kCopied, kMisaligned, kNoImprovement, kLossIncrease,
    kReplicaMismatch, kReplicaUnresolved, kWorkUnitRetired, kTooStale};
// clang-format on

}  // namespace tessera::server::reason
