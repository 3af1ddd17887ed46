// The logger both programs use: text lines on the right stream with the program's name before
// warnings and errors, JSON objects with event, level, message, time and fields, quiet silencing
// information only, and the process's logger replaced once.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <iostream>
#include <sstream>
#include <string>

#include "logger.h"

using namespace tessera::common;

namespace {

struct Captured {
    std::string out, err;
};

// What `write` prints on standard output and standard error.
template <class Write>
Captured captured(Write&& write) {
    std::ostringstream out, err;
    auto* standard_out = std::cout.rdbuf(out.rdbuf());
    auto* standard_error = std::cerr.rdbuf(err.rdbuf());
    write();
    std::cout.rdbuf(standard_out);
    std::cerr.rdbuf(standard_error);
    return {out.str(), err.str()};
}

}  // namespace

TEST_CASE("text: information on stdout, warnings and errors on stderr after the program's name") {
    Logger log("tessera-server", false, false);
    auto info = captured([&] { log.info("listening", "listening on http://127.0.0.1:1"); });
    CHECK(info.out == "listening on http://127.0.0.1:1\n");
    CHECK(info.err.empty());
    auto warning = captured([&] { log.warning("lease", "renewing the lease failed"); });
    CHECK(warning.out.empty());
    CHECK(warning.err == "tessera-server: renewing the lease failed\n");
    auto error = captured([&] { log.error("merge", "the merge failed"); });
    CHECK(error.err == "tessera-server: the merge failed\n");

    Logger stages("tessera-server", false, false, "", Logger::InfoStream::Stderr);
    auto on_stderr = captured([&] { stages.info("orphans_removed", "removed 2 orphan files"); });
    CHECK(on_stderr.out.empty());
    CHECK(on_stderr.err == "tessera-server: removed 2 orphan files\n");

    Logger named("tessera-client", false, false, "host:8443");
    CHECK(captured([&] { named.info("unit", "trained"); }).out == "[host:8443] trained\n");
    CHECK(captured([&] { named.error("no answer"); }).err == "tessera-client: [host:8443] no answer\n");
}

TEST_CASE("quiet silences information, never warnings or errors") {
    Logger log("tessera-client", true, false);
    CHECK(log.quiet());
    auto info = captured([&] { log.info("unit", "trained"); });
    CHECK(info.out.empty());
    CHECK(info.err.empty());
    CHECK(captured([&] { log.warning("disk", "the disk is nearly full"); }).err ==
          "tessera-client: the disk is nearly full\n");
}

TEST_CASE("JSON: one object per line with event, level, message, time, the server and the fields") {
    Logger log("tessera-server", false, true, "host:8443");
    CHECK(log.quiet());  // no progress bars between the lines
    auto lines = captured([&] {
        log.info("aggregator_leads", "this process now runs the aggregator", {{"task_id", "t-1"}, {"version", 7}});
        log.error("merge", "the merge failed");
    });
    CHECK(lines.err.empty());
    std::istringstream in(lines.out);
    std::string first, second;
    REQUIRE(std::getline(in, first));
    REQUIRE(std::getline(in, second));
    auto leads = boost::json::parse(first).as_object();
    CHECK(leads.at("event").as_string() == "aggregator_leads");
    CHECK(leads.at("level").as_string() == "info");
    CHECK(leads.at("message").as_string() == "this process now runs the aggregator");
    CHECK(leads.at("task_id").as_string() == "t-1");
    CHECK(leads.at("version").as_int64() == 7);
    CHECK(leads.at("server").as_string() == "host:8443");
    CHECK(leads.at("time").as_int64() > 1'700'000'000);
    auto failed = boost::json::parse(second).as_object();
    CHECK(failed.at("level").as_string() == "error");
    CHECK(failed.at("event").as_string() == "merge");
}

TEST_CASE("the process's logger: text under \"tessera\" until main sets another") {
    CHECK(captured([] { process_log().error("x", "before"); }).err == "tessera: before\n");
    set_process_log(Logger("tessera-server", false, true));
    auto json = captured([] { process_log().warning("lease", "after"); });
    CHECK(boost::json::parse(json.out).at("level").as_string() == "warning");
    set_process_log(Logger("tessera", false, false));
}
