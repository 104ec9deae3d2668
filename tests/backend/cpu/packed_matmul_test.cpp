// PackedWeight: panels of Q4_0 / Q4_1 / Q5_0 / Q8_0 / K-quants / IQ4_NL / IQ4_XS / MXFP4 for the AVX-512 VNNI and the AVX2 kernels (one
// contract, bitwise), and the fallback to the view path.
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

#include "core/error.h"
#include "backend/cpu/matmul/matmul_paths.h"
#include "backend/cpu/matmul/weight_prefetch.h"
#include "backend/cpu/matmul_test_util.h"
#include "quant/block_formats.h"
#include "quant/codebook_blocks.h"

namespace pagoda::backend::cpu {
namespace {

using gguf::GgmlType;
using namespace testing;

bool block_of_256(GgmlType t) { return gguf::type_traits(t).block_size == 256; }

constexpr GgmlType kPanelTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4_K,
                                    GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};

// The paths with a panel kernel here: avx2 (vpmaddubsw) and, with VNNI, avx512 (vpdpbusd). An
// AVX-512 host without VNNI runs the AVX2 kernel on its avx512 path too.
std::vector<Isa> packed_isas() {
    std::vector<Isa> out;
    for (Isa isa : available_isas())
        if (isa >= Isa::avx2) out.push_back(isa);
    return out;
}

// The packed kernel's contract, written from its documentation: activations quantised per 32 values
// (d = max|x|/127, q = round-half-even(x * 127/max|x|)); per output, over blocks in order,
// acc = fma(f32(sum_i w_i q_i), sc * d_x, acc), with w_i the block's signed integer weights and sc
// its scale (Q4_K / Q5_K: f32(scale) * d, plus macc = fma(-(f32(min) * dmin), s, macc) with
// s = d_x * sum(first 16 q) + d_x * sum(last 16 q); output acc + macc; Q6_K: one such FMA per
// 16-value half with its scale f32(int8 scale) * d; IQ4_NL / IQ4_XS / MXFP4: w the codebook values
// of the 4-bit indices, sc = d, f32(ls - 32) * d, or 2^(e - 128)).
float contract_output(GgmlType type, const uint8_t* row, const float* x, int64_t cols) {
    float acc = 0, macc = 0;
    for (int64_t b = 0; b < cols / 32; ++b) {
        const float* xb = x + b * 32;
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
        const float dx = amax / 127.f, inv = amax > 0 ? 127.f / amax : 0.f;
        int q[32], half[2] = {0, 0};
        for (int i = 0; i < 32; ++i) {
            q[i] = std::clamp(int(std::nearbyint(xb[i] * inv)), -127, 127);
            half[i / 16] += q[i];
        }
        int w[32];
        float sc = 0, mn = 0;
        if (type == GgmlType::Q6_K) {
            // GGML's Q6_K layout: value 128h + 32k + l of a super-block takes 4 bits from
            // ql[64h + l (+32 for odd k)] (low nibble for k < 2) and 2 bits from qh[32h + l] at bit 2k.
            const uint8_t* sb = row + b / 8 * 210;
            const int j = int(b % 8), h = j / 4, k = j % 4;
            uint16_t dh;
            std::memcpy(&dh, sb + 208, 2);
            const float d = f16_to_f32(dh);
            for (int l = 0; l < 32; ++l) {
                const uint8_t lo = sb[64 * h + l + (k % 2) * 32];
                w[l] = int(((k < 2 ? lo : lo >> 4) & 15) | (((sb[128 + 32 * h + l] >> (2 * k)) & 3) << 4)) - 32;
            }
            for (int half = 0; half < 2; ++half) {
                int32_t isum = 0;
                for (int i = 16 * half; i < 16 * half + 16; ++i) isum += w[i] * q[i];
                const float s16 = float(int8_t(sb[192 + 2 * j + half])) * d;
                acc = std::fma(float(isum), s16 * dx, acc);
            }
            continue;
        }
        // GGML's codebook blocks: 16 index bytes pairing values i (low nibble) and 16 + i (high).
        auto indices = [&](const uint8_t* qs, const int8_t* book) {
            for (int i = 0; i < 32; ++i) w[i] = book[i < 16 ? qs[i] & 15 : qs[i - 16] >> 4];
        };
        if (type == GgmlType::IQ4_NL) {  // f16 d, 16 index bytes
            const uint8_t* blk = row + b * 18;
            uint16_t dh;
            std::memcpy(&dh, blk, 2);
            sc = f16_to_f32(dh);
            indices(blk + 2, quant::kValuesIq4nl);
        } else if (type == GgmlType::MXFP4) {  // e8m0 e, 16 index bytes; the doubled e2m1 values x 2^(e - 128)
            const uint8_t* blk = row + b * 17;
            sc = std::ldexp(1.f, int(blk[0]) - 128);
            indices(blk + 1, quant::kValuesMxfp4);
        } else if (type == GgmlType::IQ4_XS) {
            // Super-block: f16 d, u16 scales_h, 4 bytes scales_l, 128 index bytes (16 per sub-block);
            // sub-block j's ls = nibble j % 2 of scales_l[j / 2] | bits 2j..2j+1 of scales_h << 4.
            const uint8_t* sb = row + b / 8 * 136;
            const int j = int(b % 8);
            uint16_t dh, sh;
            std::memcpy(&dh, sb, 2);
            std::memcpy(&sh, sb + 2, 2);
            const int ls = ((sb[4 + j / 2] >> (4 * (j % 2))) & 15) | (((sh >> (2 * j)) & 3) << 4);
            sc = float(ls - 32) * f16_to_f32(dh);
            indices(sb + 8 + 16 * j, quant::kValuesIq4nl);
        } else if (type == GgmlType::Q4_K || type == GgmlType::Q5_K) {
            const bool q5 = type == GgmlType::Q5_K;
            const uint8_t* sb = row + b / 8 * (q5 ? 176 : 144);
            const int j = int(b % 8);
            uint8_t s6, m6;
            quant::k_scale_min(j, sb + 4, s6, m6);
            uint16_t dh, dminh;
            std::memcpy(&dh, sb, 2);
            std::memcpy(&dminh, sb + 2, 2);
            sc = float(s6) * f16_to_f32(dh);
            mn = float(m6) * f16_to_f32(dminh);
            // Value i of sub-block j: nibble j%2 of qs[32 (j/2) + i]; Q5_K: bit j of qh[i] above it.
            for (int i = 0; i < 32; ++i)
                w[i] = ((sb[(q5 ? 48 : 16) + 32 * (j / 2) + i] >> (4 * (j % 2))) & 15) |
                       (q5 ? ((sb[16 + i] >> j) & 1) << 4 : 0);
        } else if (type == GgmlType::Q4_1) {
            // GGML's Q4_1 block: f16 d, f16 m, then 16 bytes: value i < 16 low nibble of byte i,
            // value 16 + i its high nibble; value = d * code + m.
            const uint8_t* blk = row + b * 20;
            uint16_t dh, mh;
            std::memcpy(&dh, blk, 2);
            std::memcpy(&mh, blk + 2, 2);
            sc = f16_to_f32(dh);
            mn = f16_to_f32(mh);
            for (int i = 0; i < 32; ++i) w[i] = i < 16 ? blk[4 + i] & 15 : blk[4 + i - 16] >> 4;
        } else if (type == GgmlType::Q5_0) {
            // GGML's Q5_0 block: f16 d, 4 bytes qh (bit i: the fifth bit of value i, little-endian),
            // then 16 bytes of nibbles as Q4_0's; value = d * (code - 16).
            const uint8_t* blk = row + b * 22;
            uint16_t dh;
            uint32_t qh;
            std::memcpy(&dh, blk, 2);
            std::memcpy(&qh, blk + 2, 4);
            sc = f16_to_f32(dh);
            for (int i = 0; i < 32; ++i)
                w[i] = int((i < 16 ? blk[6 + i] & 15 : blk[6 + i - 16] >> 4) | (((qh >> i) & 1) << 4)) - 16;
        } else {
            const uint8_t* blk = row + b * (type == GgmlType::Q4_0 ? 18 : 34);
            uint16_t dh;
            std::memcpy(&dh, blk, 2);
            sc = f16_to_f32(dh);
            for (int i = 0; i < 32; ++i)
                w[i] = type == GgmlType::Q4_0 ? int(i < 16 ? blk[2 + i] & 15 : blk[2 + i - 16] >> 4) - 8
                                              : int(int8_t(blk[2 + i]));
        }
        int32_t isum = 0;
        for (int i = 0; i < 32; ++i) isum += w[i] * q[i];
        acc = std::fma(float(isum), sc * dx, acc);
        if (type == GgmlType::Q4_K || type == GgmlType::Q5_K) macc = std::fma(-mn, dx * float(half[0]) + dx * float(half[1]), macc);
        if (type == GgmlType::Q4_1) macc = std::fma(mn, dx * float(half[0]) + dx * float(half[1]), macc);
    }
    return type == GgmlType::Q4_K || type == GgmlType::Q5_K || type == GgmlType::Q4_1 ? acc + macc : acc;
}

// Installs a weight prefetch level for one scope, then puts back whatever was installed.
struct PrefetchRestored {
    explicit PrefetchRestored(WeightPrefetch level) { set_weight_prefetch(level); }
    ~PrefetchRestored() { set_weight_prefetch(std::nullopt); }
};

TEST(PackedMatmul, FollowsItsContractBitwiseForEveryTokenCount) {
    if (packed_isas().empty()) GTEST_SKIP() << "no AVX2: no panel kernel runs here";
    KernelConfigGuard guard;
    set_quant_method(QuantMethod::int8_dot);
    ThreadPool pool(2);
    for (Isa isa : packed_isas()) {
        set_isa(isa);
        SCOPED_TRACE(isa_name(isa));
        std::mt19937 rng(21);
        for (GgmlType type : kPanelTypes) {
            for (int64_t rows : {1, 7, 37, 83}) {
                const int64_t cols = block_of_256(type) ? (rows == 7 ? 256 : 768) : rows == 7 ? 32 * 5 : 32 * 16;
                auto w = make_weights(type, rows, cols, rng);
                const PackedWeight pw = pack_weight(w.view());
                ASSERT_TRUE(pw.is_packed());
                const int64_t max_n = 70;
                auto x = random_activations(max_n * cols, rng);
                x[5] = 0;  // a zero and an all-zero block
                std::fill(x.begin() + 32, x.begin() + 64, 0.f);
                const int64_t rb = int64_t(*gguf::row_size(type, cols));
                // Every decode loop (1..16 tokens stream one contiguous range per thread) and prefill;
                // steps of up to 4 tokens a pass with either weight prefetch (weight_prefetch.h: never a result).
                for (int64_t n : {1, 2, 3, 4, 5, 8, 9, 16, 17, 70})
                for (WeightPrefetch level : {WeightPrefetch::l1, WeightPrefetch::l2}) {
                    if (n > 4 && level == WeightPrefetch::l1) continue;
                    const PrefetchRestored restore(level);
                    std::vector<float> y(size_t(n * rows));
                    matmul(pw, x.data(), n, y.data(), pool);
                    for (int64_t t = 0; t < n; ++t)
                        for (int64_t r = 0; r < rows; ++r) {
                            const float want = contract_output(type, w.bytes.data() + r * rb, x.data() + t * cols, cols);
                            const float got = y[size_t(t * rows + r)];
                            ASSERT_EQ(std::memcmp(&got, &want, 4), 0)
                                << gguf::type_name(uint32_t(type)) << " rows " << rows << " n " << n << " t " << t
                                << " r " << r << " prefetch " << weight_prefetch_name(level) << ": " << got << " vs " << want;
                        }
                }
            }
        }
    }
}

TEST(PackedMatmul, AgreesWithReferenceAndIsThreadInvariant) {
    if (packed_isas().empty()) GTEST_SKIP() << "no AVX2: no panel kernel runs here";
    KernelConfigGuard guard;
    set_quant_method(QuantMethod::int8_dot);
    ThreadPool pool1(1), pool2(2), pool3(3);
    for (Isa isa : packed_isas()) {
        set_isa(isa);
        SCOPED_TRACE(isa_name(isa));
        std::mt19937 rng(22);
        const int64_t rows = 83, cols = 32 * 24, n = 19;
        for (GgmlType type : kPanelTypes) {
            auto w = make_weights(type, rows, cols, rng);
            const PackedWeight pw = pack_weight(w.view());
            auto x = random_activations(n * cols, rng);
            std::vector<float> a(size_t(n * rows)), b(size_t(n * rows)), ref(size_t(n * rows)), row(static_cast<size_t>(cols));
            // Decode-sized steps split the panels into one range per thread: any thread count agrees.
            for (int64_t m : {int64_t(1), int64_t(3), int64_t(16), n}) {
                std::vector<float> one(size_t(m * rows)), many(size_t(m * rows));
                matmul(pw, x.data(), m, one.data(), pool1);
                for (ThreadPool* p : {&pool2, &pool3}) {
                    std::fill(many.begin(), many.end(), 0.f);
                    matmul(pw, x.data(), m, many.data(), *p);
                    EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * 4), 0)
                        << gguf::type_name(uint32_t(type)) << " n " << m << " threads " << p->size();
                }
            }
            matmul(pw, x.data(), n, a.data(), pool1);
            matmul(pw, x.data(), n, b.data(), pool2);
            EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
            for (int64_t mc : {8, 48, 1000}) {  // rows per prefill task: never changes a result
                set_gemm_tiles({.kc = 512, .mc = mc, .nc = 64});
                std::fill(b.begin(), b.end(), 0.f);
                matmul(pw, x.data(), n, b.data(), pool2);
                EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "mc " << mc;
            }
            set_gemm_tiles({});
            matmul_reference(w.view(), x.data(), n, ref.data());
            for (int64_t r = 0; r < rows; ++r) {
                dequantize_row(w.view(), r, row.data());
                for (int64_t t = 0; t < n; ++t) {
                    double bound = 0;  // activation rounding: half a quantisation step per value
                    for (int64_t c0 = 0; c0 < cols; c0 += 32) {
                        float amax = 0;
                        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[size_t(t * cols + c0 + i)]));
                        for (int i = 0; i < 32; ++i) bound += std::fabs(row[size_t(c0 + i)]) * amax / 254.0;
                    }
                    ASSERT_NEAR(a[size_t(t * rows + r)], ref[size_t(t * rows + r)], bound * 1.001 + 1e-4)
                        << gguf::type_name(uint32_t(type));
                }
            }
        }
    }
}

// MXFP4's e8m0 scales over a wide range of exponents, the f32 denormals of e = 0 and 1 included
// (the quantiser only writes exponents near the weights' magnitude): the panels' vector decoding of
// the scale bytes against the contract's 2^(e - 128), bit for bit.
TEST(PackedMatmul, MxfpScalesOfEveryExponentFollowTheContract) {
    if (packed_isas().empty()) GTEST_SKIP() << "no AVX2: no panel kernel runs here";
    KernelConfigGuard guard;
    set_quant_method(QuantMethod::int8_dot);
    ThreadPool pool(2);
    std::mt19937 rng(26);
    std::uniform_int_distribution<int> byte(0, 255);
    const int64_t rows = 19, cols = 32 * 9;
    std::vector<uint8_t> bytes(size_t(rows * cols / 32 * 17));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(byte(rng));
    for (size_t b = 0; b < bytes.size() / 17; ++b) bytes[b * 17] = uint8_t(b % 150);  // e = 0 .. 149
    const WeightView view{GgmlType::MXFP4, bytes.data(), rows, cols};
    const PackedWeight pw = pack_weight(view);
    ASSERT_TRUE(pw.is_packed());
    auto x = random_activations(17 * cols, rng);
    for (Isa isa : packed_isas()) {
        set_isa(isa);
        for (int64_t n : {1, 4, 17}) {
            std::vector<float> y(size_t(n * rows));
            matmul(pw, x.data(), n, y.data(), pool);
            for (int64_t t = 0; t < n; ++t)
                for (int64_t r = 0; r < rows; ++r) {
                    const float want = contract_output(GgmlType::MXFP4, bytes.data() + r * (cols / 32 * 17), x.data() + t * cols, cols);
                    const float got = y[size_t(t * rows + r)];
                    ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << isa_name(isa) << " n " << n << " t " << t << " r " << r;
                }
        }
    }
}

// The codebook types' panels against the stored-block int8 path they replace (int8_formats.h, on the
// view): the same quantised activations and the same exact integer block sums, so the two differ only
// in the order their floats are accumulated — far below what a wrong index, codebook or scale gives.
TEST(PackedMatmul, CodebookPanelsAgreeWithTheStoredBlockPath) {
    if (packed_isas().empty()) GTEST_SKIP() << "no AVX2: no panel kernel runs here";
    KernelConfigGuard guard;
    set_quant_method(QuantMethod::int8_dot);
    ThreadPool pool(2);
    for (Isa isa : packed_isas()) {
        set_isa(isa);
        SCOPED_TRACE(isa_name(isa));
        std::mt19937 rng(25);
        for (GgmlType type : {GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4}) {
            const int64_t rows = 37, cols = block_of_256(type) ? 512 : 32 * 13, max_n = 19;
            auto w = make_weights(type, rows, cols, rng);
            const PackedWeight pw = pack_weight(w.view());
            ASSERT_TRUE(pw.is_packed());
            auto x = random_activations(max_n * cols, rng);
            std::vector<float> deq(size_t(rows * cols));
            for (int64_t r = 0; r < rows; ++r) dequantize_row(w.view(), r, deq.data() + r * cols);
            for (int64_t n : {int64_t(1), int64_t(5), max_n}) {
                std::vector<float> panels(size_t(n * rows)), blocks(size_t(n * rows));
                matmul(pw, x.data(), n, panels.data(), pool);
                matmul(w.view(), x.data(), n, blocks.data(), pool);
                for (int64_t t = 0; t < n; ++t)
                    for (int64_t r = 0; r < rows; ++r) {
                        double mag = 0;  // the size of the terms summed
                        for (int64_t c = 0; c < cols; ++c) mag += std::fabs(deq[size_t(r * cols + c)] * x[size_t(t * cols + c)]);
                        ASSERT_NEAR(panels[size_t(t * rows + r)], blocks[size_t(t * rows + r)], mag * 1e-5)
                            << gguf::type_name(uint32_t(type)) << " n " << n << " t " << t << " r " << r;
                    }
            }
        }
    }
}

TEST(PackedMatmul, OtherTypesAndPathsUseTheView) {
    KernelConfigGuard guard;
    set_isa(best_supported_isa());  // packing follows the active path, which PAGODA_ISA may lower
    ThreadPool pool(2);
    std::mt19937 rng(23);
    set_float_method(FloatMethod::f32_fma);  // F16 panels (bf16_dot) are tested in bf16_matmul_test.cpp
    auto f16 = make_weights(GgmlType::F16, 9, 64, rng);
    EXPECT_FALSE(pack_weight(f16.view()).is_packed());
    auto q4 = make_weights(GgmlType::Q4_0, 9, 64, rng);
    const PackedWeight pw = pack_weight(q4.view());
    EXPECT_EQ(pw.is_packed(), !packed_isas().empty());
    // On a path without a panel kernel the packed weight computes exactly what the view does.
    auto x = random_activations(3 * 64, rng);
    for (Isa isa : available_isas()) {
        if (isa >= Isa::avx2) continue;
        set_isa(isa);
        std::vector<float> a(27), b(27);
        matmul(pw, x.data(), 3, a.data(), pool);
        matmul(q4.view(), x.data(), 3, b.data(), pool);
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << isa_name(isa);
    }
    EXPECT_THROW(pack_weight(WeightView{GgmlType::Q8_1, q4.bytes.data(), 1, 256}), Error);
    EXPECT_THROW(pack_weight(WeightView{GgmlType::Q4_0, q4.bytes.data(), 1, 40}), Error);
}

// Stacked weights (Q|K|V, gate|up) give, per token, each part's outputs one after the other, bit for
// bit what the parts give one by one — on the packed kernel and on every fallback path.
TEST(PackedMatmul, StackedPartsEqualTheirSeparateProducts) {
    KernelConfigGuard guard;
    set_isa(best_supported_isa());  // both sides packed on the best path, whatever PAGODA_ISA says
    ThreadPool pool(2);
    std::mt19937 rng(24);
    for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::IQ4_XS,
                          GgmlType::MXFP4, GgmlType::F16}) {
        const int64_t cols = block_of_256(type) ? 512 : 96;
        const int64_t part_rows[] = {13, 5, 24};  // panels straddle the parts
        std::vector<RandomWeights> parts;
        std::vector<WeightView> views;
        for (int64_t r : part_rows) parts.push_back(make_weights(type, r, cols, rng));
        for (auto& p : parts) views.push_back(p.view());
        const PackedWeight stacked = pack_weights(views);
        EXPECT_EQ(stacked.source().rows, 42);
        for (Isa isa : available_isas()) {
            set_isa(isa);
            for (int64_t n : {1, 9}) {
                auto x = random_activations(n * cols, rng);
                std::vector<float> y(size_t(n * 42));
                matmul(stacked, x.data(), n, y.data(), pool);
                int64_t offset = 0;
                for (const auto& v : views) {
                    std::vector<float> want(size_t(n * v.rows));
                    matmul(pack_weight(v), x.data(), n, want.data(), pool);
                    for (int64_t t = 0; t < n; ++t)
                        ASSERT_EQ(std::memcmp(y.data() + t * 42 + offset, want.data() + t * v.rows, size_t(v.rows) * 4), 0)
                            << gguf::type_name(uint32_t(type)) << " " << isa_name(isa) << " n " << n << " offset " << offset;
                    offset += v.rows;
                }
            }
        }
    }
    auto a = make_weights(GgmlType::Q4_0, 8, 64, rng);
    auto b = make_weights(GgmlType::Q8_0, 8, 64, rng);
    auto c = make_weights(GgmlType::Q4_0, 8, 96, rng);
    EXPECT_THROW(pack_weights(std::vector<WeightView>{a.view(), b.view()}), Error);
    EXPECT_THROW(pack_weights(std::vector<WeightView>{a.view(), c.view()}), Error);
    EXPECT_THROW(pack_weights(std::vector<WeightView>{}), Error);
}

// Activations quantised ahead of their matmuls: the AVX-512 path (whole groups of 16 blocks with the
// blocks' scalars in vector lanes, int8_quantize_avx512.h) writes the AVX2 loop's codes, scales and
// half sums byte for byte, at widths with and without a remainder of blocks, over magnitudes from
// denormal-adjacent to 1e30, with all-zero blocks and exact ties (x * 127 / max on a .5, rounded to even).
TEST(PackedMatmul, QuantisedActivationsAreTheSameBytesOnBothPaths) {
    if (best_supported_isa() != Isa::avx512) GTEST_SKIP() << "no AVX-512 here: only the AVX2 quantiser runs";
    std::mt19937 rng(25);
    for (int64_t cols : {32, 160, 512, 768, 2048, 5632}) {
        for (float magnitude : {1e-30f, 1e-3f, 1.f, 1e30f}) {
            const int64_t n = 3;
            std::vector<float> x(size_t(n * cols));
            std::normal_distribution<float> nd(0.f, magnitude);
            for (auto& v : x) v = nd(rng);
            std::fill(x.begin() + cols, x.begin() + cols + 32, 0.f);  // token 1: a zero block
            x[size_t(2 * cols + 1)] = 127.f;  // token 2, block 0: max 127, so x * inv = x exactly: ties
            x[size_t(2 * cols + 2)] = 2.5f;   // to even: 2
            x[size_t(2 * cols + 3)] = -3.5f;  // -4
            std::vector<uint8_t> a(prequantized_bytes(n, cols), 0xa5), b(a.size(), 0xa5);
            for (int64_t t = 0; t < n; ++t) {
                detail::prequantize_token_avx512(x.data() + t * cols, t, n, cols, a.data());
                detail::prequantize_token_avx2(x.data() + t * cols, t, n, cols, b.data());
            }
            ASSERT_EQ(a, b) << "cols " << cols << " magnitude " << magnitude;
        }
    }
}

}  // namespace
}  // namespace pagoda::backend::cpu
