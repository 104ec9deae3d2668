// Which layers of a model attend through a sliding window, from GGUF metadata the way llama.cpp
// reads it: `{arch}.attention.sliding_window` is the window W (a token at p sees keys p - W + 1 .. p)
// and `{arch}.attention.sliding_window_pattern` says which layers use it, either as one bool per
// layer (true: sliding) or as a period n (layer i slides unless i % n == n - 1; n = 1: none slide,
// n = 0: all do). Without the pattern key the architecture's own default period applies.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::gguf {
class File;
}

namespace pagoda::model {

// Per layer: its window, or 0 for a global (full-context) layer. `window` <= 0 gives all zeros.
std::vector<int32_t> layer_windows(const gguf::File& file, const std::string& arch, int64_t n_layers, int64_t window,
                                   int64_t default_period);

}  // namespace pagoda::model
