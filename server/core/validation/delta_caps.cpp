// DeltaCaps: a map from task to cap under a mutex.
#include "delta_caps.h"

#include <algorithm>

namespace tessera::server {

void DeltaCaps::set(const std::string& task_id, std::int64_t bytes) {
    std::lock_guard lock(mutex_);
    caps_[task_id] = bytes;
}

void DeltaCaps::remove(const std::string& task_id) {
    std::lock_guard lock(mutex_);
    caps_.erase(task_id);
}

std::int64_t DeltaCaps::of(const std::string& task_id) const {
    std::lock_guard lock(mutex_);
    auto found = caps_.find(task_id);
    return found == caps_.end() ? 0 : found->second;
}

std::int64_t DeltaCaps::largest_of(const std::vector<std::string>& task_ids) const {
    std::int64_t largest = 0;
    for (const auto& id : task_ids) largest = std::max(largest, of(id));
    return largest;
}

std::int64_t DeltaCaps::largest() const {
    std::lock_guard lock(mutex_);
    std::int64_t largest = 0;
    for (const auto& [id, bytes] : caps_) largest = std::max(largest, bytes);
    return largest;
}

}  // namespace tessera::server
