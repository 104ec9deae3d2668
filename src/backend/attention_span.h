// Image rows and the sliding window. A causal row at position p reads keys up to its attend_until
// (StepInputs: an image's rows read to the image's end; a non-causal row to its sequence's last
// position in the step). Its first key under a sliding window W is
//   max(0, min(p - W + 1, span_start)),
// span_start the first position of the row's span: the image's first position for an image row, p
// for any other row. That is Hugging Face Gemma 3's mask, "causal within the window OR the same
// image": keys from the image's start to its end are all the image's, so the union is this one
// range, also where an image starts before the window (an image longer than W) or lies past it.
// The model layer gives each row's span start (StepInputs::attend_from) and every backend takes
// its window's first key from window_first_key, so they agree by construction.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace pagoda::backend {

// The span start of each row of a step in which every image runs whole (the model layer checks
// that): rows of one sequence with the same attend_until form one span (an image's last row's
// attend_until is its own position), starting at the span's lowest position. Empty when
// attend_until is empty (every row its own).
std::vector<int32_t> attention_span_starts(std::span<const int32_t> seq_index, std::span<const int32_t> positions,
                                           std::span<const int32_t> attend_until);

// The first key a row at `position` whose span starts at `span_start` reads under a window
// (0: no window: key 0).
inline int32_t window_first_key(int32_t position, int32_t span_start, int32_t window) {
    if (window <= 0) return 0;
    return std::max(0, std::min(position - window + 1, span_start));
}

}  // namespace pagoda::backend
