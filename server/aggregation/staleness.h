// Staleness weights s(τ): how much a delta computed against an older model version counts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "result.h"

namespace tessera::server {

// s(τ) for staleness τ = current version − base version (τ ≥ 0; a negative τ counts as 0).
// The three functions of the FedAsync paper (Xie et al. 2019). A plain value type.
struct Staleness {
    enum class Kind { Constant, Polynomial, Hinge };
    Kind kind = Kind::Constant;
    double a = 0;  // poly: exponent; hinge: slope
    double b = 0;  // hinge: τ up to which the weight is 1

    // const: 1; poly: (1+τ)^−a; hinge: 1 if τ ≤ b else 1/(a(τ−b)+1).
    double weight(std::int64_t tau) const;
    // "const", "poly:0.5", "hinge:10,4"; round-trips through parse_staleness.
    std::string to_string() const;
};

// OK when the parameters are ones parse_staleness accepts; otherwise a named error.
common::Status validate_staleness(const Staleness& staleness);

// Parses "const" | "poly:A" | "hinge:A,B" (A, B finite, ≥ 0; poly A > 0). Errors name the
// bad text and say the accepted forms.
common::Result<Staleness> parse_staleness(std::string_view text);

}  // namespace tessera::server
