// Configuration files: the lines they accept, the named errors of the ones they refuse, and
// --config through cxxopts with the command line winning over the file; the parsing every
// command shares (-h, usage mistakes).
#include <doctest/doctest.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "command_line.h"
#include "config_file.h"
#include "options_with_config.h"
#include "temp_dir.h"

using namespace tessera::common;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

cxxopts::Options test_options() {
    cxxopts::Options options("prog", "test");
    options.add_options()("server", "", cxxopts::value<std::string>())(
        "threads", "", cxxopts::value<int>()->default_value("0"))("name", "", cxxopts::value<std::string>()->default_value("v"))(
        "once", "");
    add_config_option(options);
    return options;
}

cxxopts::ParseResult parse(cxxopts::Options& options, std::vector<const char*> argv) {
    auto result = parse_with_config(options, static_cast<int>(argv.size()), argv.data());
    REQUIRE_MESSAGE(result.ok(), (result.ok() ? "" : result.message()));
    return std::move(*result);
}

}  // namespace

TEST_CASE("name = value lines become command-line words, comments and blanks ignored") {
    auto words = parse_config_text(
        "# the volunteer\n"
        "server = https://example.org:8443   # where\n"
        "\n"
        "  threads=4\r\n"
        "name = \"my # machine\"\n"
        "once = true\n"
        "quiet = false\n"
        "ca-cert =\n");
    REQUIRE(words.ok());
    std::vector<std::string> expected{"--server=https://example.org:8443", "--threads=4", "--name=my # machine", "--once",
                                      "--ca-cert="};
    CHECK(*words == expected);
    CHECK(parse_config_text("").value().empty());
    CHECK(parse_config_text("# only a comment").value().empty());
}

TEST_CASE("a malformed line is refused with its number") {
    auto check = [](const std::string& text, const std::string& part) {
        auto words = parse_config_text(text);
        REQUIRE_FALSE(words.ok());
        CHECK_MESSAGE(contains(words.message(), part), words.message());
    };
    check("server = x\nthreads 4\n", "line 2: expected 'name = value'");
    check("Server = x", "line 1: 'Server' is not an option name");
    check("--server = x", "is not an option name");
    check(" = x", "line 1: '' is not an option name");
    check("config = other.conf", "cannot name another");
    check("name = \"unterminated", "must end with one");
    check("name = \"a\"b\"", "cannot hold a double quote");
}

TEST_CASE("an unreadable file is an error naming it") {
    auto words = read_config_file("/nonexistent/tessera.conf");
    REQUIRE_FALSE(words.ok());
    CHECK(contains(words.message(), "/nonexistent/tessera.conf"));
}

TEST_CASE("--config: the file's options apply, the command line wins, the file's mistakes name it") {
    tessera::testing::TempDir dir;
    auto path = dir.path() / "client.conf";
    std::ofstream(path) << "server = http://127.0.0.1:1\nthreads = 3\nonce = true\n";
    auto options = test_options();
    auto both = parse(options, {"prog", "--config", path.c_str(), "--threads", "7"});
    CHECK(both["server"].as<std::string>() == "http://127.0.0.1:1");
    CHECK(both["threads"].as<int>() == 7);
    CHECK(both.count("once") > 0);
    CHECK(both["name"].as<std::string>() == "v");

    auto options2 = test_options();
    auto file_only = parse(options2, {"prog", ("--config=" + path.string()).c_str()});
    CHECK(file_only["threads"].as<int>() == 3);

    auto options3 = test_options();
    auto none = parse(options3, {"prog", "--threads", "2"});
    CHECK(none["threads"].as<int>() == 2);
    CHECK(none.count("server") == 0);

    std::ofstream(path) << "server = http://127.0.0.1:1\nsevrer = typo\n";
    auto options4 = test_options();
    const char* argv[] = {"prog", "--config", path.c_str()};
    auto unknown = parse_with_config(options4, 3, argv);
    REQUIRE_FALSE(unknown.ok());
    CHECK(contains(unknown.message(), path.string()));
    CHECK(contains(unknown.message(), "sevrer"));

    std::ofstream(path) << "threads = many\n";
    auto options5 = test_options();
    auto bad_value = parse_with_config(options5, 3, argv);
    REQUIRE_FALSE(bad_value.ok());
    CHECK(contains(bad_value.message(), path.string()));

    auto options6 = test_options();
    const char* missing[] = {"prog", "--config", "/nonexistent/x.conf"};
    CHECK_FALSE(parse_with_config(options6, 3, missing).ok());
}

TEST_CASE("a command's line: -h prints the help (0), a mistake is named after the command (2), else the options") {
    tessera::testing::TempDir dir;
    auto run = [&](std::vector<std::string> words, bool with_config, std::string& printed) {
        std::vector<char*> argv;
        for (auto& word : words) argv.push_back(word.data());
        auto options = test_options();
        std::ostringstream out, err;
        auto* standard_out = std::cout.rdbuf(out.rdbuf());
        auto* standard_error = std::cerr.rdbuf(err.rdbuf());
        auto parsed = parse_command_line(options, static_cast<int>(argv.size()), argv.data(), with_config);
        std::cout.rdbuf(standard_out);
        std::cerr.rdbuf(standard_error);
        printed = out.str() + err.str();
        return parsed;
    };
    std::string printed;
    auto help = run({"prog", "-h"}, false, printed);
    CHECK_FALSE(help);
    CHECK(help.exit_code == 0);
    CHECK(contains(printed, "--threads"));
    CHECK(contains(printed, "--help"));

    auto unknown = run({"prog", "--sevrer", "x"}, false, printed);
    CHECK_FALSE(unknown);
    CHECK(unknown.exit_code == 2);
    CHECK(printed.starts_with("prog: "));
    CHECK(contains(printed, "sevrer"));
    auto bad_value = run({"prog", "--threads", "many"}, false, printed);
    CHECK_FALSE(bad_value);
    CHECK(bad_value.exit_code == 2);

    auto path = dir.path() / "prog.conf";
    std::ofstream(path) << "threads = few\n";
    auto bad_file = run({"prog", "--config", path.string()}, true, printed);
    CHECK_FALSE(bad_file);
    CHECK(bad_file.exit_code == 2);
    CHECK(contains(printed, path.string()));

    std::ofstream(path) << "threads = 5\n";
    auto fine = run({"prog", "--config", path.string(), "--once"}, true, printed);
    REQUIRE(fine);
    CHECK((*fine)["threads"].as<int>() == 5);
    CHECK((*fine).count("once") == 1);
    CHECK(printed.empty());
}
