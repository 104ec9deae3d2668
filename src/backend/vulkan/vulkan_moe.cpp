#include "backend/vulkan/vulkan_moe.h"

#include <algorithm>
#include <limits>

#include "backend/moe_routing.h"
#include "backend/vulkan/push_constants.h"
#include "backend/vulkan/vulkan_handles.h"
#include "core/error.h"

namespace pagoda::backend::vulkan {
namespace {

// The rows [first, first + rows) of a `cols`-wide region starting at `base` of the arena.
Tensor rows_of(uint64_t base, int64_t cols, int64_t first, int64_t rows) {
    return {reinterpret_cast<void*>(uintptr_t(base + uint64_t(first * cols) * 4)), rows, cols};
}
uint64_t address_of(const Tensor& t) { return uint64_t(reinterpret_cast<uintptr_t>(t.data)); }

}  // namespace

VulkanMoe::~VulkanMoe() {
    try {
        dev_->stream.flush();
    } catch (...) {
    }
    for (DeviceBias& b : biases_) dev_->ctx->destroy(b.buffer);
}

std::string VulkanMoe::refusal(const MoeOp& op) {
    // The device router has no per-expert scales yet.
    if (!op.routing.expert_scale.empty()) return "moe_ffn's per-expert output scales (gemma4's ffn_down_exps.scale)";
    if (op.gate_up.size() > size_t(kMaxExperts))
        return fmt::format("moe_ffn over {} experts (the device router takes at most {})", op.gate_up.size(), kMaxExperts);
    return "";
}

int64_t VulkanMoe::workspace_cols(const MoeOp& op) {
    if (op.gate_up.empty()) return 1;
    const int64_t d = op.gate_up[0]->cols(), f = op.ffn(), k = op.n_used, fs = op.shared_ffn(), e = int64_t(op.gate_up.size());
    // Per token: slots' rows (x, gate, up, out), the shared expert's, ids, weights and slots, the
    // router's scratch (3 per expert); once per step (fits in one token's row): 8 per expert.
    return std::max<int64_t>(1, k * (2 * d + 2 * f) + (op.shared_gate_up ? 2 * fs + d : 0) + 3 * k + 3 * e + 8 * e);
}

uint64_t VulkanMoe::correction_bias(const std::vector<float>& values) {
    if (values.empty()) return 0;
    for (const DeviceBias& b : biases_)
        if (b.key == values.data() && b.values == values) return b.buffer.address;
    DeviceBias b{values.data(), values, dev_->ctx->create_buffer(values.size() * 4, false, "an MoE correction bias")};
    dev_->upload(values.data(), b.buffer, 0, values.size() * 4);
    biases_.push_back(std::move(b));
    return biases_.back().buffer.address;
}

void VulkanMoe::run(Backend& backend, const Buffer& arena, uint32_t gemm_bk, const MoeOp& op, const Tensor& x,
                    const Tensor& logits, const Tensor& out, const Tensor& workspace) {
    const auto n_experts = int32_t(op.gate_up.size());
    if (n_experts == 0 || int32_t(op.down.size()) != n_experts) fail("vulkan moe_ffn: gate|up and down per expert");
    if (const std::string why = refusal(op); !why.empty()) fail("vulkan backend: cannot run {}", why);
    const int64_t n = x.rows, d = op.gate_up[0]->cols(), f = op.ffn(), k = op.n_used, fs = op.shared_ffn();
    check_routing(op.routing, n_experts, int32_t(k));
    for (int32_t e = 0; e < n_experts; ++e) {
        const Weight& gu = *op.gate_up[size_t(e)];
        const Weight& dn = *op.down[size_t(e)];
        if (gu.parts().size() != 2 || gu.parts()[0].rows != f || gu.parts()[1].rows != f || gu.cols() != d)
            fail("vulkan moe_ffn: expert {}'s gate|up is not two {} x {} parts", e, f, d);
        if (dn.parts().size() != 1 || dn.parts()[0].rows != d || dn.cols() != f)
            fail("vulkan moe_ffn: expert {}'s down is not {} x {}", e, d, f);
    }
    for (const auto* b : {&op.gate_bias, &op.up_bias, &op.down_bias})
        if (!b->empty() && int32_t(b->size()) != n_experts) fail("vulkan moe_ffn: {} expert biases for {} experts", b->size(), n_experts);
    if (op.shared_gate_up && (!op.shared_down || op.shared_gate_up->parts().size() != 2 || op.shared_gate_up->cols() != d))
        fail("vulkan moe_ffn: the shared expert needs a gate|up of {} columns and a down", d);
    if (op.shared_gate && op.shared_gate->size() != d) fail("vulkan moe_ffn: a shared gate of {} values for rows of {}", op.shared_gate->size(), d);
    if (x.cols != d || logits.rows != n || logits.cols != n_experts || out.rows != n || out.cols != d)
        fail("vulkan moe_ffn: x {}x{}, logits {}x{}, out {}x{} for {} experts of width {}", x.rows, x.cols, logits.rows, logits.cols,
             out.rows, out.cols, n_experts, d);
    if (workspace.rows != n || workspace.cols != workspace_cols(op))
        fail("vulkan moe_ffn: a workspace of {}x{}, expected {}x{}", workspace.rows, workspace.cols, n, workspace_cols(op));
    if (n == 0) return;
    if (n * k > std::numeric_limits<int32_t>::max() / std::max<int64_t>(d, f))
        fail("vulkan moe_ffn: {} tokens x {} experts of width {} exceed the shaders' 32-bit indices", n, k, std::max(d, f));

    // The workspace's regions (floats): gathered x, gate, up, expert outputs; the shared expert's;
    // the routes (ids, weights, slots), the router's scratch; then the step's per-expert ranges and
    // indirect grids.
    const uint64_t ws = address_of(workspace), xg = ws, g = xg + uint64_t(n * k * d) * 4, u = g + uint64_t(n * k * f) * 4,
                   y = u + uint64_t(n * k * f) * 4, sg = y + uint64_t(n * k * d) * 4, su = sg + uint64_t(n * fs) * 4,
                   sy = su + uint64_t(n * fs) * 4, ids = sy + uint64_t(n * d) * 4, weights = ids + uint64_t(n * k) * 4,
                   slots = weights + uint64_t(n * k) * 4, scratch = slots + uint64_t(n * k) * 4,
                   range = scratch + uint64_t(n * 3 * n_experts) * 4, indirect = range + uint64_t(2 * n_experts) * 4;
    auto dispatch = [&](const char* name, const auto& push, uint64_t groups) {
        auto [gx, gy] = grid(groups);
        dev_->stream.dispatch(dev_->ctx->pipeline(name, {}), &push, sizeof(push), gx, gy);
    };
    const MoeRoutePush route{address_of(logits), correction_bias(op.routing.correction_bias), scratch, ids, weights,
                             uint32_t(n), uint32_t(n_experts), uint32_t(k), uint32_t(op.routing.scoring),
                             op.normalize ? 1u : 0u, uint32_t(std::max(0, op.routing.n_groups)),
                             uint32_t(std::max(0, op.routing.n_groups_used)), op.routing.scale};
    dispatch("moe_route", route, (uint64_t(n) + 63) / 64);
    const MoeSlotsPush assign{ids, range, indirect, slots, uint32_t(n * k), uint32_t(n_experts), uint32_t((f + 31) / 32),
                              uint32_t((d + 31) / 32)};
    dev_->stream.dispatch(dev_->ctx->pipeline("moe_slots", {}), &assign, sizeof(assign), 1);
    const MoeGatherPush gather{address_of(x), slots, xg, uint32_t(n), uint32_t(k), uint32_t(d)};
    dispatch("moe_gather", gather, (uint64_t(n * k * d) + 255) / 256);

    // Expert e's GEMM over its slots: the grid at `grid_at` of the indirect region, its token range
    // read by the shader.
    auto expert_gemm = [&](const Weight& wt, uint64_t in, uint64_t out_rows, int64_t rows, int64_t row0, int64_t cols,
                           const Vector* bias, int32_t e, size_t grid_at) {
        const VulkanWeight& w = weight(wt);
        MatmulPush p{w.data.address, w.groups.address, in, out_rows, range + uint64_t(2 * e) * 4,
                     bias ? vec(*bias).buffer.address : 0, uint32_t(rows), uint32_t(row0), uint32_t(cols), 0};
        const std::string shader = std::string("matmul_gemm_") + weight_format_name(w.format);
        dev_->stream.dispatch_indirect(dev_->ctx->pipeline(shader, {gemm_bk}), &p, sizeof(p), arena,
                                       indirect - arena.address + uint64_t(6 * e + grid_at) * 4);
    };
    for (int32_t e = 0; e < n_experts; ++e) {
        const Weight& gu = *op.gate_up[size_t(e)];
        expert_gemm(gu, xg, g, f, 0, d, op.gate_bias.empty() ? nullptr : op.gate_bias[size_t(e)], e, 0);
        expert_gemm(gu, xg, u, f, f, d, op.up_bias.empty() ? nullptr : op.up_bias[size_t(e)], e, 0);
    }
    // The activation over every slot at once, into the gate rows.
    const Pointwise act = op.activation == MoeActivation::swiglu ? Pointwise::silu_mul
                          : op.activation == MoeActivation::gelu ? Pointwise::gelu_mul
                                                                 : Pointwise::swiglu_oai;
    const PointwisePush activate{g, u, g, uint32_t(n * k * f), uint32_t(f), uint32_t(act), 0.0f};
    dispatch("pointwise", activate, (uint64_t(n * k * f) + 255) / 256);
    for (int32_t e = 0; e < n_experts; ++e)
        expert_gemm(*op.down[size_t(e)], g, y, d, 0, f, op.down_bias.empty() ? nullptr : op.down_bias[size_t(e)], e, 3);
    if (op.shared_gate_up) {  // the shared expert: SwiGLU over every token
        const Tensor sgt = rows_of(sg, fs, 0, n), sut = rows_of(su, fs, 0, n), syt = rows_of(sy, d, 0, n);
        const Tensor outs[2] = {sgt, sut};
        backend.matmul(*op.shared_gate_up, x, outs, nullptr);
        const PointwisePush p{sg, su, sg, uint32_t(n * fs), uint32_t(fs), uint32_t(Pointwise::silu_mul), 0.0f};
        dispatch("pointwise", p, (uint64_t(n * fs) + 255) / 256);
        backend.matmul(*op.shared_down, sgt, {&syt, 1}, nullptr);
    }
    const MoeCombinePush p{y, weights, slots, op.shared_gate_up ? sy : 0, op.shared_gate ? vec(*op.shared_gate).buffer.address : 0,
                           address_of(x), address_of(out), uint32_t(n), uint32_t(k), uint32_t(d)};
    dispatch("moe_combine", p, uint64_t(n));
}

}  // namespace pagoda::backend::vulkan
