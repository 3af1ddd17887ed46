// Api: routing, and the volunteer routes (register, work, results, heartbeat, abandon).
#include "api.h"

#include <boost/json.hpp>

#include <charconv>

#include "blob_handler.h"
#include "protocol.h"
#include "request_auth.h"
#include "result_upload.h"
#include "task_lookup.h"
#include "text_encoding.h"

namespace tessera::server {
namespace {

constexpr std::string_view kApi = "/api/v1/";
constexpr std::string_view kBlobs = "/blobs/";

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

std::string_view body_text(const Request& request) {
    return {reinterpret_cast<const char*>(request.body().data()), request.body().size()};
}

Response bad_request(const Request& request, const std::string& message) {
    return error_response(request, http::status::bad_request, "bad_request", message);
}


}  // namespace

std::int64_t query_integer(std::string_view target, std::string_view name, std::int64_t fallback,
                           std::int64_t min, std::int64_t max) {
    auto query_start = target.find('?');
    if (query_start == std::string_view::npos) return fallback;
    auto query = target.substr(query_start + 1);
    while (!query.empty()) {
        auto amp = query.find('&');
        auto pair = query.substr(0, amp);
        if (pair.starts_with(name) && pair.size() > name.size() && pair[name.size()] == '=') {
            auto text = pair.substr(name.size() + 1);
            std::int64_t value = 0;
            auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
            if (error != std::errc() || end != text.data() + text.size()) return fallback;
            return std::clamp(value, min, max);
        }
        if (amp == std::string_view::npos) break;
        query.remove_prefix(amp + 1);
    }
    return fallback;
}

Api::Api(Store& store, const BlobStore& blobs, Scheduler& scheduler, ResultIntake& intake, Dashboard& dashboard,
         ServerMetrics& metrics, const common::VerifyKey& server_key, std::string operator_token_sha256, Clock clock,
         ApiLimits limits)
    : store_(store), blobs_(blobs), scheduler_(scheduler), intake_(intake), dashboard_(dashboard), metrics_(metrics),
      server_key_(server_key),
      operator_token_sha256_(std::move(operator_token_sha256)), clock_(std::move(clock)), limits_(limits) {}

std::uint64_t Api::body_limit(http::verb method, std::string_view target) const {
    if (method == http::verb::post && path_of(target) == "/api/v1/results")
        return static_cast<std::uint64_t>(limits_.max_delta_bytes) + 4 + common::kMaxManifestBytes;
    return limits_.small_body_bytes;
}

Response Api::handle(Request request) {
    metrics_.count_request();
    try {
        return route(request, path_of(request.target()));
    } catch (const std::exception& error) {
        return internal_error(request, error.what());
    }
}

Response Api::route(const Request& request, std::string_view path) {
    auto method = request.method();
    bool get = method == http::verb::get || method == http::verb::head;
    auto method_not_allowed = [&] {
        return error_response(request, http::status::method_not_allowed, "method_not_allowed",
                              std::string(request.method_string()) + " is not allowed on " + std::string(path));
    };
    if (path.starts_with(kBlobs)) return get ? serve_blob(request, blobs_, path.substr(kBlobs.size())) : method_not_allowed();
    if (path == "/metrics") return get ? metrics(request) : method_not_allowed();
    if (auto page = dashboard_.handle(request, path)) return std::move(*page);
    if (!path.starts_with(kApi))
        return error_response(request, http::status::not_found, "not_found", "no route " + std::string(path));
    auto route_name = path.substr(kApi.size());

    if (route_name == "versions") return get ? versions(request) : method_not_allowed();
    if (route_name == "volunteers") return get ? volunteers(request, false) : method_not_allowed();
    if (route_name == "rejections") return get ? rejections(request) : method_not_allowed();
    if (route_name == "events") return get ? events(request) : method_not_allowed();
    if (route_name == "register") return method == http::verb::post ? register_client(request) : method_not_allowed();
    if (route_name.starts_with("admin/")) {
        if (!is_operator(request, operator_token_sha256_))
            return error_response(request, http::status::unauthorized, "unauthorized",
                                  "admin routes need Authorization: Bearer <operator token>");
        return admin(request, route_name.substr(6));
    }
    using Handler = Response (Api::*)(const Request&, const ClientRecord&);
    Handler handler = nullptr;
    if (route_name == "work") handler = &Api::request_work;
    else if (route_name == "results") handler = &Api::upload_result;
    else if (route_name == "heartbeat") handler = &Api::heartbeat;
    else if (route_name == "abandon") handler = &Api::abandon;
    else if (route_name == "result") handler = &Api::result_status;
    if (handler == nullptr) return error_response(request, http::status::not_found, "not_found", "no route " + std::string(path));
    if (method != http::verb::post) return method_not_allowed();
    auto auth = authenticate(request, store_, clock_());
    if (auto* failure = std::get_if<AuthFailure>(&auth))
        return error_response(request, failure->status, failure->code, failure->message);
    return (this->*handler)(request, std::get<ClientRecord>(auth));
}

Response Api::register_client(const Request& request) {
    auto message = common::parse_message<common::RegisterRequest>(body_text(request));
    if (!message) return bad_request(request, message.message());
    auto client = store_.register_client(message->public_key, message->name, message->client_version, clock_());
    if (!client) return internal_error(request, client.message());
    if (client->banned) return error_response(request, http::status::forbidden, "banned", "this volunteer is banned");
    common::RegisterResponse response{client->id, common::to_base64(server_key_.raw()), server_key_.key_id()};
    return json_response(request, http::status::ok, common::to_json(response));
}

Response Api::request_work(const Request& request, const ClientRecord& client) {
    auto message = common::parse_message<common::WorkRequest>(body_text(request));
    if (!message) return bad_request(request, message.message());
    if (message->client_id != client.id)
        return error_response(request, http::status::forbidden, "forbidden", "client_id is not the signer");
    auto device = message->device.kind + ":" + message->device.name;
    if (auto seen = store_.note_client_seen(client.id, device, message->samples_per_s, clock_()); !seen)
        return internal_error(request, seen.message());
    auto response = scheduler_.assign(client, *message);
    if (!response) return internal_error(request, response.message());
    return json_response(request, http::status::ok, common::to_json(*response));
}

Response Api::upload_result(const Request& request, const ClientRecord& client) {
    auto outcome = intake_.receive(client.id, request.body(), limits_.max_delta_bytes);
    if (!outcome) return internal_error(request, outcome.message());
    if (outcome->http_status != 200)
        return error_response(request, static_cast<http::status>(outcome->http_status), outcome->error, outcome->message);
    return json_response(request, http::status::ok, {{"status", "received"}, {"message", outcome->message}});
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
        return error_response(request, http::status::not_found, "not_found", "no work unit '" + message->wu_id + "' for you");
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
        return error_response(request, http::status::conflict, "conflict", "work unit " + assignment.id + " is not in progress");
    return json_response(request, http::status::ok, {{"status", "abandoned"}});
}

Response Api::result_status(const Request& request, const ClientRecord& client) {
    auto found = own_assignment(request, client);
    if (auto* error = std::get_if<Response>(&found)) return std::move(*error);
    const auto& assignment = std::get<AssignmentRecord>(found);
    common::ResultStatus status{assignment.id, std::string(assignment_state_name(assignment.state)), "", assignment.credit};
    if (assignment.state == AssignmentState::Rejected) {
        auto rejection = store_.rejection_of(assignment.id);
        if (!rejection) return internal_error(request, rejection.message());
        if (*rejection) status.reason = (*rejection)->reason;
    }
    return json_response(request, http::status::ok, common::to_json(status));
}

}  // namespace tessera::server
