// The encoder folder tests' forward pass: the CPU backend's hidden states of two sequences in one
// step (11 and 4 tokens, 4-token KV blocks), every row wanted, to compare a model read from a Hugging
// Face folder with the same model read from GGUF.
#pragma once
#include <cstdint>
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

}  // namespace pagoda::model::encoder_test
