// The resources a Backend hands out and the inputs of one step (backend.h states the contract):
// weights and small vectors uploaded once, RoPE tables, the paged KV cache, activation tensors of the
// step's arena, and StepInputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
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
    // (>= its position; an image's rows read to the image's end, model/batch.h).
    std::span<const int32_t> attend_until;
    // Per token, or empty (each row's own position): the first position of the row's span (an
    // image's first position for its rows). A sliding window counts back from the row's own
    // position and reaches to this (backend/attention_span.h).
    std::span<const int32_t> attend_from;
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

}  // namespace pagoda::backend
