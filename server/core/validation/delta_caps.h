// The largest result delta each served task takes, set from its model's size
// (model_cache.h, max_delta_bytes_for): an upload is held to the cap of its own unit's task,
// never to the largest task's. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::server {

class DeltaCaps {
public:
    void set(const std::string& task_id, std::int64_t bytes);
    void remove(const std::string& task_id);
    // 0 for a task not served here: nothing is taken for it.
    std::int64_t of(const std::string& task_id) const;
    // The largest cap among these tasks (a volunteer's units in progress); 0 if none is served.
    std::int64_t largest_of(const std::vector<std::string>& task_ids) const;
    // The largest cap of all: no upload to any task is larger.
    std::int64_t largest() const;

private:
    mutable std::mutex mutex_;
    std::map<std::string, std::int64_t, std::less<>> caps_;
};

}  // namespace tessera::server
