// EventHub: one poller, many readers.
#include "event_hub.h"

#include <boost/json.hpp>

#include <stdexcept>

#include "io_thread.h"
#include "logger.h"
#include "worker_guard.h"

namespace tessera::server {
namespace {

constexpr int kChunkEvents = 100;

std::string sse_text(const EventRecord& e) {
    boost::json::object data{
        {"id", e.id}, {"at", e.at}, {"kind", e.kind}, {"detail", boost::json::parse(e.detail_json)}};
    return "id: " + std::to_string(e.id) + "\nevent: " + e.kind + "\ndata: " + boost::json::serialize(data) + "\n\n";
}

}  // namespace

EventHub::EventHub(HistoryStore& store, std::chrono::milliseconds period, std::size_t capacity)
    : store_(store), capacity_(capacity) {
    if (auto last = store_.last_event_id()) newest_ = *last;  // older events are read on demand
    if (period.count() <= 0) return;
    thread_ = std::thread([this, period] {
        std::unique_lock lock(mutex_);
        while (!stop_.wait_for(lock, period, [this] { return stopping_; })) {
            lock.unlock();
            common::run_guarded("event hub", [this] { refresh(); });
            lock.lock();
        }
    });
}

EventHub::~EventHub() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    stop_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void EventHub::refresh() {
    std::int64_t after = 0;
    {
        std::lock_guard lock(mutex_);
        after = newest_;
        ++store_reads_;
    }
    auto rows = store_.events_after(after, kChunkEvents * 10);
    if (!rows) {
        common::process_log().error("event_hub", "event hub: " + rows.message());
        return;
    }
    std::lock_guard lock(mutex_);
    for (auto& e : *rows) {
        if (e.id <= newest_) continue;  // another refresh got there first
        newest_ = e.id;
        recent_.push_back(std::move(e));
    }
    while (recent_.size() > capacity_) recent_.pop_front();
}

std::string EventHub::chunk_after(std::int64_t& after) {
    if (auto text = chunk_from_memory(after)) return *text;
    return chunk_from_store(after);
}

std::optional<std::string> EventHub::chunk_from_memory(std::int64_t& after) {
    std::lock_guard lock(mutex_);
    // Memory answers when it holds everything after `after`.
    bool in_memory = after >= newest_ || (!recent_.empty() && after >= recent_.front().id - 1);
    if (!in_memory) return std::nullopt;
    std::string text;
    int written = 0;
    for (const auto& e : recent_) {
        if (e.id <= after) continue;
        if (written++ == kChunkEvents) break;
        text += sse_text(e);
        after = e.id;
    }
    return text;
}

std::string EventHub::chunk_from_store(std::int64_t& after) {
    if (on_io_thread()) throw std::logic_error("the events table read on an I/O thread");
    {
        std::lock_guard lock(mutex_);
        ++store_reads_;
    }
    std::string text;
    auto rows = store_.events_after(after, kChunkEvents);
    if (!rows) return text;
    for (const auto& e : *rows) {
        text += sse_text(e);
        after = e.id;
    }
    return text;
}

std::uint64_t EventHub::store_reads() const {
    std::lock_guard lock(mutex_);
    return store_reads_;
}

}  // namespace tessera::server
