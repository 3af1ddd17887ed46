// Several servers: the list checked, a state directory and a thread per server, one turn table.
#include "several_servers.h"

#include <cctype>
#include <numeric>
#include <set>
#include <thread>

#include "logger.h"
#include "preference_watcher.h"
#include "turn_table.h"
#include "url.h"

namespace tessera::client {
namespace {

// How bad a Stop is, for the one run_volunteers returns.
int severity(StopReason reason) {
    switch (reason) {
        case StopReason::Untrusted: return 3;
        case StopReason::Error: return 2;
        case StopReason::Requested: return 1;
        case StopReason::OnceDone: return 0;
    }
    return 2;
}

std::string host_and_port(const Url& url) { return url.host + ":" + std::to_string(url.port); }

}  // namespace

common::Result<std::vector<ServerShare>> servers_with_shares(const std::vector<std::string>& urls,
                                                             const std::vector<double>& shares) {
    if (urls.empty()) return common::make_error("needs --server URL");
    if (!shares.empty() && shares.size() != urls.size())
        return common::make_error("--share gives " + std::to_string(shares.size()) + " shares for " +
                                  std::to_string(urls.size()) + " servers: give one per server, in the same order");
    std::vector<ServerShare> servers;
    std::set<std::string> seen;
    for (std::size_t i = 0; i < urls.size(); ++i) {
        auto text = urls[i];  // "a, b" in a configuration file leaves spaces around b
        text.erase(0, text.find_first_not_of(" \t"));
        text.erase(text.find_last_not_of(" \t") + 1);
        auto url = parse_url(text);
        if (!url) return common::make_error("--server " + text + ": " + url.message());
        if (!seen.insert(url->origin()).second) return common::make_error("--server " + text + " is given twice");
        double share = shares.empty() ? 1.0 : shares[i];
        if (!(share > 0 && share <= 1e6))
            return common::make_error("--share: each share must be above 0 (and at most 1000000)");
        servers.push_back({text, share});
    }
    return servers;
}

std::filesystem::path server_state_dir(const std::filesystem::path& state, const std::string& url) {
    auto parsed = parse_url(url);
    std::string name = parsed ? parsed->host + "-" + std::to_string(parsed->port) : url;
    for (auto& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
    return state / "servers" / name;
}

Stop run_volunteers(const VolunteerOptions& base, const std::vector<ServerShare>& servers, VolunteerControl& control) {
    if (servers.size() == 1) {
        auto options = base;
        options.server = servers[0].url;
        return run_volunteer(options, control);
    }
    Logger log(base.quiet, base.json_logs);
    auto watcher = watch_preferences(base, control, log);
    std::vector<double> shares;
    for (const auto& server : servers) shares.push_back(server.share);
    double total = std::accumulate(shares.begin(), shares.end(), 0.0);
    TurnTable turns(shares);

    while (control.servers.size() < servers.size()) control.servers.emplace_back();  // boards never move
    std::vector<VolunteerOptions> options(servers.size(), base);
    std::vector<SharedMachine> places(servers.size());
    for (std::size_t i = 0; i < servers.size(); ++i) {
        options[i].server = servers[i].url;
        options[i].state_dir = server_state_dir(base.state_dir, servers[i].url);
        options[i].cache_quota_bytes =
            static_cast<std::uint64_t>(static_cast<double>(base.cache_quota_bytes) * servers[i].share / total);
        auto url = parse_url(servers[i].url);
        places[i] = {&turns, i, nullptr, url ? host_and_port(*url) : servers[i].url};
    }
    for (std::size_t i = 0; i < servers.size(); ++i) places[i].status = &control.servers[i];

    std::vector<Stop> stops(servers.size());
    {
        std::vector<std::jthread> loops;
        for (std::size_t i = 0; i < servers.size(); ++i)
            loops.emplace_back([&, i] { stops[i] = run_volunteer(options[i], control, &places[i]); });
    }
    std::size_t worst = 0;
    for (std::size_t i = 1; i < servers.size(); ++i)
        if (severity(stops[i].reason) > severity(stops[worst].reason)) worst = i;
    for (std::size_t i = 0; i < servers.size(); ++i)  // the worst is the caller's to tell
        if (i != worst && !stops[i].message.empty()) log.error(places[i].source + ": " + stops[i].message);
    auto stop = stops[worst];
    if (!stop.message.empty()) stop.message = places[worst].source + ": " + stop.message;
    return stop;
}

}  // namespace tessera::client
