// A mutex per key, made when first locked and dropped when its last user lets go: work on
// one key runs one at a time, work on different keys concurrently (the validator settles each
// replicated unit alone, and many units at once). Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>

namespace tessera::server {

class KeyedMutex {
public:
    // Held until destroyed.
    class Lock {
    public:
        Lock(KeyedMutex& owner, std::string key);
        ~Lock();
        Lock(const Lock&) = delete;
        Lock& operator=(const Lock&) = delete;

    private:
        KeyedMutex& owner_;
        std::string key_;
    };

    Lock lock(std::string key) { return Lock(*this, std::move(key)); }

private:
    struct Entry {
        std::mutex mutex;
        int users = 0;  // holding or waiting
    };
    std::mutex mutex_;                      // guards entries_ and the counts
    std::map<std::string, Entry> entries_;  // a map's nodes stay where they are
};

inline KeyedMutex::Lock::Lock(KeyedMutex& owner, std::string key) : owner_(owner), key_(std::move(key)) {
    Entry* entry = nullptr;
    {
        std::lock_guard lock(owner_.mutex_);
        entry = &owner_.entries_[key_];
        ++entry->users;
    }
    entry->mutex.lock();
}

inline KeyedMutex::Lock::~Lock() {
    std::lock_guard lock(owner_.mutex_);
    auto found = owner_.entries_.find(key_);
    found->second.mutex.unlock();
    if (--found->second.users == 0) owner_.entries_.erase(found);
}

}  // namespace tessera::server
