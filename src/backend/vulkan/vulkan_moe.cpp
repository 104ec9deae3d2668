#include "backend/vulkan/vulkan_moe.h"

#include <algorithm>
#include <cstring>
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
    dev_->ctx->destroy(routes_);
}

int64_t VulkanMoe::workspace_cols(const MoeOp& op) {
    if (op.gate_up.empty()) return 1;
    const int64_t d = op.gate_up[0]->cols(), f = op.ffn(), k = op.n_used, fs = op.shared_ffn();
    return std::max<int64_t>(1, k * (2 * d + 2 * f) + (op.shared_gate_up ? 2 * fs + d : 0));
}

void VulkanMoe::run(Backend& backend, const Buffer& arena, const MoeOp& op, const Tensor& x, const Tensor& logits,
                    const Tensor& out, const Tensor& workspace) {
    const auto n_experts = int32_t(op.gate_up.size());
    if (n_experts == 0 || int32_t(op.down.size()) != n_experts) fail("vulkan moe_ffn: gate|up and down per expert");
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

    // Route on the host (waits for the logits).
    logits_.resize(size_t(n * n_experts));
    backend.read(logits, logits_.data());
    ids_.resize(size_t(n * k));
    weights_.resize(size_t(n * k));
    for (int64_t t = 0; t < n; ++t)
        route_token(logits_.data() + t * n_experts, n_experts, int32_t(k), op.normalize, op.routing, ids_.data() + t * k,
                    weights_.data() + t * k);
    // Slots grouped by expert, tokens in order within an expert.
    std::vector<int64_t> first(size_t(n_experts) + 1, 0);
    for (int32_t id : ids_) ++first[size_t(id) + 1];
    for (int32_t e = 0; e < n_experts; ++e) first[size_t(e) + 1] += first[size_t(e)];
    std::vector<int64_t> next(first.begin(), first.end() - 1);
    slots_.resize(size_t(n * k));
    for (size_t i = 0; i < ids_.size(); ++i) slots_[i] = int32_t(next[size_t(ids_[i])]++);

    // The workspace's regions (floats): gathered x, gate, up, expert outputs; the shared expert's.
    const uint64_t ws = address_of(workspace), xg = ws, g = xg + uint64_t(n * k * d) * 4, u = g + uint64_t(n * k * f) * 4,
                   y = u + uint64_t(n * k * f) * 4, sg = y + uint64_t(n * k * d) * 4, su = sg + uint64_t(n * fs) * 4,
                   sy = su + uint64_t(n * fs) * 4;
    std::vector<VkBufferCopy> copies;
    const uint64_t row_bytes = uint64_t(d) * 4;
    for (int64_t t = 0; t < n; ++t)
        for (int64_t j = 0; j < k; ++j)
            copies.push_back({address_of(x) - arena.address + uint64_t(t) * row_bytes,
                              xg - arena.address + uint64_t(slots_[size_t(t * k + j)]) * row_bytes, row_bytes});
    dev_->stream.copy_regions(arena, arena, copies);

    for (int32_t e = 0; e < n_experts; ++e) {
        const int64_t rows = first[size_t(e) + 1] - first[size_t(e)];
        if (rows == 0) continue;
        const Tensor ge = rows_of(g, f, first[size_t(e)], rows), ue = rows_of(u, f, first[size_t(e)], rows);
        const Tensor outs[2] = {ge, ue};
        backend.matmul(*op.gate_up[size_t(e)], rows_of(xg, d, first[size_t(e)], rows), outs, nullptr);
        if (!op.gate_bias.empty()) backend.add_bias(ge, *op.gate_bias[size_t(e)]);
        if (!op.up_bias.empty()) backend.add_bias(ue, *op.up_bias[size_t(e)]);
    }
    // The activation over every slot at once, into the gate rows.
    const Pointwise act = op.activation == MoeActivation::swiglu ? Pointwise::silu_mul
                          : op.activation == MoeActivation::gelu ? Pointwise::gelu_mul
                                                                 : Pointwise::swiglu_oai;
    auto activate = [&](uint64_t gate, uint64_t up, int64_t elements, int64_t cols) {
        PointwisePush p{gate, up, gate, uint32_t(elements), uint32_t(cols), uint32_t(act), 0.0f};
        auto [gx, gy] = grid((uint64_t(elements) + 255) / 256);
        dev_->stream.dispatch(dev_->ctx->pipeline("pointwise", {}), &p, sizeof(p), gx, gy);
    };
    activate(g, u, n * k * f, f);
    for (int32_t e = 0; e < n_experts; ++e) {
        const int64_t rows = first[size_t(e) + 1] - first[size_t(e)];
        if (rows == 0) continue;
        const Tensor ye = rows_of(y, d, first[size_t(e)], rows);
        backend.matmul(*op.down[size_t(e)], rows_of(g, f, first[size_t(e)], rows), {&ye, 1}, nullptr);
        if (!op.down_bias.empty()) backend.add_bias(ye, *op.down_bias[size_t(e)]);
    }
    if (op.shared_gate_up) {  // the shared expert: SwiGLU over every token
        const Tensor sgt = rows_of(sg, fs, 0, n), sut = rows_of(su, fs, 0, n), syt = rows_of(sy, d, 0, n);
        const Tensor outs[2] = {sgt, sut};
        backend.matmul(*op.shared_gate_up, x, outs, nullptr);
        PointwisePush p{sg, su, sg, uint32_t(n * fs), uint32_t(fs), uint32_t(Pointwise::silu_mul), 0.0f};
        auto [gx, gy] = grid((uint64_t(n * fs) + 255) / 256);
        dev_->stream.dispatch(dev_->ctx->pipeline("pointwise", {}), &p, sizeof(p), gx, gy);
        backend.matmul(*op.shared_down, sgt, {&syt, 1}, nullptr);
    }

    // The routes for the combine: the previous MoE's commands have finished (read() waited).
    const size_t bytes = size_t(n * k) * 8;
    if (routes_.size < bytes) {
        dev_->stream.flush();
        dev_->ctx->destroy(routes_);
        routes_ = dev_->ctx->create_buffer(std::max<size_t>(bytes * 2, 1 << 12), true, "the MoE routes");
    }
    std::memcpy(routes_.mapped, weights_.data(), size_t(n * k) * 4);
    std::memcpy(static_cast<char*>(routes_.mapped) + size_t(n * k) * 4, slots_.data(), size_t(n * k) * 4);
    MoeCombinePush p{y, routes_.address, routes_.address + uint64_t(n * k) * 4, op.shared_gate_up ? sy : 0,
                     op.shared_gate ? vec(*op.shared_gate).buffer.address : 0, address_of(x), address_of(out),
                     uint32_t(n), uint32_t(k), uint32_t(d)};
    auto [gx, gy] = grid(uint64_t(n));
    dev_->stream.dispatch(dev_->ctx->pipeline("moe_combine", {}), &p, sizeof(p), gx, gy);
}

}  // namespace pagoda::backend::vulkan
