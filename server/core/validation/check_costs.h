// What the contribution checks cost: seconds spent in each stage over all results, so an
// operator (and docs/benchmarks.md) can see the checks' share of the server's time.
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

namespace tessera::server {

struct CheckCosts {
    std::atomic<double> decode{0};       // reading and decoding the delta file
    std::atomic<double> cheap{0};        // layout, finiteness, norms
    std::atomic<double> copy{0};         // sketching and comparing
    std::atomic<double> held_out{0};     // the held-out loss check
    std::atomic<double> own_samples{0};  // the proof of training
    std::atomic<double> commitments{0};  // the commitments' identity and opening loss
    std::atomic<double> audit{0};        // replaying units (replay_audit.h)
    std::atomic<double> spot{0};         // loss-check units' reports, checked on a sample of rows
    std::atomic<std::int64_t> results{0};
    std::atomic<std::int64_t> loss_checked{0};
    std::atomic<std::int64_t> audited{0};      // replayed
    std::atomic<std::int64_t> unauditable{0};  // drawn for an audit that could not replay them
};

}  // namespace tessera::server
