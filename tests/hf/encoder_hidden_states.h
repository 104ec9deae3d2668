// The encoder folder tests' forward pass: the CPU backend's hidden states of two sequences in one
// step (11 and 4 tokens, 4-token KV blocks), every row wanted, to compare a model read from a Hugging
// Face folder with the same model read from GGUF (bit for bit: the same weights, the same kernels).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>
#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "model/batch.h"
#include "model/open_step_model.h"

namespace pagoda::model::encoder_test {

inline std::vector<float> hidden_states(std::shared_ptr<const gguf::File> file) {
    auto model = open_step_model(file, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 64});
    const std::vector<std::vector<int32_t>> seqs = {{2, 17, 200, 31, 99, 42, 7, 3, 250, 64, 5}, {2, 40, 41, 3}};
    Batch b;
    int32_t block = 0;
    for (const auto& tokens : seqs) {
        std::vector<int32_t> blocks;
        for (size_t i = 0; i < (tokens.size() + 3) / 4; ++i) blocks.push_back(block++);
        const int32_t index = b.add_sequence(blocks);
        for (size_t p = 0; p < tokens.size(); ++p)
            b.add(tokens[p], int32_t(p), index, int64_t(blocks[p / 4]) * 4 + int64_t(p) % 4, false, true);
    }
    model->forward(b);
    return model->hidden_rows();
}

// The two files' hidden states are the same bytes, and worth comparing (15 finite rows of `dim`, not
// all near zero).
inline void expect_same_hidden_states(std::shared_ptr<const gguf::File> gguf, std::shared_ptr<const gguf::File> hf, int64_t dim) {
    const std::vector<float> a = hidden_states(std::move(gguf)), b = hidden_states(std::move(hf));
    ASSERT_EQ(a.size(), size_t(15 * dim));
    double norm = 0;
    for (float v : a) norm += double(v) * v;
    ASSERT_TRUE(std::isfinite(norm) && norm > 1.0) << "hidden states worth comparing";
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "hidden states differ";
}

}  // namespace pagoda::model::encoder_test
