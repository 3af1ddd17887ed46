// RouteTable: matching a path to its route.
#include "route_table.h"

namespace tessera::server {
namespace {

constexpr std::string_view kParam = "{}";

bool is_prefix(const RouteSpec& spec) { return spec.path.ends_with('/') && spec.path.size() > 1; }

// A path matched against a route's: how well (0: not at all; an exact path beats one with a
// parameter, which beats a prefix; a longer beats a shorter), the parameter and the rest.
struct Match {
    std::size_t score = 0;
    std::string_view param;
    std::string_view rest;
};

Match match(const RouteSpec& spec, std::string_view path) {
    Match found;
    std::size_t at = 0;  // in `path`
    bool has_param = false;
    for (std::size_t i = 0; i < spec.path.size();) {
        if (spec.path.substr(i).starts_with(kParam)) {
            auto end = path.find('/', at);
            auto segment = path.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
            if (segment.empty()) return {};
            found.param = segment;
            has_param = true;
            at += segment.size();
            i += kParam.size();
            continue;
        }
        if (at >= path.size() || path[at] != spec.path[i]) return {};
        ++at;
        ++i;
    }
    constexpr std::size_t kTier = std::size_t{1} << 32;  // above any path's length
    if (is_prefix(spec)) {
        found.rest = path.substr(at);
        found.score = spec.path.size();
    } else if (at == path.size()) {
        found.score = (has_param ? kTier : 2 * kTier) + spec.path.size();
    }
    return found;
}

bool method_matches(http::verb route, http::verb request) {
    return route == request || (route == http::verb::get && request == http::verb::head);
}

}  // namespace

RouteTable::Lookup RouteTable::find(http::verb method, std::string_view path) const {
    Lookup best;
    std::size_t best_score = 0;
    for (const auto& route : routes_) {
        auto found = match(route.spec, path);
        if (found.score == 0 || found.score < best_score) continue;
        bool allowed = method_matches(route.spec.method, method);
        // Of equally good matches, the one that allows the method wins.
        if (found.score == best_score && (best.outcome == Outcome::Found || !allowed)) continue;
        best_score = found.score;
        best.outcome = allowed ? Outcome::Found : Outcome::MethodNotAllowed;
        best.route = &route;
        best.rest = found.rest;
        best.param = found.param;
    }
    return best;
}

RouteGroup RouteTable::group_of(std::string_view path) const {
    std::size_t best_score = 0;
    auto group = RouteGroup::Other;
    for (const auto& route : routes_)
        if (auto found = match(route.spec, path); found.score > best_score) {
            best_score = found.score;
            group = route.spec.group;
        }
    return group;
}

}  // namespace tessera::server
