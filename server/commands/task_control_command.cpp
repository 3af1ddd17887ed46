// `tessera-server task list|pause|resume|finish|weight`: the operator's controls over the tasks
// of a state directory's database, while the server runs or not (running servers notice
// within a second: docs/operations.md, "Several tasks").
#include <cxxopts.hpp>

#include <cstdio>

#include "command_line.h"
#include "clock.h"
#include "command_support.h"
#include "task_lookup.h"

namespace tessera::server {
namespace {

int list_tasks(Store& store) {
    auto tasks = store.tasks();
    if (!tasks) return fail("task list", tasks.message());
    std::printf("%-32s %-9s %8s %8s\n", "task", "state", "weight", "version");
    for (const auto& t : *tasks)
        std::printf("%-32s %-9s %8.2f %8lld\n", t.id.c_str(), std::string(task_state_name(t.state)).c_str(), t.weight,
                    static_cast<long long>(t.version));
    return 0;
}

}  // namespace

int task_control_command(int argc, char** argv) {
    cxxopts::Options options("tessera-server task", "Pause, resume, finish or weigh a task; list the tasks");
    options.add_options()("action", "list, pause, resume, finish or weight", cxxopts::value<std::string>())(
        "id", "the task", cxxopts::value<std::string>())("value", "weight: the task's share of work (>= 0)",
                                                         cxxopts::value<double>())("state", "state directory",
                                                                                   cxxopts::value<std::string>());
    options.parse_positional({"action", "id", "value"});
    options.positional_help("ACTION [ID [WEIGHT]]");
    add_database_option(options);
    auto parsed = common::parse_command_line(options, argc, argv);
    if (!parsed) return parsed.exit_code;
    const auto& args = *parsed;
    auto action = args["action"].as<std::string>();
    if (!args.count("state")) return fail("task " + action, "needs --state DIR");
    auto store = Store::connect(state_dir_of(args).database_url(), false);
    if (!store) return fail("task " + action, store.message());
    if (action == "list") return list_tasks(**store);
    if (!args.count("id")) return fail("task " + action, "needs the task's id");
    auto id = args["id"].as<std::string>();
    auto task = (*store)->task(id);
    if (!task) return fail("task " + action, task.message());
    if (!*task) return fail("task " + action, "no task '" + id + "'");
    if (action == "weight") {
        if (!args.count("value") || !(args["value"].as<double>() >= 0))
            return fail("task weight", "needs a weight >= 0 after the id (0: no new units)");
        if (auto status = (*store)->set_task_weight(id, args["value"].as<double>()); !status)
            return fail("task weight", status.message());
        std::cout << "task " << id << ": weight " << args["value"].as<double>() << "\n";
        return 0;
    }
    auto state = state_for_action(action);
    if (!state) return fail("task", "unknown action '" + action + "' (create, list, pause, resume, finish, weight)");
    if ((*task)->state == TaskState::Finished)
        return fail("task " + action, "task '" + id + "' is finished already");
    if (auto status = (*store)->set_task_state(id, *state, system_clock()()); !status)
        return fail("task " + action, status.message());
    std::cout << "task " << id << ": " << task_state_name(*state) << "\n";
    return 0;
}

}  // namespace tessera::server
