#include "backend/backend.h"

#include <vector>

#include "core/error.h"

namespace pagoda::backend {

int64_t Weight::rows() const {
    int64_t n = 0;
    for (const auto& p : parts_) n += p.rows;
    return n;
}

const char* fused_op_name(FusedOp op) {
    switch (op) {
        case FusedOp::add_rms_norm: return "add_rms_norm";
        case FusedOp::qkv_rope_kv_write: return "qkv_rope_kv_write";
        case FusedOp::matmul_silu_mul: return "matmul_silu_mul";
        case FusedOp::norm_quantize: return "norm_quantize";
        case FusedOp::lora_in_fused: return "lora_in_fused";
    }
    return "?";
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

// The fusion pass only emits what a backend declares, so reaching these is a bug in the caller.
const char* optional_op_name(OptionalOp op) {
    switch (op) {
        case OptionalOp::layer_norm: return "layer_norm";
        case OptionalOp::gelu: return "gelu";
        case OptionalOp::position_embedding: return "position_embedding";
        case OptionalOp::copy_columns: return "copy_columns";
    }
    return "?";
}

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
void Backend::rms_norm_quantize(const Tensor&, const Tensor*, const Vector&, float, const Tensor&, const Tensor&) {
    fail("backend {} has no fused rms_norm_quantize", name());
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
