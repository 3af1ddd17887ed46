#include "external_program.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace tessera::server {
namespace {

constexpr std::size_t kKeptStderr = 2000;  // the tail of standard error a failure reports

std::string tail_of(const std::string& text) {
    auto start = text.size() > kKeptStderr ? text.size() - kKeptStderr : 0;
    auto tail = text.substr(start);
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
    return tail;
}

}  // namespace

common::Status run_program(const std::vector<std::string>& argv, const std::string& what) {
    if (argv.empty()) return common::make_error(what + ": no program");
    int err_pipe[2];
    if (::pipe(err_pipe) != 0) return common::make_error(what + ": pipe: " + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, err_pipe[1]);
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    int spawned = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(err_pipe[1]);
    if (spawned != 0) {
        ::close(err_pipe[0]);
        return common::make_error(what + ": cannot run " + argv[0] + ": " + std::strerror(spawned));
    }
    std::string err;
    char buffer[4096];
    for (ssize_t n; (n = ::read(err_pipe[0], buffer, sizeof buffer)) != 0;) {
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        err.append(buffer, static_cast<std::size_t>(n));
        if (err.size() > 4 * kKeptStderr) err.erase(0, err.size() - kKeptStderr);
    }
    ::close(err_pipe[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
    std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                        : "signal " + std::to_string(WTERMSIG(status));
    // posix_spawnp reports a missing program as exit status 127 from the child.
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && err.empty())
        return common::make_error(what + ": cannot run " + argv[0] + " (not found)");
    auto tail = tail_of(err);
    return common::make_error(what + " failed (" + how + ")" + (tail.empty() ? "" : ": " + tail));
}

}  // namespace tessera::server
