// The gated DeltaNet layers' recurrent ops on the Vulkan backend (backend.h: CausalConv1d,
// GatedDeltaRule), each one dispatch over (channels or value heads) x (the call's tokens): the
// workgroups of a sequence's first token run that sequence's tokens in order, updating its state row
// in device memory, and the others exit (shaders/causal_conv1d.comp, shaders/gated_delta_rule.comp).
// A sequence's results therefore never depend on the call's other sequences nor on how its tokens
// are split into calls. The per-token state rows are written into a host-visible buffer, each
// distinct set once per step at the buffer's next free bytes (no host wait: the step's recorded work
// reads only bytes written before it); the buffer starts over after a flush (begin_step, or when full).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/vulkan/device_state.h"

namespace pagoda::backend::vulkan {

class VulkanRecurrent {
public:
    explicit VulkanRecurrent(std::shared_ptr<DeviceState> dev) : dev_(std::move(dev)) {}
    ~VulkanRecurrent();
    VulkanRecurrent(const VulkanRecurrent&) = delete;
    VulkanRecurrent& operator=(const VulkanRecurrent&) = delete;

    // The backend's begin_step, after its flush: no recorded work reads the rows buffer.
    void begin_step() { used_ = 0, held_.clear(); }
    // The tensors are device memory the caller checked (the backend's arena).
    void causal_conv1d(const CausalConv1d& op, const Tensor& x, const Tensor& state, const Tensor& out);
    void gated_delta_rule(const GatedDeltaRule& op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                          const Tensor& beta, const Tensor& state, const Tensor& out);

    static constexpr int32_t kMaxHeadDim = 256;  // gated_delta_rule.comp's shared arrays

private:
    // The device address of `rows`: the last call's when they are the same, otherwise written anew.
    uint64_t rows_address(std::span<const int32_t> rows);
    std::shared_ptr<DeviceState> dev_;
    Buffer rows_buf_;
    size_t used_ = 0;            // bytes of rows_buf_ that recorded work may read
    std::vector<int32_t> held_;  // the last rows written, at held_at_
    uint64_t held_at_ = 0;
};

}  // namespace pagoda::backend::vulkan
