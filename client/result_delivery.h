// A trained unit's result on its way to the server: uploaded (retried while the failure is
// transient) with, when the answer asks for them, the moments its unit started from (docs/
// protocol.md, "Moments for an audit"), then its verdict awaited a few seconds and logged with
// the unit's figures. The
// volunteer's loop delivers on its own thread, or hands the result to a BackgroundUpload that
// delivers it while the next unit trains (transfers hidden, issue 54).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "client_state.h"
#include "logger.h"
#include "retry.h"
#include "server_api.h"
#include "unit_download.h"
#include "volunteer.h"

namespace tessera::client {

struct Delivery {
    std::string wu_id;
    std::string body;  // the packed result
    common::TrainMetrics metrics;
    std::string device;
    std::int64_t model_bytes = 0, patch_bytes = 0, shard_bytes = 0;  // what the unit downloaded
};
Delivery delivery_of(const UnitInHand& hand);

// How the loop ends when a stop came while a result was uploading: it stays in `file`.
Stop kept_for_later(const std::string& wu_id, const std::filesystem::path& file);

enum class Delivered {
    Uploaded,  // the server has it (now, or an earlier try got through)
    Refused,   // for good: the server refused it or answered nonsense
    Stopped,   // a stop came while retrying: the result stays on disk for the next start
    Failed,    // no trust, a local problem: the loop ends, the result stays on disk
};
struct DeliveryOutcome {
    Delivered how = Delivered::Uploaded;
    ApiFailure failure;  // unless Uploaded
};

struct DeliverySettings {
    RetryPolicy retry;
    std::function<bool()> stopping;    // ends the retries
    std::function<void()> on_failure;  // after any failed call (among several servers: the turn goes)
    // Where the moments units started from are kept (ClientState::moments_in_file), sent when
    // the upload's answer or the result's status asks for them and removed once the result is
    // decided; none: not kept.
    const ClientState* moments_kept_in = nullptr;
};

DeliveryOutcome upload_result(ServerApi& api, const Delivery& delivery, const common::Logger& log,
                              const DeliverySettings& settings);

// Validation usually settles within a second: waits up to 5 s for the verdict (sending the
// moments the unit started from if a flag's replay asks for them), settles the other kept
// moments, then logs the result line and adds it to the status board.
void report_verdict(ServerApi& api, const Delivery& delivery, VolunteerStatus& status, const common::Logger& log,
                    const DeliverySettings& settings);
// The moments kept for earlier units (ClientState::moments_in_file): sent where a result's status
// asks for them, dropped once it is decided (or unknown to the server), kept while it waits.
void settle_kept_moments(ServerApi& api, const common::Logger& log, const DeliverySettings& settings);

// The result handed over to the state directory's upload files (ClientState::hand_over_upload),
// delivered on a thread of its own with its own connection. Uploaded or refused: the files go.
// Stopped or failed: they stay, and the next start uploads them.
class BackgroundUpload {
public:
    BackgroundUpload(ServerApi& api, HttpOptions http, Delivery delivery, const ClientState& state,
                     VolunteerStatus& status, const common::Logger& log, DeliverySettings settings);
    ~BackgroundUpload();  // waits for the delivery (a quit interrupts its transfer)
    BackgroundUpload(const BackgroundUpload&) = delete;
    BackgroundUpload& operator=(const BackgroundUpload&) = delete;

    // Waits for the delivery: the Stop it calls for, if any (the result kept for later, or a
    // failure that ends the loop).
    std::optional<Stop> finish();
    // How long its upload took (once finished).
    double seconds() const { return seconds_; }

private:
    void run();

    HttpClient http_;
    ServerApi api_;
    Delivery delivery_;
    const ClientState& state_;
    VolunteerStatus& status_;
    const common::Logger& log_;
    DeliverySettings settings_;
    std::optional<Stop> stop_;
    double seconds_ = 0;
    std::thread thread_;  // last: started after everything it reads
};

}  // namespace tessera::client
