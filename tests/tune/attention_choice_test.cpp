// `pagoda tune`'s attention method: the lower modelled attention time of one request of the tuned
// workload, from each method's time per (query token, key) pair on the prompt shapes and on the
// decode shapes; simd on a tie. The timings below are this AMX host's measured shapes in kind
// (amx_bf16 about 3x faster on prompts; on decode 2.5x slower where a KV head serves one query
// head, `small`, and a little faster where it serves eight, tinyllama).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "tune/attention_choice.h"

namespace pagoda::tune {
namespace {

using backend::cpu::AttentionMethod;

// Shapes as the tuner times them: prompts of 512 and 2048 tokens, decode of 1 and 16 sequences at
// position 1024; amx_bf16 takes `prompt` and `decode` times simd's time on each kind.
std::vector<AttentionTiming> timings(double prompt, double decode) {
    auto pairs = [](double n) { return n * (n + 1) / 2; };
    const double simd_pair = 2e-8;  // seconds per pair, both kinds: only the ratios matter
    return {{"prefill 512 tokens", false, pairs(512), simd_pair * pairs(512), prompt * simd_pair * pairs(512)},
            {"prefill 2048 tokens", false, pairs(2048), simd_pair * pairs(2048), prompt * simd_pair * pairs(2048)},
            {"decode 1 sequence at 1024", true, 1025, simd_pair * 1025, decode * simd_pair * 1025},
            {"decode 16 sequences at 1024", true, 16 * 1025, simd_pair * 16 * 1025, decode * simd_pair * 16 * 1025}};
}

TEST(AttentionChoice, TheWorkloadsMixOfPromptAndDecodeDecides) {
    // Serving-like requests (80 prompt tokens, 68 out): 3 240 prompt pairs, 7 786 decode pairs.
    const Workload serving{80, 68};
    const auto small = choose_attention_method(timings(1 / 3.0, 2.5), serving);
    EXPECT_EQ(small.method, AttentionMethod::simd);
    EXPECT_NEAR(small.simd_seconds, 2e-8 * (3240 + 7786), 1e-12);
    EXPECT_NEAR(small.amx_seconds, 2e-8 * (3240 / 3.0 + 2.5 * 7786), 1e-12);
    EXPECT_EQ(choose_attention_method(timings(1 / 3.0, 0.9), serving).method, AttentionMethod::amx_bf16);
    // Long prompts and short answers (a RAG-like 4 000 in, 100 out): the prompt pairs dominate, so a
    // decode loss of 2.5x is paid for.
    EXPECT_EQ(choose_attention_method(timings(1 / 3.0, 2.5), {4000, 100}).method, AttentionMethod::amx_bf16);
    // Generation alone (no prompt): only the decode rate counts.
    EXPECT_EQ(choose_attention_method(timings(0.1, 1.01), {0, 500}).method, AttentionMethod::simd);
}

TEST(AttentionChoice, AKindWithoutTimingsAddsNothing) {
    auto prompt_only = timings(0.5, 3.0);
    prompt_only.resize(2);  // the decode shapes left out
    const auto c = choose_attention_method(prompt_only, {80, 68});
    EXPECT_EQ(c.method, AttentionMethod::amx_bf16);
    EXPECT_NEAR(c.simd_seconds, 2e-8 * 3240, 1e-12);
}

TEST(AttentionChoice, ATieKeepsSimd) {
    EXPECT_EQ(choose_attention_method(timings(1.0, 1.0), {80, 68}).method, AttentionMethod::simd);
    EXPECT_EQ(choose_attention_method(timings(0.5, 3.0), {0, 0}).method, AttentionMethod::simd);  // no work: 0 = 0
}

TEST(AttentionChoice, RefusesTimingsAndWorkloadsItCannotUse) {
    const Workload w;
    EXPECT_THROW(choose_attention_method({}, w), Error);
    EXPECT_THROW(choose_attention_method({{"zero", false, 10, 0.0, 1.0}}, w), Error);
    EXPECT_THROW(choose_attention_method({{"negative", true, 10, 1.0, -1.0}}, w), Error);
    EXPECT_THROW(choose_attention_method({{"nan", false, 10, std::nan(""), 1.0}}, w), Error);
    EXPECT_THROW(choose_attention_method({{"no pairs", false, 0, 1.0, 1.0}}, w), Error);
    EXPECT_THROW(choose_attention_method({{"inf pairs", false, std::numeric_limits<double>::infinity(), 1.0, 1.0}}, w), Error);
    EXPECT_THROW(choose_attention_method(timings(1, 1), {-1, 68}), Error);
    EXPECT_THROW(choose_attention_method(timings(1, 1), {80, std::nan("")}), Error);
    EXPECT_THROW(choose_attention_method(timings(1, 1), {std::numeric_limits<double>::infinity(), 68}), Error);
}

}  // namespace
}  // namespace pagoda::tune
