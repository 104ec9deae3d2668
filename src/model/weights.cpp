#include "model/weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::model {
namespace {

std::string shape_string(const std::vector<int64_t>& s) {
    return fmt::format("[{}]", fmt::join(s, ", "));
}

class Binder {
public:
    Binder(const gguf::File& f) : f_(f) {}

    const gguf::TensorInfo* find(const std::string& name) const { return f_.find_tensor(name); }

    const gguf::TensorInfo& require(const std::string& name, std::vector<int64_t> shape) const {
        const auto* t = f_.find_tensor(name);
        if (!t) fail("{}: tensor {} is missing", f_.name(), name);
        if (t->shape != shape)
            fail("{}: tensor {} has shape {}, expected {}", f_.name(), name, shape_string(t->shape),
                 shape_string(shape));
        return *t;
    }

    kernels::WeightView matrix(const std::string& name, int64_t cols, int64_t rows) const {
        const auto& t = require(name, {cols, rows});
        kernels::require_matmul_support(t.type, fmt::format("{}: tensor {}", f_.name(), name));
        return {t.type, t.data, rows, cols};
    }

    std::vector<float> vector(const std::string& name, int64_t n) const { return to_f32(require(name, {n})); }

    std::vector<float> to_f32(const gguf::TensorInfo& t) const {
        kernels::require_matmul_support(t.type, fmt::format("{}: tensor {}", f_.name(), t.name));
        int64_t n = t.n_elements();
        std::vector<float> out(static_cast<size_t>(n));
        kernels::WeightView view{t.type, t.data, 1, n};
        kernels::dequantize_row(view, 0, out.data());
        return out;
    }

private:
    const gguf::File& f_;
};

// A packed weight never reads its source again (unless the kernel method changes at run time, when
// the pages fault back in from the page cache): drop the file pages it touched while packing from
// this process, so a model does not count twice in resident memory. Whole pages inside each part
// only; the file mapping is read-only.
void release_source_pages(const kernels::PackedWeight& w) {
    if (!w.is_packed()) return;
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    for (const auto& part : w.parts()) {
        const auto begin = reinterpret_cast<uintptr_t>(part.data);
        const uintptr_t bytes = part.bytes();
        const uintptr_t first = (begin + page - 1) / page * page, last = (begin + bytes) / page * page;
        if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
    }
}

kernels::PackedWeight pack_and_release(const kernels::WeightView& v) {
    kernels::PackedWeight w = kernels::pack_weight(v);
    release_source_pages(w);
    return w;
}

// Matrices that read the same input are stacked into one packed weight when they share a type and
// a packed kernel takes it: one pass, the input quantised once, one parallel region instead of
// several. Otherwise (types differ, e.g. Q4_K_M's Q6_K attn_v, or no packed kernel) one per matrix.
std::vector<kernels::PackedWeight> stack_if_packed(const std::vector<kernels::WeightView>& parts) {
    bool same = true;
    for (const auto& v : parts) same = same && v.type == parts[0].type;
    if (same) {
        kernels::PackedWeight stacked = kernels::pack_weights(parts);
        if (stacked.is_packed()) {
            release_source_pages(stacked);
            return {std::move(stacked)};
        }
    }
    std::vector<kernels::PackedWeight> out;
    for (const auto& v : parts) out.push_back(pack_and_release(v));
    return out;
}

}  // namespace

ModelWeights bind_weights(const gguf::File& file, const ModelConfig& c) {
    Binder b(file);
    ModelWeights w;
    w.token_embd = b.matrix("token_embd.weight", c.dim, c.vocab_size);
    w.output_norm = b.vector("output_norm.weight", c.dim);
    if (b.find("output.weight")) {
        w.output = pack_and_release(b.matrix("output.weight", c.dim, c.vocab_size));
    } else {
        w.output = pack_and_release(w.token_embd);
        w.tied_output = true;
    }
    if (const auto* t = b.find("rope_freqs.weight")) {
        if (t->shape != std::vector<int64_t>{c.rope_dims / 2})
            fail("{}: tensor rope_freqs.weight has shape {}, expected [{}]", file.name(), shape_string(t->shape),
                 c.rope_dims / 2);
        w.rope_freq_factors = b.to_f32(*t);
        for (float v : w.rope_freq_factors)
            if (!(v > 0)) fail("{}: rope_freqs.weight holds a non-positive factor {}", file.name(), v);
    }
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const std::string p = fmt::format("blk.{}.", i);
        LayerWeights l;
        l.attn_norm = b.vector(p + "attn_norm.weight", c.dim);
        l.qkv = stack_if_packed({b.matrix(p + "attn_q.weight", c.dim, c.q_dim()),
                                 b.matrix(p + "attn_k.weight", c.dim, c.kv_dim()),
                                 b.matrix(p + "attn_v.weight", c.dim, c.kv_dim())});
        l.wo = pack_and_release(b.matrix(p + "attn_output.weight", c.q_dim(), c.dim));
        if (c.qkv_bias) {
            l.bq = b.vector(p + "attn_q.bias", c.q_dim());
            l.bk = b.vector(p + "attn_k.bias", c.kv_dim());
            l.bv = b.vector(p + "attn_v.bias", c.kv_dim());
        }
        l.ffn_norm = b.vector(p + "ffn_norm.weight", c.dim);
        l.gate_up = stack_if_packed({b.matrix(p + "ffn_gate.weight", c.dim, c.ffn_dim),
                                     b.matrix(p + "ffn_up.weight", c.dim, c.ffn_dim)});
        l.w_down = pack_and_release(b.matrix(p + "ffn_down.weight", c.ffn_dim, c.dim));
        w.layers.push_back(std::move(l));
    }
    return w;
}

}  // namespace pagoda::model
