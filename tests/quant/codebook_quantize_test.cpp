// Quantisers to IQ4_NL, IQ4_XS and MXFP4: error bounds of the round trip, the fixed point (quantising
// dequantised values gives them back bitwise), importance weighting lowering the weighted error, and
// the refusal of the grid types by name.
#include <cmath>
#include <cstdio>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "quant/calibrated_quantize.h"
#include "quant/codebook_quantize.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"

namespace pagoda::quant {
namespace {

using gguf::GgmlType;

std::vector<float> round_trip(GgmlType type, const std::vector<float>& x, const float* importance = nullptr) {
    std::vector<uint8_t> q(size_t(*gguf::row_size(type, int64_t(x.size()))));
    quantize_row_codebook(type, x.data(), importance, q.data(), int64_t(x.size()));
    std::vector<float> back(x.size());
    dequantize_row(type, q.data(), back.data(), int64_t(back.size()));
    return back;
}

double weighted_rel_error(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& w) {
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        num += w[i] * (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
        den += w[i] * double(x[i]) * x[i];
    }
    return std::sqrt(num / den);
}

std::vector<float> gaussian(size_t n, std::mt19937& rng, float sigma = 0.02f) {
    std::normal_distribution<float> normal(0.f, sigma);
    std::vector<float> x(n);
    for (auto& v : x) v = normal(rng);
    return x;
}

const GgmlType kQuantisable[] = {GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};

TEST(CodebookQuantize, RoundTripErrorIsBounded) {
    std::mt19937 rng(3);
    const std::vector<float> ones(4096, 1.f);
    // Relative RMS error of Gaussian rows (4-bit non-linear codes: ~0.09 is typical; MXFP4's power
    // of two scales and E2M1 values: ~0.13).
    const double bound[] = {0.11, 0.11, 0.16};
    for (int k = 0; k < 3; ++k) {
        const auto x = gaussian(4096, rng);
        const auto y = round_trip(kQuantisable[k], x);
        const double err = weighted_rel_error(x, y, ones);
        EXPECT_LT(err, bound[k]) << gguf::type_name(uint32_t(kQuantisable[k]));
        EXPECT_GT(err, 0.0) << gguf::type_name(uint32_t(kQuantisable[k]));
    }
}

TEST(CodebookQuantize, RequantisingDequantisedValuesIsStable) {
    std::mt19937 rng(5);
    for (GgmlType type : kQuantisable) {
        for (int trial = 0; trial < 4; ++trial) {
            const auto x = gaussian(1024, rng, trial == 3 ? 1e-30f : 0.05f * float(trial + 1));
            const auto once = round_trip(type, x);
            const auto twice = round_trip(type, once);
            for (size_t i = 0; i < x.size(); ++i)
                ASSERT_EQ(once[i], twice[i]) << gguf::type_name(uint32_t(type)) << " trial " << trial << " value " << i;
        }
    }
}

TEST(CodebookQuantize, ZeroRowsStayZero) {
    for (GgmlType type : kQuantisable) {
        const auto y = round_trip(type, std::vector<float>(256, 0.f));
        for (float v : y) EXPECT_EQ(v, 0.f) << gguf::type_name(uint32_t(type));
    }
}

TEST(CodebookQuantize, ImportanceLowersTheWeightedError) {
    // Columns with importance 100 against 1: weighting must lower the importance-weighted error
    // compared with uniform importance (summed over many rows, so it is not luck). MXFP4 chooses only
    // among three exponents per block, so its gain is smaller.
    std::mt19937 rng(9);
    for (GgmlType type : kQuantisable) {
        std::vector<float> imp(256), uniform(256, 1.f);
        for (size_t i = 0; i < imp.size(); ++i) imp[i] = i % 7 == 0 ? 100.f : 1.f;
        double plain = 0, weighted = 0;
        for (int r = 0; r < 40; ++r) {
            const auto x = gaussian(256, rng);
            plain += weighted_rel_error(x, round_trip(type, x, uniform.data()), imp);
            weighted += weighted_rel_error(x, round_trip(type, x, imp.data()), imp);
        }
        std::printf("%s: importance-weighted error %.4f, uniform %.4f\n", gguf::type_name(uint32_t(type)).c_str(), weighted, plain);
        EXPECT_LT(weighted, (type == GgmlType::MXFP4 ? 0.99 : 0.95) * plain) << gguf::type_name(uint32_t(type));
    }
}

TEST(CodebookQuantize, CalibratedTargetsUseTheCodebookQuantiser) {
    std::mt19937 rng(1);
    const auto x = gaussian(256, rng);
    for (GgmlType type : kQuantisable) {
        EXPECT_TRUE(can_quantize(type));
        std::vector<uint8_t> a(size_t(*gguf::row_size(type, 256))), b(a.size()), c(a.size());
        quantize_row_calibrated(QuantTarget{type}, x.data(), nullptr, a.data(), 256);
        quantize_row(type, x.data(), b.data(), 256);
        quantize_row_codebook(type, x.data(), nullptr, c.data(), 256);
        EXPECT_EQ(a, c);
        EXPECT_EQ(b, c);
    }
}

TEST(CodebookQuantize, RefusesGridTypesAndBadLengthsByName) {
    std::vector<float> x(256, 0.1f);
    std::vector<uint8_t> out(1024);
    for (GgmlType type : {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S,
                          GgmlType::IQ1_S, GgmlType::IQ1_M}) {
        EXPECT_FALSE(can_quantize(type));
        try {
            quantize_row(type, x.data(), out.data(), 256);
            ADD_FAILURE() << "no error for " << gguf::type_name(uint32_t(type));
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(gguf::type_name(uint32_t(type))), std::string::npos) << e.what();
        }
    }
    EXPECT_THROW(quantize_row_codebook(GgmlType::IQ4_XS, x.data(), nullptr, out.data(), 128), Error);
    EXPECT_THROW(quantize_row_codebook(GgmlType::IQ4_NL, x.data(), nullptr, out.data(), 40), Error);
}

}  // namespace
}  // namespace pagoda::quant
