// The doorbell of accepted results (core/threads/doorbell.h): rings are counted, a ring wakes
// every waiter, a waiter that looked away returns at once, and a stop wakes waiters unrung.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "doorbell.h"

using namespace tessera::server;
using namespace std::chrono_literals;

TEST_CASE("a ring wakes every waiter; rings missed while looking away end the next wait at once") {
    Doorbell bell;
    std::atomic<bool> stop{false};
    CHECK(bell.rings() == 0);
    auto seen = bell.rings();
    std::atomic<int> woken{0};
    std::vector<std::thread> waiters;
    for (int i = 0; i < 3; ++i)
        waiters.emplace_back([&] {
            bell.wait(seen, 600s, stop);
            ++woken;
        });
    std::this_thread::sleep_for(50ms);
    CHECK(woken.load() == 0);  // nothing rang
    bell.ring();
    for (auto& waiter : waiters) waiter.join();
    CHECK(woken.load() == 3);
    CHECK(bell.rings() == 1);

    bell.ring();  // while nobody waits
    auto started = std::chrono::steady_clock::now();
    bell.wait(seen, 600s, stop);  // it was rung since `seen`
    CHECK(std::chrono::steady_clock::now() - started < 60s);
}

TEST_CASE("a wait ends at its timeout unrung, and at once when its stop is set and the bell woken") {
    Doorbell bell;
    std::atomic<bool> stop{false};
    auto started = std::chrono::steady_clock::now();
    bell.wait(bell.rings(), 30ms, stop);
    CHECK(std::chrono::steady_clock::now() - started >= 30ms);

    std::thread waiter([&] { bell.wait(bell.rings(), 600s, stop); });
    std::this_thread::sleep_for(50ms);
    stop = true;
    bell.wake_all();
    waiter.join();  // would hang for ten minutes without the wake
    CHECK(bell.rings() == 0);
}
