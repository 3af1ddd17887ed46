// Look-ahead (issue 54, transfers hidden; docs/operations.md, "Look-ahead"): while a unit
// trains, the next one is asked for and downloaded on a thread of its own, so that training
// the next unit starts as soon as this one is uploaded. The request names the model in
// training as the one held (patches start there) and its shards as cached. The unit fetched
// is kept in the state directory (next.json) until it is taken, so that a client that stops
// gives it back, now or at its next start; one that cannot be downloaded is given back at once.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <thread>

#include "client_state.h"
#include "server_api.h"
#include "unit_download.h"
#include "volunteer.h"

namespace tessera::client {

class LookAhead {
public:
    // Verifies a unit's envelope (signature, addressee) before anything else reads it.
    using Opener = std::function<common::Result<common::WorkUnit>(const common::SignedEnvelope&)>;
    struct Context {
        ServerApi& api;  // the volunteer's: a unit not taken is given back through it
        HttpOptions http;
        BlobCache& cache;
        const ClientState& state;
        const common::Logger& log;
        UnitDownloader::Settings download;  // its give_up also ends the look-ahead's waits
        Opener open;
    };
    // Starts asking for a unit like `request` at once.
    LookAhead(Context context, common::WorkRequest request);
    // Cancels what is still under way and gives back a unit not taken.
    ~LookAhead();
    LookAhead(const LookAhead&) = delete;
    LookAhead& operator=(const LookAhead&) = delete;

    // Waits for the thread: the blobs the unit fetched needs (none when there is none).
    std::vector<std::string> wait();
    // The unit fetched, ready to train (none: no work, or it could not be had); or the Stop
    // a forged unit calls for. Waits for the thread first.
    struct Outcome {
        std::optional<UnitInHand> unit;
        std::optional<Stop> stop;
    };
    Outcome take();

private:
    void run(const common::WorkRequest& request);
    // Joins the thread, then gives back through the volunteer's own connection a unit it
    // could not fetch (its own connection is interrupted by a cancel).
    void join();
    void give_back(const std::string& wu_id, const std::string& why);

    HttpClient http_;
    ServerApi api_;
    Context context_;
    std::atomic<bool> cancelled_{false};
    Outcome outcome_;
    std::optional<std::pair<std::string, std::string>> failed_;  // a unit to give back, and why
    std::thread thread_;                                         // last: started after everything it reads
};

}  // namespace tessera::client
