// Delivering a result: upload with retries, then the verdict, on the loop's thread or another.
#include "result_delivery.h"

#include <filesystem>
#include <utility>

#include "file_io.h"
#include "safetensors.h"

namespace tessera::client {
namespace {

std::string short_number(double value) { return std::to_string(value).substr(0, 6); }

std::string describe(const common::ResultStatus& status) {
    if (status.state == "merged" || status.state == "accepted" || status.state == "confirmed")
        return "accepted, credit " + std::to_string(status.credit).substr(0, 6);
    if (status.state == "rejected") return "rejected (" + status.reason + ")";
    if (status.state == "validated") return "valid, waiting for its replica";
    if (status.state == "timed_out") return "too late: the unit had timed out";
    if (status.state == "abandoned") return "the unit had been given back";
    return "uploaded, validation pending";
}

// An upload that failed for good: the server refused it or answered nonsense. Anything else
// (no trust, a local problem) ends the run with the result kept for the next start.
bool upload_is_final(const ApiFailure& failure) {
    return failure.kind == FailureKind::Refused || failure.kind == FailureKind::BadAnswer;
}

}  // namespace

Delivery delivery_of(const UnitInHand& hand) {
    return {hand.unit.wu_id,  hand.upload,      hand.metrics,    hand.device,
            hand.model_bytes, hand.patch_bytes, hand.shard_bytes};
}

Stop kept_for_later(const std::string& wu_id, const std::filesystem::path& file) {
    return {StopReason::Requested, "the result of " + wu_id + " is kept in " + file.string() +
                                       " and is uploaded when the client starts again"};
}

namespace {

// The moments unit `wu_id` started from, posted (retried as the upload) when its answer or its
// status asked for them; a failure is logged: the audit then refuses the result, and the client
// goes on.
void send_moments(ServerApi& api, const std::string& wu_id, const common::Logger& log,
                  const DeliverySettings& settings) {
    auto file = settings.moments_kept_in ? settings.moments_kept_in->moments_in_file(wu_id) : std::filesystem::path();
    std::error_code missing;
    if (file.empty() || !std::filesystem::exists(file, missing)) {
        log.error("moments",
                  wu_id + ": its audit asked for the moments it started from, and this client did not keep them");
        return;
    }
    auto moments = common::read_file(file, common::kMaxModelBytes);
    if (!moments) {
        log.error("moments", wu_id + ": reading the moments it started from: " + moments.message());
        return;
    }
    auto call = [&] { return api.upload_moments(wu_id, *moments); };
    auto sent = with_retries(call, settings.stopping, log, "sending the moments of " + wu_id, settings.retry);
    if (!sent) {
        log.error("moments", wu_id + ": sending the moments it started from for its audit: " + sent.error().message);
        return;
    }
    log.info("moments", wu_id + ": sent the moments it started from for its replay audit",
             {{"wu_id", wu_id}, {"bytes", static_cast<std::int64_t>(moments->size())}});
}

}  // namespace

DeliveryOutcome upload_result(ServerApi& api, const Delivery& delivery, const common::Logger& log,
                              const DeliverySettings& settings) {
    auto call = [&] {
        auto uploaded = api.upload_result(delivery.body);
        if (!uploaded && settings.on_failure) settings.on_failure();
        return uploaded;
    };
    auto uploaded = with_retries(call, settings.stopping, log, "uploading " + delivery.wu_id, settings.retry);
    if (uploaded && *uploaded) send_moments(api, delivery.wu_id, log, settings);
    // The moments stay until the result is decided (settle_kept_moments): a flag may ask for them.
    if (uploaded || uploaded.error().http_status == 409) return {};  // 409: an earlier try got through
    const auto& failure = uploaded.error();
    if (failure.kind == FailureKind::Stopped) return {Delivered::Stopped, failure};
    if (!upload_is_final(failure)) return {Delivered::Failed, failure};
    if (settings.moments_kept_in) {
        std::error_code ignored;
        std::filesystem::remove(settings.moments_kept_in->moments_in_file(delivery.wu_id), ignored);
    }
    log.info("refused", delivery.wu_id + ": the server refused the result: " + failure.message,
             {{"wu_id", delivery.wu_id}, {"status", failure.http_status}});
    return {Delivered::Refused, failure};
}

void settle_kept_moments(ServerApi& api, const common::Logger& log, const DeliverySettings& settings) {
    if (!settings.moments_kept_in) return;
    std::error_code error;
    std::vector<std::filesystem::path> kept;
    for (const auto& entry : std::filesystem::directory_iterator(settings.moments_kept_in->moments_in_dir(), error))
        kept.push_back(entry.path());
    for (const auto& file : kept) {
        auto wu_id = file.stem().string();
        auto answer = api.result_status(wu_id);
        if (!answer && answer.error().http_status != 404) continue;  // asked again after the next unit
        if (answer && answer->moments_wanted) send_moments(api, wu_id, log, settings);
        // Not uploaded yet (a unit training while another uploads), or waiting for its verdict.
        if (answer && (answer->state == "in_progress" || answer->state == "returned")) continue;
        std::filesystem::remove(file, error);
    }
}

void report_verdict(ServerApi& api, const Delivery& delivery, VolunteerStatus& status, const common::Logger& log,
                    const DeliverySettings& settings) {
    const auto& wu_id = delivery.wu_id;
    common::ResultStatus outcome{wu_id, "returned", "", 0};
    bool moments_sent = false;  // once here; a failed send is tried again by settle_kept_moments
    for (int i = 0; i < 20 && outcome.state == "returned"; ++i) {
        if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
        auto answer = api.result_status(wu_id);
        if (!answer) break;
        outcome = *answer;
        if (outcome.moments_wanted && !std::exchange(moments_sent, true))
            send_moments(api, wu_id, log, settings);  // a flag's replay needs them
    }
    settle_kept_moments(api, log, settings);
    status.add_result(wu_id, outcome.state, outcome.reason, outcome.credit);
    const auto& metrics = delivery.metrics;
    auto bytes = static_cast<std::int64_t>(delivery.body.size());
    log.info("result",
             wu_id + ": " + describe(outcome) + "; loss " + short_number(metrics.loss_start) + " → " +
                 short_number(metrics.loss_end) + ", " + std::to_string(static_cast<int>(metrics.samples_per_s)) +
                 " samples/s, " + std::to_string(bytes) + " bytes",
             {{"wu_id", wu_id},
              {"state", outcome.state},
              {"reason", outcome.reason},
              {"credit", outcome.credit},
              {"bytes", bytes},
              {"model_bytes", delivery.model_bytes},
              {"patch_bytes", delivery.patch_bytes},
              {"shard_bytes", delivery.shard_bytes},
              {"samples_per_s", metrics.samples_per_s},
              {"device", delivery.device}});
}

BackgroundUpload::BackgroundUpload(ServerApi& api, HttpOptions http, Delivery delivery, const ClientState& state,
                                   VolunteerStatus& status, const common::Logger& log, DeliverySettings settings)
    : http_(std::move(http)), api_(api.through(http_)), delivery_(std::move(delivery)), state_(state), status_(status),
      log_(log), settings_(std::move(settings)), thread_([this] { run(); }) {}

BackgroundUpload::~BackgroundUpload() {
    if (thread_.joinable()) thread_.join();
}

std::optional<Stop> BackgroundUpload::finish() {
    if (thread_.joinable()) thread_.join();
    return std::exchange(stop_, std::nullopt);
}

void BackgroundUpload::run() {
    auto started = std::chrono::steady_clock::now();
    auto outcome = upload_result(api_, delivery_, log_, settings_);
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    switch (outcome.how) {
        case Delivered::Uploaded:
            state_.clear_uploading();
            report_verdict(api_, delivery_, status_, log_, settings_);
            return;
        case Delivered::Refused: state_.clear_uploading(); return;
        case Delivered::Stopped: stop_ = kept_for_later(delivery_.wu_id, state_.uploading_delta_file()); return;
        case Delivered::Failed:
            stop_ = Stop{outcome.failure.kind == FailureKind::Untrusted ? StopReason::Untrusted : StopReason::Error,
                         outcome.failure.message};
            return;
    }
}

}  // namespace tessera::client
