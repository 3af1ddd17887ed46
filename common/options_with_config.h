// --config FILE for a program's cxxopts options: the file's options (config_file.h) are parsed
// before the command line's, so the command line wins. A mistake in the file is reported with
// the file's name; the command line's own mistakes throw as Options::parse does.
#pragma once

#include <cxxopts.hpp>

#include <string>
#include <vector>

#include "config_file.h"
#include "result.h"

namespace tessera::common {

inline void add_config_option(cxxopts::Options& options) {
    options.add_options()("config", "read options from this file first (name = value lines; the command line wins)",
                          cxxopts::value<std::string>());
}

inline Result<cxxopts::ParseResult> parse_with_config(cxxopts::Options& options, int argc, const char* const* argv) {
    auto path = config_path_argument(argc, argv);
    if (path.empty()) return options.parse(argc, argv);
    auto words = read_config_file(path);
    if (!words) return words.error();
    std::vector<const char*> file_words{argv[0]};
    for (const auto& word : *words) file_words.push_back(word.c_str());
    try {
        (void)options.parse(static_cast<int>(file_words.size()), file_words.data());
    } catch (const cxxopts::exceptions::exception& error) {
        return make_error(path + ": " + error.what());
    }
    std::vector<const char*> all = file_words;
    all.insert(all.end(), argv + 1, argv + argc);
    return options.parse(static_cast<int>(all.size()), all.data());
}

}  // namespace tessera::common
