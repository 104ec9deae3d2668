// `pagoda tune`'s AMX threshold: the smallest measured token count from which AMX tiles win at every
// larger count; never (kAmxNever) when they win nowhere or only below a count where they lose.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tune/amx_threshold.h"

namespace pagoda::tune {
namespace {

TEST(AmxThreshold, SmallestCountFromWhichAmxKeepsWinning) {
    EXPECT_EQ(choose_amx_min_tokens({{16, 1.0, 1.2}, {32, 2.0, 1.9}, {64, 4.0, 3.0}, {512, 30.0, 20.0}}), 32);
    EXPECT_EQ(choose_amx_min_tokens({{512, 30.0, 20.0}, {16, 1.0, 0.9}, {64, 4.0, 3.0}}), 16) << "any order";
    // A win at 16 that is lost at 32 does not count: the switch must hold for every larger step.
    EXPECT_EQ(choose_amx_min_tokens({{16, 1.0, 0.9}, {32, 2.0, 2.5}, {64, 4.0, 3.0}}), 64);
    EXPECT_EQ(choose_amx_min_tokens({{16, 1.0, 1.1}, {64, 4.0, 4.0}}), kAmxNever) << "a tie is no win";
    EXPECT_EQ(choose_amx_min_tokens({{16, 1.0, 0.5}, {64, 4.0, 4.5}}), kAmxNever);
}

// The wide prefill kernel's threshold takes the same rule, never below the first step it may take.
TEST(AmxThreshold, TheWideKernelsThresholdFollowsTheSameRuleFrom17) {
    EXPECT_EQ(choose_wide_min_tokens({{17, 1.0, 0.8}, {32, 2.0, 1.5}, {64, 4.0, 3.0}}), 17);
    EXPECT_EQ(choose_wide_min_tokens({{17, 1.0, 1.2}, {32, 2.0, 1.5}, {64, 4.0, 3.0}}), 32);
    EXPECT_EQ(choose_wide_min_tokens({{8, 1.0, 0.5}, {32, 2.0, 1.5}}), backend::cpu::kDefaultWideMinTokens) << "clamped to 17";
    EXPECT_EQ(choose_wide_min_tokens({{17, 1.0, 1.2}, {64, 4.0, 4.5}}), kAmxNever) << "the narrow kernel always";
}

TEST(AmxThreshold, RefusesTimingsItCannotUse) {
    EXPECT_THROW(choose_amx_min_tokens({}), Error);
    EXPECT_THROW(choose_amx_min_tokens({{16, 1, 1}, {16, 2, 1}}), Error);
    EXPECT_THROW(choose_amx_min_tokens({{0, 1, 1}}), Error);
    EXPECT_THROW(choose_wide_min_tokens({}), Error);
}

}  // namespace
}  // namespace pagoda::tune
