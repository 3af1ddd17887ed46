// Strict JSON parsing on Boost.JSON: a duplicate-key check with basic_parser, then parse().
#include "json_strict.h"

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cmath>
#include <unordered_set>
#include <vector>

namespace tessera::common {
namespace {

// A basic_parser handler that builds nothing: it only tracks each open object's keys.
struct DuplicateKeyFinder {
    static constexpr std::size_t max_array_size = static_cast<std::size_t>(-1);
    static constexpr std::size_t max_object_size = static_cast<std::size_t>(-1);
    static constexpr std::size_t max_string_size = static_cast<std::size_t>(-1);
    static constexpr std::size_t max_key_size = static_cast<std::size_t>(-1);

    std::vector<std::unordered_set<std::string>> open_objects;
    std::string key;
    std::string duplicate;

    using ec_t = boost::json::error_code;
    bool on_document_begin(ec_t&) { return true; }
    bool on_document_end(ec_t&) { return true; }
    bool on_array_begin(ec_t&) { return true; }
    bool on_array_end(std::size_t, ec_t&) { return true; }
    bool on_object_begin(ec_t&) {
        open_objects.emplace_back();
        return true;
    }
    bool on_object_end(std::size_t, ec_t&) {
        open_objects.pop_back();
        return true;
    }
    bool on_string_part(boost::json::string_view, std::size_t, ec_t&) { return true; }
    bool on_string(boost::json::string_view, std::size_t, ec_t&) { return true; }
    bool on_key_part(boost::json::string_view part, std::size_t, ec_t&) {
        key.append(part.data(), part.size());
        return true;
    }
    bool on_key(boost::json::string_view part, std::size_t, ec_t& ec) {
        key.append(part.data(), part.size());
        if (!open_objects.back().insert(key).second) {
            duplicate = key;
            ec = boost::json::error::syntax;
            return false;
        }
        key.clear();
        return true;
    }
    bool on_number_part(boost::json::string_view, ec_t&) { return true; }
    bool on_int64(std::int64_t, boost::json::string_view, ec_t&) { return true; }
    bool on_uint64(std::uint64_t, boost::json::string_view, ec_t&) { return true; }
    bool on_double(double, boost::json::string_view, ec_t&) { return true; }
    bool on_bool(bool, ec_t&) { return true; }
    bool on_null(ec_t&) { return true; }
    bool on_comment_part(boost::json::string_view, ec_t&) { return true; }
    bool on_comment(boost::json::string_view, ec_t&) { return true; }
};

std::string describe(const boost::json::value& value) {
    auto text = boost::json::serialize(value);
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return text;
}

}  // namespace

Result<boost::json::value> parse_json_strict(std::string_view text, const JsonLimits& limits) {
    if (text.size() > limits.max_bytes)
        return make_error("JSON document of " + std::to_string(text.size()) + " bytes is larger than the limit of " +
                          std::to_string(limits.max_bytes));
    boost::json::parse_options options;
    options.max_depth = limits.max_depth;
    boost::json::basic_parser<DuplicateKeyFinder> checker(options);
    boost::json::error_code ec;
    std::size_t consumed = checker.write_some(false, text.data(), text.size(), ec);
    if (!checker.handler().duplicate.empty())
        return make_error("invalid JSON: duplicate key \"" + checker.handler().duplicate + "\"");
    if (ec) return make_error("invalid JSON at byte " + std::to_string(consumed) + ": " + ec.message());
    boost::json::value value = boost::json::parse(boost::json::string_view(text.data(), text.size()), ec, {}, options);
    if (ec) return make_error("invalid JSON: " + ec.message());
    return value;
}

bool json_to_integer(const boost::json::value& value, std::int64_t min, std::int64_t max, std::int64_t& out) {
    if (value.is_int64()) {
        out = value.get_int64();
    } else if (value.is_uint64()) {
        if (value.get_uint64() > static_cast<std::uint64_t>(max)) return false;
        out = static_cast<std::int64_t>(value.get_uint64());
    } else if (value.is_double()) {
        double d = value.get_double();
        if (!std::isfinite(d) || d != std::floor(d) || d < -9.2e18 || d > 9.2e18) return false;
        out = static_cast<std::int64_t>(d);
    } else {
        return false;
    }
    return out >= min && out <= max;
}

JsonObjectReader::JsonObjectReader(const boost::json::value& value, std::string path)
    : object_(value.if_object()), path_(std::move(path)) {
    if (object_ == nullptr) fail("expected a JSON object, got " + describe(value));
}

std::string JsonObjectReader::path_of(std::string_view key) const { return path_ + "." + std::string(key); }

void JsonObjectReader::fail(const std::string& message) {
    if (first_error_.empty()) first_error_ = path_ + ": " + message;
}

void JsonObjectReader::absorb(const Status& child) {
    if (!child.ok() && first_error_.empty()) first_error_ = child.message();
}

bool JsonObjectReader::has(std::string_view key) const {
    return object_ != nullptr && object_->contains(boost::json::string_view(key.data(), key.size()));
}

const boost::json::value* JsonObjectReader::lookup(std::string_view key, const char* expected) {
    seen_.emplace(key);
    if (object_ == nullptr) return nullptr;
    const auto* found = object_->if_contains(boost::json::string_view(key.data(), key.size()));
    if (found == nullptr) fail("missing field \"" + std::string(key) + "\" (" + expected + ")");
    return found;
}

const boost::json::value* JsonObjectReader::field(std::string_view key) { return lookup(key, "a value"); }

std::string JsonObjectReader::string(std::string_view key, std::size_t min_length, std::size_t max_length) {
    const auto* value = lookup(key, "a string");
    if (value == nullptr) return {};
    const auto* text = value->if_string();
    if (text == nullptr || text->size() < min_length || text->size() > max_length) {
        fail("field \"" + std::string(key) + "\": expected a string of " + std::to_string(min_length) + " to " +
             std::to_string(max_length) + " characters, got " + describe(*value));
        return {};
    }
    return std::string(text->data(), text->size());
}

std::string JsonObjectReader::one_of(std::string_view key, std::initializer_list<std::string_view> allowed) {
    auto text = string(key, 0, 64);
    if (failed()) return {};
    for (auto choice : allowed)
        if (text == choice) return text;
    std::string list;
    for (auto choice : allowed) list += (list.empty() ? "" : ", ") + std::string(choice);
    fail("field \"" + std::string(key) + "\": expected one of " + list + ", got \"" + text + "\"");
    return {};
}

std::string JsonObjectReader::lower_hex(std::string_view key, std::size_t length) {
    auto text = string(key, 0, length);
    if (failed()) return {};
    bool ok = text.size() == length;
    for (char c : text) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    if (!ok) {
        fail("field \"" + std::string(key) + "\": expected " + std::to_string(length) +
             " lowercase hex digits, got \"" + text + "\"");
        return {};
    }
    return text;
}

std::int64_t JsonObjectReader::integer(std::string_view key, std::int64_t min, std::int64_t max) {
    const auto* value = lookup(key, "an integer");
    if (value == nullptr) return 0;
    std::int64_t out = 0;
    if (!json_to_integer(*value, min, max, out)) {
        fail("field \"" + std::string(key) + "\": expected an integer in [" + std::to_string(min) + ", " +
             std::to_string(max) + "], got " + describe(*value));
        return 0;
    }
    return out;
}

double JsonObjectReader::number(std::string_view key, double min, double max) {
    const auto* value = lookup(key, "a number");
    if (value == nullptr) return 0;
    double out = 0;
    bool numeric = value->is_number();
    if (numeric) out = value->to_number<double>();
    if (!numeric || !std::isfinite(out) || out < min || out > max) {
        fail("field \"" + std::string(key) + "\": expected a number in [" + std::to_string(min) + ", " +
             std::to_string(max) + "], got " + describe(*value));
        return 0;
    }
    return out;
}

bool JsonObjectReader::boolean(std::string_view key) {
    const auto* value = lookup(key, "true or false");
    if (value == nullptr) return false;
    if (!value->is_bool()) {
        fail("field \"" + std::string(key) + "\": expected true or false, got " + describe(*value));
        return false;
    }
    return value->get_bool();
}

Status JsonObjectReader::finish() {
    if (!first_error_.empty()) return make_error(first_error_);
    for (const auto& entry : *object_) {
        std::string_view key(entry.key().data(), entry.key().size());
        if (!seen_.contains(key)) return make_error(path_ + ": unknown field \"" + std::string(key) + "\"");
    }
    return {};
}

}  // namespace tessera::common
