// The LoRA model tests' shared run: a fixed prompt, a greedy prefill + n decode steps keeping every
// step's logits, and the largest difference relative to the larger logit, so the CPU, reference and
// Vulkan LoRA tests compare adapted, merged and base models the same way.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "lora/adapter.h"
#include "model/sequence_runner.h"
#include "model/step_model.h"

namespace pagoda::model::lora_test {

inline const std::vector<int32_t> kPrompt = {1, 17, 42, 99, 5, 230, 7, 64, 12};

struct GreedyRun {
    std::vector<int32_t> tokens;
    std::vector<float> logits;  // every step's row, in step order
};

inline GreedyRun greedy(StepModel& model, const lora::AdapterRef& adapter, int n = 12) {
    SequenceRunner runner(model, false);
    if (adapter) runner.set_lora(0, adapter);
    GreedyRun r;
    std::vector<float> l = runner.prefill(0, kPrompt);
    for (int i = 0; i < n; ++i) {
        r.logits.insert(r.logits.end(), l.begin(), l.end());
        const int32_t t = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
        r.tokens.push_back(t);
        l = runner.decode(0, t);
    }
    return r;
}

inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double diff = 0, scale = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
        scale = std::max(scale, std::fabs(double(b[i])));
    }
    return diff / std::max(scale, 1e-30);
}

}  // namespace pagoda::model::lora_test
