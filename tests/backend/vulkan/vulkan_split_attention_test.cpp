// Split-KV decode attention on Vulkan (vulkan_attention.h): a token with a long context runs in
// several key ranges plus a combine pass. Against the unsplit shader (PAGODA_VULKAN_SPLIT_KEYS=0)
// and the reference, at context lengths below, at and past the split thresholds, with block sizes
// that put a split boundary inside a page, sinks, a sliding window, GQA, a soft cap and the f16 and
// q8 caches. A token of one split gets bitwise the unsplit output, in a step with split tokens or
// alone (batch invariance), and a split count is refused out of range naming the variable.
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>

#include "backend/backend_test_util.h"
#include "backend/vulkan/vulkan_test_env.h"
#include "core/error.h"

namespace pagoda::backend {
namespace {

using kv::KvDtype;
using namespace testing;

std::unique_ptr<Backend> vulkan_splitting(const char* split_keys) {
    setenv("PAGODA_VULKAN_SPLIT_KEYS", split_keys, 1);
    std::unique_ptr<Backend> b;
    try {
        b = make_backend("vulkan");
    } catch (...) {
        unsetenv("PAGODA_VULKAN_SPLIT_KEYS");
        throw;
    }
    unsetenv("PAGODA_VULKAN_SPLIT_KEYS");
    return b;
}

struct SplitCase {
    kv::KvLayout layout;
    AttentionParams params;
    std::vector<int32_t> lengths;  // per sequence: its keys, the last one the decode token's own
    std::vector<float> sinks;      // per query head, or empty
    int32_t fresh = 1;             // tokens of the attending step per sequence (its last ones)
};

// Writes every sequence's keys but its last c.fresh in one step, then runs one step of those (a
// decode step when fresh is 1) that writes their K/V and attends; `only` >= 0: that sequence alone.
std::vector<float> decode(Side& s, const SplitCase& c, uint32_t seed, int32_t only = -1) {
    s.reset();
    std::mt19937 rng(seed);
    const Step tables = make_tables(c.lengths, c.layout.block_size, rng);
    Step prefix = tables, step = tables;
    for (int32_t i = 0; i < int32_t(c.lengths.size()); ++i) {
        prefix.add_tokens(i, 0, c.lengths[size_t(i)] - c.fresh);
        step.add_tokens(i, c.lengths[size_t(i)] - c.fresh, c.lengths[size_t(i)]);
    }
    const int64_t width = int64_t(c.layout.n_kv_heads) * c.layout.head_dim, q_width = int64_t(c.params.n_heads) * c.layout.head_dim;
    auto cache = s->create_kv_cache(c.layout, tables.n_blocks);
    for (const Step* st : {&prefix, &step}) {
        const int64_t n = st->n_tokens();
        const std::vector<float> k = random_values(n * width, rng), v = random_values(n * width, rng);
        s->begin_step(st->inputs());
        s->kv_write(*cache, 0, s.input(n, width, k), s.input(n, width, v));
    }
    std::vector<float> q = random_values(step.n_tokens() * q_width, rng, 3.0f);
    AttentionParams params = c.params;
    std::shared_ptr<Vector> sinks;
    if (!c.sinks.empty()) {
        sinks = s->upload_vector(c.sinks);
        params.sinks = sinks.get();
    }
    if (only >= 0) {
        Step alone = tables;
        alone.add_tokens(only, c.lengths[size_t(only)] - c.fresh, c.lengths[size_t(only)]);
        s->begin_step(alone.inputs());
        q = {q.begin() + only * c.fresh * q_width, q.begin() + (only + 1) * c.fresh * q_width};
        step = alone;
    }
    const Tensor out = s.tensor(step.n_tokens(), q_width);
    s->attention(*cache, 0, s.input(step.n_tokens(), q_width, q), out, params);
    return s.read(out);
}

TEST(VulkanSplitAttention, MatchesTheUnsplitShaderAndTheReference) {
    PAGODA_REQUIRE_VULKAN();
    // split_keys 64: a token of n keys runs in n / 64 splits (2 from 128 keys on, at most 16).
    Side split{vulkan_splitting("64"), size_t(1) << 23}, plain{vulkan_splitting("0"), size_t(1) << 23},
        reference{make_backend("reference"), size_t(1) << 23};
    std::mt19937 rng(44);
    int differed = 0;
    for (int trial = 0; trial < 8; ++trial) {
        SplitCase c;
        // Block sizes 128 and 256: a split boundary (a multiple of 64 keys past the first) falls inside a
        // page; so does one past a sliding window's first key.
        const int32_t block = std::array{128, 256, 16, 1}[size_t(trial % 4)];
        const KvDtype dtype = std::array{KvDtype::f16, KvDtype::f32, KvDtype::q8, KvDtype::bf16}[size_t(trial % 4)];
        c.layout = {1, 2, trial % 2 == 0 ? 64 : 40, block, dtype};
        c.params = {c.layout.n_kv_heads * (trial % 3 == 0 ? 4 : 1), 1.0f / std::sqrt(float(c.layout.head_dim)),
                    trial == 2 || trial == 5 ? 300 : 0, trial == 3 ? 2.0f : 0.0f};
        // Lengths below, at and past the 128-key threshold, one with 16 splits and more (clamped).
        c.lengths = {std::array{127, 128, 129, 200}[size_t(trial % 4)], std::array{1000, 700, 1100, 2000}[size_t(trial % 4)], 17};
        if (trial % 2 == 1) c.sinks = random_values(c.params.n_heads, rng, 2.0f);
        const uint32_t seed = uint32_t(300 + trial);
        const std::vector<float> got = decode(split, c, seed), unsplit = decode(plain, c, seed), want = decode(reference, c, seed);
        const std::string label = fmt::format("trial {}: {} block {} head_dim {} heads {} window {} softcap {}{}", trial,
                                              kv::kv_dtype_name(dtype), block, c.layout.head_dim, c.params.n_heads,
                                              c.params.sliding_window, c.params.softcap, c.sinks.empty() ? "" : " sinks");
        const double tolerance = dtype == KvDtype::q8 ? 1e-4 : 3e-5;
        EXPECT_TRUE(close(got, want, tolerance)) << "split vs reference, " << label;
        EXPECT_TRUE(close(got, unsplit, tolerance)) << "split vs unsplit, " << label;
        // The third sequence (17 keys) takes one split: bitwise the unsplit shader's row, in this
        // step and alone (its split count depends only on its own keys).
        const size_t row = size_t(c.params.n_heads) * size_t(c.layout.head_dim);
        EXPECT_EQ(0, std::memcmp(got.data() + 2 * row, unsplit.data() + 2 * row, row * 4)) << "one split, " << label;
        const std::vector<float> alone = decode(split, c, seed, 2);
        EXPECT_EQ(0, std::memcmp(alone.data(), got.data() + 2 * row, row * 4)) << "alone, " << label;
        // The long sequence alone gives its row of the batch bitwise.
        const std::vector<float> long_alone = decode(split, c, seed, 1);
        EXPECT_EQ(0, std::memcmp(long_alone.data(), got.data() + row, row * 4)) << "long alone, " << label;
        if (std::memcmp(got.data() + row, unsplit.data() + row, row * 4) != 0) ++differed;
    }
    // The split path ran: its rescaled sums differ in the last bits from the unsplit ones somewhere.
    EXPECT_GT(differed, 0);
}

// A chunk of 150 fresh tokens per sequence over long contexts: the split pass runs 64 tokens at a
// time (vulkan_attention.h), every token split by its own key count.
TEST(VulkanSplitAttention, AStepOfManyTokensRunsInPasses) {
    PAGODA_REQUIRE_VULKAN();
    Side split{vulkan_splitting("64"), size_t(1) << 23}, plain{vulkan_splitting("0"), size_t(1) << 23},
        reference{make_backend("reference"), size_t(1) << 23};
    std::mt19937 rng(45);
    SplitCase c;
    c.layout = {1, 2, 32, 16, KvDtype::f16};
    c.params = {4, 1.0f / std::sqrt(32.0f), 0, 0.0f};
    c.lengths = {700, 260};
    c.fresh = 150;
    c.sinks = random_values(4, rng, 2.0f);
    const std::vector<float> got = decode(split, c, 7), unsplit = decode(plain, c, 7), want = decode(reference, c, 7);
    EXPECT_TRUE(close(got, want, 3e-5)) << "split vs reference";
    EXPECT_TRUE(close(got, unsplit, 3e-5)) << "split vs unsplit";
    const std::vector<float> second = decode(split, c, 7, 1);
    const size_t rows = size_t(c.fresh) * 4 * 32;
    EXPECT_EQ(0, std::memcmp(second.data(), got.data() + rows, rows * 4)) << "the second sequence alone";
}

TEST(VulkanSplitAttention, SplitKeysOutOfRangeAreRefusedNamingTheVariable) {
    PAGODA_REQUIRE_VULKAN();
    for (const char* value : {"32", "100", "131072", "x"}) {
        try {
            vulkan_splitting(value);
            ADD_FAILURE() << value << " was accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(std::string("PAGODA_VULKAN_SPLIT_KEYS=") + value), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace pagoda::backend
