// The mixture-of-experts FFN on the Vulkan backend (backend::MoeOp), recorded without a host wait
// (the routing never comes back to the host, so a step's commands are recorded in one go):
//   1. moe_route.comp picks each token's k experts and weights from its router logits, as
//      route_token (backend/moe_routing.h) does, in f32;
//   2. moe_slots.comp counts each expert's tokens, gives every (token, rank) a slot grouped by expert,
//      and writes each expert's GEMM grid for the indirect dispatches;
//   3. moe_gather.comp copies each token's row of x into its slots;
//   4. each expert's gate|up and down GEMM (matmul_gemm.comp over the expert's slot range, read on
//      the device; its biases added in the GEMM's one add) is an indirect dispatch: an expert no token
//      chose has an empty grid and its weights are never read. GEMM gives a row the bits GEMV would,
//      so a row never depends on how many tokens share its expert (batch invariance);
//   5. the activation over every slot, then moe_combine.comp sums each token's k rows with their
//      weights in rank order, plus the (gated) shared expert.
// A routing with a score-correction bias uploads it once per op (a wait, the first time only).
// Workspace: moe_workspace_cols(op) columns per token.
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
    // What of `op` the device cannot run ("" when it runs it all): Backend::refusal's answer.
    static std::string refusal(const MoeOp& op);
    // `backend` runs the matmuls and biases (it owns x, logits, out and workspace, all in `arena`).
    // `gemm_bk`: the GEMM's columns per stage (its specialisation constant).
    void run(Backend& backend, const Buffer& arena, uint32_t gemm_bk, const MoeOp& op, const Tensor& x, const Tensor& logits,
             const Tensor& out, const Tensor& workspace);

    static constexpr int32_t kMaxExperts = 1024;  // moe_slots.comp's shared arrays

private:
    // The device copy of a routing's score-correction bias (keyed by the op's vector, checked by value).
    uint64_t correction_bias(const std::vector<float>& values);
    struct DeviceBias {
        const float* key = nullptr;
        std::vector<float> values;
        Buffer buffer;
    };
    std::shared_ptr<DeviceState> dev_;
    std::vector<DeviceBias> biases_;
};

}  // namespace pagoda::backend::vulkan
