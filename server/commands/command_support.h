// Small helpers shared by the subcommands: error exit, opening the state directory's store.
#pragma once

#include <iostream>
#include <string>

#include "state_dir.h"
#include "store.h"

namespace tessera::server {

inline int fail(const std::string& command, const std::string& message) {
    std::cerr << "tessera-server " << command << ": " << message << "\n";
    return 1;
}

}  // namespace tessera::server
