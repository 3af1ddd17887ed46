// Slow and broken connections over POSIX sockets.
#include "bytes.h"
#include "raw_connections.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <vector>

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

class Socket {
public:
    explicit Socket(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(port);
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    }
    ~Socket() {
        if (fd_ >= 0) ::close(fd_);
    }
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;

    bool connected() const { return connected_; }
    bool send(const std::string& bytes) {
        return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
    }
    // Whatever arrives within `wait`; empty when nothing did, "<closed>" when the peer closed.
    std::string receive(std::chrono::milliseconds wait) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return {};
        char buffer[4096];
        auto n = ::recv(fd_, buffer, sizeof buffer, 0);
        if (n <= 0) return "<closed>";
        return std::string(buffer, static_cast<std::size_t>(n));
    }
    // Closes with a reset instead of an orderly shutdown.
    void reset() {
        linger hard{1, 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
        ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_;
    bool connected_ = false;
};

// "HTTP/1.1 401 ..." → "401"; anything else → "no status".
std::string status_of(const std::string& answer) {
    if (answer.rfind("HTTP/1.1 ", 0) == 0 && answer.size() >= 12) return answer.substr(9, 3);
    return answer == "<closed>" ? "closed" : "no status";
}

// A header line every two seconds until the server closes the connection (or 120 s pass).
void slow_headers(std::uint16_t port, SoakRecord& record) {
    Socket socket(port);
    if (!socket.connected()) return record.count("slow headers: could not connect");
    auto started = Clock::now();
    if (!socket.send("POST /api/v1/work HTTP/1.1\r\nHost: 127.0.0.1\r\n")) return record.count("slow headers: send failed");
    for (int line = 0; Clock::now() - started < std::chrono::seconds(120); ++line) {
        auto answer = socket.receive(std::chrono::seconds(2));
        if (!answer.empty()) {
            auto held = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started).count();
            return record.count(held <= 40 ? "slow headers: closed by the server within 40 s"
                                           : "slow headers: closed by the server after 40 s");
        }
        if (!socket.send("X-Slow-" + std::to_string(line) + ": 1\r\n"))
            return record.count("slow headers: closed by the server within 40 s");
    }
    record.count("slow headers: STILL OPEN after 120 s");
}

// Announces a 64 MiB upload from a client that does not exist: the answer must come before the body.
void unknown_uploader(std::uint16_t port, SoakRecord& record) {
    Socket socket(port);
    if (!socket.connected()) return record.count("unknown uploader: could not connect");
    std::string request =
        "POST /api/v1/results HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 67108864\r\n"
        "Expect: 100-continue\r\nTessera-Client: c-nobody\r\nTessera-Timestamp: " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count()) +
        "\r\nTessera-Nonce: " + std::string(32, 'a') + "\r\nTessera-Signature: " + std::string(86, 'A') +
        "==\r\n\r\n";
    if (!socket.send(request)) return record.count("unknown uploader: send failed");
    auto answer = socket.receive(std::chrono::seconds(10));
    record.count("unknown uploader: answered " + (answer.empty() ? std::string("nothing in 10 s") : status_of(answer)));
    socket.send(std::string(common::kMiB, 'x'));
    socket.reset();
}

// A registration whose body stops a tenth of the way, then a reset.
void cut_body(std::uint16_t port, SoakRecord& record) {
    Socket socket(port);
    if (!socket.connected()) return record.count("cut body: could not connect");
    socket.send("POST /api/v1/register HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10000\r\n\r\n" +
                std::string(1000, '{'));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    socket.reset();
    record.count("cut body: reset mid-body");
}

}  // namespace

void run_raw_connections(std::uint16_t port, int connections, Clock::time_point end, SoakRecord& record) {
    std::vector<std::thread> threads;
    for (int t = 0; t < connections; ++t)
        threads.emplace_back([&, t] {
            for (int round = t; Clock::now() < end; ++round) {
                switch (round % 3) {
                    case 0: slow_headers(port, record); break;
                    case 1: unknown_uploader(port, record); break;
                    default: cut_body(port, record); break;
                }
                std::this_thread::sleep_for(std::chrono::seconds(1));
            }
        });
    for (auto& thread : threads) thread.join();
}

}  // namespace tessera::bench
