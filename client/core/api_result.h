// What a call to the server gives back: a value, or an ApiFailure that says whether trying
// again can help. The volunteer retries only transient failures (no answer, 5xx, 429); a
// refusal (another 4xx), a malformed answer, corrupt bytes or a local problem is permanent,
// and a server whose TLS certificate fails verification is not trusted at all.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "result.h"

namespace tessera::client {

enum class FailureKind {
    NoAnswer,    // connection refused or reset, timeout, DNS: retry
    ServerBusy,  // HTTP 5xx or 429: retry
    Refused,     // another HTTP 4xx: permanent for this call
    BadAnswer,   // malformed JSON, a blob with the wrong hash: permanent
    Untrusted,   // the server's TLS certificate failed verification: stop
    Local,       // this machine: the CA file, the disk
    Stopped,     // the volunteer was asked to stop while waiting to retry
};

struct ApiFailure {
    ApiFailure() = default;
    ApiFailure(FailureKind kind, std::string message, int http_status = 0, std::string code = {})
        : kind(kind), message(std::move(message)), http_status(http_status), code(std::move(code)) {}

    FailureKind kind = FailureKind::NoAnswer;
    std::string message;
    int http_status = 0;  // ServerBusy and Refused: the HTTP status
    std::string code;     // the JSON error's code ("banned", "not_found"), when the server sent one

    bool transient() const { return kind == FailureKind::NoAnswer || kind == FailureKind::ServerBusy; }
};

// An HTTP error status as a failure kind: 5xx and 429 are worth retrying, the rest are not.
inline FailureKind failure_kind_of_status(int status) {
    return status >= 500 || status == 429 ? FailureKind::ServerBusy : FailureKind::Refused;
}

// Either a value or an ApiFailure: common::Result with a failure that has a kind.
template <class T>
using ApiResult = common::Result<T, ApiFailure>;
// For calls that return nothing.
using ApiStatus = common::Result<void, ApiFailure>;

}  // namespace tessera::client
