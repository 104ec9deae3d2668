// The ViT core both vision towers share (SigLIP for Gemma 3, Qwen3-VL's), on backend ops:
//   h = LN1(x); q, k, v = h W_{q,k,v}^T + b; [2D RoPE on q and k]; x += attention(q, k, v) W_out^T + b_out
//   h = LN2(x); x += gelu_tanh(h W_up^T + b_up) W_down^T + b_down
// Attention is non-causal over one sequence of the image's patches, held in layer `layer` of the
// tower's own KV cache. `ActivationArena` hands out the step's tensors from the backend's arena.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "gguf/gguf.h"

namespace pagoda::vision {

struct VitLayer {
    std::shared_ptr<backend::Weight> qkv, out, up, down;
    std::shared_ptr<backend::Vector> q_b, k_b, v_b, out_b, up_b, down_b, ln1_w, ln1_b, ln2_w, ln2_b;
};

// How a file names one block's tensors after "v.blk.N.": Q/K/V as one `attn_qkv` (Qwen3-VL) or three
// `attn_q`/`attn_k`/`attn_v` (SigLIP), and the MLP's up and down names.
struct VitNames {
    bool fused_qkv = false;
    std::string ffn_up = "ffn_up", ffn_down = "ffn_down";
};

// Uploads block `prefix` ("v.blk.N.") of width d and MLP width n_ff; a missing or misshapen tensor is
// an error naming it.
VitLayer load_vit_layer(const gguf::File& file, backend::Backend& b, const std::string& prefix, int64_t d,
                        int64_t n_ff, const VitNames& names);

// The step's scratch: h, q, k, v, attn, o of n x d; up and ones of n x n_ff (ones holds 1.0: the up
// operand of gelu_mul, which makes it gelu_tanh(up)).
struct VitScratch {
    backend::Tensor h, q, k, v, attn, o, up, ones;
};

struct VitAttention {
    backend::KvCache* cache = nullptr;
    backend::AttentionParams params;
    const backend::Rope* rope = nullptr;  // 2D RoPE of q and k (Qwen3-VL), or none (SigLIP)
    int32_t heads = 0, head_dim = 0;
};

// One block over the rows of x, in place.
void run_vit_block(backend::Backend& b, const VitLayer& L, int32_t layer, const backend::Tensor& x,
                   const VitScratch& s, const VitAttention& attention, float eps);

// A bump allocator over the backend's activation arena, one per encode.
class ActivationArena {
public:
    ActivationArena(backend::Backend& b, size_t elements) : b_(b), capacity_(elements) {}
    backend::Tensor tensor(int64_t rows, int64_t cols);

private:
    backend::Backend& b_;
    size_t capacity_, used_ = 0;
};

}  // namespace pagoda::vision
