// Comma-separated option values ("steam, blender", "22:00-07:00,12:00-13:30", "https://a, https://b"):
// their items with the spaces and tabs around them removed. Empty items are kept; each caller
// says what one means (skipped, or refused).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::client {

inline std::string trimmed(std::string_view text) {
    auto first = text.find_first_not_of(" \t");
    if (first == std::string_view::npos) return "";
    return std::string(text.substr(first, text.find_last_not_of(" \t") - first + 1));
}

inline std::vector<std::string> comma_separated(std::string_view text) {
    std::vector<std::string> items;
    for (std::size_t begin = 0;;) {
        auto comma = text.find(',', begin);
        items.push_back(trimmed(text.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin)));
        if (comma == std::string_view::npos) return items;
        begin = comma + 1;
    }
}

}  // namespace tessera::client
