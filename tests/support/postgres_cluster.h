// A private PostgreSQL cluster for one test process: initdb in a temporary directory, the
// server on a free loopback port (pg_ctl), stopped and removed at the end. Nothing needs to
// run beforehand; the binaries come from TESSERA_PG_BIN (meson finds Debian's
// /usr/lib/postgresql/15/bin). PostgreSQL refuses to run as root, so under root the cluster
// belongs to the `postgres` user the Debian package creates.
#pragma once

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "child_process.h"
#include "free_port.h"
#include "temp_dir.h"

namespace tessera::testing {

class PostgresCluster {
public:
    PostgresCluster() {
        const char* bin = std::getenv("TESSERA_PG_BIN");
        if (bin == nullptr)
            throw std::runtime_error("TESSERA_PG_BIN is not set (scripts/install-deps installs postgresql-15)");
        bin_ = bin;
        data_ = dir_.path() / "data";
        std::filesystem::create_directories(data_);
        if (::geteuid() == 0) {
            const passwd* user = ::getpwnam("postgres");
            if (user == nullptr) throw std::runtime_error("running as root and there is no postgres user");
            for (const auto& path : {dir_.path(), data_})
                if (::chown(path.c_str(), user->pw_uid, user->pw_gid) != 0)
                    throw std::runtime_error("cannot give " + path.string() + " to postgres");
            as_user_ = {"/usr/sbin/runuser", "-u", "postgres", "--"};
        }
        run({(bin_ / "initdb").string(), "-D", data_.string(), "-U", "tessera", "-A", "trust", "-E", "UTF8",
             "--no-sync", "--no-instructions"},
            "initdb");
        // A port that was free a moment ago; another process may take it first, so try again.
        for (int attempt = 0; attempt < 5; ++attempt) {
            port_ = free_port();
            if (start()) return;
        }
        throw std::runtime_error("PostgreSQL did not start; see " + (dir_.path() / "server.log").string() + ":\n" +
                                 log());
    }
    ~PostgresCluster() {
        try {
            run({(bin_ / "pg_ctl").string(), "-D", data_.string(), "-m", "immediate", "-w", "stop"}, "", false);
        } catch (...) {
            // Removing the directory below is all that is left to do.
        }
    }
    PostgresCluster(const PostgresCluster&) = delete;
    PostgresCluster& operator=(const PostgresCluster&) = delete;

    // The URL of a new, empty database `name` in the cluster.
    std::string create_database(const std::string& name) {
        run({(bin_ / "createdb").string(), "-h", "127.0.0.1", "-p", std::to_string(port_), "-U", "tessera", name},
            "createdb");
        return url(name);
    }
    std::string url(const std::string& database) const {
        return "postgresql://tessera@127.0.0.1:" + std::to_string(port_) + "/" + database;
    }
    std::uint16_t port() const { return port_; }
    // Stops the server (its connections closed, as a crash or failover would) and starts it
    // again on the same port.
    void restart() {
        run({(bin_ / "pg_ctl").string(), "-D", data_.string(), "-m", "fast", "-w", "stop"}, "pg_ctl stop");
        if (!start()) throw std::runtime_error("PostgreSQL did not start again:\n" + log());
    }
    std::string log() const {
        std::ifstream in(dir_.path() / "server.log");
        std::stringstream text;
        text << in.rdbuf();
        return text.str();
    }

private:
    bool start() {
        auto options = "-p " + std::to_string(port_) + " -k " + dir_.path().string() +
                       " -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off"
                       " -c full_page_writes=off -c max_connections=50";
        return run({(bin_ / "pg_ctl").string(), "-D", data_.string(), "-o", options, "-l",
                    (dir_.path() / "server.log").string(), "-w", "-t", "60", "start"},
                   "", false) == 0;
    }
    // Runs a PostgreSQL program to its end (as postgres under root); its messages go to stderr.
    int run(const std::vector<std::string>& command, const std::string& what, bool must_succeed = true) {
        std::vector<std::string> argv = as_user_;
        argv.insert(argv.end(), command.begin(), command.end());
        ChildProcess child(argv);
        std::string output;
        for (std::string line = child.read_line(); !line.empty() || !child.exited(); line = child.read_line())
            output += line + "\n";
        int status = child.wait();
        if (status != 0 && must_succeed)
            throw std::runtime_error(what + " failed (" + std::to_string(status) + "): " + output);
        return status;
    }

    TempDir dir_;
    std::filesystem::path bin_, data_;
    std::vector<std::string> as_user_;
    std::uint16_t port_ = 0;
};

}  // namespace tessera::testing
