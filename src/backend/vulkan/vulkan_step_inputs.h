// A step's inputs on the Vulkan device (Backend::begin_step): one host-visible buffer holding, per
// token, its id, position, token type, causal attention limit, (sequence, position) pair, KV slot and
// its sequence's last position, then the block tables at a power-of-two stride (a push constant of
// attention, so a decode step replays until a table outgrows it); and the host copies the ops need
// (positions and the M-RoPE axis positions for the rope tables, the attention limits for the split
// grid, the gathers' row lists).
// Every address depends only on the step's computed rows and whether attend_until is given, so a
// replayed step (vk_context.h's Stream) finds its inputs where it was recorded.
//
// Replay buckets (PAGODA_VULKAN_BUCKETS=1, the default): when the model layer states that every step
// tensor has room for StepInputs::row_capacity rows (the graph executor's layout), a
// step of n <= kMaxBucketRows tokens is computed as bucket(n) = min(bit_ceil(n), row_capacity) rows,
// the logit and hidden row lists padded the same way. A padding row is token 0 at position 0 of
// sequence 0, attending to that sequence's key 0 and writing no KV (slot -1: kv_write.comp skips it);
// its logit / hidden rows are gathered after the real ones. Every op computes a row from that row (and
// the KV cache) only, so the real rows are bitwise those of the unpadded step, and decode steps of 5,
// 6, 7 or 8 sequences run one recorded command buffer.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/vulkan/device_state.h"

namespace pagoda::backend::vulkan {

class VulkanStepInputs {
public:
    explicit VulkanStepInputs(std::shared_ptr<DeviceState> dev);
    ~VulkanStepInputs() { dev_->ctx->destroy(buf_); }
    VulkanStepInputs(const VulkanStepInputs&) = delete;
    VulkanStepInputs& operator=(const VulkanStepInputs&) = delete;

    static constexpr int64_t kMaxBucketRows = 64;  // larger steps (prefill) run unpadded

    // Room for steps of up to max_tokens tokens (flushes when the buffer grows).
    void reserve(int64_t max_tokens);
    // Writes the step's inputs (the caller has flushed: no recorded command reads the buffer).
    // Pads to in.row_capacity (0: no padding).
    // Throws naming the problem for mismatched lengths or a slot outside 0..2^31.
    void begin(const StepInputs& in);

    int64_t tokens() const { return n_tokens_; }  // the step's real tokens
    int64_t rows() const { return rows_; }        // the token rows computed (bucket(tokens) when padded)
    // The rows computed for a step tensor of `r` rows (T, L or H): bucket(r) when the step is padded.
    int64_t computed(int64_t r) const;
    bool padded() const { return pad_; }  // this step is computed in buckets
    bool buckets_on() const { return buckets_; }

    uint64_t tokens_addr = 0, positions_addr = 0, token_types_addr = 0, until_addr = 0, seq_addr = 0, slots_addr = 0, ends_addr = 0,
             tables_addr = 0;
    uint32_t table_stride = 1;
    // Host copies, rows() long (logit_rows / hidden_rows: computed(L) / computed(H) long).
    std::vector<int32_t> positions, token_types, until, span_starts, ends, logit_rows, hidden_rows;
    // kRopeAxes per computed row (StepInputs::rope_positions, padding rows at 0), or empty when the
    // step gives none. Only the host reads them (rope_tables.h).
    std::vector<int32_t> rope_positions;

private:
    void ensure(size_t ints);
    std::shared_ptr<DeviceState> dev_;
    Buffer buf_;
    bool buckets_ = true, pad_ = false;
    int64_t n_tokens_ = 0, rows_ = 0, capacity_ = 0;
    std::vector<int32_t> last_;
};

}  // namespace pagoda::backend::vulkan
