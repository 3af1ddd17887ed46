// Sharing one machine between several servers, one work unit at a time (from asking for it to
// its verdict), by the volunteer's
// shares (BOINC's resource shares): the turn goes to the waiting server that has worked least
// for its share. A server that is not waiting (it had no work and sleeps until it may ask
// again, or cannot be reached) is passed over, so the others fall back to work for it; one
// that sat out saves up at most `max_saved` of turns, so its return does not starve the rest.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

namespace tessera::client {

class TurnTable {
public:
    explicit TurnTable(std::vector<double> shares, std::chrono::seconds max_saved = std::chrono::hours(1));

    // Waits until server `index` may ask for work; false if `stopping()` turned true first.
    bool take(std::size_t index, const std::function<bool()>& stopping);
    // Ends `index`'s turn, counting `worked` against its share.
    void end(std::size_t index, std::chrono::duration<double> worked);
    // Ends `index`'s turn and waits for its next one, in one step: it is among the waiting when
    // the next turn is given, so a server that wants another unit at once competes fairly.
    bool renew(std::size_t index, std::chrono::duration<double> worked, const std::function<bool()>& stopping);

    std::vector<double> worked_seconds() const;
    std::size_t waiting() const;  // how many servers wait for a turn now

    // A turn held from take() to destruction (or through renewals), the time counted as worked.
    class Turn {
    public:
        Turn(TurnTable& table, std::size_t index)
            : table_(table), index_(index), started_(std::chrono::steady_clock::now()) {}
        ~Turn() {
            if (held_) table_.end(index_, std::chrono::steady_clock::now() - started_);
        }
        Turn(const Turn&) = delete;
        Turn& operator=(const Turn&) = delete;
        // Time within the turn that is not to count as worked (a pause while training).
        void leave_out(std::chrono::steady_clock::duration waited) { started_ += waited; }
        // renew() for this turn; false: it has ended (a stop request came first).
        bool renew(const std::function<bool()>& stopping) {
            held_ = table_.renew(index_, std::chrono::steady_clock::now() - started_, stopping);
            started_ = std::chrono::steady_clock::now();
            return held_;
        }

    private:
        TurnTable& table_;
        std::size_t index_;
        std::chrono::steady_clock::time_point started_;
        bool held_ = true;
    };

private:
    double work_per_share(std::size_t index) const { return worked_[index] / shares_[index]; }
    std::optional<std::size_t> next_in_line() const;
    bool wait_for_turn(std::unique_lock<std::mutex>& lock, std::size_t index, const std::function<bool()>& stopping);

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<double> shares_;
    std::vector<double> worked_;  // seconds
    std::vector<bool> waiting_;
    std::optional<std::size_t> holder_;
    double max_saved_s_;
};

}  // namespace tessera::client
