// Metadata Value: lossless conversions, equality and the display form.
#include <gtest/gtest.h>
#include <limits>

#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::gguf {
namespace {

TEST(GgufValue, Conversions) {
    EXPECT_EQ(Value::u8(200).as_int(), 200);
    EXPECT_EQ(Value::i16(-5).as_int(), -5);
    EXPECT_EQ(Value::i16(-5).as_uint(), std::nullopt);
    EXPECT_EQ(Value::u64(std::numeric_limits<uint64_t>::max()).as_int(), std::nullopt);
    EXPECT_EQ(Value::u64(std::numeric_limits<uint64_t>::max()).as_uint(), std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(Value::i32(7).as_float(), 7.0);
    EXPECT_EQ(Value::f32(0.5f).as_float(), 0.5);
    EXPECT_EQ(Value::f32(0.5f).as_int(), std::nullopt);  // floats never silently become integers
    EXPECT_EQ(Value::boolean(true).as_int(), std::nullopt);
    EXPECT_EQ(Value::string("7").as_int(), std::nullopt);
    EXPECT_TRUE(Value::u16(1).is_integer());
    EXPECT_FALSE(Value::f64(1).is_integer());
    EXPECT_TRUE(Value::f64(1).is_float());
    EXPECT_EQ(*Value::string("x").as_string(), "x");
    EXPECT_EQ(Value::u8(1).as_string(), nullptr);
    EXPECT_EQ(Value::u8(1).as_array(), nullptr);
    EXPECT_EQ(Value::i32s({1, 2}).as_array()->items.size(), 2u);
}

TEST(GgufValue, Equality) {
    EXPECT_TRUE(Value::u32(1) == Value::u32(1));
    EXPECT_FALSE(Value::u32(1) == Value::i32(1));  // the declared type is part of the value
    EXPECT_FALSE(Value::u32(1) == Value::u32(2));
    float nan = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(Value::f32(nan) == Value::f32(nan));
    EXPECT_FALSE(Value::f32(0.0f) == Value::f32(-0.0f));
    EXPECT_TRUE(Value::strings({"a", "b"}) == Value::strings({"a", "b"}));
    EXPECT_FALSE(Value::strings({"a", "b"}) == Value::strings({"a"}));
    EXPECT_FALSE(Value::array(ValueType::u8, {}) == Value::array(ValueType::i8, {}));
}

TEST(GgufValue, Display) {
    EXPECT_EQ(Value::u8(7).to_display(), "7");
    EXPECT_EQ(Value::i64(-3).to_display(), "-3");
    EXPECT_EQ(Value::f32(1e-5f).to_display(), "1e-05");
    EXPECT_EQ(Value::boolean(false).to_display(), "false");
    EXPECT_EQ(Value::string("a\"b\n\x01").to_display(), "\"a\\\"b\\n\\x01\"");
    EXPECT_EQ(Value::i32s({1, 2, 3}).to_display(2), "[1, 2, ... +1 more]");
    EXPECT_EQ(Value::i32s({1, 2, 3}).to_display(0), "[... +3 more]");
    EXPECT_EQ(Value::array(ValueType::string, {}).to_display(), "[]");
    std::string long_text(300, 'x');
    EXPECT_EQ(Value::string(long_text).to_display(), "\"" + std::string(120, 'x') + "\"...(+180 bytes)");
    EXPECT_EQ(Value::string(long_text).to_display(std::numeric_limits<size_t>::max()), "\"" + long_text + "\"");
}

TEST(GgufValue, ArrayRejectsMixedTypes) {
    EXPECT_THROW(Value::array(ValueType::u8, {Value::u8(1), Value::u16(2)}), Error);
    EXPECT_THROW(Value::array(ValueType(42), {}), Error);
    EXPECT_NO_THROW(Value::array(ValueType::array, {Value::i32s({1}), Value::strings({"x"})}));
}

}  // namespace
}  // namespace pagoda::gguf
