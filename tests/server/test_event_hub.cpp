// The event hub: many readers served from memory after one read of the store; a reader
// resuming from before memory is served from the store; chunks are capped and ordered.
#include <doctest/doctest.h>

#include "event_hub.h"
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
