// tessera-server: the operator's program (docs/operations.md).
#include <cxxopts.hpp>

#include <cstring>
#include <iostream>
#include <string_view>

#include "commands/commands.h"
#include "tessera_version.h"

namespace {

constexpr const char* kUsage =
    "usage: tessera-server COMMAND [options]   (COMMAND --help for its options)\n"
    "  init --state DIR                      create the database, server key and operator token\n"
    "  task create --state DIR --data DIR    create a training task from a tessera-data dataset\n"
    "  task list|pause|resume|finish|weight  the tasks, and the operator's controls over each\n"
    "  run --state DIR --listen ADDR:PORT    serve the API, blobs and work until SIGINT/SIGTERM\n"
    "  export --state DIR --out FILE         write a model version as safetensors\n"
    "  status --state DIR                    print the run's progress\n"
    "  backup --state DIR --to FOLDER        back the state up into a new folder (the server may run)\n"
    "  restore --from FOLDER --state DIR     make a new state directory from a backup (--db: into PostgreSQL)\n"
    "  --version                             print the version\n";

}  // namespace

int main(int argc, char** argv) {
    using namespace tessera::server;
    if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
        std::cout << kUsage;
        return argc < 2 ? 2 : 0;
    }
    std::string_view command = argv[1];
    if (command == "--version") {
        std::cout << "tessera-server " << tessera::common::kVersion << "\n";
        return 0;
    }
    try {
        if (command == "init") return init_command(argc - 1, argv + 1);
        if (command == "task") return task_command(argc - 1, argv + 1);
        if (command == "run") return run_command(argc - 1, argv + 1);
        if (command == "export") return export_command(argc - 1, argv + 1);
        if (command == "status") return status_command(argc - 1, argv + 1);
        if (command == "backup") return backup_command(argc - 1, argv + 1);
        if (command == "restore") return restore_command(argc - 1, argv + 1);
    } catch (const cxxopts::exceptions::exception& error) {
        std::cerr << "tessera-server " << command << ": " << error.what() << "\n";
        return 2;
    }
    std::cerr << "tessera-server: unknown command '" << command << "'\n" << kUsage;
    return 2;
}
