// UploadSlots: byte and per-volunteer counts under one mutex.
#include "upload_slots.h"

namespace tessera::server {

std::optional<UploadSlots::Slot> UploadSlots::take(const std::string& client_id, std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    auto found = by_client_.find(client_id);
    std::size_t mine = found == by_client_.end() ? 0 : found->second;
    bool fits = uploads_ == 0 || (bytes <= budget_ && bytes_ <= budget_ - bytes);
    if (!fits || mine >= per_client_) {
        metrics_.count_upload_turned_away();
        return std::nullopt;
    }
    bytes_ += bytes;
    metrics_.set_upload_bytes_in_flight(bytes_);
    ++uploads_;
    ++by_client_[client_id];
    return std::optional<Slot>(std::in_place, *this, client_id, bytes);
}

std::uint64_t UploadSlots::bytes_in_flight() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

void UploadSlots::give_back(const std::string& client_id, std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    bytes_ -= bytes;
    metrics_.set_upload_bytes_in_flight(bytes_);
    --uploads_;
    if (auto it = by_client_.find(client_id); it != by_client_.end() && --it->second == 0) by_client_.erase(it);
}

}  // namespace tessera::server
