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

#include "backend/backend_resources.h"
#include "backend/op.h"
#include "backend/op_params.h"
#include "gguf/ggml_types.h"
#include "kv/kv_layout.h"

namespace pagoda::backend {

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
