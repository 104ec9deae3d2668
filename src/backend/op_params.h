// The parameters of the ops that carry more than tensors (attention, column copies, the recurrent
// layers, attention temperature, the fused QKV op, mixture-of-experts routing and FFN, LoRA parts);
// each struct's comment states what the op computes. backend.h declares the ops that take them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/backend_resources.h"

namespace pagoda::backend {

struct AttentionParams {
    int32_t n_heads = 0;         // query heads; a multiple of the cache's KV heads (GQA)
    float scale = 0.0f;          // usually 1 / sqrt(head_dim)
    int32_t sliding_window = 0;  // > 0: a token at p attends to keys p - window + 1 .. p only
    float softcap = 0.0f;        // > 0: scores become softcap * tanh(score / softcap)
    // false (encoders: BERT and kin): each query attends to every key of its sequence up to the
    // sequence's last position in this step, later positions of the step included (an encoder runs a
    // whole sequence in one step). The key range then depends only on the sequence, so batch
    // invariance holds as for causal attention.
    bool causal = true;
    // Per query head (n_heads values): an attention sink, one more logit in the head's softmax
    // denominator with no value row (gpt-oss): out = sum_j e^(s_j - m) V_j / (sum_j e^(s_j - m) +
    // e^(sink - m)). Null: none. Not scaled by `scale` (it is a logit already).
    const Vector* sinks = nullptr;
    // > 0: ALiBi (jina-bert-v2): each score gets -slope_h * |pos_q - pos_k| added (after the scale
    // and any cap), slope_h = alibi_slope(h, n_heads, alibi_max_bias) (backend/alibi.h). 0: none.
    float alibi_max_bias = 0.0f;
};

// A strided copy of column ranges, one range per head: for every row t, head h < n_heads, j < width,
//   dst[t][h * dst_stride + dst_offset + j] = src[t][h * src_stride + src_offset + j];
// dst's other columns keep their values. src_stride 0 repeats one range into every head (MLA's
// shared RoPE key); copying into a narrower stride compacts heads. src and dst are distinct tensors
// with the same rows. An exact copy on every backend.
struct ColumnCopy {
    int32_t n_heads = 1;
    int64_t width = 0;
    int64_t src_stride = 0, src_offset = 0;
    int64_t dst_stride = 0, dst_offset = 0;
};
// Throws pagoda::Error naming `backend` when a range falls outside its tensor, the rows differ, or a
// field is negative.
void check_column_copy(const ColumnCopy& c, const Tensor& src, const Tensor& dst, const std::string& backend);

// Recurrent (linear-attention) layers keep a per-sequence state instead of KV rows. A state tensor
// has one row per state slot; each token names the row its sequence reads and updates (state_rows,
// one entry per token). A step's tokens of one sequence come in position order, so running the
// tokens in row order is running each sequence's recurrence; rows of other slots are untouched.
//
// CausalConv1d: a depthwise causal convolution over the last `kernel` inputs of each channel.
// x and out are T x C (distinct tensors); weight holds C * kernel values, channel c's taps at
// c * kernel .. c * kernel + kernel - 1, the last tap multiplying the current token (GGUF's
// ssm_conv1d.weight, shape [kernel, C]); state is slots x (kernel - 1) * C, the previous kernel - 1
// inputs oldest first ([j][c]). Per token t (slot r = state_rows[t]):
//   out[t][c] = sum_{j < kernel - 1} w[c][j] * state[r][j][c] + w[c][kernel - 1] * x[t][c]
//   (then silu(out) when `silu`), and state[r] drops its oldest input and appends x[t].
struct CausalConv1d {
    const Vector* weight = nullptr;
    int32_t kernel = 0;
    bool silu = false;
    std::span<const int32_t> state_rows;  // per token
};
// GatedDeltaRule: the gated delta rule over n_v_heads value heads of head_dim (keys and values have
// the same head_dim). q and k are T x n_k_heads * head_dim, v and out T x n_v_heads * head_dim, g
// (log decay, <= 0) and beta (in (0, 1)) T x n_v_heads; state is slots x n_v_heads * head_dim^2,
// head h's matrix S[i][j] (i over keys, j over values) at h * head_dim^2 + i * head_dim + j. Value
// head h reads key head h % n_k_heads (heads tiled, as ggml broadcasts them; llama.cpp's converter
// orders the value heads for that). Per token t, head h (slot r = state_rows[t]):
//   qn = q_h / max(|q_h|, l2_eps) * scale,  kn = k_h / max(|k_h|, l2_eps)   (ggml_l2_norm)
//   S = exp(g[t][h]) * S;  d = beta[t][h] * (v_h - S^T kn);  S += kn d^T;  out_h = S^T qn.
struct GatedDeltaRule {
    int32_t n_k_heads = 0, n_v_heads = 0, head_dim = 0;
    float scale = 0.0f;  // qwen35: 1 / sqrt(head_dim)
    float l2_eps = 0.0f;
    std::span<const int32_t> state_rows;  // per token
};
// Throw pagoda::Error naming `backend` when a shape, a state row or the heads do not fit.
void check_causal_conv1d(const CausalConv1d& op, const Tensor& x, const Tensor& state, const Tensor& out,
                         const std::string& backend);
void check_gated_delta_rule(const GatedDeltaRule& op, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& g, const Tensor& beta, const Tensor& state, const Tensor& out,
                            const std::string& backend);

// Llama 4's attention temperature tuning (Mistral-Large-3, Ministral 3; OpKind::attn_temperature):
// each query row of a token at position p is multiplied, after RoPE, by
//   1 + beta * ln(1 + floor(p / length)),
// 1 below position `length` and growing by steps of `length` positions after it: the scores of a long
// context's queries sharpen as the keys spread. p is the token's KV position (StepInputs::positions),
// as llama.cpp's mistral3 / deepseek2 graphs and transformers' Ministral3 read it (no offset).
struct AttnTemperature {
    float beta = 0.0f;
    int32_t length = 0;  // > 0 (the original context length)
};
// Throws pagoda::Error naming `backend` when length is not positive or beta not finite.
void check_attn_temperature(const AttnTemperature& t, const std::string& backend);

// The Q|K|V projection, its optional biases, RoPE of Q and K, and the K/V write, as one op.
struct QkvOp {
    const Weight* qkv = nullptr;  // parts Q, K, V
    const Vector* bias[3] = {nullptr, nullptr, nullptr};
    const Rope* rope = nullptr;
    int32_t layer = 0;
    int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
};

// How a mixture-of-experts router turns a token's router logits l (n_experts values, any router
// bias already added) into k experts and their weights, as llama.cpp's build_moe_ffn does:
//   scores s = softmax(l) | sigmoid(l) | l (softmax_selected);
//   selection = s + correction_bias (DeepSeek V3's score correction; selection only, never weights);
//   with n_groups > 1 the experts split into n_groups equal groups, each scored by the sum of its two
//   best selection values, and only the best n_groups_used groups' experts stay selectable;
//   ids = the k best selection values, best first, the lower expert index on a tie;
//   w_j = s[ids[j]]; softmax_selected: w = softmax(w) over the k; MoeOp::normalize: w /= max(sum w, 2^-14);
//   then w *= scale (the routed scaling factor), and w_j *= expert_scale[ids[j]] where given (Gemma 4's
//   ffn_down_exps.scale: a per-expert factor on the down projection's output, moved onto its weight).
// The plain softmax router without a bias selects on the logits themselves (softmax is monotonic,
// and logits carry no rounding of exp that could tie two experts).
enum class MoeScoring { softmax, sigmoid, softmax_selected };
const char* moe_scoring_name(MoeScoring s);
struct MoeRouting {
    MoeScoring scoring = MoeScoring::softmax;
    float scale = 1.0f;
    int32_t n_groups = 0, n_groups_used = 0;  // group-limited top-k (n_groups > 1)
    std::vector<float> correction_bias;       // empty, or one per expert
    std::vector<float> expert_scale;          // empty, or one finite factor per expert
};

// An expert's activation between its gate|up and down projections, per element g (gate), u (up):
//   swiglu: silu(g) * u;  gelu: gelu_tanh(g) * u;
//   swiglu_oai (gpt-oss): g' = min(g, limit), u' = clamp(u, -limit, limit),
//     g' * sigmoid(alpha g') * (u' + 1), alpha 1.702, limit 7.
enum class MoeActivation { swiglu, swiglu_oai, gelu };
const char* moe_activation_name(MoeActivation a);
constexpr float kSwigluOaiAlpha = 1.702f;
constexpr float kSwigluOaiLimit = 7.0f;

// A mixture-of-experts FFN (Mixtral, Qwen MoE, gpt-oss): per token, the router logits (a matmul by
// the router weight, and its bias, computed before the op) pick k experts and their weights as
// `routing` and `normalize` say (MoeRouting; the defaults are Mixtral's: softmax, renormalised).
// out[t] = sum_j w_j * expert_{e_j}(x[t]) in rank order j = 0..k-1,
// expert(h) = act(h Wg^T + bg, h Wu^T + bu) Wd^T + bd (the biases only where given); plus, with a
// shared expert, s(x[t]) * shared(x[t]), s = sigmoid(shared_gate . x[t]) when shared_gate is given,
// else 1. Only the selected experts' weights are read (decode touches k of them); prefill runs one
// GEMM per active expert over its tokens. Each token's sum has a fixed order, so its output never
// depends on the other tokens.
struct MoeOp {
    std::vector<const Weight*> gate_up;  // per expert: parts gate, up (ffn rows each, dim columns)
    std::vector<const Weight*> down;     // per expert: dim rows, ffn columns
    int32_t n_used = 0;                  // k
    bool normalize = true;               // renormalise the k weights to sum 1
    MoeRouting routing;
    MoeActivation activation = MoeActivation::swiglu;
    // Per-expert biases (gpt-oss): empty, or one vector per expert (ffn values for gate and up, dim
    // for down).
    std::vector<const Vector*> gate_bias, up_bias, down_bias;
    const Weight* shared_gate_up = nullptr;  // optional shared expert
    const Weight* shared_down = nullptr;
    const Vector* shared_gate = nullptr;     // optional: the shared expert's sigmoid gate, dim values
    int64_t ffn() const { return gate_up.empty() ? 0 : gate_up[0]->parts()[0].rows; }
    int64_t shared_ffn() const { return shared_gate_up ? shared_gate_up->parts()[0].rows : 0; }
};

// One adapter's low-rank update of one weight over its rows of the step (LoRA):
//   y[t] += scale * B (A x[t])  for every t in rows,
// A: rank x in and B: out x rank, row-major host f32 (the adapter keeps them alive for the step).
// The model layer groups a step's rows by adapter; the segments of one op name disjoint rows.
struct LoraSegment {
    const float* a = nullptr;
    const float* b = nullptr;
    int64_t rank = 0;
    float scale = 1;
    std::span<const int32_t> rows;  // token rows of the step, increasing
    // Optional, the same numbers in the form the CPU backend streams (model/lora_graph.h builds it):
    // A (rank x in) and B^T in 16-output tiles (backend/lora_layout.h) as `elem` values, F32, F16 or BF16
    // (F16 / BF16 only where every number is exactly one, so nothing is rounded). Null: unused.
    gguf::GgmlType elem = gguf::GgmlType::F32;
    const void* a_elems = nullptr;
    const void* bt_elems = nullptr;
};

// The LoRA updates inside a fused op (Backend::fuses_lora): per part of its weight (Q, K, V or
// gate, up), the segments whose update that part's output takes right after the matmul, before the
// rest of the op (bias, RoPE, K/V write, SiLU) — what the unfused matmul ; lora_add ; ... computes,
// so a LoRA step keeps the fused ops. Empty spans: that part has no update this step.
struct PartLora {
    std::span<const LoraSegment> parts[3];
};

}  // namespace pagoda::backend
