// tune's rule for the decode KV prefetch (tune/decode_prefetch_choice.h): on only where the
// long-context steps gain at least 3 % and the workload's steps lose at most 3 %, summed over the
// batch sizes; bad timings refused.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "tune/decode_prefetch_choice.h"

namespace pagoda::tune {
namespace {

DecodePrefetchTiming timing(bool long_context, double off, double on) {
    return {long_context ? "long" : "workload", long_context, off, on};
}

TEST(DecodePrefetchChoice, OnWhereLongContextsGainAndTheWorkloadLosesNothing) {
    // small Q4_0 on the AMX Xeon (tune --quick, 2026-12-05): long 0.90-0.94, workload 0.95-1.02.
    const auto c = choose_decode_prefetch({timing(true, 4.68e-3, 4.23e-3), timing(true, 11.2e-3, 10.5e-3),
                                           timing(false, 1.50e-3, 1.53e-3), timing(false, 3.04e-3, 2.92e-3)});
    EXPECT_TRUE(c.on);
    EXPECT_NEAR(c.long_ratio, (4.23 + 10.5) / (4.68 + 11.2), 1e-12);
    EXPECT_NEAR(c.workload_ratio, (1.53 + 2.92) / (1.50 + 3.04), 1e-12);
}

TEST(DecodePrefetchChoice, OffWhereTheGainIsSmallOrTheWorkloadPays) {
    // tinyllama under amx_bf16 attention (the simd decode walk unused): level.
    EXPECT_FALSE(choose_decode_prefetch({timing(true, 10.0, 10.07), timing(false, 5.0, 4.98)}).on);
    // A gain just short of 3 %, and exactly 3 % (on: the bound is inclusive).
    EXPECT_FALSE(choose_decode_prefetch({timing(true, 1.0, 0.971)}).on);
    EXPECT_TRUE(choose_decode_prefetch({timing(true, 1.0, 0.97)}).on);
    // A long-context gain bought with the workload's steps 3.5 % slower; 3 % passes (within the spread).
    EXPECT_FALSE(choose_decode_prefetch({timing(true, 1.0, 0.8), timing(false, 1.0, 1.035)}).on);
    EXPECT_TRUE(choose_decode_prefetch({timing(true, 1.0, 0.8), timing(false, 1.0, 1.025)}).on);
    // Summed, not per shape: one workload shape 6 % slower inside a level sum passes.
    EXPECT_TRUE(choose_decode_prefetch({timing(true, 1.0, 0.8), timing(false, 1.0, 1.06), timing(false, 9.0, 8.96)}).on);
    // No workload shape: only the long contexts decide.
    const auto c = choose_decode_prefetch({timing(true, 2.0, 1.5)});
    EXPECT_TRUE(c.on);
    EXPECT_EQ(c.workload_ratio, 1.0);
}

TEST(DecodePrefetchChoice, BadTimingsAreRefused) {
    auto refused = [](const std::vector<DecodePrefetchTiming>& t, const std::string& part) {
        try {
            (void)choose_decode_prefetch(t);
            ADD_FAILURE() << "accepted, expected: " << part;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
    };
    refused({}, "no long-context decode step was timed");
    refused({timing(false, 1.0, 1.0)}, "no long-context decode step was timed");
    refused({timing(true, 0.0, 1.0)}, "'long' has a time of 0 s");
    refused({timing(true, 1.0, -1.0)}, "has a time of -1 s");
    refused({timing(true, 1.0, std::numeric_limits<double>::quiet_NaN())}, "has a time of");
    refused({timing(true, std::numeric_limits<double>::infinity(), 1.0)}, "has a time of");
}

}  // namespace
}  // namespace pagoda::tune
