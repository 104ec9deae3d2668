// Hand-made malformed files, one defect each, and a randomized corruption test: the reader must
// either parse or throw pagoda::Error naming the problem — never crash, hang or allocate wildly.
#include <random>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "gguf_bytes.h"

namespace pagoda::gguf {
namespace {

using test::Bytes;

std::string parse_error(const std::vector<uint8_t>& b) {
    try {
        File::parse(b.data(), b.size(), "case.gguf");
    } catch (const Error& e) {
        return e.what();
    }
    return "no error";
}

// A well-formed base: one f32 tensor of 4 values.
Bytes good_file() {
    Bytes b;
    b.header(3, 1, 1).kv_str("general.architecture", "llama").tensor("w", {4}, 0, 0).pad_to(32).zeros(16);
    return b;
}

TEST(GgufMalformed, BaseFileIsValid) {
    Bytes b = good_file();
    auto f = File::parse(b.b.data(), b.b.size(), "base");
    EXPECT_EQ(f->tensors().at(0).n_bytes, 16u);
    EXPECT_EQ(f->tensors().at(0).data, b.b.data() + f->data_offset());
    // A version 2 file with no tensors and no padding is also valid.
    Bytes v2;
    v2.header(2, 0, 1).kv_u32("x", 1);
    EXPECT_EQ(File::parse(v2.b.data(), v2.b.size(), "v2")->get_uint("x"), 1u);
}

struct Case {
    const char* what;
    Bytes file;
    std::vector<const char*> expect;  // substrings the error must contain
};

std::vector<Case> cases() {
    std::vector<Case> c;
    auto add = [&](const char* what, Bytes b, std::vector<const char*> expect) { c.push_back({what, std::move(b), expect}); };
    add("empty file", Bytes{}, {"case.gguf", "not a GGUF file", "0 bytes"});
    add("wrong magic", Bytes{}.raw("GGML").u32(3).u64(0).u64(0), {"bad magic", "47 47 4d 4c"});
    add("version 1", Bytes{}.header(1, 0, 0), {"version 1 is not supported"});
    add("version 4", Bytes{}.header(4, 0, 0), {"unsupported GGUF version 4"});
    add("truncated header", Bytes{}.raw("GGUF").u32(3).u32(0), {"truncated", "tensor count"});
    add("absurd kv count", Bytes{}.header(3, 0, uint64_t(1) << 60), {"metadata key/value count", "cannot fit"});
    add("absurd tensor count", Bytes{}.header(3, ~uint64_t(0), 0), {"tensor info count", "cannot fit"});
    add("key length past end", Bytes{}.header(3, 0, 1).u64(1000).raw("abc").u32(4).u32(1).u32(1),
        {"metadata entry 0", "metadata key has length 1000"});
    add("unknown value type", Bytes{}.header(3, 0, 1).str("k").u32(13).u32(0), {"key 'k'", "unknown value type id 13"});
    add("truncated value", Bytes{}.header(3, 0, 1).str("k").u32(10).u32(7), {"key 'k'", "truncated", "u64 value"});
    add("string value past end", Bytes{}.header(3, 0, 1).str("k").u32(8).u64(~uint64_t(0)).u8(0),
        {"key 'k'", "string value has length 18446744073709551615"});
    add("duplicate key", Bytes{}.header(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2), {"key 'k'", "duplicate"});
    add("absurd array count", Bytes{}.header(3, 0, 1).str("k").u32(9).u32(4).u64(uint64_t(1) << 62).u32(0),
        {"key 'k'", "array element count 4611686018427387904 cannot fit"});
    add("array of strings too long", Bytes{}.header(3, 0, 1).str("k").u32(9).u32(8).u64(3).str("a").u64(0),
        {"key 'k'", "array element count 3"});
    add("unknown array element type", Bytes{}.header(3, 0, 1).str("k").u32(9).u32(99).u64(0),
        {"key 'k'", "unknown value type id 99"});
    {
        Bytes b;
        b.header(3, 0, 1).str("deep").u32(9);
        for (int i = 0; i < 9; ++i) b.u32(9).u64(1);
        b.u32(0).u64(0);
        add("arrays nested too deep", b, {"key 'deep'", "nested deeper than 8"});
    }
    add("alignment wrong type", Bytes{}.header(3, 0, 1).str("general.alignment").u32(10).u64(64),
        {"general.alignment", "must be a u32, found u64"});
    add("alignment not power of two", Bytes{}.header(3, 0, 1).kv_u32("general.alignment", 48),
        {"general.alignment", "power of two, found 48"});
    add("alignment zero", Bytes{}.header(3, 0, 1).kv_u32("general.alignment", 0), {"power of two, found 0"});
    add("tensor name past end", Bytes{}.header(3, 1, 0).u64(500).raw("w").zeros(40), {"tensor 0", "tensor name has length 500"});
    add("too many dims", Bytes{}.header(3, 1, 0).tensor("w", {1, 1, 1, 1, 1}, 0, 0).zeros(64),
        {"tensor 'w'", "dimension count 5 is out of range"});
    add("zero dims", Bytes{}.header(3, 1, 0).tensor("w", {}, 0, 0).zeros(64), {"tensor 'w'", "dimension count 0"});
    add("negative dim", Bytes{}.header(3, 1, 0).tensor("w", {4, -1}, 0, 0).zeros(64), {"tensor 'w'", "dimension 1 has size -1"});
    add("zero dim", Bytes{}.header(3, 1, 0).tensor("w", {0}, 0, 0).zeros(64), {"tensor 'w'", "dimension 0 has size 0"});
    add("shape overflow", Bytes{}.header(3, 1, 0).tensor("w", {int64_t(1) << 32, int64_t(1) << 32}, 0, 0).zeros(64),
        {"tensor 'w'", "shape overflows"});
    add("byte size overflow", Bytes{}.header(3, 1, 0).tensor("w", {int64_t(1) << 62}, 0, 0).zeros(64),
        {"tensor 'w'", "byte size overflows"});
    add("unknown tensor type", Bytes{}.header(3, 1, 0).tensor("w", {4}, 77, 0).zeros(64),
        {"tensor 'w'", "unknown GGML tensor type id 77"});
    add("retired tensor type", Bytes{}.header(3, 1, 0).tensor("w", {32}, 4, 0).zeros(64), {"tensor type id 4"});
    add("ne0 not a block multiple", Bytes{}.header(3, 1, 0).tensor("w", {100}, 2, 0).zeros(128),
        {"tensor 'w'", "first dimension 100", "q4_0 block size 32"});
    add("unaligned offset", Bytes{}.header(3, 1, 0).tensor("w", {4}, 0, 8).zeros(64),
        {"tensor 'w'", "offset 8 is not a multiple of the alignment 32"});
    add("data past end", Bytes{}.header(3, 1, 0).tensor("w", {4}, 0, 0).pad_to(32).zeros(15),
        {"tensor 'w'", "extends past the end"});
    add("offset far past end", Bytes{}.header(3, 1, 0).tensor("w", {4}, 0, uint64_t(1) << 63).pad_to(32).zeros(16),
        {"tensor 'w'", "extends past the end"});
    add("duplicate tensor", Bytes{}.header(3, 2, 0).tensor("w", {4}, 0, 0).tensor("w", {4}, 0, 32).pad_to(32).zeros(64),
        {"tensor 'w'", "duplicate tensor name"});
    add("overlapping tensors", Bytes{}.header(3, 2, 0).tensor("a", {16}, 0, 0).tensor("b", {4}, 0, 32).pad_to(32).zeros(64),
        {"tensor 'b'", "overlaps tensor 'a'"});
    add("truncated tensor info", Bytes{}.header(3, 1, 0).str("w").u32(2).i64(4).i64(1).u32(0),
        {"tensor 'w'", "truncated", "tensor data offset"});
    return c;
}

TEST(GgufMalformed, EachDefectIsNamed) {
    for (const Case& c : cases()) {
        std::string msg = parse_error(c.file.b);
        for (const char* want : c.expect)
            EXPECT_NE(msg.find(want), std::string::npos) << c.what << ": message was: " << msg << "\n  missing: " << want;
    }
}

TEST(GgufMalformed, OpenNamesMissingFile) {
    try {
        File::open("/nonexistent/model.gguf");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
    }
}

// Every strict prefix of a valid file is a truncation the reader must report (never accept: the
// base file's tensor data runs to its last byte).
TEST(GgufMalformed, EveryTruncationFails) {
    Writer w;
    w.set("general.architecture", Value::string("llama"));
    w.set("list", Value::array(ValueType::array, {Value::i32s({1, 2}), Value::strings({"x", ""})}));
    w.add_tensor("w", GgmlType::Q8_0, {32, 2}, std::vector<uint8_t>(68, 1));
    std::string path = pagoda::test::temp_path("trunc.gguf");
    w.write(path);
    auto full = File::open(path);
    size_t end = size_t(full->data_offset() + full->tensors()[0].n_bytes);
    std::vector<uint8_t> bytes(full->tensors()[0].data - full->data_offset(), full->tensors()[0].data + 68);
    for (size_t n = 0; n < end; ++n) EXPECT_THROW(File::parse(bytes.data(), n, "prefix"), Error) << n;
    EXPECT_NO_THROW(File::parse(bytes.data(), end, "whole"));
}

// Random byte flips, insertions of hostile values and truncations of a small valid file.
TEST(GgufMalformed, RandomCorruptionNeverCrashes) {
    Writer w;
    w.set("general.architecture", Value::string("llama"));
    w.set("general.alignment", Value::u32(16));
    w.set("n", Value::u64(5));
    w.set("tokens", Value::strings({"a", "bb", "", "dddd"}));
    w.set("nested", Value::array(ValueType::array, {Value::f32s({1, 2}), Value::array(ValueType::boolean, {})}));
    w.add_tensor("a", GgmlType::F32, {4, 2}, std::vector<uint8_t>(32, 7));
    w.add_tensor("b", GgmlType::Q4_0, {32}, std::vector<uint8_t>(18, 9));
    std::string path = pagoda::test::temp_path("corrupt-base.gguf");
    w.write(path);
    auto base_file = File::open(path);
    std::vector<uint8_t> base(base_file->tensors()[0].data - base_file->data_offset(),
                              base_file->tensors()[1].data + 18);
    std::mt19937_64 rng(12345);
    int parsed = 0, rejected = 0;
    for (int iter = 0; iter < 5000; ++iter) {
        std::vector<uint8_t> b = base;
        int edits = 1 + int(rng() % 4);
        for (int e = 0; e < edits; ++e) {
            size_t at = size_t(rng() % b.size());
            switch (rng() % 4) {
                case 0: b[at] ^= uint8_t(1u << (rng() % 8)); break;
                case 1: b[at] = uint8_t(rng()); break;
                case 2:  // a hostile 64-bit value (huge, negative or small count)
                    if (at + 8 <= b.size()) {
                        uint64_t v = rng() % 2 ? ~uint64_t(0) >> (rng() % 64) : rng() % 16;
                        std::memcpy(&b[at], &v, 8);
                    }
                    break;
                case 3: b.resize(at); break;
            }
            if (b.empty()) break;
        }
        try {
            auto f = File::parse(b.data(), b.size(), "fuzz");
            ++parsed;
            for (const auto& [k, v] : f->metadata()) (void)v.to_display(4);
            uint64_t sum = 0;
            for (const TensorInfo& t : f->tensors())
                for (uint64_t i = 0; i < t.n_bytes; ++i) sum += t.data[i];
            (void)sum;
        } catch (const Error&) {
            ++rejected;
        }
    }
    EXPECT_GT(rejected, 1000);  // sanity: the corruption really happened
    EXPECT_GT(parsed, 10);      // and some edits (inside values or tensor data) stay valid
}

}  // namespace
}  // namespace pagoda::gguf
