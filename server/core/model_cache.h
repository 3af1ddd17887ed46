// Recently used model versions, read from their checkpoint blobs: the validator needs the
// base model of each result. Thread-safe; returns shared immutable tensors.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "blob_store.h"
#include "delta_codec.h"
#include "store.h"

namespace tessera::server {

class ModelCache {
public:
    ModelCache(Store& store, const BlobStore& blobs, std::size_t capacity = 4)
        : store_(store), blobs_(blobs), capacity_(capacity) {}
    common::Result<std::shared_ptr<const common::NamedTensors>> get(const std::string& task_id, std::int64_t version);

private:
    struct Entry {
        std::string task_id;
        std::int64_t version;
        std::shared_ptr<const common::NamedTensors> tensors;
    };
    Store& store_;
    const BlobStore& blobs_;
    std::size_t capacity_;
    std::list<Entry> entries_;  // most recent first
    std::mutex mutex_;
};

// Total number of values in a model.
std::int64_t value_count(const common::NamedTensors& tensors);

// The largest delta file an honest volunteer sends for a model of `values` values: f32 top-k
// stores an index and a value per entry, plus room for the header.
inline std::int64_t max_delta_bytes_for(std::int64_t values) { return 2 * 4 * values + (1 << 20); }

}  // namespace tessera::server
