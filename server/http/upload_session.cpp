// An upload's session parts that are not templates: its header checked on the handler pool
// before the body is read, its bytes spooled on the handler pool, the slot it takes, the refusals that close the connection, and the
// answer computed on the handler pool.
#include "upload_session.h"

#include "request_signing.h"

namespace tessera::server::upload_session {
namespace {

constexpr int kUploadRetryAfterS = 10;

asio::awaitable<bool> spool_received(SpoolWriter& writer, bool last) {
    writer.spool_received();
    if (last) writer.finish();
    co_return last;
}

asio::awaitable<std::optional<Response>> respond_to_upload(Api& api, UploadRequest request) {
    co_return api.handle_upload(std::move(request));
}

using HeaderCheck = std::variant<UploadAllowance, AuthFailure>;

asio::awaitable<HeaderCheck> upload_header_check(Api& api, const http::request_header<>& header) {
    co_return api.check_upload_header(header);
}

// A signed upload's header checked on the handler pool (it queries the store) before the
// body is read.
asio::awaitable<HeaderCheck> checked_on_handler_pool(asio::thread_pool& handlers, Api& api,
                                                     const http::request_header<>& header) {
    auto work = upload_header_check(api, header);
    auto checked = co_await on_handler_pool(handlers, std::move(work));
    co_return checked;
}

// The client an upload's signing headers name (checked by then).
std::string signing_client_id(const http::request_header<>& header) {
    auto name = beast::string_view(common::kHeaderClient.data(), common::kHeaderClient.size());
    return std::string(header[name]);
}

// An error answered before the request's body was read: the connection closes after it, since
// the unread body stands between this request and the next.
Request closing_stub(const http::request_header<>& header) {
    Request stub;
    stub.version(header.version());
    stub.keep_alive(false);
    return stub;
}

Response closing_error(const http::request_header<>& header, http::status status, const std::string& code,
                       const std::string& message) {
    return error_response(closing_stub(header), status, code, message);
}

}  // namespace

asio::awaitable<void> spool_on_handler_pool(asio::thread_pool& handlers, SpoolWriter& writer, bool last) {
    auto work = spool_received(writer, last);
    auto spooled = co_await on_handler_pool(handlers, std::move(work));
    (void)spooled;
}

asio::awaitable<std::optional<Response>> answer_upload(asio::thread_pool& handlers, Api& api, UploadRequest request) {
    auto work = respond_to_upload(api, std::move(request));
    auto response = co_await on_handler_pool(handlers, std::move(work));
    co_return response;
}

Response too_large(const http::request_header<>& header, std::uint64_t limit) {
    return closing_error(header, http::status::payload_too_large, "too_large",
                         "the body exceeds this route's limit of " + std::to_string(limit) + " bytes");
}

asio::awaitable<std::variant<UploadSlots::Slot, Response>> admit_upload(SessionContext& context,
                                                                        const http::request_header<>& header,
                                                                        std::optional<std::uint64_t> length,
                                                                        std::uint64_t& limit) {
    auto checked = co_await checked_on_handler_pool(context.handlers, context.api, header);
    if (auto* failure = std::get_if<AuthFailure>(&checked)) co_return refusal_response(closing_stub(header), *failure);
    limit = std::get<UploadAllowance>(checked).body_limit;
    if (length && *length > limit) co_return too_large(header, limit);
    auto slot = context.uploads.take(signing_client_id(header), length.value_or(limit));
    if (slot) co_return std::move(*slot);
    const auto& settings = context.settings;
    co_return busy_response(closing_stub(header),
                            "the server is receiving as many uploads as it holds (" +
                                std::to_string(settings.upload_spool_bytes >> 20) + " MiB in all, " +
                                std::to_string(settings.max_uploads_per_client) + " per volunteer); retry later",
                            kUploadRetryAfterS);
}

}  // namespace tessera::server::upload_session
