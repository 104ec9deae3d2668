// The f32 path's reduction order (matmul_paths.h), written out from the contract rather than from the
// kernel: each output keeps L lanes, lane j sums w[k] * x[k] for k = j (mod L) in increasing k with one
// multiply-add each (fused on AVX2 / AVX-512, a rounded multiply then an add on the scalar path), the
// final partial step reads zeros, and the lanes are summed by the fixed tree. Every tiling, token count
// and thread count must give exactly that, so these tests pin the GEMM's epilogue and K tiling.
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/matmul_test_util.h"

namespace pagoda::backend::cpu {
namespace {

using gguf::GgmlType;
using namespace testing;

// The fixed tree: halves (L = 16 only), then quarters, then (q0 + q2) + (q1 + q3).
float tree_sum(std::vector<float> v) {
    if (v.size() == 16)
        for (size_t j = 0; j < 8; ++j) v[j] = v[j] + v[j + 8];
    float q[4];
    for (size_t j = 0; j < 4; ++j) q[j] = v[j] + v[j + 4];
    const float a = q[0] + q[2], b = q[1] + q[3];
    return a + b;
}

float contract_dot(const float* w, const float* x, int64_t cols, int lanes, bool fused) {
    std::vector<float> lane(size_t(lanes), 0.f);
    for (int64_t k0 = 0; k0 < cols; k0 += lanes)
        for (int j = 0; j < lanes; ++j) {
            const int64_t k = k0 + j;
            const float wk = k < cols ? w[k] : 0.f, xk = k < cols ? x[k] : 0.f;
            if (fused) {
                lane[size_t(j)] = std::fma(wk, xk, lane[size_t(j)]);
            } else {
                volatile float product = wk * xk;  // rounded to float before the add, as the scalar path
                lane[size_t(j)] = lane[size_t(j)] + product;
            }
        }
    return tree_sum(lane);
}

TEST(FloatLaneContract, EveryTilingAndTokenCountGivesTheContractsBits) {
    KernelConfigGuard guard;
    ThreadPool pool1(1), pool2(2);
    std::mt19937 rng(23);
    for (Isa isa : available_isas()) {
        set_isa(isa);
        const int lanes = isa == Isa::avx512 ? 16 : 8;
        const bool fused = isa != Isa::scalar;
        for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
            // 37 rows: a partial row block; cols 70 (a partial vector), 768 and 1100 (two and three
            // K tiles of 512, the last partial).
            for (int64_t cols : {70, 768, 1100}) {
                const int64_t rows = 37;
                auto w = make_weights(type, rows, cols, rng);
                const int64_t max_n = 23;
                auto x = random_activations(max_n * cols, rng);
                std::vector<float> wrow(static_cast<size_t>(cols));
                std::vector<float> expect(size_t(max_n * rows));
                for (int64_t r = 0; r < rows; ++r) {
                    dequantize_row(w.view(), r, wrow.data());
                    for (int64_t t = 0; t < max_n; ++t)
                        expect[size_t(t * rows + r)] = contract_dot(wrow.data(), x.data() + t * cols, cols, lanes, fused);
                }
                for (GemmTiles tiles : {GemmTiles{}, GemmTiles{256, 8, 5}, GemmTiles{2048, 64, 64}}) {
                    set_gemm_tiles(tiles);
                    for (int64_t n : {1, 4, 7, 23}) {
                        for (ThreadPool* pool : {&pool1, &pool2}) {
                            std::vector<float> y(size_t(n * rows));
                            matmul(w.view(), x.data(), n, y.data(), *pool);
                            for (int64_t i = 0; i < n * rows; ++i) {
                                const float a = y[size_t(i)], b = expect[size_t(i)];
                                ASSERT_EQ(std::memcmp(&a, &b, 4), 0)
                                    << isa_name(isa) << " " << gguf::type_name(uint32_t(type)) << " cols " << cols
                                    << " kc " << tiles.kc << " n " << n << " threads " << pool->size() << " output "
                                    << i << ": " << a << " vs " << b;
                            }
                        }
                    }
                }
            }
        }
    }
}

}  // namespace
}  // namespace pagoda::backend::cpu
