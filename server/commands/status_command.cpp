// `tessera-server status`: every task's progress from the database, and the volunteers' (works
// while the server runs).
#include <cxxopts.hpp>

#include <iomanip>

#include "command_line.h"
#include "command_support.h"
#include "task_lookup.h"

namespace tessera::server {

int status_command(int argc, char** argv) {
    cxxopts::Options options("tessera-server status", "Print the run's progress");
    options.add_options()("state", "state directory", cxxopts::value<std::string>());
    add_database_option(options);
    auto parsed = common::parse_command_line(options, argc, argv);
    if (!parsed) return parsed.exit_code;
    const auto& args = *parsed;
    if (!args.count("state")) return fail("status", "needs --state DIR");
    StateDir state = state_dir_of(args);
    auto store = Store::connect(state.database_url(), false);
    if (!store) return fail("status", store.message());
    auto tasks = (*store)->tasks();
    if (!tasks) return fail("status", tasks.message());
    if (tasks->empty()) std::cout << "no task (create one with `tessera-server task create`)\n";
    for (const auto& record : *tasks) {
        auto t = task_view(record);
        if (!t) return fail("status", t.message());
        std::cout << "task " << record.id << " (" << task_state_name(record.state) << ", weight " << record.weight
                  << "): model " << t->config.model << ", policy " << policy_name(t->config.merge.kind) << ", version "
                  << record.version;
        auto versions = (*store)->versions(record.id);
        if (!versions) return fail("status", versions.message());
        for (auto it = versions->rbegin(); it != versions->rend(); ++it)
            if (it->validation_loss) {
                std::cout << "; validation loss " << std::setprecision(5) << *it->validation_loss << " at version "
                          << it->version;
                if (it->validation_accuracy) std::cout << ", accuracy " << *it->validation_accuracy;
                break;
            }
        std::cout << "\n";
    }
    auto counts = (*store)->counts(0);
    if (!counts) return fail("status", counts.message());
    std::cout << "work units:";
    for (const auto& [name, count] : counts->assignments) std::cout << " " << name << "=" << count;
    std::cout << "\nvolunteers: " << counts->clients << ", rejections: " << counts->rejections << "\n";
    auto clients = (*store)->clients();
    if (!clients) return fail("status", clients.message());
    for (std::size_t i = 0; i < clients->size() && i < 10; ++i) {
        const auto& c = (*clients)[i];
        std::cout << "  " << std::left << std::setw(16) << c.id << std::setw(24) << c.name << " credit " << c.credit
                  << ", accepted " << c.accepted << ", rejected " << c.rejected << (c.banned ? " (banned)" : "")
                  << "\n";
    }
    return 0;
}

}  // namespace tessera::server
