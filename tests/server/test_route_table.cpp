// The route table alone: exact paths before prefixes, the longest prefix, HEAD as GET, 405 for
// a known path with another method, and the metrics group of any path.
#include <doctest/doctest.h>

#include "route_table.h"

using namespace tessera::server;

namespace {

RouteHandler named(std::string name) {
    return [name](const Request& request, const RouteCall&) {
        return error_response(request, http::status::ok, name, "");
    };
}

RouteTable table() {
    return RouteTable({
        {{http::verb::get, "/", Access::Public, BodySize::Small, RouteGroup::Dashboard}, named("page")},
        {{http::verb::get, "/api/v1/samples", Access::Public, BodySize::Small, RouteGroup::Public}, named("samples")},
        {{http::verb::get, "/api/v1/samples/", Access::Public, BodySize::Small, RouteGroup::Public}, named("image")},
        {{http::verb::get, "/api/v1/admin/volunteers", Access::Operator, BodySize::Small, RouteGroup::Admin},
         named("list")},
        {{http::verb::post, "/api/v1/admin/clients/", Access::Operator, BodySize::Small, RouteGroup::Admin},
         named("ban")},
        {{http::verb::post, "/api/v1/results", Access::Signed, BodySize::Delta, RouteGroup::Volunteer},
         named("upload")},
    });
}

}  // namespace

TEST_CASE("routes: exact before prefix, the rest of a prefix, HEAD as GET, 405 and 404") {
    auto routes = table();
    auto samples = routes.find(http::verb::get, "/api/v1/samples");
    REQUIRE(samples.outcome == RouteTable::Outcome::Found);
    CHECK(samples.route->spec.path == "/api/v1/samples");
    auto image = routes.find(http::verb::head, "/api/v1/samples/12.png");
    REQUIRE(image.outcome == RouteTable::Outcome::Found);
    CHECK(image.rest == "12.png");
    auto ban = routes.find(http::verb::post, "/api/v1/admin/clients/c-1/ban");
    REQUIRE(ban.outcome == RouteTable::Outcome::Found);
    CHECK(ban.rest == "c-1/ban");
    CHECK(routes.find(http::verb::get, "/api/v1/results").outcome == RouteTable::Outcome::MethodNotAllowed);
    CHECK(routes.find(http::verb::head, "/api/v1/results").outcome == RouteTable::Outcome::MethodNotAllowed);
    CHECK(routes.find(http::verb::get, "/api/v1/nothing").outcome == RouteTable::Outcome::NotFound);
    CHECK(routes.find(http::verb::get, "/x").outcome == RouteTable::Outcome::NotFound);  // "/" is exact
    CHECK(routes.find(http::verb::get, "/").outcome == RouteTable::Outcome::Found);
}

TEST_CASE("routes: the metrics group of a path, and Other for an unknown one") {
    auto routes = table();
    CHECK(routes.group_of("/") == RouteGroup::Dashboard);
    CHECK(routes.group_of("/api/v1/results") == RouteGroup::Volunteer);
    CHECK(routes.group_of("/api/v1/admin/clients/x/ban") == RouteGroup::Admin);
    CHECK(routes.group_of("/api/v1/admin/unknown") == RouteGroup::Other);
    CHECK(routes.group_of("/etc/passwd") == RouteGroup::Other);
}
