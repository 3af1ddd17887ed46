// The turn table: who waits, who worked least for its share, and the cap on saved-up turns.
#include "turn_table.h"

#include <algorithm>
#include <stdexcept>

#include "retry.h"

namespace tessera::client {

TurnTable::TurnTable(std::vector<double> shares, std::chrono::seconds max_saved)
    : shares_(std::move(shares)), worked_(shares_.size(), 0.0), waiting_(shares_.size(), false),
      max_saved_s_(static_cast<double>(max_saved.count())) {
    for (double share : shares_)
        if (!(share > 0)) throw std::invalid_argument("every server's share must be above 0");
}

std::optional<std::size_t> TurnTable::next_in_line() const {
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < shares_.size(); ++i)
        if (waiting_[i] && (!best || work_per_share(i) < work_per_share(*best))) best = i;
    return best;
}

bool TurnTable::take(std::size_t index, const std::function<bool()>& stopping) {
    std::unique_lock lock(mutex_);
    return wait_for_turn(lock, index, stopping);
}

bool TurnTable::renew(std::size_t index, std::chrono::duration<double> worked,
                      const std::function<bool()>& stopping) {
    std::unique_lock lock(mutex_);
    worked_[index] += worked.count();
    if (holder_ == index) holder_.reset();
    wake_.notify_all();
    return wait_for_turn(lock, index, stopping);
}

bool TurnTable::wait_for_turn(std::unique_lock<std::mutex>& lock, std::size_t index,
                              const std::function<bool()>& stopping) {
    waiting_[index] = true;
    for (;;) {
        if (stopping && stopping()) {
            waiting_[index] = false;
            wake_.notify_all();  // the next in line may be someone else now
            return false;
        }
        if (!holder_ && next_in_line() == index) break;
        wake_.wait_for(lock, kStopCheckStep);  // wakes on end(), or to look at stopping()
    }
    waiting_[index] = false;
    holder_ = index;
    double most = 0;
    for (std::size_t i = 0; i < shares_.size(); ++i) most = std::max(most, work_per_share(i));
    worked_[index] = std::max(worked_[index], most * shares_[index] - max_saved_s_);  // at most max_saved behind
    return true;
}

void TurnTable::end(std::size_t index, std::chrono::duration<double> worked) {
    {
        std::lock_guard lock(mutex_);
        worked_[index] += worked.count();
        if (holder_ == index) holder_.reset();
    }
    wake_.notify_all();
}

std::size_t TurnTable::waiting() const {
    std::lock_guard lock(mutex_);
    return static_cast<std::size_t>(std::count(waiting_.begin(), waiting_.end(), true));
}

std::vector<double> TurnTable::worked_seconds() const {
    std::lock_guard lock(mutex_);
    return worked_;
}

}  // namespace tessera::client
