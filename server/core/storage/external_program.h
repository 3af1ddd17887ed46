// Runs another program (pg_dump, pg_restore) to its end, its standard error kept for the
// message when it fails. The arguments are never part of a message: they may hold a database
// URL with its password.
#pragma once

#include <string>
#include <vector>

#include "result.h"

namespace tessera::server {

// Runs argv[0] (a path, or a name looked up on PATH) with `argv`; an error names `what`, the
// exit status and the last lines the program wrote to standard error.
common::Status run_program(const std::vector<std::string>& argv, const std::string& what);

}  // namespace tessera::server
