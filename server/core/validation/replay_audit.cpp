// Replay audits (replay_audit.h).
#include "replay_audit.h"

#include <chrono>

#include <boost/json.hpp>

#include "commitments.h"
#include "optimizer_moments.h"

namespace tessera::server {
namespace {

AuditOutcome not_audited(std::string why) { return {false, std::move(why), {}}; }
AuditOutcome failed(std::string why) { return {true, {}, std::move(why)}; }

// The metrics the intake kept with a result (an empty object when it has none).
boost::json::object metrics_of(const AssignmentRecord& a) {
    if (!a.metrics_json) return {};
    boost::system::error_code error;
    auto metrics = boost::json::parse(*a.metrics_json, error);
    return error || !metrics.is_object() ? boost::json::object() : std::move(metrics.as_object());
}

// A text field of the metrics the intake kept with a result ("" when absent).
std::string metrics_text(const AssignmentRecord& a, std::string_view key) {
    auto metrics = metrics_of(a);
    const auto* field = metrics.if_contains(key);
    return field != nullptr && field->is_string() ? std::string(field->as_string()) : std::string();
}

// Moments as a replay resumes them; none, with why in `broken`, when the bytes are not a moments file.
std::optional<ReplayMoments> parsed_moments(common::ByteView bytes, const std::string& what, std::string& broken) {
    auto file = common::read_optimizer_moments(bytes);
    if (!file) {
        broken = what + " do not parse: " + file.message();
        return std::nullopt;
    }
    auto& m = file->moments;
    return ReplayMoments{std::move(m.exp_avg), std::move(m.exp_avg_sq), m.steps};
}

}  // namespace

bool trained_on_cpu(const AssignmentRecord& a) { return metrics_text(a, "device").starts_with("cpu"); }

std::string audit_asked(const AssignmentRecord& a) { return metrics_text(a, "audit"); }

std::int64_t moments_asked_at(const AssignmentRecord& a) {
    auto metrics = metrics_of(a);
    const auto* field = metrics.if_contains("moments_asked_at");
    if (field != nullptr && field->is_int64()) return field->as_int64();
    return a.returned_at.value_or(0);
}

bool asked_for_a_flag(const AssignmentRecord& a) { return !metrics_text(a, "flagged").empty(); }

std::string metrics_asking_moments(const AssignmentRecord& a, const std::string& flagged, const CheckFigures& figures,
                                   std::int64_t now) {
    auto metrics = metrics_of(a);
    metrics["audit"] = "moments";
    metrics["moments_asked_at"] = now;
    metrics["flagged"] = flagged;
    if (figures.gain_per_step) metrics["flag_gain_per_step"] = *figures.gain_per_step;
    if (figures.full_rate_steps) metrics["flag_full_rate_steps"] = *figures.full_rate_steps;
    return boost::json::serialize(metrics);
}

std::optional<std::int64_t> check_wait_end(const AssignmentRecord& a) {
    auto metrics = metrics_of(a);
    const auto* field = metrics.if_contains("check_until");
    if (field == nullptr || !field->is_int64()) return std::nullopt;
    return field->as_int64();
}

std::string metrics_asking_check(const AssignmentRecord& a, std::int64_t until) {
    auto metrics = metrics_of(a);
    metrics["check_until"] = until;
    return boost::json::serialize(metrics);
}

HeldFlag held_flag(const AssignmentRecord& a) {
    auto metrics = metrics_of(a);
    auto number = [&](std::string_view key) -> std::optional<double> {
        const auto* field = metrics.if_contains(key);
        if (field == nullptr || !field->is_number()) return std::nullopt;
        return field->to_number<double>();
    };
    const auto* flagged = metrics.if_contains("flagged");
    if (flagged == nullptr || !flagged->is_string()) return {};
    return {std::string(flagged->as_string()), number("flag_gain_per_step"), number("flag_full_rate_steps")};
}

common::Result<std::optional<ReplayMoments>> ReplayAudit::sent_moments(const std::string& assignment_id,
                                                                       std::string& broken) {
    auto bytes = results_.read_moments(assignment_id);
    if (!bytes) return bytes.error();
    if (!*bytes) return std::optional<ReplayMoments>();
    return parsed_moments(**bytes, "the moments it sent", broken);
}

common::Result<std::optional<ReplayMoments>> ReplayAudit::twin_moments(const common::BlobRef& blob,
                                                                       std::string& broken) {
    if (!blobs_.has(blob.sha256)) return std::optional<ReplayMoments>();
    auto bytes = blobs_.read(blob.sha256, static_cast<std::uint64_t>(blob.bytes));
    if (!bytes) return bytes.error();
    return parsed_moments(*bytes, "the moments its unit names", broken);
}

common::Result<AuditOutcome> ReplayAudit::run(const AssignmentRecord& a, const common::WorkUnit& unit,
                                              const common::NamedTensors& base, const common::Commitments* commitments,
                                              const AssignedSamples& samples, bool on_cpu) {
    if (commitments == nullptr) return not_audited("it was sent without commitments");
    if (!commitments->moments_in) return not_audited("its commitments do not say which moments it started from");
    const auto& stated = *commitments->moments_in;
    std::optional<ReplayMoments> moments;
    if (!stated.sha256.empty()) {
        if (unit.hyper.optimizer != common::InnerOptimizer::Kept)
            return failed("a fresh unit's commitments say it resumed kept moments");
        if (!unit.moments && audit_asked(a) != "moments") {
            auto outcome = not_audited("it resumed kept moments nobody asked for yet");
            outcome.needs_moments = true;
            return outcome;
        }
        // An audit twin's unit names the moments it was sent; otherwise its volunteer sent them.
        std::string broken;
        auto sent = unit.moments ? twin_moments(*unit.moments, broken) : sent_moments(a.id, broken);
        if (!sent) return sent.error();
        if (!broken.empty()) return failed(broken);
        if (!*sent && unit.moments) return not_audited("the moments its unit names are no longer kept");
        if (!*sent)
            return AuditOutcome{false, "the moments it started from were asked for and never came", {}, 0, true};
        moments = std::move(*sent);
        if (common::moments_sha256(moments->exp_avg, moments->exp_avg_sq) != stated.sha256 ||
            moments->steps != stated.steps)
            return failed("the moments it sent are not those its commitments name");
    }
    auto pool = probes_.of(a.task_id);
    if (!pool) return pool.error();
    auto started = std::chrono::steady_clock::now();
    auto replayed = (*pool)->replay(base, samples, unit.hyper, moments ? &*moments : nullptr);
    costs_.audit.fetch_add(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    if (!replayed) return replayed.error();
    ++costs_.audited;
    auto tolerance = replay_tolerance(on_cpu);
    return AuditOutcome{true, {}, common::trajectory_mismatch(*commitments, *replayed, tolerance), tolerance};
}

}  // namespace tessera::server
