// A server's answer as the volunteer reads it: Beast's response parser with the client's body
// limit (client/core/http_client.cpp), the answer kept as an HttpResponse, a refusal's JSON
// error turned into an ApiFailure, and a 200 body parsed as the answers the client expects.
// Seeds are the server's own answers (server/http/http_types.h), serialized as on the wire.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>

#include "fuzz_target.h"
#include "http_types.h"
#include "protocol.h"
#include "server_answer.h"

using namespace tessera;
namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(client::HttpOptions{}.max_body_bytes);
    parser.eager(true);
    boost::beast::error_code error;
    std::size_t used = 0;
    while (!error && !parser.is_done() && used < size) {
        auto step = parser.put(boost::asio::buffer(data + used, size - used), error);
        if (step == 0 && !error) break;
        used += step;
    }
    // The connection closes after the bytes, as http::read treats an end of stream.
    if ((error == http::error::need_more || !error) && !parser.is_done() && parser.got_some()) {
        error = {};
        parser.put_eof(error);
    }
    if (error || !parser.is_done()) return 0;
    auto reply = client::http_response_of(parser.release());
    if (reply.status != 200) {
        (void)client::refusal_of("work", reply);
        return 0;
    }
    (void)common::parse_message<common::WorkResponse>(reply.body);
    (void)common::parse_message<common::RegisterResponse>(reply.body);
    (void)common::parse_message<common::HeartbeatResponse>(reply.body);
    (void)common::parse_message<common::ResultStatus>(reply.body);
    return 0;
}

namespace {

// A response as the server writes it onto the socket.
common::Bytes on_the_wire(server::Response response) {
    common::Bytes bytes;
    boost::beast::error_code error;
    while (!response.is_done()) {
        auto buffers = response.prepare(error);
        if (error) break;
        std::size_t taken = 0;
        for (auto buffer : buffers) {
            auto* begin = static_cast<const std::uint8_t*>(buffer.data());
            bytes.insert(bytes.end(), begin, begin + buffer.size());
            taken += buffer.size();
        }
        response.consume(taken);
    }
    return bytes;
}

}  // namespace

std::vector<common::Bytes> fuzz_seeds() {
    server::Request request{http::verb::post, "/api/v1/work", 11};
    common::WorkResponse work;
    work.retry_after_s = 30;
    common::RegisterResponse registered;
    registered.client_id = "c-0123456789ab";
    std::string chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n";
    return {on_the_wire(server::json_response(request, http::status::ok, common::to_json(work))),
            on_the_wire(server::json_response(request, http::status::ok, common::to_json(registered))),
            on_the_wire(server::error_response(request, http::status::forbidden, "banned", "this key is banned")),
            on_the_wire(server::busy_response(request, "the server is busy", 60)),
            on_the_wire(server::internal_error(request, "database or disk is full")),
            common::Bytes(chunked.begin(), chunked.end())};
}
