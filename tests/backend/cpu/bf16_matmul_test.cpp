// The bf16 dot method (vdpbf16ps on 16-row panels) for packed F16 / BF16 weights, against a reference
// written from the contract in matmul.h (bitwise) and against matmul_reference within the error bound
// that contract implies; batch invariance, thread counts, tiles, stacking and the f32 fallbacks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/cpu_features.h"
#include "core/half.h"
#include "backend/cpu/matmul_test_util.h"

namespace pagoda::backend::cpu {
namespace {

using gguf::GgmlType;
using namespace testing;

bool bf16_cpu() { return cpu_features().avx512bf16 && best_supported_isa() == Isa::avx512; }

// Contract: bf16 inputs with a zero exponent (denormals) read as signed zero.
float bf16_input(uint16_t h) { return bf16_to_f32((h & 0x7f80u) == 0 ? uint16_t(h & 0x8000u) : h); }
// Contract: activations round to bf16 (nearest even), f32 denormals become signed zeros.
uint16_t act_to_bf16(float v) {
    return std::fpclassify(v) == FP_SUBNORMAL ? uint16_t(float_to_bits(v) >> 16 & 0x8000u) : f32_to_bf16(v);
}
float flush(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.f, v) : v; }

uint16_t weight_bf16(const RandomWeights& w, int64_t r, int64_t c) {
    uint16_t h;
    std::memcpy(&h, w.bytes.data() + 2 * (r * w.cols + c), 2);
    return w.type == GgmlType::BF16 ? h : f32_to_bf16(f16_to_f32(h));
}

// y[t][r] by the documented chain: from +0, per column pair (odd width: a zero column appended),
// acc = (acc + w[2j+1] x[2j+1]) + w[2j] x[2j], products exact, sums rounded to f32 and flushed.
std::vector<float> contract_reference(const RandomWeights& w, const std::vector<float>& x, int64_t n) {
    const int64_t pairs = (w.cols + 1) / 2;
    std::vector<float> y(size_t(n * w.rows));
    for (int64_t t = 0; t < n; ++t)
        for (int64_t r = 0; r < w.rows; ++r) {
            float acc = 0.f;
            auto term = [&](int64_t c) {
                if (c >= w.cols) return 0.f;
                return bf16_input(weight_bf16(w, r, c)) * bf16_input(act_to_bf16(x[size_t(t * w.cols + c)]));
            };
            for (int64_t j = 0; j < pairs; ++j) {
                acc = flush(flush(acc) + term(2 * j + 1));
                acc = flush(acc + term(2 * j));
            }
            y[size_t(t * w.rows + r)] = acc;
        }
    return y;
}

// Activations with a few special values: exact ties for the bf16 rounding, denormals, zeros.
std::vector<float> activations(int64_t count, std::mt19937& rng) {
    auto x = random_activations(count, rng);
    const float specials[] = {1e-39f, -2e-40f, 0.f, -0.f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -3.0f - 1.0f / 64};
    for (size_t i = 0; i < x.size(); i += 11) x[i] = specials[(i / 11) % 7];
    return x;
}

void expect_bitwise(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(float_to_bits(got[i]), float_to_bits(want[i])) << what << " at " << i << ": " << got[i] << " vs " << want[i];
}

struct Shape { int64_t rows, cols; };
const Shape kShapes[] = {{1, 1}, {15, 31}, {16, 32}, {17, 33}, {33, 70}, {50, 64}, {40, 257}};

TEST(Bf16Matmul, MatchesTheContractBitwiseAtEveryBatchSizeAndThreadCount) {
    if (!bf16_cpu()) GTEST_SKIP() << "no AVX-512 BF16 here";
    KernelConfigGuard guard;
    set_isa(Isa::avx512);
    set_float_method(FloatMethod::bf16_dot);
    ThreadPool pool1(1), pool2(2);
    std::mt19937 rng(41);
    for (GgmlType type : {GgmlType::F16, GgmlType::BF16})
        for (const Shape& s : kShapes) {
            auto w = make_weights(type, s.rows, s.cols, rng);
            const PackedWeight pw = pack_weight(w.view());
            ASSERT_TRUE(pw.is_packed());
            const std::string name = std::string(gguf::type_name(uint32_t(type))) + " " + std::to_string(s.rows) + "x" +
                                     std::to_string(s.cols);
            const int64_t max_n = 70;
            auto x = activations(max_n * s.cols, rng);
            const auto want = contract_reference(w, x, max_n);
            for (int64_t n : {1, 2, 5, 12, 13, 25, 70}) {
                std::vector<float> y1(size_t(n * s.rows)), y2(y1.size());
                matmul(pw, x.data(), n, y1.data(), pool1);
                matmul(pw, x.data(), n, y2.data(), pool2);
                const std::vector<float> expect(want.begin(), want.begin() + n * s.rows);
                expect_bitwise(y1, expect, name + " n " + std::to_string(n) + " 1 thread");
                expect_bitwise(y2, expect, name + " n " + std::to_string(n) + " 2 threads");
            }
            // Tile sizes change only the task split.
            set_gemm_tiles({.kc = 256, .mc = 16, .nc = 5});
            std::vector<float> y(size_t(max_n * s.rows));
            matmul(pw, x.data(), max_n, y.data(), pool2);
            expect_bitwise(y, want, name + " small tiles");
            set_gemm_tiles(GemmTiles{});
        }
}

// Every product has relative error below (1 + 2^-8)^2 - 1 (each operand rounded once to bf16's 8
// significant bits, unit roundoff 2^-8; BF16 weights are exact, so 2^-8 there) and the f32 chain adds at most (cols + 1) * 2^-24 relative to
// sum |w x|: |y - exact| <= (e_round + (cols + 1) * 2^-24) * sum |w x| (+ a denormal-flush floor).
TEST(Bf16Matmul, WithinTheRoundingBoundOfTheExactProduct) {
    if (!bf16_cpu()) GTEST_SKIP() << "no AVX-512 BF16 here";
    KernelConfigGuard guard;
    set_isa(Isa::avx512);
    set_float_method(FloatMethod::bf16_dot);
    ThreadPool pool(2);
    std::mt19937 rng(42);
    for (GgmlType type : {GgmlType::F16, GgmlType::BF16})
        for (const Shape& s : kShapes) {
            auto w = make_weights(type, s.rows, s.cols, rng);
            const int64_t n = 9;
            auto x = random_activations(n * s.cols, rng);
            std::vector<float> y(size_t(n * s.rows)), exact(y.size()), row(size_t(s.cols));
            matmul(pack_weight(w.view()), x.data(), n, y.data(), pool);
            matmul_reference(w.view(), x.data(), n, exact.data());
            const double e_round = type == GgmlType::F16 ? 2.0 / 256 + 1.0 / (256.0 * 256) : 1.0 / 256;
            const double bound = e_round + double(s.cols + 1) / 16777216.0;
            for (int64_t r = 0; r < s.rows; ++r) {
                dequantize_row(w.view(), r, row.data());
                for (int64_t t = 0; t < n; ++t) {
                    double abs_sum = 0;
                    for (int64_t c = 0; c < s.cols; ++c) abs_sum += std::abs(double(row[size_t(c)]) * x[size_t(t * s.cols + c)]);
                    ASSERT_LE(std::abs(double(y[size_t(t * s.rows + r)]) - exact[size_t(t * s.rows + r)]), bound * abs_sum + 1e-30)
                        << gguf::type_name(uint32_t(type)) << " " << s.rows << "x" << s.cols << " row " << r << " token " << t;
                }
            }
        }
}

// Panels straddle the parts: the stacked weight gives each part's outputs bit for bit.
TEST(Bf16Matmul, StackedPartsEqualSeparateProducts) {
    if (!bf16_cpu()) GTEST_SKIP() << "no AVX-512 BF16 here";
    KernelConfigGuard guard;
    set_isa(Isa::avx512);
    set_float_method(FloatMethod::bf16_dot);
    ThreadPool pool(2);
    std::mt19937 rng(43);
    for (GgmlType type : {GgmlType::F16, GgmlType::BF16}) {
        const int64_t cols = 45, part_rows[] = {24, 8, 41};
        std::vector<RandomWeights> parts;
        std::vector<WeightView> views;
        for (int64_t r : part_rows) parts.push_back(make_weights(type, r, cols, rng));
        for (auto& p : parts) views.push_back(p.view());
        const PackedWeight stacked = pack_weights(views);
        ASSERT_TRUE(stacked.is_packed());
        for (int64_t n : {1, 17}) {
            auto x = activations(n * cols, rng);
            std::vector<float> y(size_t(n * 73));
            matmul(stacked, x.data(), n, y.data(), pool);
            int64_t offset = 0;
            for (const auto& p : parts) {
                const auto want = contract_reference(p, x, n);
                for (int64_t t = 0; t < n; ++t)
                    for (int64_t r = 0; r < p.rows; ++r)
                        ASSERT_EQ(float_to_bits(y[size_t(t * 73 + offset + r)]), float_to_bits(want[size_t(t * p.rows + r)]))
                            << "n " << n << " token " << t << " part row " << offset + r;
                offset += p.rows;
            }
        }
    }
}

// f32_fma, or an ISA below avx512, computes exactly what the f32 path does with the plain view.
TEST(Bf16Matmul, FallsBackToTheF32PathWhenTheMethodOrIsaSaysSo) {
    KernelConfigGuard guard;
    ThreadPool pool(2);
    std::mt19937 rng(44);
    auto w = make_weights(GgmlType::F16, 21, 40, rng);
    auto x = random_activations(3 * 40, rng);
    set_float_method(FloatMethod::f32_fma);
    EXPECT_FALSE(bf16_kernel_available());
    EXPECT_FALSE(pack_weight(w.view()).is_packed());
    EXPECT_NE(describe_kernel_paths().find("f16/bf16 weights: f32 FMA"), std::string::npos) << describe_kernel_paths();
    if (!bf16_cpu()) return;
    set_isa(Isa::avx512);
    set_float_method(FloatMethod::bf16_dot);
    EXPECT_NE(describe_kernel_paths().find("vdpbf16ps"), std::string::npos) << describe_kernel_paths();
    const PackedWeight pw = pack_weight(w.view());
    ASSERT_TRUE(pw.is_packed());
    std::vector<float> got(63), want(63);
    set_float_method(FloatMethod::f32_fma);  // after packing: the panels are ignored
    matmul(pw, x.data(), 3, got.data(), pool);
    matmul(w.view(), x.data(), 3, want.data(), pool);
    expect_bitwise(got, want, "f32_fma");
    set_float_method(FloatMethod::bf16_dot);
    for (Isa isa : available_isas()) {
        if (isa == Isa::avx512) continue;
        set_isa(isa);
        EXPECT_FALSE(bf16_kernel_available());
        matmul(pw, x.data(), 3, got.data(), pool);
        matmul(w.view(), x.data(), 3, want.data(), pool);
        expect_bitwise(got, want, isa_name(isa));
    }
}

}  // namespace
}  // namespace pagoda::backend::cpu
