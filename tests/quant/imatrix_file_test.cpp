// Reading llama.cpp's GGUF importance matrices: values (in_sum2 / counts, expert stacks pooled,
// count 0 read as uniform) and strict errors naming what is wrong.
#include <cstring>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "quant/imatrix_file.h"

namespace pagoda::quant {
namespace {

using gguf::GgmlType;

std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

gguf::Writer imatrix_writer() {
    gguf::Writer w;
    w.set("general.type", gguf::Value::string("imatrix"));
    w.set("imatrix.datasets", gguf::Value::strings({"calib.txt"}));
    w.set("imatrix.chunk_count", gguf::Value::u32(10));
    w.set("imatrix.chunk_size", gguf::Value::u32(512));
    return w;
}

std::string write(const gguf::Writer& w, const std::string& name) {
    const std::string path = test::temp_path(name);
    w.write(path);
    return path;
}

void expect_error(const std::string& path, const std::string& needle) {
    try {
        read_imatrix_file(path);
        ADD_FAILURE() << "no error, expected one mentioning " << needle;
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

TEST(ImatrixFile, ReadsMeansAndPoolsExperts) {
    gguf::Writer w = imatrix_writer();
    w.add_tensor("blk.0.attn_q.weight.in_sum2", GgmlType::F32, {4}, bytes_of({2, 4, 6, 8}));
    w.add_tensor("blk.0.attn_q.weight.counts", GgmlType::F32, {1}, bytes_of({2}));
    // Three experts of 2 columns: the third never saw input (count 0) and is left out of the pool.
    w.add_tensor("blk.0.ffn_up_exps.weight.in_sum2", GgmlType::F32, {2, 3}, bytes_of({1, 2, 3, 4, 100, 100}));
    w.add_tensor("blk.0.ffn_up_exps.weight.counts", GgmlType::F32, {1, 3}, bytes_of({1, 3, 0}));
    w.add_tensor("blk.1.attn_k.weight.in_sum2", GgmlType::F32, {2}, bytes_of({5, 5}));
    w.add_tensor("blk.1.attn_k.weight.counts", GgmlType::F32, {1}, bytes_of({0}));
    const auto m = read_imatrix_file(write(w, "imatrix_ok.gguf"));
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(m.at("blk.0.attn_q.weight"), (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(m.at("blk.0.ffn_up_exps.weight"), (std::vector<float>{1, 1.5f}));  // (1+3)/4, (2+4)/4
    EXPECT_EQ(m.at("blk.1.attn_k.weight"), (std::vector<float>{1, 1}));         // no input: uniform
}

TEST(ImatrixFile, StrictErrors) {
    {
        gguf::Writer w = imatrix_writer();
        w.add_tensor("a.weight.in_sum2", GgmlType::F32, {2}, bytes_of({1, 1}));
        expect_error(write(w, "imatrix_nocounts.gguf"), "a.weight.counts");
    }
    {
        gguf::Writer w = imatrix_writer();
        w.add_tensor("a.weight.counts", GgmlType::F32, {1}, bytes_of({1}));
        expect_error(write(w, "imatrix_nosums.gguf"), "a.weight.in_sum2");
    }
    {
        gguf::Writer w = imatrix_writer();
        w.add_tensor("a.weight.in_sum2", GgmlType::F32, {2, 2}, bytes_of({1, 1, 1, 1}));
        w.add_tensor("a.weight.counts", GgmlType::F32, {1}, bytes_of({1}));
        expect_error(write(w, "imatrix_counts_shape.gguf"), "a.weight.counts");
    }
    {
        gguf::Writer w = imatrix_writer();
        std::vector<uint8_t> f16(4, 0);
        w.add_tensor("a.weight.in_sum2", GgmlType::F16, {2}, f16);
        w.add_tensor("a.weight.counts", GgmlType::F32, {1}, bytes_of({1}));
        expect_error(write(w, "imatrix_f16.gguf"), "expected f32");
    }
    {
        gguf::Writer w = imatrix_writer();
        w.add_tensor("a.weight.in_sum2", GgmlType::F32, {2}, bytes_of({1, -1}));
        w.add_tensor("a.weight.counts", GgmlType::F32, {1}, bytes_of({1}));
        expect_error(write(w, "imatrix_negative.gguf"), ">= 0");
    }
    {
        gguf::Writer w = imatrix_writer();
        w.add_tensor("token_embd.weight", GgmlType::F32, {2}, bytes_of({1, 1}));
        expect_error(write(w, "imatrix_stray.gguf"), "token_embd.weight");
    }
    {
        gguf::Writer w;
        w.set("general.architecture", gguf::Value::string("llama"));
        w.add_tensor("a.weight.in_sum2", GgmlType::F32, {2}, bytes_of({1, 1}));
        w.add_tensor("a.weight.counts", GgmlType::F32, {1}, bytes_of({1}));
        expect_error(write(w, "imatrix_nokeys.gguf"), "imatrix.datasets");
    }
    {
        const std::string path = test::temp_path("imatrix_legacy.dat");
        std::ofstream(path, std::ios::binary) << "\x02\x00\x00\x00legacy";
        expect_error(path, "legacy .dat");
    }
    expect_error(test::temp_path("imatrix_absent.gguf"), "cannot open");
}

}  // namespace
}  // namespace pagoda::quant
