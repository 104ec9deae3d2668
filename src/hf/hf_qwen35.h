// Qwen3.5 / Qwen3.6 (Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM and their *ForConditionalGeneration
// text models) as GGUF `qwen35` / `qwen35moe`, the way llama.cpp's converter hands them over:
// linear_* keys -> ssm.*, full_attention_interval, a partial_rotary_factor share of each head
// rotating with M-RoPE sections, A_log -> ssm_a = -exp(A_log), and — when value heads outnumber key
// heads — the DeltaNet's value heads reordered from grouped (HF: key head k's r value heads
// adjacent, k*r + i) to tiled (GGUF: i*key_heads + k, the order the builder reads them in).
// Qwen3-Next (Qwen3NextForCausalLM) as GGUF `qwen3next` shares the config keys (no M-RoPE sections;
// top-level rope_theta / partial_rotary_factor) and keeps its value heads grouped.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>

#include "hf/config_reader.h"
#include "hf/hf_config.h"

namespace pagoda::gguf {
class File;
}

namespace pagoda::hf {

// The qwen35 part of read_hf_config: the ssm.*, interval and M-RoPE keys of `c` (the text config),
// the DeltaNet head counts into `m`; returns the rotary dims and theta (rope_parameters' or the top
// level's) for read_hf_config to write.
struct Qwen35Rope {
    int64_t dims = 0;
    double theta = 0;
};
Qwen35Rope read_qwen35_config(const detail::Config& c, HfModel& m);

// The inverse, for hf_config_json: the keys of a qwen35 / qwen35moe GGUF that config.json holds.
void write_qwen35_config(const gguf::File& f, nlohmann::json& j);

// Where a DeltaNet tensor keeps its value heads (in HF's row-major shape).
enum class VHeads {
    none,
    rows,           // every row is in a value head (in_proj_z, in_proj_a / _b, A_log, dt_bias)
    rows_after_qk,  // rows after the 2 x key_dim Q and K rows (in_proj_qkv, conv1d's channels)
    columns,        // each row's columns (out_proj)
};

// Reorders the value heads of a tensor of HF shape `shape` (bytes per element `elt`) from grouped
// to tiled (to_tiled) or back. A no-op copy when the key and value head counts are equal.
void reorder_v_heads(const HfModel& m, VHeads kind, const std::vector<int64_t>& shape, uint64_t elt, const uint8_t* in,
                     uint8_t* out, bool to_tiled);

// ssm_a from A_log, as the loader computes it (f32: -exp). a_log_of inverts it exactly: the f32
// A_log whose a_of is `a` (a search around log(-a), since f32 exp is not one-to-one); throws when
// no such value exists.
float ssm_a_of(float a_log);
float a_log_of(float a);

}  // namespace pagoda::hf
