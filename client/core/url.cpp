// URL parsing for server and blob-cache addresses.
#include "url.h"

#include <charconv>

namespace tessera::client {

std::string Url::origin() const {
    return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(port);
}

common::Result<Url> parse_url(std::string_view text) {
    Url url;
    auto fail = [&] {
        return common::make_error("bad URL '" + std::string(text) + "': expected http(s)://host[:port][/path]");
    };
    std::string_view rest;
    if (text.starts_with("https://")) {
        url.tls = true;
        url.port = 443;
        rest = text.substr(8);
    } else if (text.starts_with("http://")) {
        rest = text.substr(7);
    } else {
        return fail();
    }
    auto slash = rest.find('/');
    auto authority = rest.substr(0, slash);
    url.path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
    while (!url.path.empty() && url.path.back() == '/') url.path.pop_back();
    // "[v6]:port", "[v6]", "host:port" or "host".
    std::string_view host = authority;
    std::string_view port_text;
    if (authority.starts_with('[')) {
        auto close = authority.find(']');
        if (close == std::string_view::npos) return fail();
        host = authority.substr(1, close - 1);
        auto after = authority.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') return fail();
            port_text = after.substr(1);
        }
    } else if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
        host = authority.substr(0, colon);
        port_text = authority.substr(colon + 1);
    }
    if (!port_text.empty() || authority.ends_with(':')) {
        unsigned port = 0;
        auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
        if (error != std::errc() || end != port_text.data() + port_text.size() || port == 0 || port > 65535)
            return fail();
        url.port = static_cast<std::uint16_t>(port);
    }
    authority = host;
    if (authority.empty()) return fail();
    url.host = std::string(authority);
    return url;
}

}  // namespace tessera::client
