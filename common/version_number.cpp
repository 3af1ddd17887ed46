// Dotted release versions compared number by number.
#include "version_number.h"

#include <charconv>

namespace tessera::common {

std::optional<VersionNumber> parse_version(std::string_view text) {
    VersionNumber parts{};
    for (std::size_t i = 0; i < parts.size(); ++i) {
        bool last = i + 1 == parts.size();
        auto dot = last ? text.size() : text.find('.');
        if (dot == std::string_view::npos) return std::nullopt;
        auto part = text.substr(0, dot);
        if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string_view::npos)
            return std::nullopt;
        auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), parts[i]);
        if (error != std::errc{} || end != part.data() + part.size()) return std::nullopt;
        text = last ? std::string_view{} : text.substr(dot + 1);
    }
    return parts;
}

bool version_older(std::string_view version, std::string_view than) {
    auto mine = parse_version(version);
    auto other = parse_version(than);
    if (!other) return false;
    return !mine || *mine < *other;
}

}  // namespace tessera::common
