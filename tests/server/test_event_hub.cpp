// The event hub: many readers served from memory after one read of the store; a reader
// resuming from before memory is served from the store, never on an I/O thread; chunks are
// capped and ordered.
#include <doctest/doctest.h>

#include <thread>

#include "event_hub.h"
#include "store.h"
#include "io_thread.h"
#include "temp_dir.h"

using namespace tessera;
using namespace tessera::server;

namespace {

int events_in(const std::string& text) {
    int count = 0;
    for (auto at = text.find("id: "); at != std::string::npos; at = text.find("id: ", at + 1)) ++count;
    return count;
}

}  // namespace

TEST_CASE("the event hub reads the store once for every reader, and resumes old readers from it") {
    testing::TempDir dir;
    auto store = Store::open(dir / "server.db", true).value();
    REQUIRE(store->add_event("old", "{}", 1));
    EventHub hub(*store, std::chrono::milliseconds(0));  // no thread: refresh() by hand
    for (int i = 0; i < 150; ++i) REQUIRE(store->add_event("tick", "{\"i\": " + std::to_string(i) + "}", 2));
    hub.refresh();
    CHECK(hub.store_reads() == 1);

    std::int64_t newest = store->last_event_id().value();
    for (int reader = 0; reader < 20; ++reader) {
        std::int64_t after = newest - 150;  // just after "old": all 150 are in memory
        auto first = hub.chunk_after(after);
        CHECK(events_in(first) == 100);  // at most 100 a chunk, oldest first
        CHECK(first.find("event: tick\n") != std::string::npos);
        auto second = hub.chunk_after(after);
        CHECK(events_in(second) == 50);
        CHECK(after == newest);
        CHECK(hub.chunk_after(after).empty());
    }
    CHECK(hub.store_reads() == 1);  // twenty readers, one query

    std::int64_t from_start = 0;  // "old" was written before the hub started: the store has it
    auto resumed = hub.chunk_after(from_start);
    CHECK(resumed.find("event: old\n") != std::string::npos);
    CHECK(hub.store_reads() == 2);

    REQUIRE(store->add_event("late", "{}", 3));
    std::int64_t caught_up = newest;
    CHECK(hub.chunk_after(caught_up).empty());  // not refreshed yet
    hub.refresh();
    CHECK(hub.chunk_after(caught_up).find("event: late\n") != std::string::npos);
}

TEST_CASE("memory alone answers what it holds; the store is read only off the I/O threads") {
    testing::TempDir dir;
    auto store = Store::open(dir / "server.db", true).value();
    REQUIRE(store->add_event("old", "{}", 1));
    EventHub hub(*store, std::chrono::milliseconds(0));
    REQUIRE(store->add_event("new", "{}", 2));
    hub.refresh();
    auto reads = hub.store_reads();

    std::int64_t from_start = 0;
    CHECK_FALSE(hub.chunk_from_memory(from_start));  // "old" is only in the store
    CHECK(from_start == 0);
    CHECK(hub.store_reads() == reads);
    std::int64_t recent = store->last_event_id().value() - 1;
    auto in_memory = hub.chunk_from_memory(recent);
    REQUIRE(in_memory);
    CHECK(in_memory->find("event: new\n") != std::string::npos);

    bool refused = false;
    std::thread io_thread([&] {
        mark_io_thread();
        std::int64_t after = 0;
        try {
            hub.chunk_from_store(after);
        } catch (const std::logic_error&) {
            refused = true;
        }
    });
    io_thread.join();
    CHECK(refused);
    CHECK_FALSE(on_io_thread());  // the mark is the I/O thread's alone
    CHECK(hub.chunk_from_store(from_start).find("event: old\n") != std::string::npos);
}
