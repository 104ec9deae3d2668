// Writer tests: an exact golden file spelled out from the format description, and write -> read
// round trips covering every value type, nesting, empty values, alignment and several tensor types.
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "gguf_bytes.h"

namespace pagoda::gguf {
namespace {

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> out(n);
    for (auto& b : out) b = uint8_t(rng());
    return out;
}

TEST(GgufWriter, GoldenBytes) {
    Writer w;
    w.set("general.architecture", Value::string("llama"));
    w.set("n", Value::u32(7));
    const float data[3] = {1.0f, -2.0f, 0.5f};
    w.add_tensor("t", GgmlType::F32, {3}, data, sizeof data);
    std::string path = pagoda::test::temp_path("golden.gguf");
    w.write(path);

    test::Bytes expect;
    expect.header(3, 1, 2).kv_str("general.architecture", "llama").kv_u32("n", 7).tensor("t", {3}, 0, 0).pad_to(32);
    for (float f : data) expect.put(f);
    expect.pad_to(32);
    EXPECT_EQ(read_all(path), expect.b);
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

Value nested_arrays() {
    // [[1, 2], [], [["deep"]]] : arrays of arrays whose inner element types differ.
    Value inner_a = Value::array(ValueType::u16, {Value::u16(1), Value::u16(2)});
    Value inner_b = Value::array(ValueType::f64, {});
    Value deep = Value::array(ValueType::array, {Value::strings({"deep"})});
    return Value::array(ValueType::array, {inner_a, inner_b, deep});
}

TEST(GgufWriter, RoundTripEveryValueType) {
    Writer w;
    std::vector<std::pair<std::string, Value>> expect = {
        {"u8", Value::u8(255)},
        {"i8", Value::i8(-128)},
        {"u16", Value::u16(65535)},
        {"i16", Value::i16(-32768)},
        {"u32", Value::u32(4000000000u)},
        {"i32", Value::i32(std::numeric_limits<int32_t>::min())},
        {"u64", Value::u64(std::numeric_limits<uint64_t>::max())},
        {"i64", Value::i64(std::numeric_limits<int64_t>::min())},
        {"f32", Value::f32(3.14159f)},
        {"f32.nan", Value::f32(std::numeric_limits<float>::quiet_NaN())},
        {"f32.inf", Value::f32(-std::numeric_limits<float>::infinity())},
        {"f64", Value::f64(2.718281828459045)},
        {"bool.true", Value::boolean(true)},
        {"bool.false", Value::boolean(false)},
        {"string", Value::string("héllo \"world\"\n")},
        {"string.empty", Value::string("")},
        {"string.nul", Value::string(std::string("a\0b", 3))},
        {"array.strings", Value::strings({"a", "", "ccc"})},
        {"array.f32", Value::f32s({1.5f, -0.25f})},
        {"array.i32", Value::i32s({-1, 0, 1})},
        {"array.empty", Value::array(ValueType::string, {})},
        {"array.bool", Value::array(ValueType::boolean, {Value::boolean(true), Value::boolean(false)})},
        {"array.nested", nested_arrays()},
        {"", Value::string("an empty key is legal")},
    };
    for (const auto& [k, v] : expect) w.set(k, v);
    w.set("u8", Value::u8(255));  // replacing keeps the original position
    std::string path = pagoda::test::temp_path("values.gguf");
    w.write(path);

    auto f = File::open(path);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_TRUE(f->tensors().empty());
    ASSERT_EQ(f->metadata().size(), expect.size());
    for (size_t i = 0; i < expect.size(); ++i) {
        EXPECT_EQ(f->metadata()[i].first, expect[i].first);
        EXPECT_TRUE(f->metadata()[i].second == expect[i].second)
            << expect[i].first << ": " << f->metadata()[i].second.to_display();
    }
    EXPECT_EQ(f->get_uint("u64"), std::numeric_limits<uint64_t>::max());
    EXPECT_THROW(f->get_int("u64"), Error);  // does not fit int64
    EXPECT_THROW(f->get_uint("i8"), Error);  // negative
    EXPECT_EQ(f->get_int("i8"), -128);
    EXPECT_FLOAT_EQ(float(f->get_float("f32")), 3.14159f);
    EXPECT_EQ(f->get_float("u16"), 65535.0);
    EXPECT_TRUE(f->get_bool("bool.true"));
    EXPECT_THROW(f->get_bool("u8"), Error);
    EXPECT_EQ(f->get_strings("array.strings"), (std::vector<std::string>{"a", "", "ccc"}));
    EXPECT_EQ(f->get_floats("array.f32"), (std::vector<float>{1.5f, -0.25f}));
    EXPECT_EQ(f->get_ints("array.i32"), (std::vector<int64_t>{-1, 0, 1}));
    EXPECT_THROW(f->get_strings("array.i32"), Error);
    EXPECT_THROW(f->get_ints("array.strings"), Error);
    EXPECT_EQ(f->get_string("string.nul"), std::string("a\0b", 3));
    EXPECT_EQ(f->find("array.nested")->to_display(), "[[1, 2], [], [[\"deep\"]]]");
}

TEST(GgufWriter, RoundTripTensorsAndAlignment) {
    for (uint32_t alignment : {0u, 1u, 64u, 4096u}) {  // 0: leave general.alignment unset (32)
        SCOPED_TRACE(alignment);
        Writer w;
        if (alignment) w.set("general.alignment", Value::u32(alignment));
        struct Spec { std::string name; GgmlType type; std::vector<int64_t> shape; size_t bytes; };
        std::vector<Spec> specs = {
            {"a.f32", GgmlType::F32, {5}, 20},
            {"b.q4_0", GgmlType::Q4_0, {64, 3}, 2 * 18 * 3},
            {"c.q4_K", GgmlType::Q4_K, {256, 2, 1, 2}, 144 * 4},
            {"d.bf16", GgmlType::BF16, {3, 1, 7}, 42},
            {"e.q8_0", GgmlType::Q8_0, {32}, 34},
        };
        std::vector<std::vector<uint8_t>> payloads;
        for (size_t i = 0; i < specs.size(); ++i) payloads.push_back(random_bytes(specs[i].bytes, uint32_t(i + 1)));
        for (size_t i = 0; i < specs.size(); ++i) {
            if (i % 2) w.add_tensor(specs[i].name, specs[i].type, specs[i].shape, payloads[i]);  // owned copy
            else w.add_tensor(specs[i].name, specs[i].type, specs[i].shape, payloads[i].data(), payloads[i].size());
        }
        std::string path = pagoda::test::temp_path("tensors.gguf");
        w.write(path);

        auto f = File::open(path);
        uint64_t expect_alignment = alignment ? alignment : 32;
        EXPECT_EQ(f->alignment(), expect_alignment);
        EXPECT_EQ(f->has("general.alignment"), alignment != 0);
        EXPECT_EQ(f->data_offset() % expect_alignment, 0u);
        ASSERT_EQ(f->tensors().size(), specs.size());
        for (size_t i = 0; i < specs.size(); ++i) {
            const TensorInfo& t = f->tensors()[i];
            EXPECT_EQ(t.name, specs[i].name);
            EXPECT_EQ(t.type, specs[i].type);
            EXPECT_EQ(t.shape, specs[i].shape);
            EXPECT_EQ(t.n_bytes, specs[i].bytes);
            EXPECT_EQ(t.offset % expect_alignment, 0u);
            EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.n_bytes), payloads[i]) << t.name;
            EXPECT_EQ(f->find_tensor(specs[i].name), &t);
        }
        // The last tensor is padded too, so the file ends on an alignment boundary.
        EXPECT_EQ(std::filesystem::file_size(path) % expect_alignment, 0u);
    }
}

TEST(GgufWriter, RoundTripRealFixture) {
    std::string src = pagoda::test::fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(src);
    auto a = File::open(src);
    Writer w;
    for (const auto& [k, v] : a->metadata()) w.set(k, v);
    for (const TensorInfo& t : a->tensors()) w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    std::string path = pagoda::test::temp_path("stories-copy.gguf");
    w.write(path);
    auto b = File::open(path);
    ASSERT_EQ(a->metadata().size(), b->metadata().size());
    for (size_t i = 0; i < a->metadata().size(); ++i) {
        EXPECT_EQ(a->metadata()[i].first, b->metadata()[i].first);
        EXPECT_TRUE(a->metadata()[i].second == b->metadata()[i].second) << a->metadata()[i].first;
    }
    ASSERT_EQ(a->tensors().size(), b->tensors().size());
    for (size_t i = 0; i < a->tensors().size(); ++i) {
        const TensorInfo& x = a->tensors()[i];
        const TensorInfo& y = b->tensors()[i];
        EXPECT_EQ(x.name, y.name);
        EXPECT_EQ(x.shape, y.shape);
        EXPECT_EQ(0, std::memcmp(x.data, y.data, x.n_bytes)) << x.name;
    }
}

TEST(GgufWriter, RejectsInvalidInput) {
    Writer w;
    std::vector<uint8_t> four(4);
    auto message = [](auto&& fn) {
        try {
            fn();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message([&] { w.add_tensor("x", GgmlType::F32, {2}, four); }).find("needs 8"), std::string::npos);
    EXPECT_NE(message([&] { w.add_tensor("x", GgmlType::Q8_0, {16}, four); }).find("block size 32"), std::string::npos);
    EXPECT_NE(message([&] { w.add_tensor("x", GgmlType::F32, {}, four); }).find("dimension count 0"), std::string::npos);
    EXPECT_NE(message([&] { w.add_tensor("x", GgmlType::F32, {1, 1, 1, 1, 1}, four); }).find("dimension count 5"),
              std::string::npos);
    EXPECT_NE(message([&] { w.add_tensor("x", GgmlType::F32, {0}, four); }).find("positive"), std::string::npos);
    EXPECT_NE(message([&] { w.add_tensor("x", GgmlType(77), {1}, four); }).find("77"), std::string::npos);
    w.add_tensor("x", GgmlType::F32, {1}, four);
    EXPECT_NE(message([&] { w.add_tensor("x", GgmlType::F32, {1}, four); }).find("duplicate"), std::string::npos);
    EXPECT_NE(message([] { Value::array(ValueType::u8, {Value::i8(1)}); }).find("index 0"), std::string::npos);

    std::string path = pagoda::test::temp_path("bad.gguf");
    Writer bad_align;
    bad_align.set("general.alignment", Value::u32(48));
    EXPECT_NE(message([&] { bad_align.write(path); }).find("power of two"), std::string::npos);
    Writer wrong_type;
    wrong_type.set("general.alignment", Value::u64(64));
    EXPECT_NE(message([&] { wrong_type.write(path); }).find("general.alignment"), std::string::npos);
    Writer too_deep;
    Value v = Value::u8(1);
    for (int i = 0; i < 9; ++i) v = Value::array(v.type, {v});
    too_deep.set("deep", v);
    EXPECT_NE(message([&] { too_deep.write(path); }).find("nested deeper"), std::string::npos);
    Writer out_of_range;
    Value forged = Value::u8(1);
    forged.data = uint64_t(300);  // hand-made Value whose payload does not fit its type
    out_of_range.set("forged", forged);
    EXPECT_NE(message([&] { out_of_range.write(path); }).find("forged"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    EXPECT_NE(message([&] { Writer().write("/nonexistent-dir/x.gguf"); }).find("cannot create"), std::string::npos);
}

TEST(GgufWriter, EightLevelsOfNestingRoundTrip) {
    Value v = Value::u8(9);
    for (int i = 0; i < 8; ++i) v = Value::array(v.type, {v});
    Writer w;
    w.set("deep", v);
    std::string path = pagoda::test::temp_path("deep.gguf");
    w.write(path);
    auto f = File::open(path);
    EXPECT_TRUE(*f->find("deep") == v);
}

}  // namespace
}  // namespace pagoda::gguf
