#include "backend/backend.h"

#include <cmath>
#include <vector>

#include "core/error.h"

namespace pagoda::backend {

int64_t Weight::rows() const {
    int64_t n = 0;
    for (const auto& p : parts_) n += p.rows;
    return n;
}

const char* moe_scoring_name(MoeScoring s) {
    switch (s) {
        case MoeScoring::softmax: return "softmax";
        case MoeScoring::sigmoid: return "sigmoid";
        case MoeScoring::softmax_selected: return "softmax of the selected";
    }
    return "?";
}

const char* moe_activation_name(MoeActivation a) {
    switch (a) {
        case MoeActivation::swiglu: return "swiglu";
        case MoeActivation::swiglu_oai: return "swiglu_oai";
        case MoeActivation::gelu: return "geglu";
    }
    return "?";
}

const char* matmul_arithmetic_name(MatmulArithmetic a) {
    switch (a) {
        case MatmulArithmetic::unmeasured: return "";
        case MatmulArithmetic::f32: return "f32";
        case MatmulArithmetic::bf16: return "bf16";
        case MatmulArithmetic::int8: return "int8";
        case MatmulArithmetic::amx_bf16: return "amx_bf16";
        case MatmulArithmetic::amx_int8: return "amx_int8";
    }
    return "?";
}

bool Backend::supports(OpKind op) const { return !is_optional_op(op) && !is_fused_op(op); }

std::string Backend::refusal(const OpUse& use) const {
    if (!supports(use.op)) return std::string("the ") + op_name(use.op) + " op";
    if (const AttentionParams* p = use.attention; p && !supports_attention(*p)) {
        return p->alibi_max_bias > 0   ? "the ALiBi attention"
               : p->sinks              ? "the attention sinks"
               : p->softcap > 0        ? "the soft-capped attention"
               : p->sliding_window > 0 ? "the sliding-window attention"
               : !p->causal            ? "the bidirectional attention"
                                       : "the attention";
    }
    return "";
}

// The optional and fused ops are only called where supports() says so, so reaching these defaults
// is a bug in the caller.
void Backend::layer_norm(const Tensor&, const Vector&, const Vector&, float, const Tensor&) {
    fail("backend {} has no layer_norm op", name());
}
void Backend::gelu(const Tensor&) { fail("backend {} has no gelu op", name()); }
void Backend::add_position_embedding(const Weight&, const Tensor&) {
    fail("backend {} has no position_embedding op", name());
}

void Backend::add_token_type_embedding(const Weight&, const Tensor&) {
    fail("backend {} has no token_type_embedding op", name());
}

void Backend::copy_columns(const Tensor&, const Tensor&, const ColumnCopy&) {
    fail("backend {} has no copy_columns op", name());
}

void Backend::causal_conv1d(const CausalConv1d&, const Tensor&, const Tensor&, const Tensor&) {
    fail("backend {} has no causal_conv1d op", name());
}
void Backend::gated_delta_rule(const GatedDeltaRule&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                               const Tensor&, const Tensor&, const Tensor&) {
    fail("backend {} has no gated_delta_rule op", name());
}

void Backend::sigmoid_mul(const Tensor&, const Tensor&, const Tensor&) {
    fail("backend {} has no sigmoid_mul op", name());
}

void Backend::attn_temperature(const Tensor&, const AttnTemperature&) {
    fail("backend {} has no attn_temperature op", name());
}

void check_attn_temperature(const AttnTemperature& t, const std::string& backend) {
    if (t.length <= 0) fail("{} attn_temperature: the length {} must be positive", backend, t.length);
    if (!std::isfinite(t.beta)) fail("{} attn_temperature: beta {} is not finite", backend, t.beta);
}

namespace {
void check_state_rows(std::span<const int32_t> rows, const Tensor& x, const Tensor& state, const char* op,
                      const std::string& backend) {
    if (int64_t(rows.size()) != x.rows) fail("{} {}: {} state rows for {} tokens", backend, op, rows.size(), x.rows);
    for (int32_t r : rows)
        if (r < 0 || r >= state.rows) fail("{} {}: state row {} is outside the {} slots", backend, op, r, state.rows);
}
void check_shape(const Tensor& t, int64_t rows, int64_t cols, const char* op, const char* what,
                 const std::string& backend) {
    if (t.rows != rows || t.cols != cols)
        fail("{} {}: {} is {} x {}, expected {} x {}", backend, op, what, t.rows, t.cols, rows, cols);
}
}  // namespace

void check_causal_conv1d(const CausalConv1d& op, const Tensor& x, const Tensor& state, const Tensor& out,
                         const std::string& backend) {
    if (!op.weight || op.kernel < 2) fail("{} causal_conv1d: kernel {} (needs a weight and at least 2 taps)", backend, op.kernel);
    if (op.weight->size() != x.cols * op.kernel)
        fail("{} causal_conv1d: {} weights for {} channels of {} taps", backend, op.weight->size(), x.cols, op.kernel);
    check_shape(out, x.rows, x.cols, "causal_conv1d", "out", backend);
    if (state.cols != x.cols * (op.kernel - 1))
        fail("{} causal_conv1d: state has {} columns, expected {}", backend, state.cols, x.cols * (op.kernel - 1));
    if (x.data == out.data) fail("{} causal_conv1d: x and out are the same tensor", backend);
    check_state_rows(op.state_rows, x, state, "causal_conv1d", backend);
}

void check_gated_delta_rule(const GatedDeltaRule& op, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& g, const Tensor& beta, const Tensor& state, const Tensor& out,
                            const std::string& backend) {
    if (op.n_k_heads < 1 || op.n_v_heads < 1 || op.head_dim < 1 || op.n_v_heads % op.n_k_heads != 0)
        fail("{} gated_delta_rule: {} value heads over {} key heads of {} (needs a multiple)", backend, op.n_v_heads,
             op.n_k_heads, op.head_dim);
    const int64_t t = q.rows, d = op.head_dim;
    check_shape(q, t, op.n_k_heads * d, "gated_delta_rule", "q", backend);
    check_shape(k, t, op.n_k_heads * d, "gated_delta_rule", "k", backend);
    check_shape(v, t, op.n_v_heads * d, "gated_delta_rule", "v", backend);
    check_shape(out, t, op.n_v_heads * d, "gated_delta_rule", "out", backend);
    check_shape(g, t, op.n_v_heads, "gated_delta_rule", "g", backend);
    check_shape(beta, t, op.n_v_heads, "gated_delta_rule", "beta", backend);
    if (state.cols != op.n_v_heads * d * d)
        fail("{} gated_delta_rule: state has {} columns, expected {}", backend, state.cols, op.n_v_heads * d * d);
    check_state_rows(op.state_rows, q, state, "gated_delta_rule", backend);
}

void check_rope_spec(const RopeSpec& spec, const std::string& backend) {
    if (spec.pair_axis.empty()) return;
    if (int64_t(spec.pair_axis.size()) != spec.dims / 2)
        fail("{} backend: a multi-axis RoPE of {} dimensions needs {} pair axes, has {}", backend, spec.dims,
             spec.dims / 2, spec.pair_axis.size());
    for (size_t i = 0; i < spec.pair_axis.size(); ++i)
        if (spec.pair_axis[i] >= kRopeAxes)
            fail("{} backend: RoPE pair {} reads position axis {}, expected below {}", backend, i, spec.pair_axis[i],
                 kRopeAxes);
}

void check_column_copy(const ColumnCopy& c, const Tensor& src, const Tensor& dst, const std::string& backend) {
    if (c.n_heads < 1 || c.width < 0 || c.src_stride < 0 || c.src_offset < 0 || c.dst_stride < 0 || c.dst_offset < 0)
        fail("{} copy_columns: negative or zero field (heads {}, width {}, strides {} / {}, offsets {} / {})", backend,
             c.n_heads, c.width, c.src_stride, c.dst_stride, c.src_offset, c.dst_offset);
    if (src.rows != dst.rows) fail("{} copy_columns: src has {} rows, dst {}", backend, src.rows, dst.rows);
    if (src.data == dst.data) fail("{} copy_columns: src and dst are the same tensor", backend);
    const int64_t last = c.n_heads - 1;
    if (last * c.src_stride + c.src_offset + c.width > src.cols)
        fail("{} copy_columns: head {} reads past src's {} columns", backend, last, src.cols);
    if (last * c.dst_stride + c.dst_offset + c.width > dst.cols)
        fail("{} copy_columns: head {} writes past dst's {} columns", backend, last, dst.cols);
    if (c.n_heads > 1 && c.dst_stride < c.width)
        fail("{} copy_columns: dst stride {} is narrower than the width {}: heads would overlap", backend, c.dst_stride,
             c.width);
}

void Backend::add_rms_norm(const Tensor&, const Tensor&, const Vector&, float, const Tensor&) {
    fail("backend {} has no fused add_rms_norm", name());
}
void Backend::qkv_rope_kv_write(KvCache&, const QkvOp&, const Tensor&, const Tensor&, const Tensor*, const PartLora*) {
    fail("backend {} has no fused qkv_rope_kv_write", name());
}
void Backend::matmul_silu_mul(const Weight&, const Tensor&, const Tensor&, const Tensor*, const PartLora*) {
    fail("backend {} has no fused matmul_silu_mul", name());
}
void Backend::moe_ffn(const MoeOp&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
    fail("backend {} cannot run mixture-of-experts layers", name());
}
void Backend::norm_prepare(const Tensor&, const Tensor*, const Vector&, float, const Tensor&, const Tensor&) {
    fail("backend {} keeps no prepared matmul input (norm_prepare)", name());
}

// The generic LoRA path: the two tensors to host, the update in double, y back. Correct on any
// backend that implements read/write; a backend with device memory overrides it to stay on the device.
void Backend::lora_add(const Tensor& x, const Tensor& y, std::span<const LoraSegment> segments) {
    if (segments.empty()) return;
    if (x.rows != y.rows) fail("lora_add: x has {} rows but y {}", x.rows, y.rows);
    std::vector<float> xs(size_t(x.rows * x.cols)), ys(size_t(y.rows * y.cols));
    read(x, xs.data());
    read(y, ys.data());
    std::vector<double> h;
    for (const LoraSegment& s : segments) {
        h.assign(size_t(s.rank), 0.0);
        for (int32_t t : s.rows) {
            if (t < 0 || t >= x.rows) fail("lora_add: row {} is outside the step's {} rows", t, x.rows);
            const float* xt = xs.data() + int64_t(t) * x.cols;
            for (int64_t r = 0; r < s.rank; ++r) {
                double acc = 0;
                for (int64_t c = 0; c < x.cols; ++c) acc += double(s.a[r * x.cols + c]) * xt[c];
                h[size_t(r)] = acc;
            }
            float* yt = ys.data() + int64_t(t) * y.cols;
            for (int64_t o = 0; o < y.cols; ++o) {
                double acc = 0;
                for (int64_t r = 0; r < s.rank; ++r) acc += double(s.b[o * s.rank + r]) * h[size_t(r)];
                yt[o] = float(double(yt[o]) + double(s.scale) * acc);
            }
        }
    }
    write(y, ys.data());
}

}  // namespace pagoda::backend
