#include "backend/cpu/matmul/matmul.h"

#include <cmath>
#include <gtest/gtest.h>

#include "core/error.h"
#include "backend/cpu/matmul_test_util.h"

namespace pagoda::backend::cpu {
namespace {

using gguf::GgmlType;
using namespace testing;

const GgmlType kAllTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                              GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K,
                              GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS,
                              GgmlType::MXFP4, GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS,
                              GgmlType::IQ3_S, GgmlType::IQ1_S, GgmlType::IQ1_M};

int64_t block_of(GgmlType t) { return gguf::type_traits(t).block_size; }

// Odd shapes: cols not a multiple of any vector width (for f32 types) or an odd number of blocks,
// rows not a multiple of any row block.
int64_t test_cols(GgmlType t, int variant) {
    const int64_t b = block_of(t);
    if (b == 1) return variant == 0 ? 77 : 300;
    if (b == 32) return variant == 0 ? 32 * 5 : 32 * 16;
    return variant == 0 ? 256 : 256 * 3;
}

// Activation quantisation as the matmul contract states it (written from the spec, not the kernel):
// per 32 values d = max|x|/127, q = round-half-even(x * 127/max|x|).
std::vector<float> spec_quantised_activations(const std::vector<float>& x, int64_t cols) {
    std::vector<float> out(x.size());
    for (size_t b0 = 0; b0 < x.size(); b0 += 32) {
        float amax = 0;
        for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b0 + i]));
        float d = amax / 127.f, inv = amax > 0 ? 127.f / amax : 0.f;
        for (size_t i = 0; i < 32; ++i) out[b0 + i] = d * float(std::nearbyint(x[b0 + i] * inv));
    }
    (void)cols;
    return out;
}

// |error| bound for output (t, r): relative to sum |w| |x| (the condition of the sum).
std::vector<double> magnitude(const WeightView& w, const std::vector<float>& x, int64_t n) {
    std::vector<float> row(size_t(w.cols));
    std::vector<double> m(size_t(n * w.rows));
    for (int64_t r = 0; r < w.rows; ++r) {
        dequantize_row(w, r, row.data());
        for (int64_t t = 0; t < n; ++t) {
            double s = 0;
            for (int64_t c = 0; c < w.cols; ++c) s += std::fabs(double(row[size_t(c)]) * x[size_t(t * w.cols + c)]);
            m[size_t(t * w.rows + r)] = s;
        }
    }
    return m;
}

TEST(Matmul, EveryPathMatchesReference) {
    KernelConfigGuard guard;
    ThreadPool pool(2);
    std::mt19937 rng(7);
    for (Isa isa : available_isas()) {
        set_isa(isa);
        for (GgmlType type : kAllTypes) {
            for (QuantMethod method : {QuantMethod::int8_dot, QuantMethod::dequant_fma}) {
                if (is_float_type(type) && method == QuantMethod::dequant_fma) continue;
                set_quant_method(method);
                for (int variant = 0; variant < 2; ++variant) {
                    const int64_t rows = variant == 0 ? 37 : 70, cols = test_cols(type, variant);
                    const int64_t n = variant == 0 ? 3 : 11;
                    auto w = make_weights(type, rows, cols, rng);
                    auto x = random_activations(n * cols, rng);
                    std::vector<float> y(size_t(n * rows)), ref(size_t(n * rows));
                    matmul(w.view(), x.data(), n, y.data(), pool);
                    const bool int8 = !is_float_type(type) && method == QuantMethod::int8_dot;
                    // The int8 method is compared with the exact product of the weights and the
                    // activations quantised per the spec; its only other error is f32 rounding.
                    auto xq = int8 ? spec_quantised_activations(x, cols) : x;
                    matmul_reference(w.view(), xq.data(), n, ref.data());
                    auto mag = magnitude(w.view(), xq, n);
                    for (size_t i = 0; i < y.size(); ++i)
                        ASSERT_NEAR(y[i], ref[i], 2e-6 * mag[i] + 1e-30)
                            << isa_name(isa) << " " << gguf::type_name(uint32_t(type)) << " "
                            << quant_method_name(method) << " cols " << cols << " index " << i;
                }
            }
        }
    }
}

TEST(Matmul, Int8MethodErrorIsBoundedByActivationRounding) {
    // Against the unquantised activations: |err| <= sum_c |w_c| * (max|x| of c's block) / 254.
    KernelConfigGuard guard;
    ThreadPool pool(2);
    std::mt19937 rng(3);
    set_quant_method(QuantMethod::int8_dot);
    const int64_t rows = 9, cols = 256, n = 2;
    auto w = make_weights(GgmlType::Q4_K, rows, cols, rng);
    auto x = random_activations(n * cols, rng);
    std::vector<float> y(size_t(n * rows)), ref(size_t(n * rows)), row(static_cast<size_t>(cols));
    matmul(w.view(), x.data(), n, y.data(), pool);
    matmul_reference(w.view(), x.data(), n, ref.data());
    for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(w.view(), r, row.data());
        for (int64_t t = 0; t < n; ++t) {
            double bound = 0;
            for (int64_t b = 0; b < cols / 32; ++b) {
                float amax = 0;
                for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[size_t(t * cols + b * 32 + i)]));
                for (int i = 0; i < 32; ++i) bound += std::fabs(row[size_t(b * 32 + i)]) * amax / 254.0;
            }
            EXPECT_NEAR(y[size_t(t * rows + r)], ref[size_t(t * rows + r)], bound * 1.001 + 1e-4);
        }
    }
}

TEST(Matmul, BatchInvariantBitwise) {
    // A token's output is identical alone, anywhere inside batches of 1..64 tokens, with 1 or 2
    // threads, and with different GEMM tiles, on every ISA path and method.
    KernelConfigGuard guard;
    ThreadPool pool1(1), pool2(2);
    std::mt19937 rng(11);
    for (Isa isa : available_isas()) {
        set_isa(isa);
        for (GgmlType type : kAllTypes) {
            for (QuantMethod method : {QuantMethod::int8_dot, QuantMethod::dequant_fma}) {
                if (is_float_type(type) && method == QuantMethod::dequant_fma) continue;
                set_quant_method(method);
                const int64_t rows = 21, cols = block_of(type) == 1 ? 601 : 512;
                auto w = make_weights(type, rows, cols, rng);
                const int64_t max_n = 64;
                auto x = random_activations(max_n * cols, rng);
                set_gemm_tiles(GemmTiles{});
                std::vector<float> alone(size_t(max_n * rows));
                for (int64_t t = 0; t < max_n; ++t)
                    matmul(w.view(), x.data() + t * cols, 1, alone.data() + t * rows, pool1);
                for (int64_t n : {2, 5, 8, 13, 64}) {
                    for (int threads : {1, 2}) {
                        GemmTiles tiles;
                        if (n == 13) tiles = GemmTiles{256, 8, 5};
                        set_gemm_tiles(tiles);
                        std::vector<float> y(size_t(n * rows));
                        const int64_t first = (max_n - n) / 2;
                        matmul(w.view(), x.data() + first * cols, n, y.data(), threads == 1 ? pool1 : pool2);
                        for (int64_t i = 0; i < n * rows; ++i) {
                            float a = y[size_t(i)], b = alone[size_t(first * rows + i)];
                            ASSERT_EQ(std::memcmp(&a, &b, 4), 0)
                                << isa_name(isa) << " " << gguf::type_name(uint32_t(type)) << " "
                                << quant_method_name(method) << " n " << n << " threads " << threads << " i " << i
                                << ": " << a << " vs " << b;
                        }
                    }
                }
            }
        }
    }
}

TEST(Matmul, ManyTokenCountsAgreeWithReference) {
    // n_tokens 1..70 on the best path, f16 weights (the GEMM tail blocks in both dimensions).
    ThreadPool pool(2);
    std::mt19937 rng(5);
    const int64_t rows = 19, cols = 45;
    auto w = make_weights(GgmlType::F16, rows, cols, rng);
    auto x = random_activations(70 * cols, rng);
    auto mag = magnitude(w.view(), x, 70);
    std::vector<float> ref(size_t(70 * rows));
    matmul_reference(w.view(), x.data(), 70, ref.data());
    for (int64_t n = 1; n <= 70; n += (n < 10 ? 1 : 7)) {
        std::vector<float> y(size_t(n * rows));
        matmul(w.view(), x.data(), n, y.data(), pool);
        for (int64_t i = 0; i < n * rows; ++i) ASSERT_NEAR(y[size_t(i)], ref[size_t(i)], 2e-6 * mag[size_t(i)]) << n;
    }
}

TEST(Matmul, QuantisedTokenCountsAgreeWithReferenceOnEveryPath) {
    // n_tokens 1..70 for every block type and ISA path (the int8 kernels' register-block tails), with
    // an odd number of 32-blocks per row for the simple formats.
    KernelConfigGuard guard;
    ThreadPool pool(2);
    std::mt19937 rng(17);
    set_quant_method(QuantMethod::int8_dot);
    for (GgmlType type : kAllTypes) {
        if (is_float_type(type)) continue;
        const int64_t rows = 13, cols = block_of(type) == 32 ? 32 * 11 : 512;
        auto w = make_weights(type, rows, cols, rng);
        auto x = random_activations(70 * cols, rng);
        auto xq = spec_quantised_activations(x, cols);
        auto mag = magnitude(w.view(), xq, 70);
        std::vector<float> ref(size_t(70 * rows));
        matmul_reference(w.view(), xq.data(), 70, ref.data());
        for (Isa isa : available_isas()) {
            set_isa(isa);
            for (int64_t n = 1; n <= 70; n += (n < 10 ? 1 : 11)) {
                std::vector<float> y(size_t(n * rows));
                matmul(w.view(), x.data(), n, y.data(), pool);
                for (int64_t i = 0; i < n * rows; ++i)
                    ASSERT_NEAR(y[size_t(i)], ref[size_t(i)], 2e-6 * mag[size_t(i)] + 1e-30)
                        << isa_name(isa) << " " << gguf::type_name(uint32_t(type)) << " n " << n << " i " << i;
            }
        }
    }
}

TEST(Matmul, DequantFmaEqualsF32MatmulOfDequantisedWeights) {
    // Both run the same f32 GEMM, so the results must agree bitwise.
    KernelConfigGuard guard;
    ThreadPool pool(2);
    std::mt19937 rng(13);
    set_quant_method(QuantMethod::dequant_fma);
    const int64_t rows = 10, cols = 512, n = 9;
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K,
                          GgmlType::IQ4_XS, GgmlType::MXFP4, GgmlType::IQ2_S, GgmlType::IQ1_M}) {
        auto w = make_weights(type, rows, cols, rng);
        std::vector<float> deq(size_t(rows * cols));
        for (int64_t r = 0; r < rows; ++r) dequantize_row(w.view(), r, deq.data() + r * cols);
        auto x = random_activations(n * cols, rng);
        std::vector<float> a(size_t(n * rows)), b(size_t(n * rows));
        matmul(w.view(), x.data(), n, a.data(), pool);
        matmul(WeightView{GgmlType::F32, deq.data(), rows, cols}, x.data(), n, b.data(), pool);
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << gguf::type_name(uint32_t(type));
    }
}

TEST(Matmul, RejectsUnsupportedTypesAndBadShapes) {
    ThreadPool pool(1);
    float x[64] = {}, y[4] = {};
    uint8_t data[256] = {};
    EXPECT_THROW(matmul(WeightView{GgmlType::Q8_1, data, 1, 256}, x, 1, y, pool), Error);
    EXPECT_THROW(matmul(WeightView{GgmlType::Q4_0, data, 1, 40}, x, 1, y, pool), Error);
    EXPECT_FALSE(matmul_supports(GgmlType::TQ1_0));
    EXPECT_TRUE(matmul_supports(GgmlType::IQ2_XXS));
    EXPECT_TRUE(matmul_supports(GgmlType::Q6_K));
    for (GgmlType t : {GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K}) EXPECT_TRUE(matmul_supports(t));
    EXPECT_THROW(set_gemm_tiles(GemmTiles{0, 1, 1}), Error);
}

TEST(Matmul, DescribesTheChosenPath) {
    KernelConfigGuard guard;
    set_isa(Isa::scalar);
    set_quant_method(QuantMethod::int8_dot);
    EXPECT_NE(describe_kernel_paths().find("scalar path"), std::string::npos);
    set_quant_method(QuantMethod::dequant_fma);
    EXPECT_NE(describe_kernel_paths().find("dequantise"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::backend::cpu
