// What the volunteer makes of a server's answer, apart from the socket it came on: the HTTP
// response as the client keeps it (status, body, lower-case headers) and a refusal's JSON
// error as an ApiFailure. Shared by HttpClient and ServerApi, and by the fuzz target that runs
// them on made-up answers (fuzz/server_answer.cpp).
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <string>

#include "api_result.h"
#include "http_client.h"

namespace tessera::client {

// An answer read by Beast (its body within HttpOptions::max_body_bytes) as the client keeps it.
HttpResponse http_response_of(boost::beast::http::response<boost::beast::http::string_body>&& response);

// A non-200 answer to `route` as a failure: its kind from the status, its code and message
// from the JSON error body when there is one (docs/protocol.md, "Errors").
ApiFailure refusal_of(const std::string& route, const HttpResponse& reply);

}  // namespace tessera::client
