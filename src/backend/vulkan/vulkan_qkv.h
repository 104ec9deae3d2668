// The Vulkan backend's qkv_rope_kv_write (backend::QkvOp) in three dispatches where the unfused
// sequence takes up to nine: one GEMV / GEMM over the Q, K and V parts together into a scratch
// buffer (each output summed as the plain matmul sums it), with LoRA parts each part's lora_add.comp
// updates on its columns of it, qkv_epilogue.comp (bias, RoPE, into q_out and contiguous K and V),
// then the K/V write, which the caller records from k() and v(). Bitwise the unfused matmul ;
// [lora_add per part ;] add_bias ; rope ; rope ; kv_write. The scratch buffer is made at the first
// use for a step of max_tokens (no flush: nothing recorded reads it yet), so a step's commands are
// not cut in two and replay finds it where it was recorded; it grows (a flush) only for wider layers.
#pragma once
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "backend/vulkan/device_state.h"
#include "backend/vulkan/vulkan_handles.h"
#include "backend/vulkan/vulkan_lora.h"

namespace pagoda::backend::vulkan {

class VulkanQkv {
public:
    explicit VulkanQkv(std::shared_ptr<DeviceState> dev) : dev_(std::move(dev)) {}
    ~VulkanQkv() { dev_->ctx->destroy(scratch_); }
    VulkanQkv(const VulkanQkv&) = delete;
    VulkanQkv& operator=(const VulkanQkv&) = delete;

    // Records the matmul and the epilogue for n tokens of x (throws naming a mismatch of the op,
    // its weight, biases and the cache's heads); `rope_table` is the step's table of
    // op.rope (rope_tables.h). Afterwards k() and v() hold the K and V rows (n x kv_cols each).
    // max_tokens: the most tokens a step may have (reserve_activations), what the scratch is sized for.
    // lora (Backend::fuses_lora; null: none): the parts' updates, recorded by `updates` on the
    // matmul's output before the epilogue.
    void run(const QkvOp& op, const kv::KvLayout& cache, uint64_t x, uint64_t q_out, int64_t n, int64_t max_tokens, uint64_t rope_table,
             uint32_t gemv_wg, uint32_t gemm_bk, const PartLora* lora = nullptr, VulkanLora* updates = nullptr);
    uint64_t k() const { return k_; }
    uint64_t v() const { return v_; }

private:
    std::shared_ptr<DeviceState> dev_;
    Buffer scratch_;
    uint64_t k_ = 0, v_ = 0;
};

}  // namespace pagoda::backend::vulkan
