// Strict JSON: duplicate keys, depth and size limits, and the field reader's named errors.
#include <doctest/doctest.h>

#include "json_strict.h"

using namespace tessera::common;

TEST_CASE("standard JSON parses; duplicates, comments, trailing commas do not") {
    CHECK(parse_json_strict(R"({"a":1,"b":[1,2,{"c":null}]})").ok());
    auto duplicate = parse_json_strict(R"({"a":1,"b":{"x":1,"x":2}})");
    CHECK(duplicate.message().find("duplicate key \"x\"") != std::string::npos);
    // The same key in sibling objects is fine.
    CHECK(parse_json_strict(R"([{"x":1},{"x":2}])").ok());
    CHECK_FALSE(parse_json_strict(R"({"a":1,})").ok());
    CHECK_FALSE(parse_json_strict(R"({"a":1 /* c */})").ok());
    CHECK_FALSE(parse_json_strict(R"({"a":1} trailing)").ok());
    CHECK_FALSE(parse_json_strict("").ok());
}

TEST_CASE("size and depth limits") {
    CHECK(parse_json_strict("[[[1]]]", {.max_bytes = 100, .max_depth = 3}).ok());
    CHECK_FALSE(parse_json_strict("[[[[1]]]]", {.max_bytes = 100, .max_depth = 3}).ok());
    auto big = parse_json_strict(std::string(200, ' ') + "1", {.max_bytes = 100, .max_depth = 3});
    CHECK(big.message().find("larger than the limit") != std::string::npos);
}

TEST_CASE("field reader names the field and the problem") {
    // 1e400 parses as infinity; the reader refuses non-finite numbers.
    auto huge = parse_json_strict(R"({"big":1e400})").value();
    JsonObjectReader infinite(huge, "msg");
    infinite.number("big", -1e300, 1e300);
    CHECK(infinite.finish().message().find("field \"big\": expected a number") != std::string::npos);

    auto value = parse_json_strict(R"({"name":"x","count":3,"ratio":0.5,"flag":true,"whole":2.0})").value();
    JsonObjectReader ok(value, "msg");
    CHECK(ok.string("name") == "x");
    CHECK(ok.integer("count", 0, 10) == 3);
    CHECK(ok.number("ratio", 0, 1) == 0.5);
    CHECK(ok.boolean("flag"));
    CHECK(ok.integer("whole", 0, 10) == 2);
    CHECK(ok.finish().ok());

    JsonObjectReader range(value, "msg");
    range.integer("count", 5, 10);
    CHECK(range.finish().message() == "msg: field \"count\": expected an integer in [5, 10], got 3");

    JsonObjectReader missing(value, "msg");
    missing.string("absent");
    CHECK(missing.finish().message().find("msg: missing field \"absent\"") == 0);

    JsonObjectReader unknown(value, "msg");
    unknown.string("name");
    CHECK(unknown.finish().message().find("unknown field") != std::string::npos);

    JsonObjectReader typed(value, "msg");
    typed.integer("name", 0, 1);
    CHECK(typed.finish().message().find("field \"name\": expected an integer") != std::string::npos);

    JsonObjectReader choice(value, "msg");
    choice.one_of("name", {"a", "b"});
    CHECK(choice.finish().message().find("expected one of a, b, got \"x\"") != std::string::npos);

    auto array = parse_json_strict("[1]").value();
    JsonObjectReader not_object(array, "msg");
    CHECK(not_object.finish().message().find("expected a JSON object") != std::string::npos);
}
