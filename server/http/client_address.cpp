#include "client_address.h"

#include <algorithm>
#include <optional>

#include "text_trim.h"

namespace tessera::server {
namespace {

namespace ip = boost::asio::ip;
using common::trimmed;

std::optional<ip::address> address_of(std::string_view text) {
    boost::system::error_code error;
    auto address = ip::make_address(std::string(trimmed(text)), error);
    if (error) return std::nullopt;
    // An IPv4 client seen through an IPv6 socket is the IPv4 address.
    if (address.is_v6() && address.to_v6().is_v4_mapped())
        return ip::address(ip::make_address_v4(ip::v4_mapped, address.to_v6()));
    return address;
}

bool is_trusted(const ip::address& address, const std::vector<ip::address>& trusted) {
    return std::find(trusted.begin(), trusted.end(), address) != trusted.end();
}

}  // namespace

std::string client_address(const std::string& peer, std::string_view forwarded_for,
                           const std::vector<ip::address>& trusted_proxies) {
    auto from = address_of(peer);
    if (!from || !is_trusted(*from, trusted_proxies) || trimmed(forwarded_for).empty()) return peer;
    // Right to left: each hop appended the address it saw.
    for (std::size_t end = forwarded_for.size();;) {
        auto comma = end == 0 ? std::string_view::npos : forwarded_for.rfind(',', end - 1);
        auto start = comma == std::string_view::npos ? 0 : comma + 1;
        auto hop = address_of(forwarded_for.substr(start, end - start));
        if (!hop) return peer;
        if (!is_trusted(*hop, trusted_proxies)) return hop->to_string();
        if (comma == std::string_view::npos) return hop->to_string();  // proxies all the way
        end = comma;
    }
}

common::Result<std::vector<ip::address>> parse_trusted_proxies(std::string_view text) {
    std::vector<ip::address> addresses;
    while (!trimmed(text).empty()) {
        auto comma = text.find(',');
        auto item = trimmed(text.substr(0, comma));
        if (!item.empty()) {
            auto address = address_of(item);
            if (!address)
                return common::make_error("\"" + std::string(item) +
                                          "\" is not an IP address (give the proxy's address, "
                                          "e.g. 127.0.0.1)");
            addresses.push_back(*address);
        }
        if (comma == std::string_view::npos) break;
        text.remove_prefix(comma + 1);
    }
    return addresses;
}

}  // namespace tessera::server
