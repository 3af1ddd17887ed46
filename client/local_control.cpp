// The control socket: one request line in, one JSON line out, served by one thread that polls
// so it can stop; and the lock file that keeps one client per state directory.
#include "local_control.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <cerrno>
#include <cstring>
#include <optional>
#include <sstream>

namespace tessera::client {
namespace {

constexpr const char* kSocketName = "control.sock";
constexpr const char* kLockName = "client.lock";
constexpr std::size_t kMaxRequest = 256;
constexpr std::size_t kMaxAnswer = 64 << 10;
constexpr int kAnswerTimeoutMs = 5000;

common::Result<sockaddr_un> address_of(const std::filesystem::path& socket) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    auto text = socket.string();
    if (text.size() >= sizeof address.sun_path)
        return common::make_error("the control socket's path is too long (" + text + "): use a shorter --state");
    std::memcpy(address.sun_path, text.c_str(), text.size() + 1);
    return address;
}

// One line (without its newline) within the timeout and `max_bytes`; nothing otherwise.
std::optional<std::string> read_line(int fd, int timeout_ms, std::size_t max_bytes) {
    std::string line;
    for (;;) {
        pollfd ready{fd, POLLIN, 0};
        if (poll(&ready, 1, timeout_ms) <= 0) return std::nullopt;
        char c = 0;
        if (read(fd, &c, 1) != 1) return line.empty() ? std::nullopt : std::optional(line);
        if (c == '\n') return line;
        if (line.size() >= max_bytes) return std::nullopt;
        line += c;
    }
}

bool write_all(int fd, const std::string& text) {
    for (std::size_t done = 0; done < text.size();) {
        auto n = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
        if (n <= 0) return false;
        done += static_cast<std::size_t>(n);
    }
    return true;
}

std::string reply(bool ok, const std::string& message, boost::json::object extra = {}) {
    extra["ok"] = ok;
    extra["message"] = message;
    return boost::json::serialize(extra);
}

// The lock file's holder, for the message to a second client.
std::string holder_of(int fd) {
    char text[32] = {};
    auto n = pread(fd, text, sizeof text - 1, 0);
    return n > 0 ? " (pid " + std::string(text, static_cast<std::size_t>(n)) + ")" : "";
}

}  // namespace

common::Result<std::unique_ptr<LocalControl>> LocalControl::open(const std::filesystem::path& state_dir,
                                                                  VolunteerControl& control) {
    std::error_code error;
    if (!std::filesystem::exists(state_dir, error)) {
        std::filesystem::create_directories(state_dir, error);
        if (error) return common::make_error("cannot create " + state_dir.string() + ": " + error.message());
        std::filesystem::permissions(state_dir, std::filesystem::perms::owner_all, error);
    }
    int lock_fd = ::open((state_dir / kLockName).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd < 0) return common::make_error("cannot open " + (state_dir / kLockName).string() + ": " + std::strerror(errno));
    if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
        auto holder = holder_of(lock_fd);
        ::close(lock_fd);
        return common::make_error("another tessera-client is running on " + state_dir.string() + holder +
                                  ": stop it first, or give this one its own --state");
    }
    // The pid is for the message to a second client; the lock holds without it.
    auto pid = std::to_string(getpid());
    [[maybe_unused]] bool noted = ftruncate(lock_fd, 0) == 0 && pwrite(lock_fd, pid.data(), pid.size(), 0) >= 0;
    auto socket_path = state_dir / kSocketName;
    auto address = address_of(socket_path);
    if (!address) {
        ::close(lock_fd);
        return address.error();
    }
    std::filesystem::remove(socket_path, error);  // a stale one: the lock says no client runs
    int listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    auto old_mask = umask(0177);
    bool bound = listen_fd >= 0 && bind(listen_fd, reinterpret_cast<const sockaddr*>(&*address), sizeof *address) == 0;
    umask(old_mask);
    if (!bound || chmod(socket_path.c_str(), 0600) != 0 || listen(listen_fd, 8) != 0) {
        auto why = std::string(std::strerror(errno));
        if (listen_fd >= 0) ::close(listen_fd);
        ::close(lock_fd);
        return common::make_error("cannot serve " + socket_path.string() + ": " + why);
    }
    return std::unique_ptr<LocalControl>(new LocalControl(control, lock_fd, listen_fd, socket_path));
}

LocalControl::LocalControl(VolunteerControl& control, int lock_fd, int listen_fd, std::filesystem::path socket)
    : control_(control), lock_fd_(lock_fd), listen_fd_(listen_fd), socket_(std::move(socket)) {
    thread_ = std::thread([this] { serve(); });
}

LocalControl::~LocalControl() {
    stopping_ = true;
    thread_.join();
    ::close(listen_fd_);
    std::error_code ignored;
    std::filesystem::remove(socket_, ignored);
    ::close(lock_fd_);  // releases the lock
}

void LocalControl::serve() {
    while (!stopping_) {
        pollfd ready{listen_fd_, POLLIN, 0};
        if (poll(&ready, 1, 100) <= 0) continue;
        int connection = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (connection < 0) continue;
        if (auto line = read_line(connection, 1000, kMaxRequest)) write_all(connection, answer(*line) + "\n");
        ::close(connection);
    }
}

boost::json::array LocalControl::servers_json() const {
    boost::json::array boards;
    for (const auto& board : control_.servers) boards.push_back(board.to_json());
    return boards;
}

std::string LocalControl::answer(const std::string& command) {
    if (command == "status")
        return reply(true,
                     control_.paused ? "paused"
                     : control_.stop_after_unit ? "stopping"
                     : control_.held ? "waiting"
                                     : "working",
                     {{"paused", control_.paused.load()},
                      {"held", control_.held.load()},
                      {"stopping", control_.stop_after_unit.load() || control_.abandon_now.load()},
                      {"status", control_.status.to_json()},
                      {"servers", servers_json()}});
    if (command == "pause") {
        if (control_.paused.exchange(true)) return reply(false, "already paused");
        return reply(true, "paused: training waits between steps and no new unit is asked for; "
                           "`tessera-client resume` goes on");
    }
    if (command == "resume") {
        if (!control_.paused.exchange(false)) return reply(false, "not paused");
        return reply(true, control_.held ? "resumed; still waiting while a preference holds work (see status)"
                                         : "resumed");
    }
    if (command == "finish") {
        control_.stop_after_unit = true;
        control_.paused = false;
        return reply(true, "finishing the current unit, then stopping");
    }
    if (command == "quit") {
        control_.abandon_now = true;
        return reply(true, "giving the current unit back and stopping");
    }
    return reply(false, "unknown command '" + command.substr(0, 32) + "': status, pause, resume, finish or quit");
}

namespace {

std::string text_of(const boost::json::object& object, const char* key) {
    const auto* value = object.if_contains(key);
    return value && value->is_string() ? std::string(value->as_string()) : std::string();
}

double number_of(const boost::json::object& object, const char* key) {
    const auto* value = object.if_contains(key);
    return value && value->is_number() ? value->to_number<double>() : 0.0;
}

bool flag_of(const boost::json::object& object, const char* key) {
    const auto* value = object.if_contains(key);
    return value && value->is_bool() && value->as_bool();
}

// One server's board: who, what it does (with the client's own pause or stop), its unit, results.
void describe_board(std::ostream& out, const boost::json::object& board, const boost::json::object& answer) {
    out << "server:   " << text_of(board, "server") << " as " << text_of(board, "client_id") << ", on "
        << text_of(board, "device") << "\n";
    out << "state:    " << text_of(board, "phase");
    if (flag_of(answer, "paused")) out << " (paused by `tessera-client pause`)";
    if (flag_of(answer, "stopping")) out << " (stopping)";
    out << "\n";
    if (auto wu = text_of(board, "wu_id"); !wu.empty())
        out << "unit:     " << wu << ", step " << number_of(board, "step") << " of " << number_of(board, "steps") << "\n";
    out << "results:  " << number_of(board, "units_done") << " this run, credit " << number_of(board, "credit");
    if (auto worked = number_of(board, "worked_s"); worked > 0) out << ", its turns " << worked << " s";
    out << "\n";
    out << "moved:    " << number_of(board, "downloaded_bytes") << " bytes down, " << number_of(board, "uploaded_bytes")
        << " bytes up\n";
    if (const auto* last = board.if_contains("last_results"); last && last->is_array())
        for (const auto& item : last->as_array())
            if (item.is_object()) {
                const auto& verdict = item.as_object();
                out << "          " << text_of(verdict, "wu_id") << " " << text_of(verdict, "state");
                if (auto reason = text_of(verdict, "reason"); !reason.empty()) out << " (" << reason << ")";
                out << "\n";
            }
}

}  // namespace

std::string describe_status(const boost::json::object& answer) {
    const auto* status_value = answer.if_contains("status");
    if (!status_value || !status_value->is_object()) return "a status answer without a status\n";
    const auto& status = status_value->as_object();
    std::ostringstream out;
    const auto* servers = answer.if_contains("servers");
    if (servers && servers->is_array() && !servers->as_array().empty()) {
        for (const auto& board : servers->as_array())
            if (board.is_object()) describe_board(out, board.as_object(), answer);
    } else {
        describe_board(out, status, answer);
    }
    if (auto reason = text_of(status, "waiting_because"); !reason.empty())
        out << "waiting:  " << reason << " (a preference)\n";
    if (const auto* preferences = status.if_contains("preferences"); preferences && preferences->is_array()) {
        std::string list;
        for (const auto& item : preferences->as_array())
            if (item.is_string()) list += (list.empty() ? "" : "; ") + std::string(item.as_string());
        out << "prefers:  " << (list.empty() ? "to work at any time" : list) << "\n";
    }
    return out.str();
}

common::Result<std::string> send_control_command(const std::filesystem::path& state_dir, const std::string& command) {
    auto socket_path = state_dir / kSocketName;
    auto not_running = "no tessera-client is running with the state directory " + state_dir.string();
    std::error_code error;
    if (!std::filesystem::exists(socket_path, error)) return common::make_error(not_running + " (no " + kSocketName + ")");
    auto address = address_of(socket_path);
    if (!address) return address.error();
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return common::make_error(std::string("socket: ") + std::strerror(errno));
    if (connect(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof *address) != 0) {
        int why = errno;
        ::close(fd);
        if (why == EACCES)
            return common::make_error("cannot reach the client on " + state_dir.string() +
                                      ": permission denied (run this as the client's user, e.g. sudo -u tessera-client)");
        return common::make_error(not_running + " (" + std::strerror(why) + ")");
    }
    std::optional<std::string> answer;
    if (write_all(fd, command + "\n")) answer = read_line(fd, kAnswerTimeoutMs, kMaxAnswer);
    ::close(fd);
    if (!answer) return common::make_error("the client on " + state_dir.string() + " did not answer");
    return *answer;
}

}  // namespace tessera::client
