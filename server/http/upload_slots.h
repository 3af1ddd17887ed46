// Upload bodies being received, bounded by the bytes they may hold in all and by a count per
// volunteer: each body is spooled to a file on disk as it arrives (upload_spool.h), so the
// budget (`--upload-spool`) bounds the disk that uploads in flight hold however many arrive
// (docs/operations.md, "Limits"). One upload is always let in, whatever its size, so a
// model larger than the budget can still be trained. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "server_metrics.h"

namespace tessera::server {

class UploadSlots {
public:
    // `metrics` is told the bytes in flight and each upload turned away.
    UploadSlots(std::uint64_t budget_bytes, std::size_t per_client, ServerMetrics& metrics)
        : budget_(budget_bytes), per_client_(per_client), metrics_(metrics) {}

    // Held while one upload's body is read and answered; gives its bytes back when destroyed.
    class Slot {
    public:
        Slot(UploadSlots& slots, std::string client_id, std::uint64_t bytes)
            : slots_(&slots), client_id_(std::move(client_id)), bytes_(bytes) {}
        Slot(Slot&& other) noexcept
            : slots_(std::exchange(other.slots_, nullptr)), client_id_(std::move(other.client_id_)),
              bytes_(other.bytes_) {}
        Slot(const Slot&) = delete;
        Slot& operator=(const Slot&) = delete;
        Slot& operator=(Slot&& other) noexcept {
            if (this != &other) {
                release();
                slots_ = std::exchange(other.slots_, nullptr);
                client_id_ = std::move(other.client_id_);
                bytes_ = other.bytes_;
            }
            return *this;
        }
        ~Slot() { release(); }

    private:
        void release() {
            if (slots_) std::exchange(slots_, nullptr)->give_back(client_id_, bytes_);
        }

        UploadSlots* slots_;
        std::string client_id_;
        std::uint64_t bytes_;
    };

    // A place for an upload of up to `bytes` from `client_id`, or nothing when it would take the
    // bytes in flight past the budget or the volunteer already has its share in flight.
    std::optional<Slot> take(const std::string& client_id, std::uint64_t bytes);

    std::uint64_t bytes_in_flight() const;

private:
    void give_back(const std::string& client_id, std::uint64_t bytes);

    const std::uint64_t budget_;
    const std::size_t per_client_;
    ServerMetrics& metrics_;
    mutable std::mutex mutex_;
    std::uint64_t bytes_ = 0;
    std::size_t uploads_ = 0;
    std::map<std::string, std::size_t> by_client_;
};

}  // namespace tessera::server
