// Debian's nginx as a child process for integration tests: in the foreground, one worker,
// every file under one directory, on a loopback port that was free a moment ago.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "child_process.h"
#include "free_port.h"

namespace tessera::testing {

class NginxProcess {
public:
    // `http_body` goes inside `http { }` beside a `server { listen …; <server_body> }`.
    NginxProcess(const std::string& nginx, const std::filesystem::path& dir, const std::string& server_body,
                 const std::string& http_body = "")
        : dir_(dir) {
        // Another process may take the port first (tests run in parallel): nginx then exits
        // without writing its pid file, and another port is tried.
        for (int attempt = 0; attempt < 5; ++attempt) {
            port_ = free_port();
            std::filesystem::remove(dir / "nginx.pid");
            write_config(server_body, http_body);
            process_ = std::make_unique<ChildProcess>(
                std::vector<std::string>{nginx, "-p", dir.string(), "-c", (dir / "nginx.conf").string()});
            for (int i = 0; i < 200; ++i) {
                if (std::filesystem::exists(dir / "nginx.pid")) return;
                if (process_->exited()) break;
                std::this_thread::sleep_for(std::chrono::milliseconds(25));
            }
        }
        throw std::runtime_error("nginx did not start; see " + (dir / "error.log").string());
    }
    std::uint16_t port() const { return port_; }
    std::filesystem::path access_log() const { return dir_ / "access.log"; }

private:
    void write_config(const std::string& server_body, const std::string& http_body) {
        std::filesystem::create_directories(dir_ / "tmp");
        auto tmp = (dir_ / "tmp").string();
        std::ofstream config(dir_ / "nginx.conf");
        config << "daemon off;\nmaster_process off;\nworker_processes 1;\n"
               << "pid " << (dir_ / "nginx.pid").string() << ";\n"
               << "error_log " << (dir_ / "error.log").string() << ";\n"
               << "events { worker_connections 256; }\n"
               << "http {\n"
               << "  access_log " << access_log().string() << ";\n"
               << "  client_body_temp_path " << tmp << ";\n  proxy_temp_path " << tmp << ";\n"
               << "  fastcgi_temp_path " << tmp << ";\n  uwsgi_temp_path " << tmp << ";\n"
               << "  scgi_temp_path " << tmp << ";\n"
               << http_body << "\n"
               << "  server {\n    listen 127.0.0.1:" << port_ << ";\n"
               << server_body << "\n  }\n}\n";
    }

    std::filesystem::path dir_;
    std::uint16_t port_ = 0;
    std::unique_ptr<ChildProcess> process_;
};

}  // namespace tessera::testing
