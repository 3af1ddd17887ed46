// Staleness weights s(τ): how much a delta computed against an older model version counts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "result.h"

namespace tessera::server {

// s(τ) for staleness τ = current version − base version (τ ≥ 0; a negative τ counts as 0).
// The three functions of the FedAsync paper (Xie et al. 2019), and `conc`, which measures τ
// against the fleet's concurrency: with C volunteers at work a result is typically about C
// versions old however healthy the run (Koloskova et al. 2022, arXiv 2206.08307, show
// asynchronous SGD's rate depends on the concurrency, not the largest delay), so it keeps
// full weight up to M·C_v and is refused beyond R·C_v. A plain value type.
struct Staleness {
    enum class Kind { Constant, Polynomial, Hinge, Concurrency };
    Kind kind = Kind::Constant;
    double a = 0;  // poly: exponent; hinge: slope; conc: exponent A
    double b = 0;  // hinge: τ up to which the weight is 1; conc: M, in concurrencies
    double c = 0;  // conc: R, τ beyond R·C_v is too stale to merge (0: never)

    // const: 1; poly: (1+τ)^−a; hinge: 1 if τ ≤ b else 1/(a(τ−b)+1);
    // conc: 1 if τ ≤ M·C_v else (M·C_v/τ)^A. C_v is the concurrency in versions (≥ 1; the
    // other kinds ignore it).
    double weight(std::int64_t tau, std::int64_t concurrency_versions = 1) const;
    // True when τ > R·C_v for `conc` with R > 0; never for the other kinds.
    bool too_stale(std::int64_t tau, std::int64_t concurrency_versions) const;
    // "const", "poly:0.5", "hinge:10,4", "conc:1,1,4"; round-trips through parse_staleness.
    std::string to_string() const;
};

// OK when the parameters are ones parse_staleness accepts; otherwise a named error.
common::Status validate_staleness(const Staleness& staleness);

// Parses "const" | "poly:A" | "hinge:A,B" (A, B finite, ≥ 0; poly A > 0) | "conc:M,A[,R]"
// (M > 0, A ≥ 0, R = 0 or R ≥ M). Errors name the bad text and say the accepted forms.
common::Result<Staleness> parse_staleness(std::string_view text);

}  // namespace tessera::server
