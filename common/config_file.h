// A program's configuration file (/etc/tessera/client.conf, server.conf): one command-line
// option per line as "name = value", the option's long name without its dashes; "#" starts a
// comment; a flag is "name = true" ("false" leaves it off); a value may be in double quotes.
// The file becomes command-line words placed before the real command line, so an option given
// on the command line wins over the file (docs/operations.md, "Configuration files").
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "result.h"

namespace tessera::common {

// The words "--name=value" (or "--name" for a flag set true) of the file's text, in its order.
// An error names the line: not "name = value", a name that is not an option's, "config".
Result<std::vector<std::string>> parse_config_text(std::string_view text);
// The same for a file; an unreadable file is an error naming it.
Result<std::vector<std::string>> read_config_file(const std::filesystem::path& path);

// The value of --config (as "--config F" or "--config=F") in a command line, or empty.
std::string config_path_argument(int argc, const char* const* argv);

}  // namespace tessera::common
