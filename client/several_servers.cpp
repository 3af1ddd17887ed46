// Several servers: the list checked, a state directory and a thread per server, one turn table.
#include "several_servers.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <set>
#include <thread>

#include "comma_separated.h"
#include "logger.h"
#include "preference_watcher.h"
#include "rate_limiter.h"
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

// "a, b,c" as {"a", "b", "c"}; empty items dropped.
std::vector<std::string> comma_list(const std::string& text) {
    std::vector<std::string> items;
    for (auto& item : comma_separated(text))
        if (!item.empty()) items.push_back(std::move(item));
    return items;
}

}  // namespace

common::Result<std::vector<ServerShare>> servers_with_shares(const std::string& urls, const std::string& shares) {
    auto url_list = comma_list(urls);
    auto share_list = comma_list(shares);
    if (url_list.empty()) return common::make_error("needs --server URL");
    if (!share_list.empty() && share_list.size() != url_list.size())
        return common::make_error("--share gives " + std::to_string(share_list.size()) + " shares for " +
                                  std::to_string(url_list.size()) + " servers: give one per server, in the same order");
    std::vector<ServerShare> servers;
    std::set<std::string> seen;
    for (std::size_t i = 0; i < url_list.size(); ++i) {
        const auto& text = url_list[i];
        auto url = parse_url(text);
        if (!url) return common::make_error("--server " + text + ": " + url.message());
        if (!seen.insert(host_and_port(*url)).second)
            return common::make_error("--server " + text + ": " + host_and_port(*url) + " is given twice");
        double share = 1;
        if (!share_list.empty()) {
            std::size_t used = 0;
            try {
                share = std::stod(share_list[i], &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used != share_list[i].size())
                return common::make_error("--share: \"" + share_list[i] + "\" is not a number");
        }
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
    common::Logger log("tessera-client", base.quiet, base.json_logs);
    auto watcher = watch_preferences(base, control, log);
    std::vector<double> shares;
    for (const auto& server : servers) shares.push_back(server.share);
    double total = std::accumulate(shares.begin(), shares.end(), 0.0);
    TurnTable turns(shares);

    while (control.servers.size() < servers.size()) control.servers.emplace_back();  // boards never move
    std::vector<VolunteerOptions> options(servers.size(), base);
    std::vector<SharedMachine> places(servers.size());
    std::shared_ptr<RateLimiter> download_limit, upload_limit;  // one pair for every server
    if (base.max_download_mbps > 0)
        download_limit = std::make_shared<RateLimiter>(RateLimiter::bytes_per_second_of_mbps(base.max_download_mbps));
    if (base.max_upload_mbps > 0)
        upload_limit = std::make_shared<RateLimiter>(RateLimiter::bytes_per_second_of_mbps(base.max_upload_mbps));
    for (std::size_t i = 0; i < servers.size(); ++i) {
        options[i].server = servers[i].url;
        options[i].state_dir = server_state_dir(base.state_dir, servers[i].url);
        options[i].cache_quota_bytes =
            static_cast<std::uint64_t>(static_cast<double>(base.cache_quota_bytes) * servers[i].share / total);
        auto url = parse_url(servers[i].url);
        places[i] = {&turns, i, nullptr, url ? host_and_port(*url) : servers[i].url, download_limit, upload_limit};
    }
    for (std::size_t i = 0; i < servers.size(); ++i) places[i].status = &control.servers[i];

    std::vector<Stop> stops(servers.size());
    {
        std::vector<std::jthread> loops;
        for (std::size_t i = 0; i < servers.size(); ++i)
            loops.emplace_back([&, i] {
                stops[i] = run_volunteer(options[i], control, &places[i]);
                // Told now, not when the last server's loop ends, which may be days later.
                auto why = stops[i].message.empty() ? std::string("stopped") : "stopped: " + stops[i].message;
                control.servers[i].set_phase(why);
                if (stops[i].reason == StopReason::Error || stops[i].reason == StopReason::Untrusted)
                    log.error(places[i].source + ": " + why + "; the other servers go on");
            });
    }
    std::size_t worst = 0;
    for (std::size_t i = 1; i < servers.size(); ++i)
        if (severity(stops[i].reason) > severity(stops[worst].reason)) worst = i;
    auto stop = stops[worst];
    if (!stop.message.empty()) stop.message = places[worst].source + ": " + stop.message;
    return stop;
}

}  // namespace tessera::client
