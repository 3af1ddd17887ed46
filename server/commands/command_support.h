// Small helpers shared by the subcommands: error exit, the state directory and its database.
#pragma once

#include <cxxopts.hpp>

#include <iostream>
#include <string>

#include "state_dir.h"
#include "store.h"

namespace tessera::server {

inline int fail(const std::string& command, const std::string& message) {
    std::cerr << "tessera-server " << command << ": " << message << "\n";
    return 1;
}

// --db, which every command takes: the database when it is not the state directory's own.
inline void add_database_option(cxxopts::Options& options) {
    options.add_options()("db", "database URL: sqlite:PATH or postgresql://USER@HOST:PORT/DB (default: DIR/server.db)",
                          cxxopts::value<std::string>());
}
// The state directory of --state with the database of --db.
inline StateDir state_dir_of(const cxxopts::ParseResult& args) {
    return StateDir(args["state"].as<std::string>(), args.count("db") ? args["db"].as<std::string>() : "");
}

}  // namespace tessera::server
