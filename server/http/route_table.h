// Every route the server answers, in one table: method, path, who may call it, how large a body
// it reads, its /metrics group, whether the session streams it, and its handler. A path may
// name one segment "{}" (a task's or a client's id), which its handler gets as `param`. The HTTP
// session asks the table for a request's body limit, stream kind and metrics group before it
// reads the body; the API dispatches through it (docs/protocol.md, "Routes").
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "http_types.h"
#include "records.h"
#include "server_metrics.h"

namespace tessera::server {

enum class Access { Public, Signed, Operator };
enum class BodySize { Small, Delta };  // Small: ApiLimits::small_body_bytes; Delta: an upload

struct RouteSpec {
    http::verb method = http::verb::get;  // a GET route answers HEAD too
    std::string_view path;                // ending in '/': a prefix, the rest passed on; "{}": any one segment
    Access access = Access::Public;
    BodySize body = BodySize::Small;
    RouteGroup group = RouteGroup::Public;
    bool event_stream = false;  // server-sent events, written by the session itself
};

// What a handler gets besides the request.
struct RouteCall {
    std::string_view rest;                 // the path after a prefix route's path
    std::string_view param;                // the segment the path's "{}" matched
    const ClientRecord* client = nullptr;  // the signer, for Access::Signed routes
    std::string_view peer;                 // the connection's remote address ("" when unknown)
};

using RouteHandler = std::function<Response(const Request&, const RouteCall&)>;

struct Route {
    RouteSpec spec;
    RouteHandler handler;
};

class RouteTable {
public:
    enum class Outcome { Found, NotFound, MethodNotAllowed };
    struct Lookup {
        Outcome outcome = Outcome::NotFound;
        const Route* route = nullptr;
        std::string_view rest;
        std::string_view param;
    };

    explicit RouteTable(std::vector<Route> routes) : routes_(std::move(routes)) {}
    // The route for `method` and `path` (no query): an exact path first, then one with a "{}"
    // segment, then the longest prefix.
    Lookup find(http::verb method, std::string_view path) const;
    // The /metrics group of a path, whatever its method; Other when no route has it.
    RouteGroup group_of(std::string_view path) const;
    const std::vector<Route>& routes() const { return routes_; }

private:
    std::vector<Route> routes_;
};

}  // namespace tessera::server
