// The error type for expected failures (bad bytes, bad input, I/O) and Result<T>.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace tessera::common {

// A failure a person can act on: the message says what was wrong and where.
struct Error {
    std::string message;
};

inline Error make_error(std::string message) { return Error{std::move(message)}; }

// Either a value or an Error (or another error type with a `message`: the client's
// ApiFailure). Not thread-safe (a plain value type).
template <class T, class E = Error>
class [[nodiscard]] Result {
public:
    Result(T value) : state_(std::move(value)) {}
    Result(E error) : state_(std::move(error)) {}

    bool ok() const { return std::holds_alternative<T>(state_); }
    explicit operator bool() const { return ok(); }

    T& value() & { return std::get<T>(state_); }
    const T& value() const& { return std::get<T>(state_); }
    // By value, so `for (auto& x : f().value())` does not dangle.
    T value() && { return std::get<T>(std::move(state_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const E& error() const { return std::get<E>(state_); }
    const std::string& message() const { return error().message; }

private:
    std::variant<T, E> state_;
};

// Success or an error, for operations that return nothing.
template <class E>
class [[nodiscard]] Result<void, E> {
public:
    Result() = default;
    Result(E error) : error_(std::move(error)), failed_(true) {}

    bool ok() const { return !failed_; }
    explicit operator bool() const { return ok(); }
    const E& error() const { return error_; }
    const std::string& message() const { return error_.message; }

private:
    E error_;
    bool failed_ = false;
};

using Status = Result<void>;

// Prefixes an error's message with where it happened ("shard 3: ...").
inline Error with_context(const std::string& context, const Error& error) {
    return Error{context + ": " + error.message};
}

}  // namespace tessera::common
