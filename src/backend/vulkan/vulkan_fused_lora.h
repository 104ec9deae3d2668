// The Vulkan backend's matmul_silu_mul with LoRA parts (Backend::fuses_lora): one GEMV / GEMM
// over the gate and up parts together into a scratch buffer (row t: gate | up, each output summed as
// the plain matmul sums it), each part's updates applied in place by lora_add.comp over its half of
// the scratch rows, then silu(gate) * up (pointwise.comp's op 9, the silu_mul expression) into out:
// bitwise the unfused matmul ; lora_add per part ; silu_mul. The scratch is made at the first use for
// a step of max_tokens (no flush: nothing recorded reads it yet) and grows (a flush) only for a
// wider layer, as the fused QKV's (vulkan_qkv.h). qkv_rope_kv_write takes its parts' updates the same
// way, between its matmul and its epilogue (VulkanQkv::run).
#pragma once
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "backend/vulkan/device_state.h"
#include "backend/vulkan/vulkan_handles.h"
#include "backend/vulkan/vulkan_lora.h"

namespace pagoda::backend::vulkan {

class VulkanGateUpLora {
public:
    explicit VulkanGateUpLora(std::shared_ptr<DeviceState> dev) : dev_(std::move(dev)) {}
    ~VulkanGateUpLora() { dev_->ctx->destroy(scratch_); }
    VulkanGateUpLora(const VulkanGateUpLora&) = delete;
    VulkanGateUpLora& operator=(const VulkanGateUpLora&) = delete;

    // out (n x rows) = silu(x Wg^T + updates of part 0) * (x Wu^T + updates of part 1) for a weight
    // of two parts of `rows` rows (throws naming the weight otherwise); x, out: arena addresses the
    // caller checked. `updates` records the LoRA dispatches.
    void run(const VulkanWeight& w, uint64_t x, uint64_t out, int64_t n, int64_t max_tokens, const PartLora& lora,
             VulkanLora& updates, uint32_t gemv_wg, uint32_t gemm_bk);

private:
    std::shared_ptr<DeviceState> dev_;
    Buffer scratch_;
};

// One matmul over all the parts of `w` into `out` (n rows of all the parts' rows, part after part in
// each row), GEMV or GEMM by n as Backend::matmul picks: the fused QKV's and gate|up's first pass.
void encode_stacked_matmul(DeviceState& dev, const VulkanWeight& w, uint64_t x, uint64_t out, int64_t n, uint32_t gemv_wg,
                           uint32_t gemm_bk);

}  // namespace pagoda::backend::vulkan
