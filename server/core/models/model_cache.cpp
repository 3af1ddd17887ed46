// ModelCache: a small LRU of published models.
#include "model_cache.h"

namespace tessera::server {

std::int64_t value_count(const common::NamedTensors& tensors) {
    std::int64_t count = 0;
    for (const auto& t : tensors) count += static_cast<std::int64_t>(t.values.size());
    return count;
}

common::Result<std::shared_ptr<const common::NamedTensors>> ModelCache::get(const std::string& task_id,
                                                                            std::int64_t version) {
    // Else built from the newest cached model before it when its file is not stored.
    std::optional<PublishedModels::Start> start;
    std::shared_ptr<const common::NamedTensors> start_model;
    {
        std::lock_guard lock(mutex_);
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if (it->task_id != task_id || it->version > version) continue;
            if (it->version == version) {
                entries_.splice(entries_.begin(), entries_, it);
                return it->tensors;
            }
            if (!start || it->version > start->version) {
                start_model = it->tensors;
                start = PublishedModels::Start{it->version, start_model.get()};
            }
        }
    }
    auto tensors = published_.model(task_id, version, start);
    if (!tensors) return tensors.error();
    return add(task_id, version, std::move(*tensors));
}

common::Result<std::shared_ptr<const common::NamedTensors>> ModelCache::unit_base(const common::WorkUnit& unit) {
    if (unit.patches.size() == 1) {  // a catch-up carries one patch (a chain may too)
        auto own = published_.reconstruction(unit.task_id, unit.base_version, unit.model_blob.sha256);
        if (!own) return own.error();
        if (*own) return std::make_shared<const common::NamedTensors>(std::move(**own));
    }
    return get(unit.task_id, unit.base_version);
}

void ModelCache::put(const std::string& task_id, std::int64_t version, common::NamedTensors model) {
    add(task_id, version, std::move(model));
}

std::shared_ptr<const common::NamedTensors> ModelCache::add(const std::string& task_id, std::int64_t version,
                                                            common::NamedTensors model) {
    auto shared = std::make_shared<const common::NamedTensors>(std::move(model));
    std::lock_guard lock(mutex_);
    entries_.remove_if([&](const Entry& e) { return e.task_id == task_id && e.version == version; });
    entries_.push_front({task_id, version, shared});
    if (entries_.size() > capacity_) entries_.pop_back();
    return shared;
}

}  // namespace tessera::server
