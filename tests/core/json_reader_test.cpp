// core/json_reader.h: each reader takes the right type and range, and each refusal names the path,
// what was wanted and what came, with the code the server sends.
#include "core/json_reader.h"

#include <gtest/gtest.h>

namespace pagoda::json_reader {
namespace {

using nlohmann::json;

template <class F>
JsonFieldError error_of(F&& read) {
    try {
        read();
    } catch (const JsonFieldError& e) {
        return e;
    }
    ADD_FAILURE() << "no JsonFieldError";
    return JsonFieldError("", "", Problem::bad_value);
}

TEST(JsonReader, TypeNames) {
    EXPECT_STREQ(type_name(json(nullptr)), "null");
    EXPECT_STREQ(type_name(json(true)), "boolean");
    EXPECT_STREQ(type_name(json("x")), "string");
    EXPECT_STREQ(type_name(json::array()), "array");
    EXPECT_STREQ(type_name(json::object()), "object");
    EXPECT_STREQ(type_name(json(1.5)), "number");
    EXPECT_STREQ(type_name(json(-3)), "integer");
    EXPECT_STREQ(type_name(json(3u)), "integer");
    EXPECT_STREQ(type_name(nlohmann::ordered_json("x")), "string");
}

TEST(JsonReader, WrongTypeNamesPathWantedAndGot) {
    const auto e = error_of([] { read_number(json("hot"), "sampling.temperature", 0, 2); });
    EXPECT_STREQ(e.what(), "'sampling.temperature' must be a number, got string");
    EXPECT_EQ(e.path, "sampling.temperature");
    EXPECT_STREQ(e.code(), "invalid_type");
    EXPECT_STREQ(error_of([] { read_bool(json(1), "b"); }).what(), "'b' must be a boolean, got integer");
    EXPECT_STREQ(error_of([] { read_string(json::array(), "s"); }).what(), "'s' must be a string, got array");
    EXPECT_STREQ(error_of([] { read_object(json(2.5), "o"); }).what(), "'o' must be an object, got number");
    EXPECT_STREQ(error_of([] { read_array(json::object(), "a", "an array of ids"); }).what(),
                 "'a' must be an array of ids, got object");
}

TEST(JsonReader, RangesAndIntegers) {
    EXPECT_EQ(read_number(json(1.5), "x", 0, 2), 1.5);
    const auto e = error_of([] { read_number(json(2.5), "x", 0, 2); });
    EXPECT_STREQ(e.what(), "'x' must be between 0 and 2");
    EXPECT_STREQ(e.code(), "invalid_value");
    EXPECT_EQ(read_integer(json(3.0), "n", 1, 5), 3) << "JavaScript clients send 3.0";
    EXPECT_STREQ(error_of([] { read_integer(json(3.5), "n", 1, 5); }).what(), "'n' must be an integer, got number");
    EXPECT_STREQ(error_of([] { read_integer(json(9), "n", 1, 5); }).what(), "'n' must be between 1 and 5");
    EXPECT_STREQ(error_of([] { read_integer(json(0), "n", 1, int64_t(1) << 40); }).what(), "'n' must be at least 1");
    EXPECT_STREQ(error_of([] { read_integer(json(uint64_t(1) << 63), "seed"); }).what(),
                 "'seed' must fit in a signed 64-bit integer");
    EXPECT_EQ(read_integer(json(std::numeric_limits<int64_t>::min()), "seed"), std::numeric_limits<int64_t>::min());
}

TEST(JsonReader, FieldsAbsentNullAndRequired) {
    const json o = json::parse(R"({"a": 1, "b": null})");
    ASSERT_NE(field(o, "a"), nullptr);
    EXPECT_EQ(field(o, "b"), nullptr) << "null reads as not given";
    EXPECT_EQ(field(o, "c"), nullptr);
    EXPECT_EQ(field(json::array(), "a"), nullptr) << "not an object: no members";
    EXPECT_EQ(required(o, "a", "x.a"), 1);
    const auto e = error_of([&] { required(o, "b", "x.b"); });
    EXPECT_STREQ(e.what(), "'x.b' is required");
    EXPECT_STREQ(e.code(), "missing_required_parameter");
}

}  // namespace
}  // namespace pagoda::json_reader
