// RouteTable: matching a path to its route.
#include "route_table.h"

namespace tessera::server {
namespace {

bool is_prefix(const RouteSpec& spec) { return spec.path.ends_with('/') && spec.path.size() > 1; }

// How well `spec` matches `path`: 0 no match, else longer is better and exact beats prefix.
std::size_t match_length(const RouteSpec& spec, std::string_view path) {
    if (is_prefix(spec)) return path.starts_with(spec.path) ? spec.path.size() : 0;
    return path == spec.path ? path.size() + 1 : 0;
}

bool method_matches(http::verb route, http::verb request) {
    return route == request || (route == http::verb::get && request == http::verb::head);
}

}  // namespace

RouteTable::Lookup RouteTable::find(http::verb method, std::string_view path) const {
    Lookup best;
    std::size_t best_length = 0;
    for (const auto& route : routes_) {
        auto length = match_length(route.spec, path);
        if (length == 0 || length < best_length) continue;
        bool allowed = method_matches(route.spec.method, method);
        // Of equally good matches, the one that allows the method wins.
        if (length == best_length && (best.outcome == Outcome::Found || !allowed)) continue;
        best_length = length;
        best.outcome = allowed ? Outcome::Found : Outcome::MethodNotAllowed;
        best.route = &route;
        best.rest = is_prefix(route.spec) ? path.substr(route.spec.path.size()) : std::string_view();
    }
    return best;
}

RouteGroup RouteTable::group_of(std::string_view path) const {
    std::size_t best_length = 0;
    auto group = RouteGroup::Other;
    for (const auto& route : routes_)
        if (auto length = match_length(route.spec, path); length > best_length) {
            best_length = length;
            group = route.spec.group;
        }
    return group;
}

}  // namespace tessera::server
