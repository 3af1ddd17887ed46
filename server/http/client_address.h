// The address a request comes from, for the per-address limits (registrations): the TCP peer,
// or, when the peer is a trusted reverse proxy (nginx in front, docs/operations.md), the
// right-most address in X-Forwarded-For that is not itself a trusted proxy. What a client
// writes at the left of that header is never believed: each proxy appends the address it saw.
#pragma once

#include <boost/asio/ip/address.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "result.h"

namespace tessera::server {

// `peer`: the TCP peer's address as text; `forwarded_for`: the request's X-Forwarded-For, or
// empty. A header with a malformed entry before the first untrusted address gives the peer.
std::string client_address(const std::string& peer, std::string_view forwarded_for,
                           const std::vector<boost::asio::ip::address>& trusted_proxies);

// "127.0.0.1, ::1" as addresses; a name or a malformed address is a named error.
common::Result<std::vector<boost::asio::ip::address>> parse_trusted_proxies(std::string_view text);

}  // namespace tessera::server
