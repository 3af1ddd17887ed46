// Transitioner: deadlines and lonely replicas, task by task.
#include "transitioner.h"

#include "liveness.h"

namespace tessera::server {

common::Status Transitioner::tick_task(const TaskRecord& record, std::int64_t now, TickReport& report) {
    auto task = task_view(record);
    if (!task) return task.error();
    const auto& config = task->config;
    auto ended = results_.expire_overdue(record.id, now, config.max_failures);
    if (!ended) return ended.error();
    for (const auto& e : *ended) {
        ++report.timed_out;
        if (e.work_unit_retired) ++report.retired;
    }
    ResultClaim claim{holder_, now + kValidationClaimS};
    auto lonely = results_.claim_lonely_validated(record.id, now, config.deadline_s, claim);
    if (!lonely) return lonely.error();
    for (const auto& a : *lonely) {
        if (auto status = validator_.accept_alone(a); !status) return status.error();
        ++report.accepted_alone;
    }
    return note_liveness(record, now, report);
}

common::Status Transitioner::note_liveness(const TaskRecord& record, std::int64_t now, TickReport& report) {
    if (record.state == TaskState::Finished) {
        stalled_.erase(record.id);
        return {};
    }
    auto liveness = task_liveness(results_, record.id, now);
    if (!liveness) return liveness.error();
    bool known = stalled_.count(record.id) > 0;
    if (liveness->stalled && !known) {
        stalled_.insert(record.id);
        report.stalls.push_back(describe_stall(record.id, *liveness));
    } else if (!liveness->stalled && known) {
        stalled_.erase(record.id);
        report.merging_again.push_back(record.id);
    }
    return {};
}

common::Result<TickReport> Transitioner::tick() {
    TickReport report;
    auto tasks = tasks_.tasks();
    if (!tasks) return tasks.error();
    auto now = clock_();
    // Every task, finished ones included: units issued before a task finished still time out.
    // One task's failure (a config no longer readable, a result that cannot be accepted) is
    // reported; the other tasks' deadlines still pass.
    for (const auto& record : *tasks)
        if (auto status = tick_task(record, now, report); !status)
            report.task_errors.push_back("task " + record.id + ": " + status.message());
    return report;
}

}  // namespace tessera::server
