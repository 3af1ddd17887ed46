// Staleness weights and their text form ("const", "poly:A", "hinge:A,B", "conc:M,A[,R]").
#include "staleness.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <vector>

namespace tessera::server {
namespace {

constexpr std::string_view kAcceptedForms =
    "expected const, poly:A (A > 0), hinge:A,B (A, B >= 0) or conc:M,A[,R] (M > 0, A >= 0, R = 0 or >= M)";

// Shortest text that reads back as the same double, so to_string round-trips exactly.
std::string format_number(double value) {
    char buffer[64];
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
    if (ec != std::errc{}) return "nan";
    return std::string(buffer, end);
}

// The whole of `text` as a finite number, or nothing.
std::optional<double> parse_number(std::string_view text) {
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
    return value;
}

// M·C_v, the staleness up to which `conc` gives full weight.
double full_weight_limit(const Staleness& s, std::int64_t concurrency_versions) {
    return s.b * static_cast<double>(std::max<std::int64_t>(concurrency_versions, 1));
}

// Why the three numbers of `conc` do not make a staleness kind, or empty.
std::string_view bad_concurrency_numbers(double m, double a, double r) {
    if (!std::isfinite(m) || !std::isfinite(a) || !std::isfinite(r)) return "M, A and R must be finite numbers";
    if (m <= 0) return "M must be > 0";
    if (a < 0) return "A must be >= 0";
    if (r != 0 && r < m) return "R must be 0 (never refuse) or >= M";
    return {};
}

common::Error bad_staleness(std::string_view text, std::string_view why) {
    return common::make_error("bad staleness '" + std::string(text) + "': " + std::string(why) + "; " +
                              std::string(kAcceptedForms));
}

}  // namespace

double Staleness::weight(std::int64_t tau, std::int64_t concurrency_versions) const {
    const double t = tau < 0 ? 0.0 : static_cast<double>(tau);
    switch (kind) {
        case Kind::Constant: return 1.0;
        case Kind::Polynomial: return std::pow(1.0 + t, -a);
        case Kind::Hinge: return t <= b ? 1.0 : 1.0 / (a * (t - b) + 1.0);
        case Kind::Concurrency: {
            const double limit = full_weight_limit(*this, concurrency_versions);
            return t <= limit ? 1.0 : std::pow(limit / t, a);
        }
    }
    return 1.0;
}

bool Staleness::too_stale(std::int64_t tau, std::int64_t concurrency_versions) const {
    if (kind != Kind::Concurrency || c <= 0) return false;
    return static_cast<double>(tau) > c * static_cast<double>(std::max<std::int64_t>(concurrency_versions, 1));
}

std::string Staleness::to_string() const {
    switch (kind) {
        case Kind::Constant: return "const";
        case Kind::Polynomial: return "poly:" + format_number(a);
        case Kind::Hinge: return "hinge:" + format_number(a) + "," + format_number(b);
        case Kind::Concurrency:
            return "conc:" + format_number(b) + "," + format_number(a) + (c > 0 ? "," + format_number(c) : "");
    }
    return "const";
}

common::Status validate_staleness(const Staleness& staleness) {
    switch (staleness.kind) {
        case Staleness::Kind::Constant: return {};
        case Staleness::Kind::Polynomial:
            if (!std::isfinite(staleness.a) || staleness.a <= 0)
                return bad_staleness(staleness.to_string(), "the exponent must be a finite number > 0");
            return {};
        case Staleness::Kind::Hinge:
            if (!std::isfinite(staleness.a) || staleness.a < 0 || !std::isfinite(staleness.b) || staleness.b < 0)
                return bad_staleness(staleness.to_string(), "slope and offset must be finite numbers >= 0");
            return {};
        case Staleness::Kind::Concurrency:
            if (auto why = bad_concurrency_numbers(staleness.b, staleness.a, staleness.c); !why.empty())
                return bad_staleness(staleness.to_string(), why);
            return {};
    }
    return bad_staleness(staleness.to_string(), "unknown kind");
}

common::Result<Staleness> parse_staleness(std::string_view text) {
    if (text == "const") return Staleness{};
    const auto colon = text.find(':');
    const std::string_view kind = text.substr(0, colon);
    const std::string_view args = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
    if (kind == "poly" && colon != std::string_view::npos) {
        const auto a = parse_number(args);
        if (!a) return bad_staleness(text, "the exponent is not a finite number");
        if (*a <= 0) return bad_staleness(text, "the exponent must be > 0");
        return Staleness{Staleness::Kind::Polynomial, *a, 0};
    }
    if (kind == "hinge" && colon != std::string_view::npos) {
        const auto comma = args.find(',');
        if (comma == std::string_view::npos) return bad_staleness(text, "hinge takes two numbers");
        const auto a = parse_number(args.substr(0, comma));
        const auto b = parse_number(args.substr(comma + 1));
        if (!a || !b) return bad_staleness(text, "slope and offset must be finite numbers");
        if (*a < 0 || *b < 0) return bad_staleness(text, "slope and offset must be >= 0");
        return Staleness{Staleness::Kind::Hinge, *a, *b};
    }
    if (kind == "conc" && colon != std::string_view::npos) {
        std::vector<double> numbers;
        for (std::string_view rest = args;;) {
            const auto comma = rest.find(',');
            const auto number = parse_number(rest.substr(0, comma));
            if (!number) return bad_staleness(text, "M, A and R must be finite numbers");
            numbers.push_back(*number);
            if (comma == std::string_view::npos) break;
            rest = rest.substr(comma + 1);
        }
        if (numbers.size() < 2 || numbers.size() > 3) return bad_staleness(text, "conc takes two or three numbers");
        const double r = numbers.size() == 3 ? numbers[2] : 0;
        if (auto why = bad_concurrency_numbers(numbers[0], numbers[1], r); !why.empty())
            return bad_staleness(text, why);
        return Staleness{Staleness::Kind::Concurrency, numbers[1], numbers[0], r};
    }
    return bad_staleness(text, "unknown form");
}

}  // namespace tessera::server
