// One reader of the events table for every server-sent-events client. The hub reads new
// events from the store once per period (on its own thread) and keeps the newest in memory;
// each SSE session takes its chunks from memory, so a hundred open dashboards cost one query
// per period, not a hundred. A client resuming from before what memory holds is served from
// the store, on the handler pool: never on an I/O thread. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "store_history.h"

namespace tessera::server {

class EventHub {
public:
    // `period` 0: no thread (tests call refresh()).
    EventHub(HistoryStore& store, std::chrono::milliseconds period, std::size_t capacity = 1000);
    ~EventHub();
    EventHub(const EventHub&) = delete;
    EventHub& operator=(const EventHub&) = delete;

    // Reads the events written since the last refresh into memory.
    void refresh();
    // The SSE text ("id: N\nevent: KIND\ndata: JSON\n\n" each) of up to 100 events after
    // `after`, which moves to the last id written; empty when there is nothing new.
    std::string chunk_after(std::int64_t& after);
    // The same from memory alone (an I/O thread may call it): nothing when memory does not
    // hold everything after `after`, and chunk_from_store must answer, off the I/O threads.
    std::optional<std::string> chunk_from_memory(std::int64_t& after);
    // The same from the store; refuses to run on an I/O thread (io_thread.h).
    std::string chunk_from_store(std::int64_t& after);
    // How many times the store was queried (refreshes and resumes from before memory).
    std::uint64_t store_reads() const;

private:
    HistoryStore& store_;
    std::size_t capacity_;
    mutable std::mutex mutex_;
    std::condition_variable stop_;
    bool stopping_ = false;
    std::deque<EventRecord> recent_;  // ascending ids, contiguous up to newest_
    std::int64_t newest_ = 0;         // every event up to this id has been read
    std::uint64_t store_reads_ = 0;
    std::thread thread_;
};

}  // namespace tessera::server
