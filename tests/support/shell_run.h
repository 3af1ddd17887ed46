// A command run through the shell with its stdout and stderr captured: what the data tool's
// tests check of `tessera-data` and of Python scripts.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tessera::testing {

struct Run {
    int status;  // the exit status; -1 when it did not exit normally
    std::string output;
};

inline Run run_command(const std::string& command) {
    FILE* pipe = popen((command + " 2>&1").c_str(), "r");
    std::string output;
    char buffer[4096];
    while (auto n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
    int status = pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// `tessera-data` (the TESSERA_DATA environment variable) with these arguments.
inline Run run_tool(const std::string& args) { return run_command(std::string(std::getenv("TESSERA_DATA")) + " " + args); }

}  // namespace tessera::testing
