#include "model/arch/gated_delta_net.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/arch/graph_emitter.h"
#include "model/arch/model_head.h"
#include "model/arch/moe_ffn.h"
#include "model/arch/rope_frequencies.h"
#include "model/arch/tensor_binder.h"

namespace pagoda::model {

DeltaShape read_delta_shape(const gguf::File& f, const std::string& a) {
    auto key = [&](const std::string& k) {
        if (!f.has(a + k)) fail("{}: key {}{} is missing", f.name(), a, k);
        const int64_t v = f.get_int(a + k);
        if (v <= 0 || v > (int64_t(1) << 20)) fail("{}: {}{} = {} is out of range", f.name(), a, k, v);
        return v;
    };
    DeltaShape d;
    d.kernel = key("ssm.conv_kernel");
    d.head = key("ssm.state_size");
    d.v_heads = key("ssm.time_step_rank");
    d.k_heads = key("ssm.group_count");
    const int64_t inner = key("ssm.inner_size");
    if (d.kernel < 2) fail("{}: {}ssm.conv_kernel = {} (at least 2 taps)", f.name(), a, d.kernel);
    if (d.v_heads % d.k_heads)
        fail("{}: {} value heads (ssm.time_step_rank) are not a multiple of {} key heads (ssm.group_count)", f.name(),
             d.v_heads, d.k_heads);
    if (inner != d.v_heads * d.head)
        fail("{}: {}ssm.inner_size = {} is not {} value heads x the key head size {}: value heads of another size "
             "than the key heads are not supported", f.name(), a, inner, d.v_heads, d.head);
    return d;
}

std::vector<bool> recurrent_layers(const gguf::File& f, const std::string& a, int64_t n_layers) {
    std::vector<bool> out(static_cast<size_t>(n_layers), false);
    if (const auto* v = f.find(a + "attention.recurrent_layers"); v && v->as_array()) {
        const auto& items = v->as_array()->items;
        if (int64_t(items.size()) < n_layers)
            fail("{}: {}attention.recurrent_layers has {} entries for {} layers", f.name(), a, items.size(), n_layers);
        for (int64_t i = 0; i < n_layers; ++i) out[size_t(i)] = items[size_t(i)].as_int().value_or(0) != 0;
        return out;
    }
    const int64_t interval = f.get_int_or(a + "full_attention_interval", 4);
    if (interval < 1 || interval > n_layers + 1)
        fail("{}: {}full_attention_interval = {} is out of range", f.name(), a, interval);
    for (int64_t i = 0; i < n_layers; ++i) out[size_t(i)] = (i + 1) % interval != 0;
    return out;
}

namespace {

// The convolved q (or k: `offset` key_dim) as one key head per value head, in grouped order: value
// head g * group + j reads key head g. With one value head per key head the plain columns.
int per_value_head_keys(GraphEmitter& e, int mixed, const DeltaShape& d, int64_t offset, const std::string& name) {
    if (d.group() == 1) return e.copy_columns(mixed, -1, {.width = d.key_dim(), .src_offset = offset}, d.key_dim(), name);
    int out = -1;
    for (int64_t j = 0; j < d.group(); ++j)
        out = e.copy_columns(mixed, out,
                             {.n_heads = int32_t(d.k_heads), .width = d.head, .src_stride = d.head, .src_offset = offset,
                              .dst_stride = d.group() * d.head, .dst_offset = j * d.head},
                             d.v_heads * d.head, name);
    return out;
}

// The DeltaNet mixer of layer `l` on its projected inputs; returns its output (T x dim).
int emit_delta_net(GraphEmitter& e, BuiltModel& m, TensorBinder& bind, const gguf::File& file, const ModelConfig& c,
                   const DeltaShape& d, ValueHeads order, int32_t l, const DeltaInputs& in, backend::Backend& b) {
    Graph& g = m.graph;
    const std::string p = fmt::format("blk.{}.", l);
    const auto& out_w = bind.matrix({{p + "ssm_out.weight", d.value_dim(), c.dim}});
    const std::vector<float> conv = bind.all_floats(p + "ssm_conv1d.weight", {d.kernel, d.conv_dim()});
    Node::DeltaGates gates{.dt_bias = bind.floats(p + "ssm_dt.bias", d.v_heads), .a = bind.floats(p + "ssm_a", d.v_heads)};
    for (float a : gates.a)
        if (!(a <= 0) || !std::isfinite(a))
            fail("{}: {}ssm_a holds {}: the decay rates must be -exp(A_log) <= 0", file.name(), p, a);
    const auto& norm = bind.vector(p + "ssm_norm.weight", d.head);
    g.nodes.push_back({.kind = OpKind::delta_gates, .in = {in.alpha, in.beta}, .out = {in.alpha, in.beta},
                       .gates = std::move(gates)});

    m.vectors.push_back(b.upload_vector(conv));
    const int conv_state = g.add_tensor(p + "conv_state", Rows::state, (d.kernel - 1) * d.conv_dim());
    const int mixed = g.add_tensor(p + "qkv_conv", Rows::tokens, d.conv_dim());
    g.nodes.push_back({.kind = OpKind::causal_conv1d, .in = {in.qkv, conv_state}, .out = {mixed},
                       .conv = {.weight = m.vectors.back().get(), .kernel = int32_t(d.kernel), .silu = true}});
    const bool grouped = order == ValueHeads::grouped && d.group() > 1;
    const int q = grouped ? per_value_head_keys(e, mixed, d, 0, p + "q")
                          : e.copy_columns(mixed, -1, {.width = d.key_dim()}, d.key_dim(), p + "q");
    const int k = grouped ? per_value_head_keys(e, mixed, d, d.key_dim(), p + "k")
                          : e.copy_columns(mixed, -1, {.width = d.key_dim(), .src_offset = d.key_dim()}, d.key_dim(),
                                           p + "k");
    const int v = e.copy_columns(mixed, -1, {.width = d.value_dim(), .src_offset = 2 * d.key_dim()}, d.value_dim(), p + "v");

    const int state = g.add_tensor(p + "delta_state", Rows::state, d.v_heads * d.head * d.head);
    const int o = g.add_tensor(p + "delta_out", Rows::tokens, d.value_dim());
    g.nodes.push_back({.kind = OpKind::gated_delta_rule, .in = {q, k, v, in.alpha, in.beta, state}, .out = {o},
                       .delta = {.n_k_heads = int32_t(grouped ? d.v_heads : d.k_heads), .n_v_heads = int32_t(d.v_heads),
                                 .head_dim = int32_t(d.head), .scale = 1.0f / std::sqrt(float(d.head)),
                                 .l2_eps = c.rms_eps}});
    e.rms_norm_heads(o, norm, c.rms_eps, int32_t(d.v_heads));
    const int gated = e.silu_mul(in.z, o, p + "delta_gated");
    return e.matmul(out_w, gated, {p + "delta_proj"}, l, MatmulInput::attention_output)[0];
}

// The gated full attention of layer `l` (KV layer `kv_layer`) on the normed input h.
int emit_gated_attention(GraphEmitter& e, TensorBinder& bind, const ModelConfig& c, const backend::Rope& rope,
                         int32_t l, int32_t kv_layer, int h) {
    const std::string p = fmt::format("blk.{}.", l);
    const auto heads = int32_t(c.n_heads), kv_heads = int32_t(c.n_kv_heads), hd = int32_t(c.head_dim);
    const auto& qg_w = bind.matrix({{p + "attn_q.weight", c.dim, 2 * c.q_dim()}});
    const auto& kv_w = bind.matrix({{p + "attn_k.weight", c.dim, c.kv_dim()}, {p + "attn_v.weight", c.dim, c.kv_dim()}});
    const auto& wo = bind.matrix({{p + "attn_output.weight", c.q_dim(), c.dim}});
    const int qg = e.matmul(qg_w, h, {p + "q_gate"}, l, MatmulInput::attention)[0];
    const auto k_v = e.matmul(kv_w, h, {p + "k", p + "v"}, l, MatmulInput::attention);
    const int q = e.copy_columns(qg, -1, {.n_heads = heads, .width = hd, .src_stride = 2 * hd, .dst_stride = hd},
                                 c.q_dim(), p + "q");
    const int gate = e.copy_columns(qg, -1, {.n_heads = heads, .width = hd, .src_stride = 2 * hd, .src_offset = hd,
                                             .dst_stride = hd}, c.q_dim(), p + "gate");
    e.rms_norm_heads(q, bind.vector(p + "attn_q_norm.weight", c.head_dim), c.rms_eps, heads);
    e.rms_norm_heads(k_v[0], bind.vector(p + "attn_k_norm.weight", c.head_dim), c.rms_eps, kv_heads);
    e.rope(q, rope, heads, hd);
    e.rope(k_v[0], rope, kv_heads, hd);
    e.kv_write(kv_layer, k_v[0], k_v[1]);
    const int a = e.attention(kv_layer, q, {.n_heads = heads, .scale = 1.0f / std::sqrt(float(c.head_dim))}, hd, p + "attn");
    const int gated = e.sigmoid_mul(gate, a, p + "attn_gated");
    return e.matmul(wo, gated, {p + "attn_out"}, l, MatmulInput::attention_output)[0];
}

}  // namespace

BuiltModel build_gated_delta_hybrid(const gguf::File& file, const ModelConfig& c, backend::Backend& b,
                                    const HybridSpec& spec) {
    for (auto op : {backend::OpKind::causal_conv1d, backend::OpKind::gated_delta_rule, backend::OpKind::sigmoid_mul,
                    backend::OpKind::copy_columns})
        if (!b.supports(op))
            fail("{}: backend {} has no {} op, which {}'s gated DeltaNet layers need", file.name(), b.name(),
                 backend::op_name(op), c.arch);
    const std::string a = c.arch + ".";
    const DeltaShape d = read_delta_shape(file, a);
    const std::vector<bool> recurrent = recurrent_layers(file, a, c.n_layers);
    BuiltModel m;
    TensorBinder bind(file, b, m);
    GraphEmitter e(m.graph);
    const ModelHead head = bind_model_head(bind, c);
    const auto& rope = bind.rope(make_rope_spec(c.rope_dims, true, c.rope_theta, c.rope_linear_scale, {}));
    m.kv_dtype = file.find_tensor("token_embd.weight")->type == gguf::GgmlType::F32 ? kv::KvDtype::f32 : kv::KvDtype::f16;

    int x = e.embed(head.embedding, "x");
    int32_t kv_layer = 0;
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const auto l = int32_t(i);
        const std::string p = fmt::format("blk.{}.", i);
        const int h = e.rms_norm(x, bind.vector(p + "attn_norm.weight", c.dim), c.rms_eps, p + "attn_in");
        const int mixed = recurrent[size_t(i)]
                              ? emit_delta_net(e, m, bind, file, c, d, spec.value_heads, l, spec.project(e, bind, l, h), b)
                              : emit_gated_attention(e, bind, c, rope, l, kv_layer++, h);
        e.add(x, mixed);
        const int f = e.rms_norm(x, bind.vector(p + "post_attention_norm.weight", c.dim), c.rms_eps, p + "ffn_in");
        const int out = spec.moe ? emit_moe_ffn(e, bind, file, c, b, m, i, f,
                                                {.shared_expert = c.shared_expert_ffn_dim > 0, .shared_gate = true})
                                 : emit_swiglu_ffn(e, bind, c, l, f);
        e.add(x, out);
    }
    if (kv_layer == 0) fail("{}: every layer is recurrent: {} needs at least one full attention layer", file.name(), c.arch);
    m.kv_layers = kv_layer;
    emit_model_head(e, m, head, x, c.rms_eps);
    return m;
}

}  // namespace pagoda::model
