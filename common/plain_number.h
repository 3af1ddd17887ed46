// A figure as people write it in a refusal or a log line: 4.5, not 4.500000 (six significant digits).
#pragma once

#include <cstdio>
#include <string>

namespace tessera::common {

inline std::string plain_number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
}

}  // namespace tessera::common
