// End to end: a random llama model whose matrices are stored as Q5_0 / Q5_1 / Q2_K / Q3_K / IQ4_NL /
// IQ4_XS / MXFP4, or mixed with every IQ type (written
// with quant::quantize_row through gguf::Writer) loads and runs, and its logits match the same model
// with those matrices dequantised to F32: bit-close with the dequant_fma method (the same f32 GEMM on
// the same values), close with the int8 method (activations rounded to int8 per 32 values).
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <gtest/gtest.h>
#include <set>

#include "fixtures.h"
#include "gguf/gguf.h"
#include "backend/cpu/matmul/matmul.h"
#include "model/random_model.h"
#include "model/open_step_model.h"
#include "model/sequence_runner.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "quant/random_codebook_blocks.h"

namespace pagoda::quant {
namespace {

using gguf::GgmlType;

// Writes `quantised` (matrices of `type`, other tensors as they are) and `dequantised` (the same
// values as F32) from an F32 model.
// The type of matrix i (in file order) is type_of(i); the grid types (no quantiser) get random codes.
void write_pair(const std::string& f32_path, const std::function<GgmlType(size_t)>& type_of, const std::string& quantised,
                const std::string& dequantised) {
    auto in = gguf::File::open(f32_path);
    size_t matrix_index = 0;
    std::mt19937 rng(41);
    gguf::Writer wq, wd;
    for (const auto& [key, value] : in->metadata()) {
        wq.set(key, value);
        wd.set(key, value);
    }
    for (const auto& t : in->tensors()) {
        // Every matrix, the token embedding (rows read by dequantisation) included.
        const bool matrix = t.shape.size() == 2 && t.type == GgmlType::F32;
        if (!matrix) {
            wq.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
            wd.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
            continue;
        }
        const GgmlType type = type_of(matrix_index++);
        const int64_t cols = t.shape[0], rows = t.shape[1];
        const uint64_t row_bytes = *gguf::row_size(type, cols);
        std::vector<uint8_t> q(size_t(row_bytes * uint64_t(rows))), f(size_t(rows * cols * 4));
        std::vector<float> src(size_t(rows * cols));
        std::memcpy(src.data(), t.data, src.size() * 4);
        for (int64_t r = 0; r < rows; ++r) {
            if (can_quantize(type)) quantize_row(type, src.data() + r * cols, q.data() + uint64_t(r) * row_bytes, cols);
            else testing::random_codebook_row(type, cols, rng, q.data() + uint64_t(r) * row_bytes);
            dequantize_row(type, q.data() + uint64_t(r) * row_bytes, reinterpret_cast<float*>(f.data()) + r * cols, cols);
        }
        wq.add_tensor(t.name, type, t.shape, std::move(q));
        wd.add_tensor(t.name, GgmlType::F32, t.shape, std::move(f));
    }
    wq.write(quantised);
    wd.write(dequantised);
}

std::vector<float> run_logits(const std::string& path, const std::vector<int32_t>& ids) {
    auto model = model::open_step_model(path, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                               .tokens_wanted = 64});
    model::SequenceRunner runner(*model, false);
    auto logits = runner.prefill(0, ids, 64, true);
    auto last = runner.decode(0, 7);
    logits.insert(logits.end(), last.begin(), last.end());
    return logits;
}

TEST(QuantizedModel, NewBlockTypesRunAndMatchTheirDequantisedModel) {
    model::RandomModelSpec spec;
    spec.n_layers = 2; spec.dim = 256; spec.n_heads = 4; spec.n_kv_heads = 2; spec.ffn_dim = 512; spec.vocab_size = 300;
    const std::string f32_path = test::temp_path("qtypes_f32.gguf");
    model::write_random_model(spec, nullptr, f32_path);
    std::vector<int32_t> ids;
    for (int i = 0; i < 9; ++i) ids.push_back((i * 37 + 11) % 300);
    const backend::cpu::QuantMethod saved = backend::cpu::quant_method();
    for (GgmlType type : {GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_NL,
                          GgmlType::IQ4_XS, GgmlType::MXFP4}) {
        const std::string name = gguf::type_name(uint32_t(type));
        const std::string qpath = test::temp_path("qtypes_" + name + ".gguf"), dpath = test::temp_path("qtypes_" + name + "_deq.gguf");
        write_pair(f32_path, [type](size_t) { return type; }, qpath, dpath);
        {
            auto file = gguf::File::open(qpath);
            EXPECT_EQ(file->find_tensor("blk.0.attn_q.weight")->type, type);
            EXPECT_EQ(file->find_tensor("token_embd.weight")->type, type);
        }
        backend::cpu::set_quant_method(backend::cpu::QuantMethod::dequant_fma);
        const auto expected = run_logits(dpath, ids);
        double scale = 0;
        for (float v : expected) scale = std::max(scale, double(std::fabs(v)));
        ASSERT_GT(scale, 0.0);
        for (auto method : {backend::cpu::QuantMethod::dequant_fma, backend::cpu::QuantMethod::int8_dot}) {
            backend::cpu::set_quant_method(method);
            const auto got = run_logits(qpath, ids);
            ASSERT_EQ(got.size(), expected.size());
            // dequant_fma: only the order of f32 sums may differ. int8: activation rounding (~0.4% per
            // value; about 0.6% of the largest logit here).
            const double tol = method == backend::cpu::QuantMethod::dequant_fma ? 1e-4 : 2e-2;
            double worst = 0;
            for (size_t i = 0; i < got.size(); ++i) {
                ASSERT_TRUE(std::isfinite(got[i])) << name;
                worst = std::max(worst, std::fabs(double(got[i]) - expected[i]) / scale);
            }
            EXPECT_LT(worst, tol) << name << " " << backend::cpu::quant_method_name(method);
        }
    }
    backend::cpu::set_quant_method(saved);
}

TEST(QuantizedModel, MixedFileWithEveryCodebookTypeRuns) {
    // One file whose matrices cycle through K-quants, Q5_0, Q8_0 and all ten codebook types (as a
    // "Q4_K_M" or UD upload mixes them); the IQ1/IQ2/IQ3 ones hold random codes (no quantiser).
    model::RandomModelSpec spec;
    spec.n_layers = 2; spec.dim = 256; spec.n_heads = 4; spec.n_kv_heads = 2; spec.ffn_dim = 512; spec.vocab_size = 300;
    spec.seed = 9;
    const std::string f32_path = test::temp_path("qmixed_f32.gguf");
    model::write_random_model(spec, nullptr, f32_path);
    const GgmlType cycle[] = {GgmlType::Q4_K,   GgmlType::IQ2_XXS, GgmlType::Q5_0,  GgmlType::IQ3_S,  GgmlType::IQ4_XS,
                              GgmlType::Q8_0,   GgmlType::IQ1_M,   GgmlType::MXFP4, GgmlType::IQ2_XS, GgmlType::IQ4_NL,
                              GgmlType::IQ3_XXS, GgmlType::IQ2_S,  GgmlType::IQ1_S, GgmlType::Q6_K};
    const std::string qpath = test::temp_path("qmixed.gguf"), dpath = test::temp_path("qmixed_deq.gguf");
    write_pair(f32_path, [&](size_t i) { return cycle[i % std::size(cycle)]; }, qpath, dpath);
    {
        auto file = gguf::File::open(qpath);
        std::set<GgmlType> seen;
        for (const auto& t : file->tensors()) seen.insert(t.type);
        for (GgmlType t : cycle) EXPECT_TRUE(seen.count(t)) << gguf::type_name(uint32_t(t)) << " not in the file";
    }
    std::vector<int32_t> ids;
    for (int i = 0; i < 9; ++i) ids.push_back((i * 37 + 11) % 300);
    const backend::cpu::QuantMethod saved = backend::cpu::quant_method();
    backend::cpu::set_quant_method(backend::cpu::QuantMethod::dequant_fma);
    const auto expected = run_logits(dpath, ids);
    double scale = 0;
    for (float v : expected) scale = std::max(scale, double(std::fabs(v)));
    ASSERT_GT(scale, 0.0);
    for (auto method : {backend::cpu::QuantMethod::dequant_fma, backend::cpu::QuantMethod::int8_dot}) {
        backend::cpu::set_quant_method(method);
        const auto got = run_logits(qpath, ids);
        ASSERT_EQ(got.size(), expected.size());
        // int8: activation rounding, as above; the random IQ1/IQ2 codes make larger weights (measured
        // worst 3.3e-2 of the largest logit).
        const double tol = method == backend::cpu::QuantMethod::dequant_fma ? 1e-4 : 5e-2;
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_TRUE(std::isfinite(got[i]));
            worst = std::max(worst, std::fabs(double(got[i]) - expected[i]) / scale);
        }
        EXPECT_LT(worst, tol) << backend::cpu::quant_method_name(method);
    }
    backend::cpu::set_quant_method(saved);
}

}  // namespace
}  // namespace pagoda::quant
