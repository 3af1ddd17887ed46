// The parsing every command shares (cxxopts): -h/--help is added to its options and prints
// their help (exit 0); a usage mistake (an unknown option, a value of the wrong type, a bad
// --config file) is printed after the command's name (exit 2); otherwise the parsed options.
#pragma once

#include <cxxopts.hpp>

#include <iostream>
#include <optional>

#include "options_with_config.h"

namespace tessera::common {

struct ParsedCommandLine {
    std::optional<cxxopts::ParseResult> args;
    int exit_code = 0;  // the command's, when `args` is empty

    explicit operator bool() const { return args.has_value(); }
    const cxxopts::ParseResult& operator*() const { return *args; }
};

// `with_config`: --config FILE is read first (options_with_config.h; the caller adds it).
inline ParsedCommandLine parse_command_line(cxxopts::Options& options, int argc, char** argv,
                                            bool with_config = false) {
    options.add_options()("h,help", "show this help");
    ParsedCommandLine parsed;
    try {
        if (!with_config) {
            parsed.args = options.parse(argc, argv);
        } else if (auto read = parse_with_config(options, argc, argv); read) {
            parsed.args = std::move(*read);
        } else {
            std::cerr << options.program() << ": " << read.message() << "\n";
            return {std::nullopt, 2};
        }
    } catch (const cxxopts::exceptions::exception& error) {
        std::cerr << options.program() << ": " << error.what() << "\n";
        return {std::nullopt, 2};
    }
    if (parsed.args->count("help")) {
        std::cout << options.help() << "\n";
        return {std::nullopt, 0};
    }
    return parsed;
}

}  // namespace tessera::common
