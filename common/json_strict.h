// Strict JSON for untrusted messages: a parser that refuses duplicate keys and deep nesting,
// and a reader that turns a JSON object into typed fields with named errors
// ("work_unit.shards[1].sha256: expected 64 lowercase hex digits").
#pragma once

#include <boost/json/value.hpp>

#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>

#include "result.h"

namespace tessera::common {

struct JsonLimits {
    std::size_t max_bytes = 1 << 20;
    std::size_t max_depth = 16;
};

// Parses standard JSON (no comments, no trailing commas). Duplicate keys in any object are
// an error, because two parsers could otherwise read the same signed bytes differently.
Result<boost::json::value> parse_json_strict(std::string_view text, const JsonLimits& limits = {});

// Reads the fields of one JSON object, recording the first error instead of throwing.
// Getters return a neutral value after an error; finish() reports the first error, or the
// first field that no getter asked for. Not thread-safe; borrows the value it reads.
class JsonObjectReader {
public:
    JsonObjectReader(const boost::json::value& value, std::string path);

    std::string string(std::string_view key, std::size_t min_length = 0, std::size_t max_length = 4096);
    std::string one_of(std::string_view key, std::initializer_list<std::string_view> allowed);
    std::string lower_hex(std::string_view key, std::size_t length);
    std::int64_t integer(std::string_view key, std::int64_t min, std::int64_t max);
    double number(std::string_view key, double min, double max);
    bool boolean(std::string_view key);
    // The field's value, for nested objects and arrays; nullptr (and an error) when absent.
    const boost::json::value* field(std::string_view key);
    bool has(std::string_view key) const;

    // Path of a nested value, for a nested reader: "work_unit.hyper" or "x.shards[3]".
    std::string path_of(std::string_view key) const;
    void fail(const std::string& message);
    void absorb(const Status& child);
    bool failed() const { return !first_error_.empty(); }

    Status finish();

private:
    const boost::json::value* lookup(std::string_view key, const char* expected);

    const boost::json::object* object_ = nullptr;
    std::string path_;
    std::string first_error_;
    std::set<std::string, std::less<>> seen_;
};

// Reads `value` as an integer in [min, max] (an integral double such as 2.0 counts);
// false when it is not one.
bool json_to_integer(const boost::json::value& value, std::int64_t min, std::int64_t max, std::int64_t& out);

}  // namespace tessera::common
