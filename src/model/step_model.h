// The seam between the engine and the compute layer: something that runs one forward step over a
// Batch (tokens, positions, KV slots, block tables) and returns logits for the rows that want them.
// The real implementation is a graph over a backend (open_step_model in model/open_step_model.h);
// engine tests use scripted fakes. Everything above src/model sees compute only through this.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/batch.h"
#include "kv/kv_layout.h"
#include "lora/adapter.h"
#include "model/config.h"
#include "model/op_times.h"

namespace pagoda::model {

struct StepModelInfo {
    int64_t vocab_size = 0;
    int32_t n_kv_blocks = 0;     // blocks in the KV pool (BlockManager must use the same count)
    int32_t block_size = 16;     // tokens per block
    // > 0: every layer attends to at most this many last positions, so the block manager may free
    // blocks below it (BlockManager::set_sliding_window); 0 when any layer is global.
    int32_t sliding_window = 0;
    // Every layer's attention is plain (no sliding window, soft cap or sinks): what the amx_bf16
    // attention method takes (backend/cpu/attention/attention.h), so `pagoda tune` measures it only then.
    bool plain_attention = false;
    int64_t max_context = 0;     // longest sequence (prompt + output) the model accepts
    uint64_t model_key = 0;      // distinguishes weights in prefix-cache hashes
    size_t kv_bytes_per_block = 0;  // K and V of every layer
    kv::KvLayout kv_layout;         // the pool's shape and element type (zeros for fakes)
    int64_t hidden_size = 0;     // floats per hidden-state row (0: the model gives none)
    // An encoder (bert): no output head, so no logits; only embedding requests. Its attention is
    // bidirectional, so a sequence runs whole in one step and its KV, which depends on every token of
    // the text, is never shared through the prefix cache.
    bool embedding_only = false;
    bool bidirectional = false;
    // Rows of the encoder's token-type (segment) embedding: a batch's token types must be below it
    // (0 and 1 for BERT; 1 for RoBERTa / XLM-R); 0 when the model has none (every type must be 0).
    int32_t n_token_types = 0;
    std::string backend;         // "cpu", "reference", ...
    int threads = 0;             // compute threads (cpu)
    ModelConfig config;          // hyper-parameters from the file (empty for fakes)
    bool lora = false;           // load_lora() works and batches may name adapters
    // Batches may give rows an image's embeddings and bidirectional attention (model/batch.h).
    bool image_input = false;
    // Multi-axis rotary positions (Qwen3-VL's M-RoPE): an image's rows take positions from its
    // merged grid and the rows after it fall behind (model/mrope_position.h); a batch gives them
    // in Batch::rope_positions. Images for such a model carry their grid.
    bool mrope = false;
    // > 0: the model has recurrent layers (qwen35's gated DeltaNet) whose per-sequence state lives
    // beside the paged KV in this many slots: every sequence of a batch names its slot
    // (Batch::seq_state). Such a state folds in every token in order, so it cannot be rolled back
    // (no speculative drafts) nor rebuilt from cached KV blocks (no prefix cache).
    int32_t n_state_slots = 0;
};

// What feeds a matmul, for calibration statistics (`quantize --calib`): attention feeds attn_q/k/v,
// attention_output feeds attn_output, ffn feeds ffn_gate/up, ffn_down feeds ffn_down, output
// (layer -1) feeds the output head.
enum class MatmulInput { none, attention, attention_output, ffn, ffn_down, output };
// Called with the host copy of every matmul's input while set.
using ActivationObserver =
    std::function<void(int64_t layer, MatmulInput input, const float* x, int64_t n_tokens, int64_t cols)>;

// forward() stopped early because its interrupt flag was raised (see set_interrupt_flag).
struct StepInterrupted : Error {
    StepInterrupted() : Error("the step was interrupted") {}
};

class StepModel {
public:
    virtual ~StepModel() = default;
    virtual const StepModelInfo& info() const = 0;
    // Runs batch.block_copies, writes the K/V of every token to its slot, and returns logits
    // [batch.n_logit_rows()][vocab_size]. Throws pagoda::Error on invalid input (nothing written).
    // Rows with want_hidden set get their final hidden state (after the output norm, before the
    // head): hidden_rows() holds them, [batch.n_hidden_rows()][hidden_size], until the next forward.
    virtual std::vector<float> forward(const Batch& batch) = 0;
    virtual const std::vector<float>& hidden_rows() const {
        static const std::vector<float> none;
        return none;
    }
    // While `*flag` is true (it may turn true from another thread during a step), forward() may
    // stop between two ops and throw StepInterrupted; the K/V it wrote for that batch is then
    // undefined and its sequences must be dropped. The engine raises it to end a shutdown without
    // finishing a long step. Null: never interrupted. Fakes may ignore it.
    virtual void set_interrupt_flag(const std::atomic<bool>* flag) { (void)flag; }
    // While `times` is set, forward() adds each op's wall-clock time and the step's to it
    // (model/op_times.h); null stops timing. Fakes may ignore it.
    virtual void set_op_times(OpTimes* times) { (void)times; }

    // Reads a LoRA adapter (a GGUF LoRA file or a PEFT folder, lora/adapter.h) against this model's
    // weights and binds it to the model: batches then name it per sequence (Batch::seq_lora).
    // Throws pagoda::Error naming the file and the tensor for any defect, or when the model was
    // opened without LoRA (StepModelOptions::lora).
    virtual std::shared_ptr<const lora::Adapter> load_lora(const std::string& path, const std::string& name, float scale) {
        (void)path;
        (void)name;
        (void)scale;
        fail("this model cannot load LoRA adapters");
    }
    // Whether load_lora() works (the model was opened with LoRA enabled).
    virtual bool supports_lora() const { return false; }

    // --- the prefix cache's second tier (kv/prefix_tier.h) ---
    // Whether export_kv_block / import_kv_block work (fakes: no).
    virtual bool can_transfer_kv() const { return false; }
    // Copies pool block `block` out of / into the KV cache: K and V of every layer,
    // info().kv_bytes_per_block bytes — for each layer its K block then its V block, each
    // [kv_head][slot][head_dim] in the layout's element encoding (what a backend stores; opaque
    // to the caller). Throws pagoda::Error on a bad block id or a span of another size. An
    // import must happen between steps, never while forward() runs.
    virtual void export_kv_block(int32_t block, std::span<uint8_t> out) const {
        (void)block;
        (void)out;
        fail("this model cannot export KV blocks");
    }
    virtual void import_kv_block(int32_t block, std::span<const uint8_t> in) {
        (void)block;
        (void)in;
        fail("this model cannot import KV blocks");
    }

    // --- for the tools (bench, graph, calibration); fakes need not provide them ---
    // Host memory a decode step streams for the weights (the bandwidth bound of `pagoda bench`).
    virtual std::vector<std::span<const uint8_t>> weight_memory() const { return {}; }
    // The arithmetic the projections run on for a prefill: "int8", "bf16" or "f32" ("" unknown).
    virtual std::string matmul_arithmetic() const { return ""; }
    // One step's graph as text (`pagoda graph`): as the architecture wrote it, or as it runs
    // (after the fusion pass, when fusion is on).
    virtual std::string describe_graph(int64_t /*n_tokens*/, int64_t /*n_logits*/, bool /*as_run*/) const { return ""; }
    // Ops per step, e.g. "add_rms_norm 44, attention 22, ...".
    virtual std::string op_counts() const { return ""; }
    virtual void set_activation_observer(ActivationObserver observer) { (void)observer; }
};

}  // namespace pagoda::model
