// ModelCache: a small LRU of decoded checkpoints.
#include "model_cache.h"

#include "checkpoint.h"

namespace tessera::server {

std::int64_t value_count(const common::NamedTensors& tensors) {
    std::int64_t count = 0;
    for (const auto& t : tensors) count += static_cast<std::int64_t>(t.values.size());
    return count;
}

common::Result<std::shared_ptr<const common::NamedTensors>> ModelCache::get(const std::string& task_id,
                                                                            std::int64_t version) {
    {
        std::lock_guard lock(mutex_);
        for (auto it = entries_.begin(); it != entries_.end(); ++it)
            if (it->task_id == task_id && it->version == version) {
                entries_.splice(entries_.begin(), entries_, it);
                return it->tensors;
            }
    }
    auto record = store_.version(task_id, version);
    if (!record) return record.error();
    if (!*record) return common::make_error("no model version " + std::to_string(version));
    auto bytes = blobs_.read((*record)->blob_sha256, std::uint64_t{8} << 30);
    if (!bytes) return bytes.error();
    auto tensors = common::read_checkpoint(*bytes);
    if (!tensors) return tensors.error();
    auto shared = std::make_shared<const common::NamedTensors>(std::move(*tensors));
    std::lock_guard lock(mutex_);
    entries_.push_front({task_id, version, shared});
    if (entries_.size() > capacity_) entries_.pop_back();
    return shared;
}

}  // namespace tessera::server
