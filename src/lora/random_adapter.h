// Random LoRA adapters for a base model, in both forms with the same numbers (`pagoda gen-model
// --lora-out / --peft-out`, and the tests): a llama.cpp GGUF LoRA file and a PEFT folder. A ~ N(0,
// 1/in), B ~ N(0, b_std^2 / rank), so scale · B A x stays a fraction of W x and greedy output changes
// without running away.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/ggml_types.h"
#include "gguf/gguf.h"

namespace pagoda::lora {

struct RandomAdapterSpec {
    int64_t rank = 8;
    double alpha = 16;
    bool rslora = false;  // PEFT: use_rslora; GGUF: alpha written as alpha·sqrt(rank), the same scale
    uint64_t seed = 7;
    float b_std = 0.5f;
    gguf::GgmlType type = gguf::GgmlType::F32;  // F32, F16 or BF16 (both forms store it)
    // The GGUF module names it targets in every layer (where the base has them as matrices).
    std::vector<std::string> modules = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
};

// Writes the GGUF form to `gguf_path` and/or the PEFT form to `peft_dir` (created); an empty path
// skips that form. Returns the number of targeted weights.
int64_t write_random_adapter(const gguf::File& base, const RandomAdapterSpec& spec, const std::string& gguf_path,
                             const std::string& peft_dir);

}  // namespace pagoda::lora
