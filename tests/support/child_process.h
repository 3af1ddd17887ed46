// Runs a program as a child process with its stdout on a pipe, for integration tests that
// start the real binaries (and kill them).
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tessera::testing {

class ChildProcess {
public:
    explicit ChildProcess(const std::vector<std::string>& argv) {
        int pipe_fds[2];
        if (::pipe(pipe_fds) != 0) throw std::runtime_error("pipe failed");
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
        posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
        // Only stdout holds the pipe: a daemon the child leaves behind must not keep it open.
        posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        int rc = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        ::close(pipe_fds[1]);
        if (rc != 0) {
            ::close(pipe_fds[0]);
            throw std::runtime_error("cannot start " + argv[0]);
        }
        out_ = pipe_fds[0];
    }
    ~ChildProcess() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            wait();
        }
        if (out_ >= 0) ::close(out_);
    }
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    // The next line of the child's stdout ("" at end of file).
    std::string read_line() {
        std::string line;
        char c = 0;
        while (::read(out_, &c, 1) == 1) {
            if (c == '\n') return line;
            line.push_back(c);
        }
        return line;
    }

    void signal(int number) { ::kill(pid_, number); }
    pid_t pid() const { return pid_; }  // -1 once waited for

    // Waits for the child; returns its exit status (128 + signal when killed).
    int wait() {
        int status = 0;
        if (pid_ <= 0) return exit_status_;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_status_;
    }

    // Whether the child has ended (it is reaped then, and wait() returns its status).
    bool exited() {
        if (pid_ <= 0) return true;
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
        pid_ = -1;
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return true;
    }

private:
    pid_t pid_ = -1;
    int out_ = -1;
    int exit_status_ = -1;
};

}  // namespace tessera::testing
