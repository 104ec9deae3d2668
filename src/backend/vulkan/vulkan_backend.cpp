#include "backend/vulkan/vulkan_backend.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <utility>

#include "backend/vulkan/device_state.h"
#include "backend/vulkan/push_constants.h"
#include "backend/vulkan/rope_tables.h"
#include "backend/vulkan/vulkan_attention.h"
#include "backend/vulkan/vulkan_fused.h"
#include "backend/vulkan/vulkan_fused_lora.h"
#include "backend/vulkan/vulkan_handles.h"
#include "backend/vulkan/vulkan_kv_cache.h"
#include "backend/vulkan/vulkan_lora.h"
#include "backend/vulkan/vulkan_qkv.h"
#include "backend/vulkan/vulkan_moe.h"
#include "backend/vulkan/vulkan_recurrent.h"
#include "backend/vulkan/vulkan_step_inputs.h"
#include "backend/vulkan/vulkan_ops_extra.h"
#include "backend/vulkan/kernel_settings.h"
#include "backend/vulkan/weight_repack.h"
#include "core/error.h"

namespace pagoda::backend {
namespace vulkan {
namespace {


class VulkanBackend final : public Backend {
public:
    VulkanBackend() : VulkanBackend(std::make_shared<DeviceState>()) {}
    explicit VulkanBackend(std::shared_ptr<DeviceState> dev)
        : dev_(dev), moe_(dev), recurrent_(dev), ropes_(dev), attention_(dev, kernel_settings(dev->ctx->info).split_keys, row_reduce(*dev)),
          qkv_(dev), lora_(dev), gate_up_(dev), step_(dev) {
        const KernelSettings k = kernel_settings(dev_->ctx->info);
        gemv_wg_ = k.gemv_workgroup;
        gemm_bk_ = k.gemm_stage;
        rows_ = row_reduce(*dev_);
    }
    ~VulkanBackend() override {
        try {
            dev_->stream.flush();
        } catch (...) {
        }
        dev_->ctx->destroy(arena_);
    }

    std::string name() const override { return "vulkan"; }
    std::string describe() const override {
        const DeviceInfo& d = dev_->ctx->info;
        return fmt::format("vulkan on {} ({}, {}), subgroup {}, {} shared memory, gemv workgroup {}, gemm stage {}, {} reductions, step replay {}{}",
                           d.name, d.type, d.driver, d.subgroup_size, format_bytes(d.shared_memory), gemv_wg_, gemm_bk_,
                           rows_.subgroup ? "subgroup" : "shared-memory",
                           dev_->stream.replay() ? "on" : "off", dev_->ctx->validation ? ", validation layer on" : "");
    }
    size_t activation_size() const override { return 4; }
    // Free device memory now (vk_context.h), so a fractional --kv-memory, sized after the weights
    // are uploaded, is a fraction of what they left free.
    uint64_t memory_bytes() const override { return dev_->ctx->free_device_memory(); }

    std::shared_ptr<Weight> upload_weight(std::vector<MatrixSource> parts, WeightUse) override {
        if (parts.empty()) fail("vulkan backend: a weight needs at least one part");
        for (const MatrixSource& p : parts) {
            weight_format(p);  // refuses a type it cannot compute, naming the tensor
            if (p.cols != parts[0].cols) fail("vulkan backend: the parts of '{}' differ in width", parts[0].name);
        }
        int64_t elements = 0;
        for (const MatrixSource& p : parts) elements += p.rows * p.cols;
        if (elements > int64_t(std::numeric_limits<uint32_t>::max()))
            fail("vulkan backend: weight '{}' has {} elements, more than the 2^32 its shaders index", parts[0].name, elements);
        return std::make_shared<VulkanWeight>(std::move(parts), dev_);
    }
    std::shared_ptr<Vector> upload_vector(std::span<const float> values) override {
        return std::make_shared<VulkanVector>(values, dev_);
    }
    std::shared_ptr<Rope> upload_rope(RopeSpec spec) override {
        if (spec.dims % 2 != 0 || int64_t(spec.inv_freq.size()) != spec.dims / 2)
            fail("vulkan backend: a rope of {} dimensions needs {} frequencies, has {}", spec.dims, spec.dims / 2, spec.inv_freq.size());
        check_rope_spec(spec, "vulkan");  // M-RoPE's pair axes: the step's rope tables read them (rope_tables.h)
        return std::make_shared<VulkanRope>(std::move(spec));
    }
    std::unique_ptr<KvCache> create_kv_cache(const kv::KvLayout& layout, int64_t n_blocks) override {
        if (n_blocks > std::numeric_limits<int32_t>::max()) fail("vulkan backend: {} KV blocks exceed an int32 block id", n_blocks);
        return std::make_unique<VulkanKvCache>(dev_, layout, int32_t(n_blocks));
    }

    void reserve_activations(size_t bytes, int64_t max_tokens) override {
        max_tokens_ = std::max(max_tokens_, max_tokens);
        if (bytes > arena_.size || !arena_.buffer) {
            dev_->stream.flush();
            dev_->ctx->destroy(arena_);
            arena_ = dev_->ctx->create_buffer(std::max<size_t>(bytes, 256), false, "the activation arena");
        }
        dev_->staging_for(arena_.size);
        step_.reserve(max_tokens_);
        ropes_.reserve();
    }
    void* activations() override { return reinterpret_cast<void*>(uintptr_t(arena_.address)); }

    void read(const Tensor& t, float* out) const override {
        const size_t bytes = size_t(t.rows * t.cols) * 4;
        if (bytes) dev_->download(arena_, arena_offset(padded(t), "read"), out, bytes, size_t(step_.computed(t.rows) * t.cols) * 4);
    }
    void write(const Tensor& t, const float* in) override {
        const size_t bytes = size_t(t.rows * t.cols) * 4;
        if (bytes) dev_->upload(in, arena_, arena_offset(t, "write"), bytes);
    }

    // Replay buckets (vulkan_step_inputs.h): a padded step computes step_.computed(rows) rows of each
    // step tensor; checks compare the tensors with the real step, then the ops take padded(t).
    void begin_step(const StepInputs& in) override {
        dev_->stream.flush();  // the previous step's commands read the step buffer
        recurrent_.begin_step();
        lora_.begin_step();
        step_.begin(in);
        ropes_.begin_step();
    }

    void embed(const Weight& table, const Tensor& out) override {
        expect(out, step_.tokens(), table.cols(), "embed", "out");
        encode_embed(*dev_, weight(table), step_.tokens_addr, address(padded(out)), step_.rows(), out.cols, false);
    }

    void matmul(const Weight& wt, const Tensor& x_in, std::span<const Tensor> outs, const Tensor*) override {
        const auto& w = weight(wt);
        if (outs.size() != w.parts().size()) fail("vulkan matmul: {} outputs for a weight of {} parts", outs.size(), w.parts().size());
        expect(x_in, x_in.rows, w.cols(), "matmul", "x");
        for (size_t p = 0; p < outs.size(); ++p) expect(outs[p], x_in.rows, w.parts()[p].rows, "matmul", "out");
        const Tensor x = padded(x_in);
        const bool gemv = x.rows <= kGemvMaxTokens;
        const std::string shader = std::string(gemv ? "matmul_gemv_" : "matmul_gemm_") + weight_format_name(w.format);
        int64_t row0 = 0;
        for (size_t p = 0; p < outs.size(); ++p) {
            const int64_t rows = w.parts()[p].rows;
            MatmulPush push{w.data.address, w.groups.address, address(x), address(padded(outs[p])), 0, 0, uint32_t(rows), uint32_t(row0),
                            uint32_t(w.cols()), uint32_t(x.rows)};
            if (gemv) dispatch(shader, {gemv_wg_}, push, uint32_t((rows + gemv_wg_ - 1) / gemv_wg_));
            else dispatch(shader, {gemm_bk_}, push, uint32_t((rows + 31) / 32), uint32_t((x.rows + 31) / 32));
            row0 += rows;
        }
    }

    void rms_norm(const Tensor& x, const Vector& w, float eps, const Tensor& out) override {
        expect(out, x.rows, x.cols, "rms_norm", "out");
        if (w.size() != x.cols) fail("vulkan rms_norm: {} weights for rows of {}", w.size(), x.cols);
        const int64_t n = step_.computed(x.rows);
        encode_rms_norm(*dev_, rows_, address(padded(x)), 0, vec(w).buffer.address, address(padded(out)), n, x.cols, eps);
    }
    // Fused ops (vulkan_fused.h, vulkan_qkv.h, vulkan_fused_lora.h), each bitwise its unfused sequence.
    // Every optional op (the encoders', and the gated DeltaNet layers': vulkan_recurrent.h) and these
    // fused ops; no quantising norm.
    bool supports(OpKind op) const override {
        return !is_fused_op(op) || op == OpKind::add_rms_norm || op == OpKind::matmul_silu_mul ||
               op == OpKind::qkv_rope_kv_write;
    }
    bool fuses_lora() const override { return true; }
    void add_rms_norm(const Tensor& x, const Tensor& r, const Vector& w, float eps, const Tensor& out) override {
        expect(r, x.rows, x.cols, "add_rms_norm", "r");
        expect(out, x.rows, x.cols, "add_rms_norm", "out");
        if (w.size() != x.cols) fail("vulkan add_rms_norm: {} weights for rows of {}", w.size(), x.cols);
        const int64_t n = step_.computed(x.rows);
        encode_rms_norm(*dev_, rows_, address(padded(x)), address(padded(r)), vec(w).buffer.address, address(padded(out)), n, x.cols, eps);
    }
    void matmul_silu_mul(const Weight& gate_up, const Tensor& x, const Tensor& out, const Tensor*, const PartLora* lora) override {
        const auto& w = weight(gate_up);
        expect(x, x.rows, w.cols(), "matmul_silu_mul", "x");
        expect(out, x.rows, w.parts()[0].rows, "matmul_silu_mul", "out");
        const int64_t n = step_.computed(x.rows);
        if (lora && (!lora->parts[0].empty() || !lora->parts[1].empty()))
            gate_up_.run(w, address(padded(x)), address(padded(out)), n, max_tokens_, *lora, lora_, gemv_wg_, gemm_bk_);
        else
            encode_matmul_silu_mul(*dev_, w, address(padded(x)), address(padded(out)), n, gemv_wg_, gemm_bk_);
    }
    void copy_columns(const Tensor& src, const Tensor& dst, const ColumnCopy& c) override {
        check_column_copy(c, src, dst, "vulkan");
        encode_copy_columns(*dev_, address(padded(src)), src.cols, address(padded(dst)), dst.cols, step_.computed(src.rows), c);
    }
    void layer_norm(const Tensor& x, const Vector& w, const Vector& b, float eps, const Tensor& out) override {
        expect(out, x.rows, x.cols, "layer_norm", "out");
        if (w.size() != x.cols || b.size() != x.cols)
            fail("vulkan layer_norm: {} weights and {} biases for rows of {}", w.size(), b.size(), x.cols);
        const int64_t n = step_.computed(x.rows);
        LayerNormPush p{address(padded(x)), vec(w).buffer.address, vec(b).buffer.address, address(padded(out)), uint32_t(x.cols),
                        uint32_t(n), eps};
        auto [gx, gy] = grid(uint64_t(n));
        dispatch("layer_norm", {kRowWorkgroup}, p, gx, gy);
    }
    void gelu(const Tensor& x) override { pointwise(Pointwise::gelu, x, 0, 0, 0.0f); }
    void add_position_embedding(const Weight& table, const Tensor& x) override {
        expect(x, step_.tokens(), table.cols(), "position_embedding", "x");
        check_embedding_rows(table, step_.positions, "position_embedding: position");
        encode_embed(*dev_, weight(table), step_.positions_addr, address(padded(x)), step_.rows(), x.cols, true);
    }
    void add_token_type_embedding(const Weight& table, const Tensor& x) override {
        expect(x, step_.tokens(), table.cols(), "token_type_embedding", "x");
        check_embedding_rows(table, step_.token_types, "token_type_embedding: token type");
        encode_embed(*dev_, weight(table), step_.token_types_addr, address(padded(x)), step_.rows(), x.cols, true);
    }

    void add(const Tensor& y, const Tensor& x) override {
        expect(x, y.rows, y.cols, "add", "x");
        pointwise(Pointwise::add, y, address(x), 0, 0.0f);
    }
    void add_bias(const Tensor& y, const Vector& b) override {
        if (b.size() != y.cols) fail("vulkan add_bias: {} biases for rows of {}", b.size(), y.cols);
        pointwise(Pointwise::add_bias, y, vec(b).buffer.address, 0, 0.0f);
    }
    void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
        expect(up, gate.rows, gate.cols, "silu_mul", "up");
        expect(out, gate.rows, gate.cols, "silu_mul", "out");
        pointwise(Pointwise::silu_mul, gate, address(up), address(out), 0.0f);
    }
    void causal_conv1d(const CausalConv1d& op, const Tensor& x, const Tensor& state, const Tensor& out) override {
        for (const Tensor* t : {&x, &state, &out}) arena_offset(*t, "causal_conv1d");
        recurrent_.causal_conv1d(op, x, state, out);
    }
    void gated_delta_rule(const GatedDeltaRule& op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                          const Tensor& beta, const Tensor& state, const Tensor& out) override {
        for (const Tensor* t : {&q, &k, &v, &g, &beta, &state, &out}) arena_offset(*t, "gated_delta_rule");
        recurrent_.gated_delta_rule(op, q, k, v, g, beta, state, out);
    }
    void sigmoid_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
        expect(up, gate.rows, gate.cols, "sigmoid_mul", "up");
        expect(out, gate.rows, gate.cols, "sigmoid_mul", "out");
        pointwise(Pointwise::sigmoid_mul, gate, address(up), address(out), 0.0f);
    }
    void gelu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
        expect(up, gate.rows, gate.cols, "gelu_mul", "up");
        expect(out, gate.rows, gate.cols, "gelu_mul", "out");
        pointwise(Pointwise::gelu_mul, gate, address(up), address(out), 0.0f);
    }
    void scale(const Tensor& x, float s) override { pointwise(Pointwise::scale, x, 0, 0, s); }
    void attn_temperature(const Tensor& x, const AttnTemperature& t) override {
        check_attn_temperature(t, "vulkan");
        expect(x, step_.tokens(), x.cols, "attn_temperature", "x");
        pointwise(Pointwise::attn_temperature, x, step_.positions_addr, 0, t.beta, uint32_t(t.length));
    }
    void softcap(const Tensor& x, float cap) override {
        if (!(cap > 0) || !std::isfinite(cap)) fail("vulkan softcap: the cap {} must be positive", cap);
        pointwise(Pointwise::softcap, x, 0, 0, cap);
    }
    void softmax(const Tensor& x) override {
        encode_softmax(*dev_, rows_, address(padded(x)), step_.computed(x.rows), x.cols);
    }

    void rope(const Tensor& x, const Rope& r, int32_t n_heads, int32_t head_dim) override {
        const RopeSpec& spec = r.spec();
        expect(x, step_.tokens(), int64_t(n_heads) * head_dim, "rope", "x");
        if (spec.dims > head_dim) fail("vulkan rope: {} rotary dimensions exceed the head size {}", spec.dims, head_dim);
        const int64_t half = spec.dims / 2;
        const int64_t n = step_.rows();
        if (half == 0 || n == 0) return;
        RopePush p{address(padded(x)), ropes_.table(r, step_.positions, step_.rope_positions), uint32_t(n), uint32_t(n_heads), uint32_t(head_dim), uint32_t(half),
                   uint32_t(x.cols), spec.neox ? 1u : 0u};
        auto [gx, gy] = grid((uint64_t(n * n_heads * half) + 255) / 256);
        dispatch("rope", {}, p, gx, gy);
    }

    void kv_write(KvCache& cache, int32_t layer, const Tensor& k, const Tensor& v) override {
        auto& c = kv(cache);
        const kv::KvLayout& l = c.layout();
        check_layer(l, layer, "kv_write");
        const int64_t width = int64_t(l.n_kv_heads) * l.head_dim;
        expect(k, step_.tokens(), width, "kv_write", "k");
        expect(v, step_.tokens(), width, "kv_write", "v");
        record_kv_write(c, layer, address(padded(k)), address(padded(v)));
    }
    void qkv_rope_kv_write(KvCache& cache, const QkvOp& op, const Tensor& x, const Tensor& q_out, const Tensor*,
                           const PartLora* lora) override {
        const auto& c = kv(cache);
        check_layer(c.layout(), op.layer, "qkv_rope_kv_write");
        expect(x, step_.tokens(), op.qkv->cols(), "qkv_rope_kv_write", "x");
        expect(q_out, step_.tokens(), int64_t(op.n_heads) * op.head_dim, "qkv_rope_kv_write", "q_out");
        if (step_.rows() == 0) return;
        qkv_.run(op, c.layout(), address(padded(x)), address(padded(q_out)), step_.rows(), max_tokens_, ropes_.table(*op.rope, step_.positions, step_.rope_positions),
                 gemv_wg_, gemm_bk_,
                 lora, &lora_);
        record_kv_write(c, op.layer, qkv_.k(), qkv_.v());
    }

    void attention(const KvCache& cache, int32_t layer, const Tensor& q, const Tensor& out, const AttentionParams& params) override {
        const auto& c = kv(cache);
        const kv::KvLayout& l = c.layout();
        check_layer(l, layer, "attention");
        if (params.n_heads <= 0 || params.n_heads % l.n_kv_heads != 0)
            fail("vulkan attention: {} query heads are not a multiple of the cache's {} KV heads", params.n_heads, l.n_kv_heads);
        if (params.sinks && params.sinks->size() != params.n_heads)
            fail("vulkan attention: {} sinks for {} query heads", params.sinks->size(), params.n_heads);
        if (params.alibi_max_bias < 0 || !std::isfinite(params.alibi_max_bias))
            fail("vulkan attention: ALiBi max bias {} is not >= 0", params.alibi_max_bias);
        const int64_t width = int64_t(params.n_heads) * l.head_dim;
        expect(q, step_.tokens(), width, "attention", "q");
        expect(out, step_.tokens(), width, "attention", "out");
        // Non-causal (encoders): each token is handed its sequence's last position of the step.
        AttentionPush p{address(padded(q)), address(padded(out)), c.buffer().address, params.causal ? step_.until_addr : step_.ends_addr,
                        step_.seq_addr, step_.tables_addr,
                        params.sinks ? vec(*params.sinks).buffer.address : 0,
                        uint32_t(params.n_heads), uint32_t(l.n_kv_heads), uint32_t(size_t(layer) * 2 * l.layer_block_bytes()),
                        step_.table_stride, uint32_t(std::max(0, params.sliding_window)), params.scale, params.softcap, geometry(l)};
        p.alibi_max_bias = params.alibi_max_bias;
        attention_.run(p, params.causal ? step_.until : step_.ends, step_.positions, step_.span_starts, uint32_t(step_.rows()),
                       uint32_t(l.head_dim));
    }

    int64_t moe_workspace_cols(const MoeOp& op) const override { return VulkanMoe::workspace_cols(op); }
    std::string refusal(const OpUse& use) const override {
        if (use.moe)
            if (std::string why = VulkanMoe::refusal(*use.moe); !why.empty()) return why;
        return Backend::refusal(use);
    }
    void moe_ffn(const MoeOp& op, const Tensor& x, const Tensor& logits, const Tensor& out, const Tensor& workspace) override {
        for (const Tensor* t : {&x, &logits, &out, &workspace}) arena_offset(*t, "moe_ffn");
        moe_.run(*this, arena_, gemm_bk_, op, padded(x), padded(logits), padded(out), padded(workspace));
    }

    void lora_add(const Tensor& x, const Tensor& y, std::span<const LoraSegment> segments) override {
        if (segments.empty()) return;
        if (x.rows != y.rows) fail("vulkan lora_add: x has {} rows but y {}", x.rows, y.rows);
        lora_.add(address(x), address(y), x.rows, x.cols, y.cols, segments);
    }

    void gather_logit_rows(const Tensor& x, const Tensor& out) override { gather(x, out, step_.logit_rows, "gather_logit_rows"); }
    void gather_hidden_rows(const Tensor& x, const Tensor& out) override { gather(x, out, step_.hidden_rows, "gather_hidden_rows"); }

    std::string describe_matmul(const Weight& w, int64_t n_tokens) const override {
        return fmt::format("vulkan {} {}", weight_format_name(weight(w).format), n_tokens <= kGemvMaxTokens ? "gemv" : "gemm");
    }

private:
    void record_kv_write(const VulkanKvCache& c, int32_t layer, uint64_t k, uint64_t v) {
        const kv::KvLayout& l = c.layout();
        KvWritePush p{k, v, c.buffer().address, step_.slots_addr, uint32_t(step_.rows()), uint32_t(l.n_kv_heads),
                      uint32_t(size_t(layer) * 2 * l.layer_block_bytes()), geometry(l)};
        dispatch("kv_write", {}, p, uint32_t((step_.rows() * l.n_kv_heads * 2 + 63) / 64));
    }
    static void check_layer(const kv::KvLayout& l, int32_t layer, const char* op) {
        if (layer < 0 || layer >= l.n_layers) fail("vulkan {}: layer {} is outside the cache's {} layers", op, layer, l.n_layers);
    }
    size_t arena_offset(const Tensor& t, const char* op) const {
        const uint64_t a = uint64_t(reinterpret_cast<uintptr_t>(t.data));
        const uint64_t bytes = uint64_t(t.rows * t.cols) * 4;
        if (a < arena_.address || a + bytes > arena_.address + arena_.size)
            fail("vulkan {}: a tensor outside the activation arena", op);
        return size_t(a - arena_.address);
    }
    uint64_t address(const Tensor& t) const {
        arena_offset(t, "op");
        return uint64_t(reinterpret_cast<uintptr_t>(t.data));
    }
    static void expect(const Tensor& t, int64_t rows, int64_t cols, const char* op, const char* what) {
        if (t.rows != rows || t.cols != cols) fail("vulkan {}: {} is {}x{}, expected {}x{}", op, what, t.rows, t.cols, rows, cols);
    }

    template <class Push>
    void dispatch(const std::string& shader, const std::vector<uint32_t>& constants, const Push& push, uint32_t gx, uint32_t gy = 1) {
        dev_->stream.dispatch(dev_->ctx->pipeline(shader, constants), &push, sizeof(Push), gx, gy);
    }
    // b and out (0: unused) have a's rows.
    void pointwise(Pointwise op, const Tensor& a_in, uint64_t b, uint64_t out, float f, uint32_t i = 0) {
        const Tensor a = padded(a_in);
        PointwisePush p{address(a), b, out, uint32_t(a.rows * a.cols), uint32_t(std::max<int64_t>(a.cols, 1)), uint32_t(op), f, i};
        auto [gx, gy] = grid((uint64_t(a.rows * a.cols) + 255) / 256);
        dispatch("pointwise", {}, p, gx, gy);
    }
    // rows: the step's list, padded with the padding rows when the step is (vulkan_step_inputs.h).
    void gather(const Tensor& x_in, const Tensor& out_in, const std::vector<int32_t>& rows, const char* op) {
        expect(out_in, out_in.rows, x_in.cols, op, "out");
        if (step_.computed(out_in.rows) != int64_t(rows.size())) fail("vulkan {}: {} rows for a step of {}", op, out_in.rows, rows.size());
        const Tensor x = padded(x_in), out = padded(out_in);
        const size_t row_bytes = size_t(x.cols) * 4, src = arena_offset(x, op), dst = arena_offset(out, op);
        std::vector<VkBufferCopy>& regions = regions_;
        regions.clear();
        for (size_t i = 0; i < rows.size(); ++i) {
            if (rows[i] < 0 || rows[i] >= x.rows) fail("vulkan {}: row {} of {}", op, rows[i], x.rows);
            regions.push_back({src + size_t(rows[i]) * row_bytes, dst + i * row_bytes, row_bytes});
        }
        if (row_bytes) dev_->stream.copy_regions(arena_, arena_, regions);
    }
    Tensor padded(const Tensor& t) const { return {t.data, step_.computed(t.rows), t.cols}; }
    std::shared_ptr<DeviceState> dev_;
    VulkanMoe moe_;
    VulkanRecurrent recurrent_;
    RopeTables ropes_;
    VulkanAttention attention_;
    VulkanQkv qkv_;
    VulkanLora lora_;
    VulkanGateUpLora gate_up_;
    VulkanStepInputs step_;
    Buffer arena_;
    uint32_t gemv_wg_ = 64, gemm_bk_ = 16;  // kernel_settings.h
    RowReduce rows_;
    int64_t max_tokens_ = 1;
    std::vector<VkBufferCopy> regions_;
};

}  // namespace
}  // namespace vulkan

std::unique_ptr<Backend> make_vulkan_backend(const BackendOptions&) { return std::make_unique<vulkan::VulkanBackend>(); }

}  // namespace pagoda::backend
