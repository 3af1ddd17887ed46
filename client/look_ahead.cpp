// LookAhead: ask, verify, keep, download, on a thread; give back what is not taken.
#include "look_ahead.h"

#include <boost/json.hpp>

#include "signed_envelope.h"

namespace tessera::client {
namespace {

// `cancelled` or the caller's own reason to stop.
std::function<bool()> or_cancelled(const std::atomic<bool>& cancelled, std::function<bool()> other) {
    return [&cancelled, other = std::move(other)] { return cancelled.load() || (other && other()); };
}

}  // namespace

LookAhead::LookAhead(Context context, common::WorkRequest request)
    : http_([&] {
          auto http = context.http;
          http.interrupted = or_cancelled(cancelled_, http.interrupted);
          return http;
      }()),
      api_(context.api.through(http_)), context_([&] {
          context.download.give_up = or_cancelled(cancelled_, context.download.give_up);  // before the thread reads it
          return std::move(context);
      }()),
      thread_([this, request = std::move(request)] { run(request); }) {}

LookAhead::~LookAhead() {
    cancelled_ = true;
    join();
    if (outcome_.unit) give_back(outcome_.unit->unit.wu_id, "not trained: the volunteer stopped first");
}

void LookAhead::join() {
    if (!thread_.joinable()) return;
    thread_.join();
    if (failed_) give_back(failed_->first, failed_->second);
    failed_.reset();
}

std::vector<std::string> LookAhead::wait() {
    join();
    return outcome_.unit ? blobs_of(outcome_.unit->unit) : std::vector<std::string>();
}

LookAhead::Outcome LookAhead::take() {
    wait();
    return std::exchange(outcome_, {});
}

void LookAhead::run(const common::WorkRequest& request) {
    const auto& log = context_.log;
    auto give_up = context_.download.give_up;
    auto response = with_retries([&] { return api_.request_work(request); }, give_up, log, "asking for the next unit",
                                 context_.download.retry);
    if (!response) {
        if (response.error().kind != FailureKind::Stopped)
            log.error("look-ahead: asking for the next unit failed (" + response.message() +
                      "); asking after this one");
        return;
    }
    if (!response->has_work) return;
    auto unit = context_.open(response->work_unit);
    if (!unit) {
        auto parsed = common::parse_message<common::WorkUnit>(response->work_unit.payload);
        if (parsed) failed_.emplace(parsed->wu_id, "its signature did not verify");
        outcome_.stop = Stop{StopReason::Untrusted, "refused a work unit: " + unit.message()};
        return;
    }
    UnitInHand hand;
    hand.unit = std::move(*unit);
    hand.envelope_json = boost::json::serialize(common::envelope_to_json(response->work_unit));
    if (auto saved = context_.state.save_next({hand.envelope_json, hand.unit.wu_id, "ahead"}); !saved) {
        failed_.emplace(hand.unit.wu_id, saved.message());
        return;
    }
    UnitDownloader downloader(context_.cache, http_, log, context_.download);
    if (auto downloaded = downloader.download(hand); !downloaded) {
        failed_.emplace(hand.unit.wu_id, "its download failed (" + downloaded.message() + ")");
        return;
    }
    log.info("look_ahead",
             "work unit " + hand.unit.wu_id + " (model v" + std::to_string(hand.unit.base_version) +
                 ") fetched while training",
             {{"wu_id", hand.unit.wu_id}, {"download_s", hand.download_s}});
    outcome_.unit = std::move(hand);
}

void LookAhead::give_back(const std::string& wu_id, const std::string& why) {
    auto abandoned = context_.api.abandon(wu_id);
    context_.log.info(
        "abandoned",
        wu_id + ": fetched ahead, given back: " + why + (abandoned ? "" : " (" + abandoned.message() + ")"),
        {{"wu_id", wu_id}});
    context_.state.clear_next();
}

}  // namespace tessera::client
