// The compute backend: where a model's weights, activations and paged KV cache live, and the ops a
// transformer step runs on them. The model layer (src/model) builds a graph of these ops per
// architecture and executes it on one Backend; nothing above src/model names a backend.
//
// Memory. Weights are uploaded once at load (upload_weight / upload_vector): the backend repacks
// them into whatever layout its kernels read. Activations live in one arena the backend allocates
// at reserve_activations(); the graph executor places every tensor of a step at a fixed offset in it,
// so a step allocates nothing. The paged KV cache is backend memory too (create_kv_cache); which
// block belongs to which sequence stays host-side bookkeeping (kv::BlockManager).
//
// A step. begin_step() hands the backend the step's inputs (tokens, positions, KV slots, block
// tables, which rows want logits); then the ops run in graph order, each on Tensors of the arena.
// Activations are rows of the backend's activation element type (f32 for cpu, f64 for reference):
// a Tensor is `rows` contiguous rows of `cols` elements. read() converts a tensor to host floats.
//
// Contracts every backend keeps (checked by tests/backend/conformance_test.cpp): each op computes
// what its comment says up to the backend's stated rounding; a token's results never depend on the
// other tokens of the step (batch invariance); fused ops compute what their unfused sequence
// computes (bitwise where the backend says so, see Backend::fused_bitwise).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/op.h"
#include "gguf/ggml_types.h"
#include "kv/kv_layout.h"

namespace pagoda::backend {

// A view of a weight matrix as stored in the model file: `rows` rows of `cols` values of `type`,
// each row gguf::row_size(type, cols) bytes (a GGUF tensor of shape [cols, rows]).
struct MatrixSource {
    gguf::GgmlType type = gguf::GgmlType::F32;
    const void* data = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;
    std::string name;  // the tensor's name, for errors and `pagoda graph`
    // The bytes are a read-only file mapping: a backend that keeps its own copy may drop these
    // pages from the process (they fault back from the page cache if read again). Never set it for
    // heap memory, whose pages would read back as zeros.
    bool file_mapped = false;
};

// How a weight is used: a matmul operand, an embedding table read by rows, or both (a tied head).
enum class WeightUse { matmul, embedding, both };

// An uploaded weight. A weight of several parts stacked by rows (Q|K|V, gate|up) is one operand:
// matmul writes each part's outputs to its own tensor, in one pass over the input where the backend
// can. Immutable after upload; shared between graphs.
class Weight {
public:
    virtual ~Weight() = default;
    const std::vector<MatrixSource>& parts() const { return parts_; }
    int64_t cols() const { return parts_.empty() ? 0 : parts_[0].cols; }
    int64_t rows() const;  // all parts
    // Host memory a decode step streams for this weight (empty for device memory), for the
    // bandwidth bound of `pagoda bench`.
    virtual std::vector<std::span<const uint8_t>> host_memory() const { return {}; }

protected:
    explicit Weight(std::vector<MatrixSource> parts) : parts_(std::move(parts)) {}

private:
    std::vector<MatrixSource> parts_;
};

// A small f32 vector (norm weights, biases) uploaded once.
class Vector {
public:
    virtual ~Vector() = default;
    int64_t size() const { return size_; }

protected:
    explicit Vector(int64_t size) : size_(size) {}

private:
    int64_t size_;
};

// Rotary embedding of the first `dims` dimensions of each head: pair i (i < dims/2) of a token at
// position p rotates by angle p * inv_freq[i]. `neox` pairs dimension i with i + dims/2 (GPT-NeoX,
// Qwen2); otherwise dimensions 2i and 2i+1 pair up (GGML "normal", Llama). inv_freq already holds any
// scaling (linear, llama3 frequency factors), in double so large positions keep their fraction.
// Multi-axis RoPE (Qwen's M-RoPE, a ViT's 2D RoPE): `pair_axis` names, per pair, which of a token's
// kRopeAxes position components (StepInputs::rope_positions) its angle reads; empty: every pair
// reads the token's position. A step without rope_positions reads the position on every axis.
constexpr int kRopeAxes = 3;  // temporal, height, width
struct RopeSpec {
    int64_t dims = 0;
    bool neox = false;
    std::vector<double> inv_freq;  // dims / 2 entries
    std::vector<uint8_t> pair_axis;  // empty, or dims / 2 entries below kRopeAxes
};
class Rope {
public:
    virtual ~Rope() = default;
    const RopeSpec& spec() const { return spec_; }

protected:
    explicit Rope(RopeSpec spec) : spec_(std::move(spec)) {}

private:
    RopeSpec spec_;
};

// The paged KV cache of one model in backend memory: for every layer, K and V of n_blocks blocks of
// layout.block_size token slots (slot = block * block_size + offset), stored in layout.dtype.
class KvCache {
public:
    virtual ~KvCache() = default;
    const kv::KvLayout& layout() const { return layout_; }
    int32_t n_blocks() const { return n_blocks_; }
    int64_t n_slots() const { return int64_t(n_blocks_) * layout_.block_size; }
    size_t total_bytes() const { return size_t(n_blocks_) * layout_.bytes_per_block(); }
    // Copies block src to dst in every layer, K and V (a copy-on-write). Throws on bad ids.
    virtual void copy_block(int32_t src, int32_t dst) = 0;
    // Block `block` of every layer, K then V per layer, each [kv_head][slot][head_dim] in the
    // layout's element encoding: layout().bytes_per_block() bytes. Throws on a bad id or size.
    virtual void export_block(int32_t block, std::span<uint8_t> out) const = 0;
    virtual void import_block(int32_t block, std::span<const uint8_t> in) = 0;
    // One stored row read back as floats (tests, debugging).
    virtual void read_k(int32_t layer, int64_t slot, int32_t kv_head, float* out) const = 0;
    virtual void read_v(int32_t layer, int64_t slot, int32_t kv_head, float* out) const = 0;

protected:
    KvCache(const kv::KvLayout& layout, int32_t n_blocks) : layout_(layout), n_blocks_(n_blocks) {}

private:
    kv::KvLayout layout_;
    int32_t n_blocks_;
};

// rows x cols contiguous activation elements in the backend's arena.
struct Tensor {
    void* data = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;
};

// One step's inputs, valid until the next begin_step (the caller keeps the storage alive).
// Validated by the model layer before begin_step: tokens are in the vocabulary, positions inside
// their block tables, slots and block ids inside the cache.
struct StepInputs {
    std::span<const int32_t> tokens;      // per token
    std::span<const int32_t> positions;   // per token
    std::span<const int32_t> seq_index;   // per token: which block table
    std::span<const int64_t> slots;       // per token: the KV slot it writes
    std::span<const int32_t> logit_rows;  // the token rows that want logits, increasing
    std::span<const std::vector<int32_t>> block_tables;  // per sequence
    std::span<const int32_t> hidden_rows;  // the token rows whose final hidden state is wanted, increasing
    // per token: its token type (segment) id, for encoders' token-type embeddings; empty: all 0
    std::span<const int32_t> token_types;
    // Per token, or empty (all causal): the last key position a causal attention reads for the row
    // (>= its position; an image's rows read to the image's end, model/batch.h). The sliding window
    // then ends there too.
    std::span<const int32_t> attend_until;
    // kRopeAxes per token (token t's axis a at t * kRopeAxes + a), or empty: every axis is the
    // token's position. Read only by ropes with a pair_axis (M-RoPE).
    std::span<const int32_t> rope_positions;
    // Rows every step tensor has room for (the graph executor's layout: a step tensor's rows sit
    // row_capacity apart from the next tensor's), or 0: a tensor holds exactly its rows (tests'
    // hand-placed tensors, a split graph's imported rows, state rows). A backend may compute padding
    // rows up to it (Vulkan's replay buckets: a decode step of n tokens computed as bit_ceil(n) rows,
    // so a few recorded command buffers serve every batch size); padding rows' values are never read.
    int64_t row_capacity = 0;
};

// The position pair `pair` of token t rotates by (times the pair's inverse frequency).
inline int32_t rope_position(const StepInputs& in, const RopeSpec& spec, size_t t, size_t pair) {
    if (spec.pair_axis.empty() || in.rope_positions.empty()) return in.positions[t];
    return in.rope_positions[t * kRopeAxes + spec.pair_axis[pair]];
}
// Throws pagoda::Error naming `backend` when a spec's pair_axis is malformed.
void check_rope_spec(const RopeSpec& spec, const std::string& backend);

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

// The arithmetic a matmul runs on, each with its own measured peak in `pagoda bench` (the host's
// fp32 FMA, bf16 dot, int8 dot, AMX bf16 and int8 tiles); unmeasured: a device whose peak the bench
// does not measure, so it states no compute bound.
enum class MatmulArithmetic { unmeasured, f32, bf16, int8, amx_bf16, amx_int8 };
// "f32", "bf16", "int8", "amx_bf16", "amx_int8"; "" for unmeasured.
const char* matmul_arithmetic_name(MatmulArithmetic a);

// One op of a model's graph as the backend sees it before the model runs (Backend::refusal): the op
// and the parameters it carries (null where the op has none).
struct OpUse {
    OpKind op{};
    const AttentionParams* attention = nullptr;  // attention
    const MoeOp* moe = nullptr;                  // moe_ffn
};

struct BackendOptions {
    int n_threads = 0;  // 0: the backend's default (cpu: physical cores)
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    // One line: the kernel paths and the device, logged at load.
    virtual std::string describe() const = 0;
    virtual size_t activation_size() const = 0;  // bytes per activation element
    virtual int n_threads() const { return 1; }
    // Bytes of free memory its allocations come from, for a fractional --kv-memory (a device: its
    // largest device-local heap's free bytes now); 0: host memory (the fraction is then of MemAvailable).
    virtual uint64_t memory_bytes() const { return 0; }

    // --- memory ---
    // Throws pagoda::Error naming the tensor when the backend cannot compute its type.
    virtual std::shared_ptr<Weight> upload_weight(std::vector<MatrixSource> parts, WeightUse use) = 0;
    virtual std::shared_ptr<Vector> upload_vector(std::span<const float> values) = 0;
    virtual std::shared_ptr<Rope> upload_rope(RopeSpec spec) = 0;
    virtual std::unique_ptr<KvCache> create_kv_cache(const kv::KvLayout& layout, int64_t n_blocks) = 0;
    // Makes the arena at least `bytes` long and sizes the backend's own scratch for steps of up to
    // `max_tokens` tokens; invalidates Tensors into the old arena. A larger step later must call it
    // again first (the graph executor does), so no op allocates.
    virtual void reserve_activations(size_t bytes, int64_t max_tokens) = 0;
    virtual void* activations() = 0;
    // Copies a tensor to host floats (rows * cols values).
    virtual void read(const Tensor& t, float* out) const = 0;
    // Copies host floats into a tensor (tests).
    virtual void write(const Tensor& t, const float* in) = 0;

    // --- a step ---
    virtual void begin_step(const StepInputs& inputs) = 0;

    // --- ops (shapes: T = tokens of the step, L = logit rows) ---
    // out[t] = row tokens[t] of the table, dequantised.            out: T x cols
    virtual void embed(const Weight& table, const Tensor& out) = 0;
    // outs[p][t][r] = sum_c part_p[r][c] * x[t][c]; one output per part. The backend picks its
    // path (GEMV for few rows, GEMM for many) by x.rows. `prepared`, when given, is x's prepared
    // form from norm_prepare (see prepared_input_cols).
    virtual void matmul(const Weight& w, const Tensor& x, std::span<const Tensor> outs,
                        const Tensor* prepared = nullptr) = 0;
    // out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w; out may be x.
    virtual void rms_norm(const Tensor& x, const Vector& w, float eps, const Tensor& out) = 0;
    virtual void add(const Tensor& y, const Tensor& x) = 0;        // y += x
    virtual void add_bias(const Tensor& y, const Vector& b) = 0;   // y[t] += b
    // In place, positions from the step, over n_heads heads of head_dim values per row.
    virtual void rope(const Tensor& x, const Rope& rope, int32_t n_heads, int32_t head_dim) = 0;
    // out = silu(gate) * up, silu(g) = g / (1 + e^-g); out may be gate.
    virtual void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
    // out = gelu(gate) * up with the tanh approximation of GELU; out may be gate.
    virtual void gelu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
    virtual void softmax(const Tensor& x) = 0;  // each row, in place
    // x *= s, in place (Gemma's sqrt(dim) embedding scale).
    virtual void scale(const Tensor& x, float s) = 0;
    // x = cap * tanh(x / cap), in place, cap > 0 (Gemma 2's final logit soft cap).
    virtual void softcap(const Tensor& x, float cap) = 0;
    // Stores each token's K and V rows ([T][n_kv_heads * head_dim]) in its slot of `layer`. With the
    // layout's v_is_k only K is stored (pass k as v) and attention reads the K rows as V.
    virtual void kv_write(KvCache& cache, int32_t layer, const Tensor& k, const Tensor& v) = 0;
    // Causal paged attention of each token over its sequence's keys 0..position (block tables
    // from the step); q and out are T x (n_heads * head_dim). K/V of this step must be written.
    // Throws when the backend cannot run the params (supports_attention false).
    virtual void attention(const KvCache& cache, int32_t layer, const Tensor& q, const Tensor& out,
                           const AttentionParams& params) = 0;
    // out[i] = x[logit_rows[i]].                                     out: L x cols
    virtual void gather_logit_rows(const Tensor& x, const Tensor& out) = 0;
    // out[i] = x[hidden_rows[i]] (embeddings read these rows).        out: H x cols
    virtual void gather_hidden_rows(const Tensor& x, const Tensor& out) = 0;
    // Copy-on-write block copies are KvCache::copy_block.

    // LoRA: applies each segment's update to its rows of y (T x out) from x (T x in), in place. Each
    // row's result depends on that row, its adapter and the scale only (batch invariance). The
    // default is a correct generic path over read()/write() (host doubles); backends override it.
    virtual void lora_add(const Tensor& x, const Tensor& y, std::span<const LoraSegment> segments);

    // Whether attention() runs these params (a sliding window, a soft cap, non-causal).
    virtual bool supports_attention(const AttentionParams&) const { return true; }
    // Empty when the backend runs `use`; else what it lacks, as "the sliding-window attention" or
    // "moe_ffn's per-expert output scales". The model layer asks for every node of a graph before the
    // model runs (model/graph_check.h), so a model is refused at load, not deep inside a step. The
    // default: an op supports() does not declare, attention params supports_attention() refuses.
    virtual std::string refusal(const OpUse& use) const;

    // Whether the backend runs `op` (op.h): every core op, and the optional and fused ops it
    // declares. The default declares none; a backend's override adds its own to Backend::supports.
    virtual bool supports(OpKind op) const;

    // --- optional ops (only called when supports() says so; the defaults throw naming the op) ---
    // out[t] = (x[t] - mean(x[t])) / sqrt(var(x[t]) + eps) * w + b, var the biased (population)
    // variance; out may be x.
    virtual void layer_norm(const Tensor& x, const Vector& w, const Vector& b, float eps, const Tensor& out);
    // x = gelu(x) = x/2 * (1 + erf(x / sqrt 2)), in place: the exact (erf) form, transformers' "gelu".
    virtual void gelu(const Tensor& x);
    // x[t] += row positions[t] of `table` (learned absolute positions, BERT), dequantised; throws when
    // a position is past the table's rows. The table was uploaded with WeightUse::embedding.
    virtual void add_position_embedding(const Weight& table, const Tensor& x);
    // x[t] += row token_types[t] of `table` (BERT's segment embeddings; row 0 for every token when the
    // step has no token types); throws when a type is past the table's rows. Part of the
    // position_embedding optional op: a backend with one has both.
    virtual void add_token_type_embedding(const Weight& table, const Tensor& x);
    // ColumnCopy from src into dst (OpKind::copy_columns).
    virtual void copy_columns(const Tensor& src, const Tensor& dst, const ColumnCopy& c);
    // CausalConv1d (OpKind::causal_conv1d) and GatedDeltaRule (OpKind::gated_delta_rule),
    // updating `state` in place.
    virtual void causal_conv1d(const CausalConv1d& op, const Tensor& x, const Tensor& state, const Tensor& out);
    virtual void gated_delta_rule(const GatedDeltaRule& op, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& g, const Tensor& beta, const Tensor& state, const Tensor& out);
    // out = sigmoid(gate) * up elementwise, sigmoid(g) = 1 / (1 + exp(-g)) (OpKind::sigmoid_mul:
    // qwen35's attention output gate); out may be gate or up.
    virtual void sigmoid_mul(const Tensor& gate, const Tensor& up, const Tensor& out);
    // x[t] *= 1 + beta ln(1 + floor(positions[t] / length)) (AttnTemperature), in place: every
    // column of the row (all its query heads) takes its token's factor.
    virtual void attn_temperature(const Tensor& x, const AttnTemperature& t);

    // The MoE FFN (MoeOp): x and out are T x dim, logits T x n_experts (the router's output).
    // `workspace` is a T x moe_workspace_cols(op) tensor of the arena the backend may use freely.
    virtual void moe_ffn(const MoeOp& op, const Tensor& x, const Tensor& logits, const Tensor& out,
                         const Tensor& workspace);
    virtual int64_t moe_workspace_cols(const MoeOp& /*op*/) const { return 1; }

    // --- fused ops (only called when supports() says so) ---
    // Whether qkv_rope_kv_write and matmul_silu_mul take a PartLora (their `lora` argument), so the
    // fusion pass may fold a LoRA step's lora_add nodes into them.
    virtual bool fuses_lora() const { return false; }
    // True when each fused op gives bitwise the results of its unfused sequence on this backend.
    virtual bool fused_bitwise() const { return true; }
    virtual void add_rms_norm(const Tensor& x, const Tensor& r, const Vector& w, float eps, const Tensor& out);
    // `lora` (only where fuses_lora()): the step's LoRA updates of the matmul's parts.
    virtual void qkv_rope_kv_write(KvCache& cache, const QkvOp& op, const Tensor& x, const Tensor& q_out,
                                   const Tensor* prepared = nullptr, const PartLora* lora = nullptr);
    virtual void matmul_silu_mul(const Weight& gate_up, const Tensor& x, const Tensor& out,
                                 const Tensor* prepared = nullptr, const PartLora* lora = nullptr);

    // --- a backend's own rewrite: prepared matmul inputs ---
    // A backend may have its own form of an activation that its matmuls read in place of the f32 rows
    // (the CPU: int8 codes with scales for its packed kernels), worth writing once in the norm's pass
    // rather than once per matmul. The fusion pass asks after its generic fusions: for a norm whose
    // output h only matmul-type ops read, of weights `readers`, a result > 0 is the columns of h's
    // prepared form; the norm node then also writes it (norm_prepare) and each reader takes it as its
    // `prepared` argument. 0 (the default): the backend keeps no such form, and nothing changes.
    virtual int64_t prepared_input_cols(int64_t /*cols*/, std::span<const Weight* const> /*readers*/) const {
        return 0;
    }
    // out = rms_norm(x) (after x += *r when r is given), and out's prepared form into `prepared`, a
    // tensor of prepared_input_cols(x.cols, ...) columns. Only where prepared_input_cols can be > 0.
    virtual void norm_prepare(const Tensor& x, const Tensor* r, const Vector& w, float eps, const Tensor& out,
                              const Tensor& prepared);

    // The kernel a matmul of `w` over n_tokens rows runs, for `pagoda graph` (e.g. "q8_0 packed
    // vnni avx512, gemv").
    virtual std::string describe_matmul(const Weight& w, int64_t n_tokens) const = 0;
    // The arithmetic that matmul runs on, whose peak bounds it.
    virtual MatmulArithmetic matmul_arithmetic(const Weight& /*w*/, int64_t /*n_tokens*/) const {
        return MatmulArithmetic::unmeasured;
    }
};

// The backends this build has: "cpu", "reference" (and "vulkan" when built with it).
std::vector<std::string> backend_names();
// Throws pagoda::Error naming the backend and the choices when `name` is unknown or unusable here.
std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options = {});

}  // namespace pagoda::backend
