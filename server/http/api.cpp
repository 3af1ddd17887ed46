// Api: routing, and the volunteer routes (register, work, results, heartbeat, abandon).
#include "api.h"

#include <boost/json.hpp>

#include <charconv>

#include "blob_handler.h"
#include "clock.h"
#include "protocol.h"
#include "request_auth.h"
#include "result_upload.h"
#include "server_info.h"
#include "sha256.h"
#include "task_lookup.h"
#include "tessera_version.h"
#include "text_encoding.h"
#include "version_number.h"

namespace tessera::server {
namespace {

std::string_view body_text(const Request& request) {
    return {reinterpret_cast<const char*>(request.body().data()), request.body().size()};
}

Response bad_request(const Request& request, const std::string& message) {
    return error_response(request, http::status::bad_request, "bad_request", message);
}

RouteSpec public_get(std::string_view path, RouteGroup group = RouteGroup::Public) {
    return {http::verb::get, path, Access::Public, BodySize::Small, group};
}

RouteSpec signed_post(std::string_view path, BodySize body = BodySize::Small) {
    return {http::verb::post, path, Access::Signed, body, RouteGroup::Volunteer};
}

RouteSpec admin_route(http::verb method, std::string_view path) {
    return {method, path, Access::Operator, BodySize::Small, RouteGroup::Admin};
}

// An upload's body: its length prefix, its manifest and a delta of at most `delta_cap` bytes.
// The moments a unit started from, for its audit (docs/protocol.md, "Moments for an audit").
constexpr std::string_view kMomentsRoute = "/api/v1/results/moments";

std::uint64_t upload_body_limit(std::int64_t delta_cap) {
    return static_cast<std::uint64_t>(delta_cap) + common::kManifestLengthBytes + common::kMaxManifestBytes;
}

}  // namespace

Api::Api(Store& store, const BlobStore& blobs, PublishedModels& published, VolunteerService& volunteers,
         Dashboard& dashboard, EventHub& events, ServerMetrics& metrics, const common::VerifyKey& server_key,
         std::string operator_token_sha256, Clock clock, ApiLimits limits, const DeltaCaps& delta_caps)
    : store_(store), blobs_(blobs), published_(published), volunteers_(volunteers), dashboard_(dashboard),
      events_(events), metrics_(metrics), server_key_(server_key),
      operator_token_sha256_(std::move(operator_token_sha256)), clock_(std::move(clock)), limits_(limits),
      delta_caps_(delta_caps), routes_(make_routes()) {}

// The whole API. Handlers capture `this`: the table lives and dies with the Api.
std::vector<Route> Api::make_routes() {
    std::vector<Route> routes;
    for (auto group : {public_routes(), volunteer_routes(), admin_routes()})
        routes.insert(routes.end(), std::make_move_iterator(group.begin()), std::make_move_iterator(group.end()));
    return routes;
}

std::vector<Route> Api::public_routes() {
    auto& d = dashboard_;
    return {
        {public_get("/", RouteGroup::Dashboard),
         [&d](const Request& r, const RouteCall&) { return d.page(r, "index.html"); }},
        {public_get("/assets/", RouteGroup::Dashboard),
         [&d](const Request& r, const RouteCall& c) { return d.page(r, c.rest); }},
        {public_get("/blobs/", RouteGroup::Blobs),
         [this](const Request& r, const RouteCall& c) {
             // A published model between checkpoints is written when first asked for.
             std::string name(c.rest);
             if (common::is_lower_hex(name, common::kSha256HexLength) && !blobs_.has(name))
                 if (auto built = published_.ensure_blob(name); !built) return internal_error(r, built.message());
             return serve_blob(r, blobs_, c.rest);
         }},
        {public_get("/metrics", RouteGroup::Metrics),
         [this](const Request& r, const RouteCall&) { return metrics(r); }},
        {public_get("/api/v1/server"), [this](const Request& r, const RouteCall&) { return server_info(r); }},
        {public_get("/api/v1/stats"), [&d](const Request& r, const RouteCall&) { return d.stats(r); }},
        {public_get("/api/v1/history"), [&d](const Request& r, const RouteCall&) { return d.history(r); }},
        {public_get("/api/v1/samples"), [&d](const Request& r, const RouteCall&) { return d.samples(r); }},
        {public_get("/api/v1/samples/"),
         [&d](const Request& r, const RouteCall& c) { return d.sample_image(r, "", c.rest); }},
        {public_get("/api/v1/prompts"), [&d](const Request& r, const RouteCall&) { return d.prompts(r); }},
        {public_get("/api/v1/prompt.png"), [&d](const Request& r, const RouteCall&) { return d.prompt_image(r); }},
        {public_get("/api/v1/versions"), [this](const Request& r, const RouteCall&) { return versions(r, ""); }},
        {public_get("/api/v1/tasks"), [&d](const Request& r, const RouteCall&) { return d.tasks(r); }},
        {public_get("/api/v1/tasks/{}/stats"),
         [&d](const Request& r, const RouteCall& c) { return d.stats(r, std::string(c.param)); }},
        {public_get("/api/v1/tasks/{}/history"),
         [&d](const Request& r, const RouteCall& c) { return d.history(r, std::string(c.param)); }},
        {public_get("/api/v1/tasks/{}/samples"),
         [&d](const Request& r, const RouteCall& c) { return d.samples(r, std::string(c.param)); }},
        {public_get("/api/v1/tasks/{}/samples/"),
         [&d](const Request& r, const RouteCall& c) { return d.sample_image(r, std::string(c.param), c.rest); }},
        {public_get("/api/v1/tasks/{}/prompts"),
         [&d](const Request& r, const RouteCall& c) { return d.prompts(r, std::string(c.param)); }},
        {public_get("/api/v1/tasks/{}/prompt.png"),
         [&d](const Request& r, const RouteCall& c) { return d.prompt_image(r, std::string(c.param)); }},
        {public_get("/api/v1/tasks/{}/versions"),
         [this](const Request& r, const RouteCall& c) { return versions(r, std::string(c.param)); }},
        {public_get("/api/v1/volunteers"), [this](const Request& r, const RouteCall&) { return volunteers(r, false); }},
        {public_get("/api/v1/rejections"), [this](const Request& r, const RouteCall&) { return rejections(r); }},
        {public_get("/api/v1/audits"), [this](const Request& r, const RouteCall&) { return audits(r); }},
        {public_get("/api/v1/events", RouteGroup::Events),
         [this](const Request& r, const RouteCall&) { return events(r); }},
        {{http::verb::get, "/api/v1/events/stream", Access::Public, BodySize::Small, RouteGroup::Events, true},
         [](const Request& r, const RouteCall&) {
             return internal_error(r, "the event stream is written by the HTTP session");
         }},
    };
}

std::vector<Route> Api::volunteer_routes() {
    auto signed_handler = [this](Response (Api::*handler)(const Request&, const ClientRecord&)) {
        return [this, handler](const Request& r, const RouteCall& call) { return (this->*handler)(r, *call.client); };
    };
    return {
        {{http::verb::post, "/api/v1/register", Access::Public, BodySize::Small, RouteGroup::Volunteer},
         [this](const Request& r, const RouteCall& call) { return register_client(r, call.peer); }},
        {signed_post("/api/v1/work"), signed_handler(&Api::request_work)},
        {signed_post("/api/v1/results", BodySize::Delta),
         [](const Request& r, const RouteCall&) {
             return internal_error(r, "a result upload is spooled by the HTTP session (handle_upload)");
         }},
        {signed_post(kMomentsRoute, BodySize::Delta),
         [](const Request& r, const RouteCall&) {
             return internal_error(r, "moments are spooled by the HTTP session (handle_upload)");
         }},
        {signed_post("/api/v1/heartbeat"), signed_handler(&Api::heartbeat)},
        {signed_post("/api/v1/abandon"), signed_handler(&Api::abandon)},
        {signed_post("/api/v1/result"), signed_handler(&Api::result_status)},
    };
}

std::vector<Route> Api::admin_routes() {
    // POST /api/v1/admin/tasks/<id>/<action> and /api/v1/admin/clients/<id>/<action>.
    auto task_action_route = [this](std::string_view path, std::string_view action) -> Route {
        return {admin_route(http::verb::post, path),
                [this, action](const Request& r, const RouteCall& c) { return task_action(r, c.param, action); }};
    };
    auto client_action_route = [this](std::string_view path, std::string_view action) -> Route {
        return {admin_route(http::verb::post, path),
                [this, action](const Request& r, const RouteCall& c) { return client_action(r, c.param, action); }};
    };
    return {
        {admin_route(http::verb::get, "/api/v1/admin/volunteers"),
         [this](const Request& r, const RouteCall&) { return volunteers(r, true); }},
        {admin_route(http::verb::post, "/api/v1/admin/task/pause"),
         [this](const Request& r, const RouteCall&) { return task_action(r, "", "pause"); }},
        {admin_route(http::verb::post, "/api/v1/admin/task/resume"),
         [this](const Request& r, const RouteCall&) { return task_action(r, "", "resume"); }},
        task_action_route("/api/v1/admin/tasks/{}/pause", "pause"),
        task_action_route("/api/v1/admin/tasks/{}/resume", "resume"),
        task_action_route("/api/v1/admin/tasks/{}/finish", "finish"),
        task_action_route("/api/v1/admin/tasks/{}/weight", "weight"),
        client_action_route("/api/v1/admin/clients/{}/ban", "ban"),
        client_action_route("/api/v1/admin/clients/{}/unban", "unban"),
        client_action_route("/api/v1/admin/clients/{}/release", "release"),
    };
}

std::uint64_t Api::body_limit(http::verb method, std::string_view target) const {
    auto found = routes_.find(method, path_of(target));
    if (found.outcome == RouteTable::Outcome::Found && found.route->spec.body == BodySize::Delta)
        return upload_body_limit(delta_caps_.largest());
    return limits_.small_body_bytes;
}

bool Api::checks_header_first(const http::request_header<>& header) const {
    auto found = routes_.find(header.method(), path_of(header.target()));
    return found.outcome == RouteTable::Outcome::Found && found.route->spec.access == Access::Signed &&
           found.route->spec.body == BodySize::Delta;
}

std::variant<UploadAllowance, AuthFailure> Api::check_upload_header(const http::request_header<>& header) {
    try {
        // Moments come after their unit's upload (none in progress then): any task's cap.
        bool moments = path_of(header.target()) == kMomentsRoute;
        auto checked = check_signing_headers(header, store_, store_, clock_(), moments);
        if (auto* failure = std::get_if<AuthFailure>(&checked)) return std::move(*failure);
        auto cap = moments ? delta_caps_.largest() : delta_caps_.largest_of(std::get<TasksInProgress>(checked));
        if (cap == 0)
            return AuthFailure{http::status::conflict, "conflict",
                               "this volunteer's work units belong to no task this server serves"};
        return UploadAllowance{upload_body_limit(cap)};
    } catch (const std::exception& error) {
        return AuthFailure{http::status::internal_server_error, "internal", logged_exception(error)};
    }
}

RouteGroup Api::route_group(std::string_view target) const { return routes_.group_of(path_of(target)); }

bool Api::is_event_stream(const http::request_header<>& header) const {
    auto found = routes_.find(header.method(), path_of(header.target()));
    return found.outcome == RouteTable::Outcome::Found && found.route->spec.event_stream;
}

Response Api::handle(Request request, std::string peer) {
    metrics_.count_request();
    try {
        return route(request, path_of(request.target()), peer);
    } catch (const std::exception& error) {
        return internal_error(request, logged_exception(error));
    }
}

Response Api::route(const Request& request, std::string_view path, std::string_view peer) {
    auto found = routes_.find(request.method(), path);
    if (found.outcome == RouteTable::Outcome::NotFound)
        return error_response(request, http::status::not_found, "not_found", "no route " + std::string(path));
    if (found.outcome == RouteTable::Outcome::MethodNotAllowed)
        return error_response(request, http::status::method_not_allowed, "method_not_allowed",
                              std::string(request.method_string()) + " is not allowed on " + std::string(path));
    const auto& route = *found.route;
    RouteCall call{found.rest, found.param, nullptr, peer};
    if (route.spec.access == Access::Operator && !is_operator(request, operator_token_sha256_))
        return error_response(request, http::status::unauthorized, "unauthorized",
                              "admin routes need Authorization: Bearer <operator token>");
    if (route.spec.access != Access::Signed) return route.handler(request, call);
    auto auth = authenticate(request, store_, clock_());
    if (auto* failure = std::get_if<AuthFailure>(&auth)) return refusal_response(request, *failure);
    call.client = &std::get<ClientRecord>(auth);
    return route.handler(request, call);
}

Response Api::register_client(const Request& request, std::string_view peer) {
    auto message = common::parse_message<common::RegisterRequest>(body_text(request));
    if (!message) return bad_request(request, message.message());
    if (!limits_.min_client_version.empty() &&
        common::version_older(message->client_version, limits_.min_client_version))
        return error_response(request, http::status::forbidden, "client_too_old",
                              "this server needs tessera-client " + limits_.min_client_version +
                                  " or newer; this one is " + message->client_version + ": install a newer one");
    auto now = clock_();
    RegistrationLimit limit{limits_.registrations_per_window, now - limits_.registration_window_s};
    auto registered = store_.register_client(message->public_key, message->name, message->client_version,
                                             std::string(peer), now, limit);
    if (!registered) return internal_error(request, registered.message());
    if (!*registered)
        return error_response(request, http::status::too_many_requests, "too_many_registrations",
                              std::to_string(limit.max) + " volunteers registered from " + std::string(peer) +
                                  " in the last " + std::to_string(limits_.registration_window_s) +
                                  " s; try again later");
    const auto& client = *registered;
    if (client->banned) return error_response(request, http::status::forbidden, "banned", "this volunteer is banned");
    common::RegisterResponse response{client->id, common::to_base64(server_key_.raw()), server_key_.key_id()};
    return json_response(request, http::status::ok, common::to_json(response));
}

Response Api::server_info(const Request& request) {
    common::ServerInfo info{common::kVersion,
                            common::to_base64(server_key_.raw()),
                            server_key_.key_id(),
                            clock_(),
                            kRequestWindowS,
                            limits_.min_client_version,
                            limits_.recommended_client_version};
    return json_response(request, http::status::ok, common::to_json(info));
}

Response Api::request_work(const Request& request, const ClientRecord& client) {
    auto message = common::parse_message<common::WorkRequest>(body_text(request));
    if (!message) return bad_request(request, message.message());
    auto answer = volunteers_.request_work(client, *message);
    if (!answer) return internal_error(request, answer.message());
    if (answer->http_status != 200)
        return error_response(request, static_cast<http::status>(answer->http_status), answer->error, answer->message);
    return json_response(request, http::status::ok, common::to_json(answer->response));
}

Response Api::handle_upload(UploadRequest request) {
    metrics_.count_request();
    Request reply_to;  // the answer's HTTP version and keep-alive
    reply_to.version(request.version());
    reply_to.keep_alive(request.keep_alive());
    try {
        auto& upload = request.body();
        bool empty = upload.delta_file().empty() && upload.error.empty();  // the spool never opened
        auto body_sha256 = empty ? common::sha256_hex({}) : upload.body_sha256;
        auto auth = authenticate(request.base(), body_sha256, store_, clock_());
        if (auto* failure = std::get_if<AuthFailure>(&auth)) return refusal_response(reply_to, *failure);
        const auto& client_id = std::get<ClientRecord>(auth).id;
        if (path_of(request.target()) == kMomentsRoute)
            return intake_answer(reply_to, volunteers_.upload_moments(client_id, upload));
        return intake_answer(reply_to, volunteers_.upload(client_id, upload));
    } catch (const std::exception& error) {
        return internal_error(reply_to, logged_exception(error));
    }
}

Response Api::intake_answer(const Request& request, const common::Result<IntakeOutcome>& outcome) {
    if (!outcome) return internal_error(request, outcome.message());
    if (outcome->http_status != 200)
        return error_response(request, static_cast<http::status>(outcome->http_status), outcome->error,
                              outcome->message);
    boost::json::object answer{{"status", "received"}, {"message", outcome->message}};
    if (outcome->moments_wanted) answer["moments_wanted"] = true;
    return json_response(request, http::status::ok, std::move(answer));
}

// The signer's own assignment named by a work-unit-ref body, or the error response.
std::variant<AssignmentRecord, Response> Api::own_assignment(const Request& request, const ClientRecord& client) {
    auto message = common::parse_message<common::WorkUnitRef>(body_text(request));
    if (!message) return bad_request(request, message.message());
    if (message->client_id != client.id)
        return error_response(request, http::status::forbidden, "forbidden", "client_id is not the signer");
    auto found = store_.assignment(message->wu_id);
    if (!found) return internal_error(request, found.message());
    if (!*found || (*found)->client_id != client.id)
        return error_response(request, http::status::not_found, "not_found",
                              "no work unit '" + message->wu_id + "' for you");
    return std::move(**found);
}

Response Api::heartbeat(const Request& request, const ClientRecord& client) {
    auto found = own_assignment(request, client);
    if (auto* error = std::get_if<Response>(&found)) return std::move(*error);
    const auto& assignment = std::get<AssignmentRecord>(found);
    if (auto seen = store_.note_client_seen(client.id, client.device, client.samples_per_s, clock_()); !seen)
        return internal_error(request, seen.message());
    bool keep = assignment.state == AssignmentState::InProgress && assignment.deadline >= clock_();
    common::HeartbeatResponse response{keep, keep ? assignment.deadline : 0};
    return json_response(request, http::status::ok, common::to_json(response));
}

Response Api::abandon(const Request& request, const ClientRecord& client) {
    auto found = own_assignment(request, client);
    if (auto* error = std::get_if<Response>(&found)) return std::move(*error);
    const auto& assignment = std::get<AssignmentRecord>(found);
    auto task = load_task(store_, assignment.task_id);
    if (!task) return internal_error(request, task.message());
    auto ended = store_.abandon(assignment.id, clock_(), task->config.max_failures);
    if (!ended) return internal_error(request, ended.message());
    if (!*ended)
        return error_response(request, http::status::conflict, "conflict",
                              "work unit " + assignment.id + " is not in progress");
    return json_response(request, http::status::ok, {{"status", "abandoned"}});
}

Response Api::result_status(const Request& request, const ClientRecord& client) {
    auto found = own_assignment(request, client);
    if (auto* error = std::get_if<Response>(&found)) return std::move(*error);
    const auto& assignment = std::get<AssignmentRecord>(found);
    common::ResultStatus status{assignment.id, std::string(assignment_state_name(assignment.state)), "",
                                assignment.credit};
    status.moments_wanted = volunteers_.moments_wanted(assignment);
    if (assignment.state == AssignmentState::Rejected) {
        auto rejection = store_.rejection_of(assignment.id);
        if (!rejection) return internal_error(request, rejection.message());
        if (*rejection) status.reason = (*rejection)->reason;
    }
    return json_response(request, http::status::ok, common::to_json(status));
}

}  // namespace tessera::server
