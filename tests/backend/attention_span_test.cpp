// backend/attention_span.h against the mask it stands for, written out key by key as Hugging Face
// Gemma 3 builds it for sliding layers: key k is visible to the row at p when (k <= p and p - k < W)
// or k is in the row's image. For random layouts of text and images (before, across and past the
// window, shorter and longer than it), the visible keys are exactly window_first_key .. attend_until,
// with the span starts attention_span_starts infers from attend_until.
#include <gtest/gtest.h>
#include <random>

#include "backend/attention_span.h"

namespace pagoda::backend {
namespace {

struct Layout {
    std::vector<int32_t> seq, pos, until;
    std::vector<int32_t> image_of;  // per row: its image's first position, or -1 for text
};

// Two sequences of text with 0-3 images each (1-40 rows), all rows in one step.
Layout random_layout(std::mt19937& rng) {
    Layout l;
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    for (int32_t s = 0; s < 2; ++s) {
        int32_t p = 0;
        const int images = pick(0, 3);
        for (int i = 0; i <= images; ++i) {
            const int text = pick(i == 0 ? 0 : 1, 30);
            for (int k = 0; k < text; ++k, ++p) {
                l.seq.push_back(s); l.pos.push_back(p); l.until.push_back(p); l.image_of.push_back(-1);
            }
            if (i == images) break;
            const int rows = pick(1, 40), first = p;
            for (int k = 0; k < rows; ++k, ++p) {
                l.seq.push_back(s); l.pos.push_back(p); l.until.push_back(first + rows - 1); l.image_of.push_back(first);
            }
        }
    }
    return l;
}

TEST(AttentionSpan, FirstKeyToUntilIsTheSlidingMaskOrTheImage) {
    std::mt19937 rng(7);
    int image_rows_checked = 0;
    for (int trial = 0; trial < 200; ++trial) {
        const Layout l = random_layout(rng);
        const std::vector<int32_t> starts = attention_span_starts(l.seq, l.pos, l.until);
        ASSERT_EQ(starts.size(), l.pos.size());
        for (int32_t window : {0, 1, 3, 8, 16, 64}) {
            for (size_t t = 0; t < l.pos.size(); ++t) {
                const int32_t p = l.pos[t], img = l.image_of[t];
                EXPECT_EQ(starts[t], img >= 0 ? img : p) << "row " << t;
                const int32_t first = window_first_key(p, starts[t], window);
                // Every key of the sequence up to its last position in the layout.
                int32_t last = 0;
                for (size_t u = 0; u < l.pos.size(); ++u)
                    if (l.seq[u] == l.seq[t]) last = std::max(last, l.pos[u]);
                for (int32_t k = 0; k <= last; ++k) {
                    const bool sliding = k <= p && (window == 0 || p - k < window);
                    const bool same_image = img >= 0 && k >= img && k <= l.until[t];
                    const bool visible = sliding || same_image;
                    ASSERT_EQ(visible, k >= first && k <= l.until[t])
                        << "trial " << trial << " window " << window << " row at " << p << " (image from " << img
                        << " to " << l.until[t] << ") key " << k;
                }
                image_rows_checked += img >= 0 && window > 0 && p - window + 1 > img;
            }
        }
    }
    EXPECT_GT(image_rows_checked, 100) << "rows whose image starts before their window";
}

TEST(AttentionSpan, NoLimitsNoStarts) {
    const std::vector<int32_t> seq{0, 0}, pos{0, 1};
    EXPECT_TRUE(attention_span_starts(seq, pos, {}).empty());
    EXPECT_EQ(window_first_key(10, 10, 0), 0);
    EXPECT_EQ(window_first_key(10, 10, 4), 7);
    EXPECT_EQ(window_first_key(10, 2, 4), 2);
    EXPECT_EQ(window_first_key(2, 2, 8), 0);
}

}  // namespace
}  // namespace pagoda::backend
