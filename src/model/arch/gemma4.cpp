// gemma4 (text, dense): the Gemma 4 decoder as llama.cpp's `gemma4` graph runs it. Per layer:
//   h = rms_norm(x) ; q = rms_norm_heads(h W_q) ; k = rms_norm_heads(h W_k)
//   v = rms_norm_heads(h W_v) with no weight (W_v absent: v is the raw h W_k, "V = K")
//   rope(q, k) ; kv_write(k, v) ; a = attention(q) with scale 1 (Q/K are RMS-normed instead)
//   x += rms_norm(a W_o) ; x += rms_norm((gelu(h' W_gate) * (h' W_up)) W_down) ; x *= layer_output_scale
// The 26B-A4B's layers add routed experts beside that FFN (emit_ffn below).
// Sliding layers (gemma4.attention.sliding_window_pattern, one bool per layer) rotate with
// gemma4.rope.freq_base_swa over gemma4.rope.dimension_count_swa dims; full layers with
// gemma4.rope.freq_base over gemma4.rope.dimension_count dims, divided by rope_freqs.weight.
// KV sharing: the last gemma4.attention.shared_kv_layers layers compute no K/V and attend over the
// cache of the last earlier layer of their kind (sliding or full). The embedding is scaled by
// sqrt(dim); the logits get gemma4.final_logit_softcapping.
// Per-layer shapes: sliding layers have gemma4.attention.key_length_swa values per head, full layers
// key_length, and head_count_kv may hold one count per layer. The paged KV has one row shape, the
// largest (ModelConfig: head_dim the larger size, n_kv_heads the largest count): a narrower layer's
// Q/K/V rows are padded with zero rows at load and its KV heads repeated up to the largest count
// (exact: zero columns add nothing to q.k, a repeated head is GQA's sharing spelled out), its Q/K/V
// norms run over the padded width with eps and weights rescaled so they equal the norm of the real
// values, and its attention output is compacted back (copy_columns) before attn_output. The cost is
// KV memory: every layer stores the largest row.
// The E2B/E4B models add per-layer embeddings (gemma4_per_layer.h) and may give each layer its own
// FFN width (feed_forward_length as an array, ModelConfig::layer_ffn_dim). Layers that share KV
// store none: the paged KV holds only the layers before the shared ones (BuiltModel::kv_layers).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/arch/gemma4_per_layer.h"
#include "model/arch/graph_emitter.h"
#include "model/arch/model_head.h"
#include "model/arch/moe_ffn.h"
#include "model/arch/rope_frequencies.h"
#include "model/arch/sliding_window.h"
#include "model/arch/tensor_binder.h"

namespace pagoda::model {
namespace {

constexpr const char* kArch = "gemma4";

void refuse_unsupported_forms(const gguf::File& file) {
    const std::string a = std::string(kArch) + ".";
    if (file.has(a + "attention.key_length_swa") && file.has(a + "attention.value_length_swa") &&
        file.get_int(a + "attention.key_length_swa") != file.get_int(a + "attention.value_length_swa"))
        fail("{}: gemma4 sliding layers' key length {} differs from their value length {}: not supported", file.name(),
             file.get_int(a + "attention.key_length_swa"), file.get_int(a + "attention.value_length_swa"));
}

// The layer whose cache layer i attends over: itself, or (KV sharing) the last layer before the
// shared ones that has the same kind.
std::vector<int32_t> kv_source_layers(const gguf::File& file, const std::vector<int32_t>& windows) {
    const auto n = int64_t(windows.size());
    const int64_t shared = file.get_int_or(std::string(kArch) + ".attention.shared_kv_layers", 0);
    if (shared < 0 || shared >= n) fail("{}: gemma4.attention.shared_kv_layers = {} is out of range for {} layers", file.name(), shared, n);
    std::vector<int32_t> src(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        src[size_t(i)] = int32_t(i);
        if (i < n - shared) continue;
        std::optional<int32_t> found;
        for (int64_t j = n - shared - 1; j >= 0 && !found; --j)
            if ((windows[size_t(j)] > 0) == (windows[size_t(i)] > 0)) found = int32_t(j);
        if (!found) fail("{}: gemma4 layer {} shares KV but no earlier layer of its kind has its own", file.name(), i);
        src[size_t(i)] = *found;
    }
    return src;
}

// The matrix `name` [cols, heads * hd] with its rows regrouped per head: each of `out_heads` heads
// takes source head h / (out_heads / heads)'s hd rows, then `pad` zero rows (bytes copied, zero rows
// zero bytes: exact in every stored type), kept alive by the model.
backend::MatrixSource padded_heads(BuiltModel& m, const gguf::File& f, const TensorBinder& bind, const std::string& name,
                                   int64_t cols, int64_t heads, int64_t hd, int64_t out_heads, int64_t pad) {
    const gguf::TensorInfo& t = bind.tensor(name, {cols, heads * hd});
    const auto row_bytes_or = gguf::row_size(t.type, cols);
    if (!row_bytes_or)
        fail("{}: tensor {}: {} columns are not whole blocks of {}", f.name(), name, cols, gguf::type_name(uint32_t(t.type)));
    const auto row_bytes = size_t(*row_bytes_or);
    const int64_t repeat = out_heads / heads;
    std::vector<uint8_t>& bytes = m.host_buffers.emplace_back(size_t(out_heads * (hd + pad)) * row_bytes, uint8_t(0));
    for (int64_t h = 0; h < out_heads; ++h)
        std::memcpy(bytes.data() + size_t(h * (hd + pad)) * row_bytes, t.data + size_t(h / repeat * hd) * row_bytes,
                    size_t(hd) * row_bytes);
    return {t.type, bytes.data(), out_heads * (hd + pad), cols, name, false};
}

// A per-head RMS norm weight of hd values for heads padded to `width`: scaled by sqrt(hd / width)
// and zero after hd. With eps scaled by hd / width at the op, the norm over the padded head equals
// the norm over its hd real values.
const backend::Vector& padded_norm(BuiltModel& m, backend::Backend& b, std::vector<float> w, int64_t width) {
    const float s = std::sqrt(float(w.size()) / float(width));
    for (float& v : w) v *= s;
    w.resize(size_t(width), 0.0f);
    m.vectors.push_back(b.upload_vector(w));
    return *m.vectors.back();
}

// The FFN of layer l on the residual x, before post_ffw_norm: the dense GELU-gated FFN, and on a
// layer with a router (the 26B-A4B) that FFN and the experts side by side, each with its own norms:
//   dense   = rms_norm(down(gelu(gate f) * up f), post_ffw_norm_1),   f = rms_norm(x, ffn_norm)
//   experts = rms_norm(moe(rms_norm(x, pre_ffw_norm_2)), post_ffw_norm_2)
// returning dense + experts. The router reads rms_norm(x) / sqrt(dim) * ffn_gate_inp.scale (folded
// into one norm weight here); softmax over the experts, top k renormalised, each chosen expert's
// output times its ffn_down_exps.scale; GELU (tanh) experts with gate|up fused or apart.
int emit_ffn(GraphEmitter& e, TensorBinder& bind, const gguf::File& file, const ModelConfig& c, backend::Backend& b,
             BuiltModel& m, int32_t l, int x) {
    const std::string p = fmt::format("blk.{}.", l);
    const bool experts = bind.has(p + "ffn_gate_inp.weight");
    const auto& gate_up = bind.matrix({{p + "ffn_gate.weight", c.dim, c.layer_ffn_dim(l)}, {p + "ffn_up.weight", c.dim, c.layer_ffn_dim(l)}});
    const auto& down = bind.matrix({{p + "ffn_down.weight", c.layer_ffn_dim(l), c.dim}});
    const int f = e.rms_norm(x, bind.vector(p + "ffn_norm.weight", c.dim), c.rms_eps, p + "ffn_in");
    const auto g_u = e.matmul(gate_up, f, {p + "gate", p + "up"}, l, MatmulInput::ffn);
    const int act = e.gelu_mul(g_u[0], g_u[1], p + "ffn_act");
    const int d = e.matmul(down, act, {p + (experts ? "ffn_dense" : "ffn_out")}, l, MatmulInput::ffn_down)[0];
    if (!experts) return d;
    if (c.n_experts == 0)
        fail("{}: tensor {}ffn_gate_inp.weight is present but key {}.expert_count is missing", file.name(), p, kArch);
    const int dense = e.rms_norm(d, bind.vector(p + "post_ffw_norm_1.weight", c.dim), c.rms_eps, p + "ffn_dense_post");
    std::vector<float> router_norm = bind.floats(p + "ffn_gate_inp.scale", c.dim);
    for (float& v : router_norm) {
        if (!std::isfinite(v)) fail("{}: {}ffn_gate_inp.scale holds a non-finite value {}", file.name(), p, v);
        v /= std::sqrt(float(c.dim));
    }
    m.vectors.push_back(b.upload_vector(router_norm));
    const int router_in = e.rms_norm(x, *m.vectors.back(), c.rms_eps, p + "router_in");
    const int h = e.rms_norm(x, bind.vector(p + "pre_ffw_norm_2.weight", c.dim), c.rms_eps, p + "moe_in");
    const int moe = emit_moe_ffn(e, bind, file, c, b, m, l, h,
                                 {.activation = backend::MoeActivation::gelu, .router_input = router_in});
    const int out = e.rms_norm(moe, bind.vector(p + "post_ffw_norm_2.weight", c.dim), c.rms_eps, p + "moe_post");
    e.add(out, dense);
    return out;
}

}  // namespace

BuiltModel build_gemma4(const gguf::File& file, const ModelConfig& c, backend::Backend& b) {
    const std::string a = std::string(kArch) + ".";
    refuse_unsupported_forms(file);
    if (!file.has(a + "attention.sliding_window")) fail("{}: {}attention.sliding_window is missing", file.name(), a);
    const std::vector<int32_t> windows = layer_windows(file, kArch, c.n_layers, file.get_int(a + "attention.sliding_window"), 6);
    const std::vector<int32_t> kv_src = kv_source_layers(file, windows);
    const float final_softcap = float(file.get_float_or(a + "final_logit_softcapping", 0.0));
    if (!(final_softcap >= 0)) fail("{}: {}final_logit_softcapping = {} is negative", file.name(), a, final_softcap);
    const double swa_theta = file.get_float_or(a + "rope.freq_base_swa", c.rope_theta);
    if (!(swa_theta > 1)) fail("{}: {}rope.freq_base_swa = {} is out of range", file.name(), a, swa_theta);
    const int64_t hd_full = file.get_int(a + "attention.key_length");
    const int64_t hd_swa = file.get_int_or(a + "attention.key_length_swa", hd_full);
    if (hd_full <= 0 || hd_swa <= 0 || hd_full % 2 || hd_swa % 2)
        fail("{}: gemma4 head sizes {} (full) and {} (sliding) must be positive and even", file.name(), hd_full, hd_swa);
    if (c.rope_dims > hd_full)
        fail("{}: {}rope.dimension_count = {} exceeds the full layers' head size {}", file.name(), a, c.rope_dims, hd_full);
    const int64_t swa_rope_dims = file.get_int_or(a + "rope.dimension_count_swa", hd_swa);
    if (swa_rope_dims <= 0 || swa_rope_dims > hd_swa || swa_rope_dims % 2 != 0)
        fail("{}: {}rope.dimension_count_swa = {} must be even and at most the sliding head size {}", file.name(), a,
             swa_rope_dims, hd_swa);
    // Per layer: its KV-head count (one per layer, or one for all; config.cpp checked each divides the largest).
    std::vector<int64_t> kv_counts(size_t(c.n_layers), c.n_kv_heads);
    if (const auto* v = file.find(a + "attention.head_count_kv"); v && v->as_array()) {
        if (int64_t(v->as_array()->items.size()) != c.n_layers)
            fail("{}: {}attention.head_count_kv has {} entries for {} layers", file.name(), a, v->as_array()->items.size(),
                 c.n_layers);
        for (size_t i = 0; i < kv_counts.size(); ++i) kv_counts[i] = v->as_array()->items[i].as_int().value_or(0);
    }
    const int64_t width = c.head_dim;  // the paged KV's row: the larger head size

    BuiltModel m;
    TensorBinder bind(file, b, m);
    GraphEmitter e(m.graph);
    const ModelHead head = bind_model_head(bind, c);
    // Full layers divide their frequencies by rope_freqs.weight (head size / 2 values; llama.cpp's
    // "proportional RoPE"), where the file has it.
    std::vector<float> factors;
    if (bind.has("rope_freqs.weight")) {
        factors = bind.floats("rope_freqs.weight", hd_full / 2);
        for (float v : factors)
            if (!(v > 0)) fail("{}: rope_freqs.weight holds a non-positive factor {}", file.name(), v);
        factors.resize(size_t(c.rope_dims / 2));
    }
    const auto& global_rope = bind.rope(make_rope_spec(c.rope_dims, true, c.rope_theta, c.rope_linear_scale, factors));
    const auto& local_rope = bind.rope(make_rope_spec(swa_rope_dims, true, swa_theta, 1.0, {}));
    m.kv_dtype = file.find_tensor("blk.0.attn_q.weight")->type == gguf::GgmlType::F32 ? kv::KvDtype::f32 : kv::KvDtype::f16;

    const auto heads = int32_t(c.n_heads), kv_heads = int32_t(c.n_kv_heads), hd = int32_t(width);
    int x = e.embed(head.embedding, "x");
    e.scale(x, std::sqrt(float(c.dim)));
    // Image soft tokens (the gemma4v projector's rows) replace their rows after the scale, as HF scatters
    // the image features into the scaled token embeddings; the per-layer inputs then read them too.
    e.input_embeddings(x);
    const PerLayerInputs per_layer = emit_per_layer_inputs(e, bind, file, c, b, x);
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const auto l = int32_t(i);
        const std::string p = fmt::format("blk.{}.", i);
        const int32_t window = windows[size_t(i)];
        const bool own_kv = kv_src[size_t(i)] == l;
        const int64_t hd_l = window > 0 ? hd_swa : hd_full, kv_l = kv_counts[size_t(i)], pad = width - hd_l;
        if (pad > 0 && !b.supports(backend::OpKind::copy_columns))
            fail("{}: the {} backend has no copy_columns op, which gemma4's layers of the smaller head size ({} of {}) need",
                 file.name(), b.name(), hd_l, width);
        // Q, K and V in the paged KV's shape: `width` values a head, the largest KV-head count.
        std::vector<backend::MatrixSource> parts{
            padded_heads(m, file, bind, p + "attn_q.weight", c.dim, c.n_heads, hd_l, c.n_heads, pad)};
        const bool v_is_k = !bind.has(p + "attn_v.weight");
        if (own_kv) {
            parts.push_back(padded_heads(m, file, bind, p + "attn_k.weight", c.dim, kv_l, hd_l, c.n_kv_heads, pad));
            // V = K: the same rows once more, as V's own operand (normed differently from K).
            parts.push_back(padded_heads(m, file, bind, p + (v_is_k ? "attn_k.weight" : "attn_v.weight"), c.dim, kv_l, hd_l,
                                         c.n_kv_heads, pad));
        }
        const auto& qkv = bind.upload(std::move(parts));
        const auto& wo = bind.matrix({{p + "attn_output.weight", c.n_heads * hd_l, c.dim}});
        const float eps = c.rms_eps * float(hd_l) / float(width);  // the padded norms' (padded_norm)

        const int h = e.rms_norm(x, bind.vector(p + "attn_norm.weight", c.dim), c.rms_eps, p + "attn_in");
        const auto q_k_v = own_kv ? e.matmul(qkv, h, {p + "q", p + "k", p + "v"}, l, MatmulInput::attention)
                                  : e.matmul(qkv, h, {p + "q"}, l, MatmulInput::attention);
        const backend::Rope& rope = window > 0 ? local_rope : global_rope;
        e.rms_norm_heads(q_k_v[0], padded_norm(m, b, bind.floats(p + "attn_q_norm.weight", hd_l), width), eps, heads);
        e.rope(q_k_v[0], rope, heads, hd);
        if (own_kv) {
            e.rms_norm_heads(q_k_v[1], padded_norm(m, b, bind.floats(p + "attn_k_norm.weight", hd_l), width), eps, kv_heads);
            // V's RMS norm has no weight: ones.
            e.rms_norm_heads(q_k_v[2], padded_norm(m, b, std::vector<float>(size_t(hd_l), 1.0f), width), eps, kv_heads);
            e.rope(q_k_v[1], rope, kv_heads, hd);
            e.kv_write(l, q_k_v[1], q_k_v[2]);
        }
        const backend::AttentionParams attention{.n_heads = heads, .scale = 1.0f, .sliding_window = window};
        if (!b.supports_attention(attention))
            fail("{}: the {} backend cannot run layer {}'s attention (window {})", file.name(), b.name(), i, window);
        int att = e.attention(kv_src[size_t(i)], q_k_v[0], attention, hd, p + "attn");
        if (pad > 0)  // back to hd_l values a head (the padding's are zero) for attn_output
            att = e.copy_columns(att, -1, {.n_heads = heads, .width = hd_l, .src_stride = width, .dst_stride = hd_l},
                                 c.n_heads * hd_l, p + "attn_compact");
        const int o = e.matmul(wo, att, {p + "attn_out"}, l, MatmulInput::attention_output)[0];
        e.add(x, e.rms_norm(o, bind.vector(p + "post_attention_norm.weight", c.dim), c.rms_eps, p + "attn_post"));

        e.add(x, e.rms_norm(emit_ffn(e, bind, file, c, b, m, l, x), bind.vector(p + "post_ffw_norm.weight", c.dim), c.rms_eps,
                            p + "ffn_post"));
        emit_per_layer_block(e, bind, c, per_layer, l, x);
        // layer_output_scale: one stored scalar multiplying the layer's output (residual included).
        if (bind.has(p + "layer_output_scale.weight")) {
            const float s = bind.floats(p + "layer_output_scale.weight", 1)[0];
            if (!std::isfinite(s)) fail("{}: {}layer_output_scale.weight = {} is not finite", file.name(), p, s);
            e.scale(x, s);
        }
    }
    emit_model_head(e, m, head, x, c.rms_eps, final_softcap);
    // The sharing layers are the last ones and attend over earlier layers' KV: the cache holds only
    // the layers before them.
    const auto own = int32_t(std::count_if(kv_src.begin(), kv_src.end(), [i = 0](int32_t s) mutable { return s == i++; }));
    if (own < c.n_layers) m.kv_layers = own;
    return m;
}

}  // namespace pagoda::model
