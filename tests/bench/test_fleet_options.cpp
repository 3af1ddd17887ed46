// The fleet simulator's curve spacing, and its command line refusing bad values by name
// before it reads any data.
#include <doctest/doctest.h>

#include <cmath>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "curve_points.h"
#include "fleet_command.h"

using namespace tessera::bench;

namespace {

struct CommandOutcome {
    int code = -1;
    std::string errors;
};

CommandOutcome fleet(std::vector<std::string> args) {
    args.insert(args.begin(), {"fleet", "--data", "/nonexistent/tessera-data"});
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    std::ostringstream captured;
    auto* previous = std::cerr.rdbuf(captured.rdbuf());
    CommandOutcome outcome;
    outcome.code = run_fleet_command(static_cast<int>(argv.size()), argv.data());
    std::cerr.rdbuf(previous);
    outcome.errors = captured.str();
    return outcome;
}

}  // namespace

TEST_CASE("even curve points split the budget; the last is the budget and they go on past it") {
    CHECK(curve_milestone(1000, 4, 1, CurveSpacing::even) == 250);
    CHECK(curve_milestone(1000, 4, 4, CurveSpacing::even) == 1000);
    CHECK(curve_milestone(1000, 4, 6, CurveSpacing::even) == 1500);
}

TEST_CASE("geometric curve points start at a thousandth of the budget and grow by one ratio") {
    const std::int64_t budget = 409600;
    CHECK(curve_milestone(budget, 40, 1, CurveSpacing::geometric) == 410);
    CHECK(curve_milestone(budget, 40, 40, CurveSpacing::geometric) == budget);
    double ratio = double(curve_milestone(budget, 40, 21, CurveSpacing::geometric)) /
                   double(curve_milestone(budget, 40, 20, CurveSpacing::geometric));
    CHECK(ratio == doctest::Approx(std::pow(1000.0, 1.0 / 39)).epsilon(1e-3));
    CHECK(curve_milestone(budget, 40, 41, CurveSpacing::geometric) > budget);
    for (std::int64_t i = 1; i < 45; ++i)
        CHECK(curve_milestone(budget, 40, i, CurveSpacing::geometric) <=
              curve_milestone(budget, 40, i + 1, CurveSpacing::geometric));
    // A budget below a thousand samples starts at one sample; one point is the budget.
    CHECK(curve_milestone(100, 3, 1, CurveSpacing::geometric) == 1);
    CHECK(curve_milestone(100, 1, 1, CurveSpacing::geometric) == 100);
}

TEST_CASE("spacing names parse; anything else is refused") {
    CHECK(parse_curve_spacing("even") == CurveSpacing::even);
    CHECK(parse_curve_spacing("geometric") == CurveSpacing::geometric);
    CHECK_FALSE(parse_curve_spacing("log").has_value());
}

TEST_CASE("the fleet command refuses bad values by flag, before it reads the dataset") {
    struct Case {
        std::vector<std::string> args;
        std::string names;
    };
    for (const auto& c : std::vector<Case>{
             {{"--spacing", "log"}, "--spacing"},
             {{"--run-lr", "central"}, "--run-lr"},
             {{"--run-lr", "central=0"}, "--run-lr"},
             {{"--run-lr", "central=4e-3x"}, "--run-lr"},
             {{"--run-lr", "fedasnyc=8e-3"}, "fedasnyc"},
             {{"--judge-guidance", "3,-1"}, "--judge-guidance"},
             {{"--judge-guidance", "three"}, "--judge-guidance"},
             {{"--judge-guidance", ","}, "--judge-guidance"},
             {{"--momentum", "1"}, "--momentum"},
             {{"--inner-state", "warm"}, "--inner-state"},
             {{"--schedule-samples", "0"}, "--schedule-samples"},
             {{"--routing", "top3"}, "--routing"},
             {{"--router-share", "1"}, "--router-share"},
             {{"--experts", "/nonexistent-clusters", "--fidelity-captions", "0"}, "--judge"},
         }) {
        CAPTURE(c.args[1]);
        auto outcome = fleet(c.args);
        CHECK(outcome.code == 2);
        CHECK(outcome.errors.find(c.names) != std::string::npos);
        CHECK(outcome.errors.find("/nonexistent") == std::string::npos);  // refused before the data is read
    }
}
