// The HTTP API (docs/protocol.md, "Routes"): a pure function from a request to a response —
// no socket I/O here; sessions own the connections. Every route, the dashboard's included, is
// one row of its route table. Volunteer routes need a signed request, admin routes the
// operator token. Thread-safe: called concurrently from the I/O threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "blob_store.h"
#include "clock.h"
#include "dashboard.h"
#include "delta_caps.h"
#include "ed25519.h"
#include "event_hub.h"
#include "http_types.h"
#include "request_auth.h"
#include "route_table.h"
#include "server_metrics.h"
#include "state_dir.h"
#include "store.h"
#include "volunteer_service.h"
#include "spooled_upload_body.h"

namespace tessera::server {

// A result upload whose body was spooled to disk as it arrived (spooled_upload_body.h).
using UploadRequest = http::request<SpooledUploadBody>;

struct ApiLimits {
    std::uint64_t small_body_bytes = 64 << 10;  // register, work, heartbeat, abandon, admin
    // New volunteers one address may register per window (Sybil limit); 0 = no limit.
    std::int64_t registrations_per_window = 20;
    std::int64_t registration_window_s = 3600;
    // Client releases: older than the minimum is refused at registration (`client_too_old`);
    // older than the recommended is told to update (GET /api/v1/server). "": none.
    std::string min_client_version;
    std::string recommended_client_version;
};

// A result upload's header passed its checks: its body may be this long (the cap of its
// volunteer's task; the largest, when its units in progress belong to several).
struct UploadAllowance {
    std::uint64_t body_limit = 0;
};

class Api {
public:
    // `delta_caps`: each served task's cap on a result's delta (uploads are held to their own).
    Api(Store& store, const BlobStore& blobs, PublishedModels& published, VolunteerService& volunteers,
        Dashboard& dashboard, EventHub& events, ServerMetrics& metrics, const common::VerifyKey& server_key,
        std::string operator_token_sha256, Clock clock, ApiLimits limits, const DeltaCaps& delta_caps);

    // `peer`: the connection's remote address (the registration limit counts per address).
    Response handle(Request request, std::string peer = {});
    // A result upload read by the session into a spool file (the routes checks_header_first
    // names): authenticated against the body's hash, then taken by the intake.
    Response handle_upload(UploadRequest request);
    // The largest body a route accepts: the session reads no more. For an upload, the largest
    // any task takes; its header's check then gives its own (check_upload_header).
    std::uint64_t body_limit(http::verb method, std::string_view target) const;
    // Signed routes that take an upload check their header before the body is read: an
    // unknown, banned or out-of-window signer is refused without the server reading (or
    // holding) what it sends (request_auth.h, check_signing_headers).
    bool checks_header_first(const http::request_header<>& header) const;
    // Why such a request is refused on its header alone (the status, code and message of
    // the error response), or how long its body may be. Queries the store: the session runs it
    // on the handler pool.
    std::variant<UploadAllowance, AuthFailure> check_upload_header(const http::request_header<>& header);
    // The /metrics group a request's latency is counted in.
    RouteGroup route_group(std::string_view target) const;
    // GET /api/v1/events/stream is server-sent events: the session streams it (no single
    // response), starting after `Last-Event-ID` or `?after=`.
    bool is_event_stream(const http::request_header<>& header) const;
    static std::int64_t event_stream_start(const http::request_header<>& header);
    // Events after `after` as SSE text ("id: N\nevent: KIND\ndata: JSON\n\n" each), from
    // the event hub's memory; `after` moves to the last id written. Empty when nothing is new.
    // A stream's next chunk from the hub's memory (an I/O thread may ask), or nothing when it
    // must come from the store: event_stream_chunk_from_store, on the handler pool.
    std::optional<std::string> event_stream_chunk_from_memory(std::int64_t& after) {
        return events_.chunk_from_memory(after);
    }
    std::string event_stream_chunk_from_store(std::int64_t& after) { return events_.chunk_from_store(after); }
    // What the sessions record (latency, bytes) and /metrics shows.
    ServerMetrics& metrics() { return metrics_; }

private:
    std::vector<Route> make_routes();       // the three groups below, in order
    std::vector<Route> public_routes();     // the dashboard, blobs, metrics and public reads
    std::vector<Route> volunteer_routes();  // registration and the signed requests
    std::vector<Route> admin_routes();      // the operator's, with the token
    Response route(const Request& request, std::string_view path, std::string_view peer);
    Response versions(const Request& request, const std::string& task_id);
    Response volunteers(const Request& request, bool full);
    Response rejections(const Request& request);
    Response events(const Request& request);
    Response audits(const Request& request);
    Response metrics(const Request& request);
    Response register_client(const Request& request, std::string_view peer);
    Response server_info(const Request& request);
    Response request_work(const Request& request, const ClientRecord& client);
    Response intake_answer(const Request& request, const common::Result<IntakeOutcome>& outcome);
    Response heartbeat(const Request& request, const ClientRecord& client);
    Response abandon(const Request& request, const ClientRecord& client);
    Response result_status(const Request& request, const ClientRecord& client);
    // POST /api/v1/admin/tasks/<id>/pause, resume, finish or weight?value=W (`task_id` "": the
    // current task).
    Response task_action(const Request& request, std::string_view task_id, std::string_view action);
    // POST /api/v1/admin/clients/<id>/ban, unban or release (from quarantine).
    Response client_action(const Request& request, std::string_view client_id, std::string_view action);
    std::variant<AssignmentRecord, Response> own_assignment(const Request& request, const ClientRecord& client);

    Store& store_;
    const BlobStore& blobs_;
    PublishedModels& published_;
    VolunteerService& volunteers_;
    Dashboard& dashboard_;
    EventHub& events_;
    ServerMetrics& metrics_;
    const common::VerifyKey& server_key_;
    std::string operator_token_sha256_;
    Clock clock_;
    ApiLimits limits_;
    const DeltaCaps& delta_caps_;
    RouteTable routes_;
};

}  // namespace tessera::server
