// The soak's two commands.
#include "soak_command.h"

#include <cxxopts.hpp>

#include <fstream>
#include <iostream>
#include <thread>

#include "command_line.h"
#include "raw_connections.h"
#include "soak_check.h"
#include "soak_fleet.h"
#include "url.h"

namespace tessera::bench {
namespace {

// Runs `body` with the parsed options; usage errors exit 2, failures 1.
template <class Body>
int with_options(const char* name, cxxopts::Options& parser, int argc, char** argv, Body body) {
    try {
        auto parsed = common::parse_command_line(parser, argc, argv);
        if (!parsed) return parsed.exit_code;
        const auto& args = *parsed;
        return body(args);
    } catch (const cxxopts::exceptions::exception& error) {
        std::cerr << name << ": " << error.what() << "\n";
        return 2;
    }
}

}  // namespace

int run_soak_command(int argc, char** argv) {
    cxxopts::Options parser("tessera-bench soak", "Simulated volunteers and misbehaving connections against servers");
    SoakLoadOptions defaults;
    parser.add_options()("server", "a server's base URL (repeat for several)", cxxopts::value<std::vector<std::string>>())(
        "volunteers", "registered volunteers",
        cxxopts::value<std::int64_t>()->default_value(std::to_string(defaults.volunteers)))(
        "connections", "request threads (requests in flight at once)",
        cxxopts::value<int>()->default_value(std::to_string(defaults.connections)))(
        "minutes", "how long the load runs", cxxopts::value<double>()->default_value("5"))(
        "unit-seconds", "mean seconds a volunteer spends on a unit", cxxopts::value<double>()->default_value("60"))(
        "hostile", "share of hostile volunteers", cxxopts::value<double>()->default_value("0.05"))(
        "churn", "share of volunteers that leave mid-unit and come back", cxxopts::value<double>()->default_value("0.1"))(
        "slow-connections", "slow or broken connections at a time (to the first server)",
        cxxopts::value<int>()->default_value("6"))("seed", "random seed", cxxopts::value<std::uint64_t>()->default_value("1"))(
        "out", "directory for acks.txt, latency.csv and tally.txt", cxxopts::value<std::string>());
    return with_options("tessera-bench soak", parser, argc, argv, [](const cxxopts::ParseResult& args) {
        if (!args.count("server") || !args.count("out")) {
            std::cerr << "tessera-bench soak: needs --server URL and --out DIR\n";
            return 2;
        }
        SoakLoadOptions options;
        options.servers = args["server"].as<std::vector<std::string>>();
        options.volunteers = args["volunteers"].as<std::int64_t>();
        options.connections = args["connections"].as<int>();
        options.minutes = args["minutes"].as<double>();
        options.unit_seconds = args["unit-seconds"].as<double>();
        options.hostile_share = args["hostile"].as<double>();
        options.churn_share = args["churn"].as<double>();
        options.seed = args["seed"].as<std::uint64_t>();
        auto first = client::parse_url(options.servers.front());
        if (!first) {
            std::cerr << "tessera-bench soak: " << first.message() << "\n";
            return 2;
        }
        std::filesystem::path out = args["out"].as<std::string>();
        std::filesystem::create_directories(out);
        SoakRecord record(out / "acks.txt");
        auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(options.minutes * 60);
        std::thread raw([&] {
            run_raw_connections(first->port, args["slow-connections"].as<int>(),
                                std::chrono::time_point_cast<std::chrono::steady_clock::duration>(end), record);
        });
        auto status = run_soak_fleet(options, record);
        raw.join();
        record.write_latency_csv(out / "latency.csv");
        std::ofstream(out / "tally.txt") << record.tally();
        std::cout << "soak load: " << record.acknowledged_count() << " results acknowledged\n" << record.tally();
        if (!status) {
            std::cerr << "tessera-bench soak: " << status.message() << "\n";
            return 1;
        }
        return 0;
    });
}

int run_soak_check_command(int argc, char** argv) {
    cxxopts::Options parser("tessera-bench soak-check", "Every acknowledged result merged once or refused");
    parser.add_options()("db", "the server's database URL (sqlite:PATH or postgresql://…)", cxxopts::value<std::string>())(
        "acks", "the acks.txt `tessera-bench soak` wrote", cxxopts::value<std::string>())(
        "wait", "seconds results may take to settle", cxxopts::value<double>()->default_value("120"));
    return with_options("tessera-bench soak-check", parser, argc, argv, [](const cxxopts::ParseResult& args) {
        if (!args.count("db") || !args.count("acks")) {
            std::cerr << "tessera-bench soak-check: needs --db URL and --acks FILE\n";
            return 2;
        }
        SoakCheckOptions options{args["db"].as<std::string>(), args["acks"].as<std::string>(),
                                 args["wait"].as<double>()};
        auto verdict = check_soak(options, std::cout);
        if (!verdict) {
            std::cerr << "tessera-bench soak-check: " << verdict.message() << "\n";
            return 1;
        }
        return verdict->passed() ? 0 : 1;
    });
}

}  // namespace tessera::bench
