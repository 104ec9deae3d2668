#include "engine/sampler.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <algorithm>

#include "core/error.h"

namespace pagoda::engine {
namespace {

std::vector<float> logits_for(const std::vector<double>& probs) {
    std::vector<float> l;
    for (double p : probs) l.push_back(float(std::log(p)));
    return l;
}

std::vector<int> histogram(SamplingParams params, const std::vector<double>& probs, int draws) {
    Sampler s(params);
    std::vector<int> counts(probs.size());
    for (int i = 0; i < draws; ++i) {
        auto l = logits_for(probs);
        ++counts[size_t(s.sample(l.data(), int64_t(l.size()), {}, i))];
    }
    return counts;
}

TEST(Sampler, GreedyPicksTheMaximum) {
    Sampler s({.temperature = 0.0f});
    std::vector<float> l = {0.1f, 2.5f, -1.0f, 2.4f};
    EXPECT_EQ(s.sample(l.data(), 4, {}, 0), 1);
}

TEST(Sampler, SameSeedSameChoices) {
    std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
    SamplingParams p{.temperature = 1.0f, .seed = 42};
    Sampler a(p), b(p);
    for (int i = 0; i < 200; ++i) {
        auto la = logits_for(probs), lb = logits_for(probs);
        ASSERT_EQ(a.sample(la.data(), 4, {}, i), b.sample(lb.data(), 4, {}, i));
    }
}

// The draw at a position is a function of (distribution, seed, choice, position) alone: a fresh
// sampler, one that drew elsewhere first (other positions, other logits), and positions visited in
// any order all give the same token. Another choice or seed is another stream.
TEST(Sampler, KeyedDrawsDependOnSeedChoiceAndPositionOnly) {
    std::vector<double> probs = {0.05, 0.15, 0.2, 0.25, 0.35};
    // top_p 0.999 keeps all five but walks them best first (the sorted path); the distribution stays p.
    SamplingParams p{.temperature = 1.0f, .top_p = 0.999f, .seed = 1234};
    auto draw = [&](Sampler& s, int64_t position) {
        auto l = logits_for(probs);
        return s.sample(l.data(), int64_t(l.size()), {}, position);
    };
    std::vector<int32_t> fresh;
    for (int64_t pos = 0; pos < 300; ++pos) {
        Sampler s(p);
        fresh.push_back(draw(s, pos));
    }
    Sampler used(p);
    for (int64_t pos = 299; pos >= 0; --pos) {
        std::vector<float> other = {3.0f, -1.0f, 0.5f, 0.0f, 2.0f};  // an unrelated draw in between
        used.sample(other.data(), 5, {}, pos + 1000);
        ASSERT_EQ(draw(used, pos), fresh[size_t(pos)]) << "position " << pos;
    }
    Sampler choice1(p, 1);
    SamplingParams q = p;
    q.seed = 1235;
    Sampler next_seed(q);
    int same_choice = 0, same_seed = 0;
    for (int64_t pos = 0; pos < 300; ++pos) {
        same_choice += draw(choice1, pos) == fresh[size_t(pos)];
        same_seed += draw(next_seed, pos) == fresh[size_t(pos)];
    }
    // Independent streams agree where two draws from p coincide: sum p^2 = 0.245 of the time.
    EXPECT_NEAR(same_choice, 0.245 * 300, 5 * std::sqrt(300 * 0.245 * 0.755));
    EXPECT_NEAR(same_seed, 0.245 * 300, 5 * std::sqrt(300 * 0.245 * 0.755));
}

// The keyed uniforms are uniform over positions, choices and seeds: a chi-square over 16 bins, and
// neighbouring keys uncorrelated.
TEST(Sampler, KeyedUniformsAreUniform) {
    constexpr int kBins = 16, kN = 64000;
    std::vector<int> bins(kBins);
    double products = 0;
    for (int i = 0; i < kN; ++i) {
        const uint64_t seed = uint64_t(i % 4), choice = uint64_t(i / 4 % 4), position = uint64_t(i / 16);
        const double u = keyed_uniform(seed, choice, position);
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
        ++bins[size_t(u * kBins)];
        products += (u - 0.5) * (keyed_uniform(seed, choice, position + 1) - 0.5);
    }
    double chi2 = 0;
    for (int b : bins) chi2 += (b - kN / kBins) * double(b - kN / kBins) / (kN / kBins);
    EXPECT_LT(chi2, 37.7);  // 15 degrees of freedom, p = 0.001
    // Correlation of neighbouring positions: mean of (u-0.5)(v-0.5) is 0 with sd 1/12/sqrt(n).
    EXPECT_NEAR(products / kN, 0.0, 5.0 / 12 / std::sqrt(double(kN)));
}

TEST(Sampler, DrawsFollowTheDistribution) {
    std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
    const int n = 40000;
    auto counts = histogram({.temperature = 1.0f, .seed = 7}, probs, n);
    for (size_t i = 0; i < probs.size(); ++i) {
        double sigma = std::sqrt(n * probs[i] * (1 - probs[i]));
        EXPECT_NEAR(counts[i], n * probs[i], 5 * sigma) << "token " << i;
    }
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
    // Sorted: 0.4 (id 3), 0.3 (id 2); cumulative 0.7 >= 0.6 so ids 0 and 1 never appear.
    auto counts = histogram({.temperature = 1.0f, .top_p = 0.6f, .seed = 3}, {0.1, 0.2, 0.3, 0.4}, 5000);
    EXPECT_EQ(counts[0], 0);
    EXPECT_EQ(counts[1], 0);
    EXPECT_GT(counts[2], 1500);
    EXPECT_GT(counts[3], 2000);
}

TEST(Sampler, TopKAndMinP) {
    auto k = histogram({.temperature = 1.0f, .top_k = 2, .seed = 3}, {0.1, 0.2, 0.3, 0.4}, 3000);
    EXPECT_EQ(k[0] + k[1], 0);
    // min_p 0.6: keep p >= 0.24 -> ids 2 and 3.
    auto m = histogram({.temperature = 1.0f, .min_p = 0.6f, .seed = 3}, {0.1, 0.2, 0.3, 0.4}, 3000);
    EXPECT_EQ(m[0] + m[1], 0);
    EXPECT_GT(m[2], 0);
}

// A vocabulary large enough that the cuts walk many of the lazily sorted chunks (64, 128, ... 1024:
// small ones from a heap, large ones by nth_element): token ranks shuffled over the ids, mass
// falling by e^-0.003 a rank. Every draw must be a token the cut keeps by its definition (a full
// sort here), and the kept set's last ranks must be drawn about as often as their mass says.
TEST(Sampler, CutsOverManyChunksKeepWhatAFullSortKeeps) {
    constexpr int kVocab = 5000;
    std::vector<int32_t> id_of_rank(kVocab);
    for (int i = 0; i < kVocab; ++i) id_of_rank[size_t(i)] = i;
    std::shuffle(id_of_rank.begin(), id_of_rank.end(), std::mt19937(11));
    std::vector<float> logits(kVocab);
    std::vector<double> mass(kVocab);
    double total = 0;
    for (int r = 0; r < kVocab; ++r) {
        logits[size_t(id_of_rank[size_t(r)])] = -0.003f * float(r);
        total += mass[size_t(r)] = std::exp(double(-0.003f * float(r)));
    }
    struct Case {
        SamplingParams params;
        int kept;  // ranks 0 .. kept - 1, by each cut's definition
    };
    // top-p 0.9: the first rank where the cumulative mass reaches 0.9; min-p 0.2: mass >= 0.2 x the
    // first's; top-k 300 exactly.
    int nucleus = 0;
    for (double c = 0; c < 0.9 * total;) c += mass[size_t(nucleus++)];
    int min_p_kept = 0;
    while (min_p_kept < kVocab && mass[size_t(min_p_kept)] >= 0.2 * mass[0]) ++min_p_kept;
    const Case cases[] = {{{.temperature = 1.0f, .top_p = 0.9f, .seed = 5}, nucleus},
                          {{.temperature = 1.0f, .min_p = 0.2f, .seed = 6}, min_p_kept},
                          {{.temperature = 1.0f, .top_k = 300, .seed = 7}, 300},
                          {{.temperature = 1.0f, .top_k = 2000, .top_p = 0.9f, .seed = 8}, nucleus}};
    ASSERT_GT(nucleus, 600);  // several chunks deep
    for (const Case& c : cases) {
        Sampler s(c.params);
        std::vector<int> rank_of_id(kVocab);
        for (int r = 0; r < kVocab; ++r) rank_of_id[size_t(id_of_rank[size_t(r)])] = r;
        const int draws = 4000;
        int tail = 0;  // draws among the kept set's last tenth of ranks
        double tail_mass = 0, kept_mass = 0;
        for (int r = 0; r < c.kept; ++r) {
            kept_mass += mass[size_t(r)];
            if (r >= c.kept - c.kept / 10) tail_mass += mass[size_t(r)];
        }
        for (int i = 0; i < draws; ++i) {
            std::vector<float> l = logits;
            const int rank = rank_of_id[size_t(s.sample(l.data(), kVocab, {}, i))];
            ASSERT_LT(rank, c.kept) << "top_k " << c.params.top_k << " top_p " << c.params.top_p << " min_p "
                                    << c.params.min_p;
            tail += rank >= c.kept - c.kept / 10;
        }
        const double want = draws * tail_mass / kept_mass, sigma = std::sqrt(want);
        EXPECT_NEAR(tail, want, 5 * sigma) << "top_k " << c.params.top_k << " top_p " << c.params.top_p;
    }
}

TEST(Sampler, PenaltiesAndBias) {
    SamplingParams p{.temperature = 0.0f, .repetition_penalty = 2.0f, .frequency_penalty = 0.5f,
                     .presence_penalty = 0.25f};
    p.logit_bias[0] = -std::numeric_limits<float>::infinity();
    Sampler s(p);
    std::vector<float> l = {10.0f, 4.0f, -2.0f, 3.0f};
    // Token 1 seen twice: 4/2 - 2*0.5 - 0.25 = 0.75; token 2 once: -2*2 - 0.5 - 0.25 = -4.75.
    int32_t chosen = s.sample(l.data(), 4, {1, 1, 2}, 3);
    EXPECT_FLOAT_EQ(l[1], 0.75f);
    EXPECT_FLOAT_EQ(l[2], -4.75f);
    EXPECT_EQ(chosen, 3);
}

TEST(Sampler, RejectsOutOfRangeParameters) {
    EXPECT_THROW(Sampler({.temperature = -1.0f}), Error);
    EXPECT_THROW(Sampler({.top_p = 0.0f}), Error);
    EXPECT_THROW(Sampler({.top_k = -3}), Error);
    EXPECT_THROW(Sampler({.min_p = 1.5f}), Error);
}

}  // namespace
}  // namespace pagoda::engine
