// The KV row encoders (kv_rows.h) against their scalar definitions, bit for bit, on every ISA this
// host has. f16 / bf16 against core/half.h's f32_to_f16 and f32_to_bf16: every f16 and bf16 value,
// the f32 values around each rounding midpoint (exact ties, one ulp either side), the overflow and
// subnormal edges, NaNs with payloads in any lane, infinities, and random bit patterns, at row
// lengths that leave partial vectors. q8 against kv::quantize_row_q8: random rows of every length
// up to 200 at scales from subnormal to huge, rows of exact ties, all-zero rows and rows holding
// inf or NaN in any lane.
#include <bit>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/kv/kv_rows.h"
#include "backend/cpu/matmul_test_util.h"
#include "core/half.h"
#include "kv/kv_q8.h"

namespace pagoda::backend::cpu {
namespace {

using namespace testing;

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// The inputs: for every 16-bit pattern h, the f32 values it stands for as f16 and as bf16, the
// midpoints to the next pattern (the ties), and their neighbours one f32 ulp either side; then
// special values and random bit patterns.
std::vector<float> edge_inputs() {
    std::vector<uint32_t> bits;
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const uint32_t f16 = std::bit_cast<uint32_t>(f16_to_f32(uint16_t(h)));
        const uint32_t bf16 = h << 16;
        for (uint32_t base : {f16, bf16}) {
            // The tie between base and the next half value sits at base + half a half-ulp: for f16
            // normals 0x1000 f32 ulps (13 dropped bits), for bf16 0x8000 (16 dropped bits).
            for (uint32_t half_step : {0x1000u, 0x8000u})
                for (int d = -1; d <= 1; ++d) bits.push_back(base + half_step + uint32_t(d));
            bits.push_back(base);
        }
        // The exact midpoint to the next f16 magnitude (covers the subnormals, whose steps are
        // wider than 0x1000 f32 ulps), and one ulp either side.
        if ((h & 0x7fffu) < 0x7bffu) {
            const float a = f16_to_f32(uint16_t(h)), b = f16_to_f32(uint16_t(h + 1));
            const uint32_t mid = std::bit_cast<uint32_t>((a + b) / 2);
            for (int d = -1; d <= 1; ++d) bits.push_back(mid + uint32_t(d));
        }
    }
    for (uint32_t u : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
                       0x7fbfffffu, 0xffffffffu, 0x477ff000u, 0x477fefffu, 0x477fffffu, 0x38800000u, 0x387fffffu,
                       0x33000000u, 0x33000001u, 0x32ffffffu, 0x00000001u, 0x007fffffu, 0x7f7fffffu, 0xff7fffffu})
        bits.push_back(u);
    std::mt19937 rng(7);
    for (int i = 0; i < 1 << 20; ++i) bits.push_back(uint32_t(rng()));
    std::vector<float> out;
    out.reserve(bits.size());
    for (uint32_t u : bits) out.push_back(from_bits(u));
    return out;
}

void expect_rows_match(void (*convert)(const float*, int64_t, uint16_t*), uint16_t (*scalar)(float), const char* what) {
    const std::vector<float> x = edge_inputs();
    std::vector<uint16_t> got(x.size() + 64, 0xdead);
    // Whole and partial vectors, at offsets that shift every value through every lane.
    for (int64_t offset : {0, 1, 7, 13}) {
        const int64_t n = int64_t(x.size()) - offset - 5;
        std::fill(got.begin(), got.end(), uint16_t(0xdead));
        convert(x.data() + offset, n, got.data());
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) {
            const uint16_t want = scalar(x[size_t(offset + i)]);
            if (got[size_t(i)] != want && ++bad <= 5)
                ADD_FAILURE() << what << " at offset " << offset << " of " << std::hex << "f32 bits 0x"
                              << std::bit_cast<uint32_t>(x[size_t(offset + i)]) << ": got 0x" << got[size_t(i)]
                              << ", want 0x" << want;
        }
        EXPECT_EQ(bad, 0) << what << " at offset " << offset;
        EXPECT_EQ(got[size_t(n)], 0xdead) << what << ": wrote past the row";
    }
    for (int64_t n = 0; n <= 40; ++n) {  // short rows: a tail alone, or one vector and a tail
        std::vector<uint16_t> row(size_t(n) + 1, 0xdead);
        convert(x.data() + 1000, n, row.data());
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(row[size_t(i)], scalar(x[size_t(1000 + i)])) << what << " n " << n;
        EXPECT_EQ(row[size_t(n)], 0xdead) << what << " n " << n << ": wrote past the row";
    }
}

uint16_t to_f16(float f) { return f32_to_f16(f); }
uint16_t to_bf16(float f) { return f32_to_bf16(f); }

TEST(KvRows, EveryIsaGivesTheScalarConversionsBits) {
    KernelConfigGuard guard;
    for (Isa isa : available_isas()) {
        SCOPED_TRACE(isa_name(isa));
        set_isa(isa);
        expect_rows_match(f32_to_f16_row, to_f16, "f16");
        expect_rows_match(f32_to_bf16_row, to_bf16, "bf16");
    }
    if (available_isas().size() < 3) GTEST_LOG_(INFO) << "this host lacks AVX-512: only the scalar and AVX2 paths ran";
}

// A NaN in one lane of a vector: that lane takes the scalar's quiet NaN (sign kept), the others
// their own conversions.
TEST(KvRows, NanLanesTakeTheQuietNanAndLeaveTheirNeighboursAlone) {
    KernelConfigGuard guard;
    for (Isa isa : available_isas()) {
        set_isa(isa);
        for (int lane = 0; lane < 16; ++lane) {
            std::vector<float> x(16);
            for (int i = 0; i < 16; ++i) x[size_t(i)] = 1.0f + float(i) / 3;
            x[size_t(lane)] = from_bits(0xff812345u);  // a negative signalling NaN with a payload
            std::vector<uint16_t> f16(16), bf16(16);
            f32_to_f16_row(x.data(), 16, f16.data());
            f32_to_bf16_row(x.data(), 16, bf16.data());
            for (int i = 0; i < 16; ++i) {
                EXPECT_EQ(f16[size_t(i)], i == lane ? 0xfe00 : f32_to_f16(x[size_t(i)])) << isa_name(isa) << " lane " << lane;
                EXPECT_EQ(bf16[size_t(i)], i == lane ? 0xffc1 : f32_to_bf16(x[size_t(i)])) << isa_name(isa) << " lane " << lane;
            }
        }
    }
}

void expect_q8_matches(const std::vector<float>& x, const char* what) {
    const int64_t n = int64_t(x.size());
    std::vector<int8_t> want(x.size() + 1, 99), got(x.size() + 1, 99);
    const float want_scale = kv::quantize_row_q8(x.data(), want.data(), n);
    const float got_scale = quantize_row_q8(x.data(), got.data(), n);
    EXPECT_EQ(std::bit_cast<uint32_t>(got_scale), std::bit_cast<uint32_t>(want_scale)) << what << " n " << n;
    EXPECT_EQ(got, want) << what << " n " << n;  // the extra element: nothing written past the row
}

TEST(KvRows, Q8RowsGiveTheReferenceCodesAndScale) {
    KernelConfigGuard guard;
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (Isa isa : available_isas()) {
        SCOPED_TRACE(isa_name(isa));
        set_isa(isa);
        for (int64_t n = 0; n <= 200; ++n)
            for (float magnitude : {1e-42f, 1e-30f, 1e-3f, 1.0f, 300.0f, 1e30f}) {
                std::vector<float> x(static_cast<size_t>(n));
                for (auto& v : x) v = normal(rng) * magnitude;
                expect_q8_matches(x, "random");
            }
        for (int64_t n : {1, 8, 15, 16, 17, 64, 100}) {
            // Largest |x| = 127: scale exactly 1, so values k + 0.5 are exact ties (half to even).
            std::vector<float> ties(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) ties[size_t(i)] = float(i % 254 - 127) + (i ? 0.5f : 0.0f);
            ties[0] = -127.0f;
            expect_q8_matches(ties, "ties");
            expect_q8_matches(std::vector<float>(static_cast<size_t>(n), 0.0f), "zeros");
            expect_q8_matches(std::vector<float>(static_cast<size_t>(n), -0.0f), "negative zeros");
            for (float special : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max()})
                for (int64_t at = 0; at < n; at += 7) {
                    std::vector<float> x(static_cast<size_t>(n));
                    for (auto& v : x) v = normal(rng);
                    x[size_t(at)] = special;
                    expect_q8_matches(x, "special");
                }
        }
    }
}

}  // namespace
}  // namespace pagoda::backend::cpu
