// `tessera-server backup` and `tessera-server restore`: a state directory into a new folder
// while the server runs, and a backup into a new state directory (docs/operations.md, "Backups").
#include <cxxopts.hpp>

#include "bytes.h"
#include "command_line.h"
#include "command_support.h"
#include "state_backup.h"

namespace tessera::server {
namespace {

void print_report(const std::string& what, const BackupReport& report) {
    std::cout << what << ": " << report.tasks << " task(s), the database, the server key and operator token, "
              << report.files << " files (" << report.bytes / common::kMiB
              << " MiB); every file a restart needs is there\n";
}

}  // namespace

int backup_command(int argc, char** argv) {
    cxxopts::Options options("tessera-server backup", "Back a state directory up into a new folder (the server may run)");
    options.add_options()("state", "state directory", cxxopts::value<std::string>())(
        "to", "the backup folder: new, or empty", cxxopts::value<std::string>())(
        "pg-bin", "with a PostgreSQL database: the folder of pg_dump (default: the PATH)",
        cxxopts::value<std::string>()->default_value(""));
    add_database_option(options);
    auto parsed = common::parse_command_line(options, argc, argv);
    if (!parsed) return parsed.exit_code;
    const auto& args = *parsed;
    if (!args.count("state") || !args.count("to")) return fail("backup", "needs --state DIR and --to FOLDER");
    auto report = back_up_state(state_dir_of(args), args["to"].as<std::string>(), {args["pg-bin"].as<std::string>()});
    if (!report) return fail("backup", report.message());
    print_report("backed up into " + args["to"].as<std::string>(), *report);
    return 0;
}

int restore_command(int argc, char** argv) {
    cxxopts::Options options("tessera-server restore", "Make a new state directory from a backup");
    options.add_options()("from", "the backup folder", cxxopts::value<std::string>())(
        "state", "the new state directory: new, or empty", cxxopts::value<std::string>())(
        "pg-bin", "a PostgreSQL backup: the folder of pg_restore (default: the PATH)",
        cxxopts::value<std::string>()->default_value(""));
    add_database_option(options);  // a PostgreSQL backup: the empty database to restore it into
    auto parsed = common::parse_command_line(options, argc, argv);
    if (!parsed) return parsed.exit_code;
    const auto& args = *parsed;
    if (!args.count("from") || !args.count("state")) return fail("restore", "needs --from FOLDER and --state DIR");
    auto report = restore_state(args["from"].as<std::string>(), state_dir_of(args), {args["pg-bin"].as<std::string>()});
    if (!report) return fail("restore", report.message());
    print_report("restored into " + args["state"].as<std::string>(), *report);
    return 0;
}

}  // namespace tessera::server
