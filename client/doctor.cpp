// The doctor's checks, in the order a volunteer would fix them: compute, disk, server.
#include "doctor.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <vector>

#include "bytes.h"
#include "client_state.h"
#include "ed25519.h"
#include "http_client.h"
#include "server_api.h"
#include "tessera_version.h"
#include "training/device_report.h"
#include "url.h"
#include "version_number.h"

namespace tessera::client {
namespace {

std::string gib(std::int64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / double(common::kGiB));
    return text;
}

std::string octal_mode(mode_t mode) {
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
    return text;
}

class Report {
public:
    explicit Report(std::ostream& out) : out_(out) {}
    void ok(const std::string& what) { line("ok   ", what, ""); }
    void info(const std::string& what) { line("info ", what, ""); }
    void warn(const std::string& what, const std::string& advice) { line("WARN ", what, advice); }
    void fail(const std::string& what, const std::string& advice) {
        line("FAIL ", what, advice);
        failed_ = true;
    }
    bool failed() const { return failed_; }

private:
    void line(const char* level, const std::string& what, const std::string& advice) {
        out_ << "  " << level << " " << what << "\n";
        if (!advice.empty()) out_ << "        -> " << advice << "\n";
    }
    std::ostream& out_;
    bool failed_ = false;
};

// The NVIDIA device nodes present, and whether this user can open each for reading and writing.
void check_device_nodes(Report& report, bool cuda_build) {
    std::vector<std::string> nodes;
    for (const char* name : {"/dev/nvidiactl", "/dev/nvidia-uvm"})
        if (access(name, F_OK) == 0) nodes.push_back(name);
    for (int i = 0; i < 16; ++i)
        if (auto name = "/dev/nvidia" + std::to_string(i); access(name.c_str(), F_OK) == 0) nodes.push_back(name);
    if (nodes.empty()) {
        if (cuda_build) report.warn("no NVIDIA device nodes (/dev/nvidia*)", "is the NVIDIA driver installed and loaded?");
        return;
    }
    for (const auto& node : nodes)
        if (access(node.c_str(), R_OK | W_OK) != 0)
            report.fail("this user (uid " + std::to_string(geteuid()) + ") cannot open " + node,
                        "add the user to the group that owns it (video or render; the packaged service's user is)");
    std::ifstream driver("/proc/driver/nvidia/version");
    std::string first_line;
    if (driver && std::getline(driver, first_line)) report.info("driver: " + first_line);
}

void check_compute(Report& report, const VolunteerOptions& options) {
    auto torch = torch_report();
    report.ok("LibTorch " + torch.libtorch_version +
              (torch.cuda_build ? ", built with CUDA " + torch.cuda_version : ", CPU only (this build has no CUDA)") +
              "; CPU threads: " + std::to_string(torch.cpu_threads));
    for (const auto& gpu : torch.gpus)
        report.ok("GPU " + std::to_string(gpu.index) + ": " + gpu.name + ", " + gib(gpu.total_bytes) +
                  (gpu.free_bytes >= 0 ? ", " + gib(gpu.free_bytes) + " free" : ", free memory unknown"));
    if (!torch.problem.empty())
        report.fail("the CUDA runtime cannot list GPUs: " + torch.problem,
                    "check the NVIDIA driver (it must support CUDA " + torch.cuda_version + ") and the device nodes");
    check_device_nodes(report, torch.cuda_build);
    const auto& device = options.device;
    if (device.rfind("cuda", 0) == 0) {
        int index = device.size() > 5 ? std::atoi(device.c_str() + 5) : 0;
        if (!torch.cuda_build)
            report.fail("--device " + device + " but this build has no CUDA",
                        "install the GPU build of tessera-client, or use --device cpu");
        else if (index >= static_cast<int>(torch.gpus.size()))
            report.fail("--device " + device + " but " + std::to_string(torch.gpus.size()) + " GPU(s) are seen",
                        "pick one of those, or use --device auto");
    } else if (device == "auto") {
        report.info(torch.gpus.empty() ? "--device auto: training on the CPU" : "--device auto: training on GPU 0");
    }
}

void check_state_directory(Report& report, const VolunteerOptions& options) {
    const auto& dir = options.state_dir;
    std::error_code error;
    auto where = std::filesystem::exists(dir, error) ? dir : dir.parent_path().empty() ? "." : dir.parent_path();
    struct stat status {};
    if (stat(where.c_str(), &status) != 0) {
        report.fail("state directory " + dir.string() + ": neither it nor its parent exists", "create it, or pass --state");
        return;
    }
    if (where != dir) {
        if (access(where.c_str(), W_OK) != 0)
            report.fail("state directory " + dir.string() + " does not exist and " + where.string() + " is not writable",
                        "create it for this user, or pass --state");
        else
            report.ok("state directory " + dir.string() + ": created at the first run");
    } else if (!S_ISDIR(status.st_mode)) {
        report.fail("state directory " + dir.string() + " is not a directory", "pass --state with a directory");
        return;
    } else if (status.st_uid != geteuid()) {
        report.fail("state directory " + dir.string() + " belongs to uid " + std::to_string(status.st_uid) +
                        ", not this user (uid " + std::to_string(geteuid()) + ")",
                    "run the client as its owner (the service runs as tessera-client), or chown it");
    } else if (access(dir.c_str(), W_OK) != 0) {
        report.fail("state directory " + dir.string() + " is not writable", "chmod u+w " + dir.string());
    } else if ((status.st_mode & 077) != 0) {
        report.warn("state directory " + dir.string() + " is mode " + octal_mode(status.st_mode) + ", open to others",
                    "chmod 700 " + dir.string());
    } else {
        report.ok("state directory " + dir.string() + ": this user's, mode " + octal_mode(status.st_mode));
    }
    auto key = dir / "client_key.pem";
    if (stat(key.c_str(), &status) == 0 && (status.st_mode & 077) != 0)
        report.fail("the client's key " + key.string() + " is mode " + octal_mode(status.st_mode), "chmod 600 " + key.string());
    struct statvfs disk {};
    if (statvfs(where.c_str(), &disk) == 0) {
        auto free_bytes = static_cast<std::int64_t>(disk.f_bavail) * static_cast<std::int64_t>(disk.f_frsize);
        auto quota = static_cast<std::int64_t>(options.cache_quota_bytes);
        if (free_bytes < common::kGiB)
            report.fail(gib(free_bytes) + " free on " + where.string(), "free some disk: a unit needs its model and data");
        else if (free_bytes < quota)
            report.warn(gib(free_bytes) + " free on " + where.string() + ", below the cache quota (" + gib(quota) + ")",
                        "lower cache-quota or free some disk");
        else
            report.ok(gib(free_bytes) + " free on " + where.string() + " (cache quota " + gib(quota) + ")");
    }
}

// The server's statement against the pinned key, this machine's clock and this release.
void check_statement(Report& report, const VolunteerOptions& options, const common::ServerInfo& info, double offset_s) {
    auto pinned = ClientState(options.state_dir).load_identity();
    if (!pinned)
        report.fail("the pinned identity is unreadable: " + pinned.message(),
                    "remove " + (options.state_dir / "identity.json").string() + " to register afresh");
    else if (!*pinned)
        report.info("not registered yet: the server's key " + info.server_key_id + " is pinned at the first run");
    else if ((*pinned)->server_public_key != info.server_public_key)
        report.fail("the server's key " + info.server_key_id + " is not the one pinned at first registration (" +
                        (*pinned)->server_key_id + ")",
                    "if the operator really changed keys, remove " + (options.state_dir / "identity.json").string());
    else
        report.ok("server key " + info.server_key_id + " is the one pinned at first registration");

    char offset[64];
    std::snprintf(offset, sizeof offset, "%+.1f s", offset_s);
    auto window = static_cast<double>(info.request_window_s);
    if (std::abs(offset_s) > window - 30)
        report.fail(std::string("this clock is ") + offset + " from the server's; signed requests beyond " +
                        std::to_string(info.request_window_s) + " s are refused",
                    "set the clock (e.g. timedatectl set-ntp true)");
    else if (std::abs(offset_s) > 60)
        report.warn(std::string("this clock is ") + offset + " from the server's", "set the clock (e.g. timedatectl set-ntp true)");
    else
        report.ok(std::string("clock: ") + offset + " from the server's (refused beyond " +
                  std::to_string(info.request_window_s) + " s)");

    std::string mine = common::kVersion;
    if (common::version_older(mine, info.min_client_version))
        report.fail("tessera-client " + mine + " is older than the " + info.min_client_version + " this server needs",
                    "install a newer tessera-client");
    else if (common::version_older(mine, info.recommended_client_version))
        report.warn("tessera-client " + mine + " is older than the " + info.recommended_client_version +
                        " this server recommends",
                    "install a newer tessera-client when you can");
    else
        report.ok("tessera-client " + mine + " is new enough (the server needs " +
                  (info.min_client_version.empty() ? std::string("any") : info.min_client_version) + ", recommends " +
                  (info.recommended_client_version.empty() ? std::string("any") : info.recommended_client_version) + ")");
}

void check_server(Report& report, const VolunteerOptions& options) {
    if (options.server.empty()) {
        report.fail("no server named", "set \"server = https://...\" in the configuration file, or pass --server");
        return;
    }
    auto url = parse_url(options.server);
    if (!url) {
        report.fail("server " + options.server + ": " + url.message(), "give an http:// or https:// URL");
        return;
    }
    HttpOptions http_options;
    http_options.timeout = std::chrono::seconds(15);
    http_options.ca_file = options.ca_file;
    HttpClient http(http_options);
    auto throwaway = common::SigningKey::generate();  // the statement is unsigned: no identity needed
    ServerApi api(*url, http, throwaway);
    auto now = [] {
        return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    };
    double sent = now();
    auto info = api.server_info();
    double answered = now();
    if (!info) {
        const auto& failure = info.error();
        std::string advice = failure.kind == FailureKind::Untrusted ? "pass the operator's CA certificate with ca-cert"
                             : failure.http_status == 404        ? "is the URL a Tessera server's (0.1.0 or newer)?"
                             : failure.kind == FailureKind::NoAnswer ? "check the URL, this machine's network and the server"
                                                                     : "tell the server's operator";
        report.fail("server " + url->origin() + ": " + failure.message, advice);
        return;
    }
    report.ok("server " + url->origin() + url->path + ": tessera-server " + info->version + ", " +
              (url->tls ? "TLS certificate verified" : "plain HTTP (not encrypted)") + ", answered in " +
              std::to_string(static_cast<int>((answered - sent) * 1000)) + " ms");
    // The server's clock has whole seconds: compare with the middle of the exchange, +0.5 s.
    double offset = static_cast<double>(info->time) + 0.5 - (sent + answered) / 2;
    check_statement(report, options, *info, offset);
}

}  // namespace

int run_doctor(const VolunteerOptions& options, std::ostream& out, const std::vector<ServerShare>& servers) {
    out << "tessera-client doctor " << common::kVersion << "\n";
    Report report(out);
    check_compute(report, options);
    check_state_directory(report, options);
    if (servers.size() <= 1) {
        check_server(report, options);
    } else {
        for (const auto& server : servers) {  // each against the key pinned in its own state
            auto one = options;
            one.server = server.url;
            one.state_dir = server_state_dir(options.state_dir, server.url);
            check_server(report, one);
        }
    }
    out << (report.failed() ? "the client cannot work until the failures above are fixed\n" : "the client can work\n");
    return report.failed() ? 1 : 0;
}

}  // namespace tessera::client
