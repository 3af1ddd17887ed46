// Volunteer: a loss-check unit in place of training (docs/protocol.md, "Loss-check units").
#include <cmath>

#include "logger.h"
#include "result_upload.h"
#include "training/loss_check_runner.h"
#include "volunteer_loop.h"

namespace tessera::client::detail {

Volunteer::Next Volunteer::check() {
    const auto& unit = unit_->unit;
    if (!turn_for_training()) return give_back(Stop{StopReason::Requested, unit.wu_id + ": abandoned on request"});
    last_download_s_ = unit_->download_s;
    hide_transfers_ = false;
    auto output =
        run_loss_check(unit, {unit_->model, unit_->shards, unit_->check_result, unit_->held_out}, options_.threads);
    if (!output) {
        auto why = "the loss check " + unit.wu_id + " failed: " + output.message();
        if (options_.once) return give_back(Stop{StopReason::Error, why});
        give_back(Stop{});  // the server checks that result itself
        log_.error(why + "; gave the unit back");
        return Phase::AskForWork;
    }
    log_.info("checked",
              unit.wu_id + ": losses of another volunteer's result on " + std::to_string(output->metrics.samples) +
                  " samples in " + std::to_string(std::lround(output->metrics.seconds * 1000)) + " ms",
              {{"samples", output->metrics.samples}});
    auto body = common::pack_result_of(unit, api_->client_id(), output->report, output->metrics, output->device);
    if (auto stop = save_upload(body)) return *stop;
    unit_->upload.assign(body.begin(), body.end());
    unit_->metrics = output->metrics;
    unit_->device = output->device;
    return Phase::Upload;
}

}  // namespace tessera::client::detail
