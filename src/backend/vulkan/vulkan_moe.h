// The mixture-of-experts FFN on the Vulkan backend (backend::MoeOp). The router runs on the host:
// the step's router logits come back (one wait per MoE layer), route_token (backend/moe_routing.h,
// the CPU backend's own routing) picks each token's experts and weights, and the device then
//   1. copies each token's row of x once per selected expert, grouped by expert (slot order),
//   2. runs each selected expert's gate|up matmul over its tokens (the dense matmul shaders: GEMV
//      and GEMM give a row the same bits, so a row never depends on how many tokens share its expert),
//      its biases, the activation, and its down matmul (and bias) into the slot's row,
//   3. sums each token's k rows with their weights in rank order, plus the (gated) shared expert
//      (moe_combine.comp).
// Experts no token selected are never read. Workspace: moe_workspace_cols(op) columns per token.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/vulkan/device_state.h"

namespace pagoda::backend::vulkan {

class VulkanMoe {
public:
    explicit VulkanMoe(std::shared_ptr<DeviceState> dev) : dev_(std::move(dev)) {}
    ~VulkanMoe();
    VulkanMoe(const VulkanMoe&) = delete;
    VulkanMoe& operator=(const VulkanMoe&) = delete;

    // Columns per token: k slots of the gathered input, gate, up and the expert's output, plus the
    // shared expert's gate, up and output.
    static int64_t workspace_cols(const MoeOp& op);
    // `backend` runs the matmuls and biases (it owns x, logits, out and workspace, all in `arena`).
    void run(Backend& backend, const Buffer& arena, const MoeOp& op, const Tensor& x, const Tensor& logits, const Tensor& out,
             const Tensor& workspace);

private:
    std::shared_ptr<DeviceState> dev_;
    Buffer routes_;  // host-visible: each step's weights (floats) then slots (ints), T x k each
    std::vector<float> logits_, weights_;
    std::vector<int32_t> ids_, slots_;
};

}  // namespace pagoda::backend::vulkan
