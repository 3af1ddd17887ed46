// Recently used published model versions, read from their checkpoint blobs or built in memory
// from a cached one and the patches since (PublishedModels): the validator needs the base
// model of each result. Thread-safe; returns shared immutable tensors.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "bytes.h"
#include "delta_codec.h"
#include "protocol.h"
#include "published_models.h"

namespace tessera::server {

class ModelCache {
public:
    explicit ModelCache(PublishedModels& published, std::size_t capacity = 4)
        : published_(published), capacity_(capacity) {}
    common::Result<std::shared_ptr<const common::NamedTensors>> get(const std::string& task_id, std::int64_t version);
    // The model a unit's volunteer trained from: the catch-up reconstruction it names, when it
    // names one that is still stored (read each time: it is one volunteer's), else its base
    // version's published model.
    common::Result<std::shared_ptr<const common::NamedTensors>> unit_base(const common::WorkUnit& unit);
    // The published model of a version just committed, as the aggregator holds it: the next
    // results' base, cached before any of them asks for it.
    void put(const std::string& task_id, std::int64_t version, common::NamedTensors model);

private:
    // `model` cached as the most recent entry (replacing the version's entry, if any).
    std::shared_ptr<const common::NamedTensors> add(const std::string& task_id, std::int64_t version,
                                                    common::NamedTensors model);
    struct Entry {
        std::string task_id;
        std::int64_t version;
        std::shared_ptr<const common::NamedTensors> tensors;
    };
    PublishedModels& published_;
    std::size_t capacity_;
    std::list<Entry> entries_;  // most recent first
    std::mutex mutex_;
};

// Total number of values in a model.
std::int64_t value_count(const common::NamedTensors& tensors);

// The largest delta file an honest volunteer sends for a model of `values` values: f32 top-k
// stores an index and a value per entry, plus room for the header.
inline std::int64_t max_delta_bytes_for(std::int64_t values) { return 2 * 4 * values + common::kMiB; }

}  // namespace tessera::server
