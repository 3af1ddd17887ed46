// Configuration files as command-line words: strict about the shape of a line, silent about
// the meaning of a name (the program's option parser says whether it knows it).
#include "config_file.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "text_trim.h"

namespace tessera::common {
namespace {

constexpr std::string_view kBlanks = " \t\r";

bool is_option_name(std::string_view name) {
    if (name.empty() || name.front() == '-') return false;
    for (char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    return true;
}

// A value without its double quotes (a quoted value may hold '#' and leading blanks).
Result<std::string> unquoted(std::string_view value) {
    if (value.empty() || value.front() != '"') return std::string(value);
    if (value.size() < 2 || value.back() != '"') return make_error("a value that opens a double quote must end with one");
    auto inner = value.substr(1, value.size() - 2);
    if (inner.find('"') != std::string_view::npos) return make_error("a quoted value cannot hold a double quote");
    return std::string(inner);
}

// The line without a comment: '#' outside double quotes.
std::string_view without_comment(std::string_view line) {
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '"') quoted = !quoted;
        if (line[i] == '#' && !quoted) return line.substr(0, i);
    }
    return line;
}

}  // namespace

Result<std::vector<std::string>> parse_config_text(std::string_view text) {
    std::vector<std::string> words;
    std::size_t number = 0;
    for (std::size_t start = 0; start <= text.size();) {
        auto end = std::min(text.find('\n', start), text.size());
        auto line = trimmed(without_comment(text.substr(start, end - start)), kBlanks);
        start = end + 1;
        auto where = "line " + std::to_string(++number) + ": ";
        if (line.empty()) continue;
        auto equals = line.find('=');
        if (equals == std::string_view::npos)
            return make_error(where + "expected 'name = value', got '" + std::string(line) + "'");
        auto name = trimmed(line.substr(0, equals), kBlanks);
        if (!is_option_name(name))
            return make_error(where + "'" + std::string(name) + "' is not an option name (lower-case letters, digits, '-')");
        if (name == "config") return make_error(where + "a configuration file cannot name another (config)");
        auto value = unquoted(trimmed(line.substr(equals + 1), kBlanks));
        if (!value) return make_error(where + value.message());
        if (*value == "true")
            words.push_back("--" + std::string(name));
        else if (*value != "false")
            words.push_back("--" + std::string(name) + "=" + *value);
    }
    return words;
}

Result<std::vector<std::string>> read_config_file(const std::filesystem::path& path) {
    std::ifstream file(path, std::ios::binary);
    if (!file) return make_error("cannot read the configuration file " + path.string());
    std::ostringstream text;
    text << file.rdbuf();
    if (file.bad()) return make_error("cannot read the configuration file " + path.string());
    auto words = parse_config_text(text.str());
    if (!words) return make_error(path.string() + ": " + words.message());
    return words;
}

std::string config_path_argument(int argc, const char* const* argv) {
    for (int i = 1; i < argc; ++i) {
        std::string_view word = argv[i];
        if (word == "--") break;
        if (word == "--config" && i + 1 < argc) return argv[i + 1];
        if (word.starts_with("--config=")) return std::string(word.substr(9));
    }
    return {};
}

}  // namespace tessera::common
