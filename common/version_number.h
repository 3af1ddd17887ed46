// Release versions as "MAJOR.MINOR.PATCH" (decimal, each below 10^6): the client's and the
// server's, and the minimum and recommended client versions a server states.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace tessera::common {

using VersionNumber = std::array<int, 3>;

// The version's three numbers, or nothing when it is not of that form.
std::optional<VersionNumber> parse_version(std::string_view text);
// Whether `version` is older than `than`; a version that does not parse counts as older (a
// client that cannot say what it is has no claim to be new enough).
bool version_older(std::string_view version, std::string_view than);

}  // namespace tessera::common
