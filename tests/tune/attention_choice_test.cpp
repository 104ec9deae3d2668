// `pagoda tune`'s attention method: the lowest sum of time relative to the faster method at each
// shape, so one large win can outweigh small losses elsewhere; simd on a tie.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "tune/attention_choice.h"

namespace pagoda::tune {
namespace {

using kernels::AttentionMethod;

TEST(AttentionChoice, TheLowestSummedRelativeTimeWins) {
    const auto faster = choose_attention_method({{"prefill 512", 2.0, 1.0}, {"decode 1", 1.0, 1.1}});
    EXPECT_EQ(faster.method, AttentionMethod::amx_bf16);
    EXPECT_DOUBLE_EQ(faster.simd_score, 2.0 + 1.0);
    EXPECT_DOUBLE_EQ(faster.amx_score, 1.0 + 1.1);
    // Winning prefill by a little does not pay for losing decode by much.
    EXPECT_EQ(choose_attention_method({{"prefill 512", 1.1, 1.0}, {"decode 1", 1.0, 1.5}}).method, AttentionMethod::simd);
    EXPECT_EQ(choose_attention_method({{"prefill 2048", 4.0, 1.0}, {"decode 16", 1.0, 2.0}, {"decode 1", 1.0, 1.2}}).method,
              AttentionMethod::amx_bf16);
}

TEST(AttentionChoice, ATieKeepsSimd) {
    const auto tie = choose_attention_method({{"prefill 512", 1.0, 1.0}});
    EXPECT_EQ(tie.method, AttentionMethod::simd);
    EXPECT_EQ(choose_attention_method({{"a", 2.0, 1.0}, {"b", 1.0, 2.0}}).method, AttentionMethod::simd);
}

TEST(AttentionChoice, RefusesTimingsItCannotUse) {
    EXPECT_THROW(choose_attention_method({}), Error);
    EXPECT_THROW(choose_attention_method({{"zero", 0.0, 1.0}}), Error);
    EXPECT_THROW(choose_attention_method({{"negative", 1.0, -1.0}}), Error);
    EXPECT_THROW(choose_attention_method({{"nan", std::nan(""), 1.0}}), Error);
}

}  // namespace
}  // namespace pagoda::tune
