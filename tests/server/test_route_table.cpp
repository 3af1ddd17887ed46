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
        {{http::verb::get, "/api/v1/tasks/{}/stats", Access::Public, BodySize::Small, RouteGroup::Public},
         named("task stats")},
        {{http::verb::get, "/api/v1/tasks/{}/samples/", Access::Public, BodySize::Small, RouteGroup::Dashboard},
         named("task image")},
        {{http::verb::get, "/api/v1/tasks/current/stats", Access::Public, BodySize::Small, RouteGroup::Admin},
         named("current stats")},
        {{http::verb::post, "/api/v1/admin/tasks/{}/pause", Access::Operator, BodySize::Small, RouteGroup::Admin},
         named("pause")},
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

TEST_CASE("routes: a \"{}\" segment matches one whole segment and is passed on; an exact path beats it") {
    auto routes = table();
    auto stats = routes.find(http::verb::get, "/api/v1/tasks/t-1/stats");
    REQUIRE(stats.outcome == RouteTable::Outcome::Found);
    CHECK(stats.route->spec.path == "/api/v1/tasks/{}/stats");
    CHECK(stats.param == "t-1");
    auto image = routes.find(http::verb::get, "/api/v1/tasks/t-2/samples/12.png");
    REQUIRE(image.outcome == RouteTable::Outcome::Found);
    CHECK(image.param == "t-2");
    CHECK(image.rest == "12.png");
    auto current = routes.find(http::verb::get, "/api/v1/tasks/current/stats");
    REQUIRE(current.outcome == RouteTable::Outcome::Found);
    CHECK(current.route->spec.path == "/api/v1/tasks/current/stats");
    CHECK(routes.find(http::verb::get, "/api/v1/tasks//stats").outcome == RouteTable::Outcome::NotFound);
    CHECK(routes.find(http::verb::get, "/api/v1/tasks/a/b/stats").outcome == RouteTable::Outcome::NotFound);
    CHECK(routes.find(http::verb::get, "/api/v1/tasks/t-1/stats/more").outcome == RouteTable::Outcome::NotFound);
    CHECK(routes.find(http::verb::get, "/api/v1/tasks/t-1/nonsense").outcome == RouteTable::Outcome::NotFound);
    CHECK(routes.find(http::verb::get, "/api/v1/admin/tasks/t-1/pause").outcome ==
          RouteTable::Outcome::MethodNotAllowed);
    CHECK(routes.group_of("/api/v1/tasks/t-1/samples/3.png") == RouteGroup::Dashboard);
    CHECK(routes.group_of("/api/v1/admin/tasks/t-1/pause") == RouteGroup::Admin);
}

TEST_CASE("routes: the metrics group of a path, and Other for an unknown one") {
    auto routes = table();
    CHECK(routes.group_of("/") == RouteGroup::Dashboard);
    CHECK(routes.group_of("/api/v1/results") == RouteGroup::Volunteer);
    CHECK(routes.group_of("/api/v1/admin/clients/x/ban") == RouteGroup::Admin);
    CHECK(routes.group_of("/api/v1/admin/unknown") == RouteGroup::Other);
    CHECK(routes.group_of("/etc/passwd") == RouteGroup::Other);
}
