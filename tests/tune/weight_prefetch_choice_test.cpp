// tune's rule for the decode weight prefetch (tune/weight_prefetch_choice.h): l1 only where the
// decode steps, summed over the batch sizes, are at least 3 % faster with it; l2 otherwise; bad
// timings refused.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "tune/weight_prefetch_choice.h"

namespace pagoda::tune {
namespace {

using backend::cpu::WeightPrefetch;

WeightPrefetchTiming timing(double l1, double l2) { return {"case", l1, l2}; }

TEST(WeightPrefetchChoice, L2UnlessL1IsClearlyFaster) {
    // tinyllama Q4_K_M on the Zen 4 host, whole decode steps: l1 1.5x the time of l2.
    const auto zen4 = choose_weight_prefetch({timing(86.6e-3, 57.5e-3), timing(120e-3, 80e-3)});
    EXPECT_EQ(zen4.level, WeightPrefetch::l2);
    EXPECT_NEAR(zen4.l1_over_l2, (86.6 + 120) / (57.5 + 80), 1e-12);
    // l1 5 % faster: l1. 2 % faster (within the spread): the default, l2.
    EXPECT_EQ(choose_weight_prefetch({timing(0.95, 1.0)}).level, WeightPrefetch::l1);
    EXPECT_EQ(choose_weight_prefetch({timing(0.98, 1.0)}).level, WeightPrefetch::l2);
    EXPECT_EQ(choose_weight_prefetch({timing(1.0, 1.0)}).level, WeightPrefetch::l2) << "a tie keeps the default";
    // Summed, not per shape: one shape 10 % faster with l1 inside a sum that is level.
    EXPECT_EQ(choose_weight_prefetch({timing(0.9, 1.0), timing(9.1, 9.0)}).level, WeightPrefetch::l2);
}

TEST(WeightPrefetchChoice, BadTimingsAreRefused) {
    auto refused = [](const std::vector<WeightPrefetchTiming>& t, const std::string& part) {
        try {
            (void)choose_weight_prefetch(t);
            ADD_FAILURE() << "accepted: " << part;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
    };
    refused({}, "no decode step was timed");
    refused({timing(0, 1)}, "'case' has a time of 0 s");
    refused({timing(1, -1)}, "'case' has a time of -1 s");
    refused({timing(1, std::numeric_limits<double>::infinity())}, "has a time of inf s");
    refused({timing(std::nan(""), 1)}, "has a time of nan s");
}

}  // namespace
}  // namespace pagoda::tune
