// bert, nomic-bert and jina-bert-v2: the BERT-family encoders (bge, e5, gte; RoBERTa / XLM-R as llama.cpp's
// converter writes them, as `bert`; nomic-embed as `nomic-bert`) by llama.cpp's GGUF tensor names.
// Post-norm, bidirectional:
//   x = token_embd[tok] + token_types[type] (+ position_embd[pos]) ; x = LN(x)       (token_embd_norm)
//   per layer:  q, k, v = x W_qkv (+ b) ; (rope(q, k)) ; kv_write(k, v) ; a = attention(q), not causal
//               x = LN(x + a W_o (+ b_o))                                           (attn_output_norm)
//               x = LN(x + ffn(x))                                                  (layer_output_norm)
// bert: learned positions, every projection with a bias, ffn(x) = gelu(x W_up + b_up) W_down + b_down.
// nomic-bert: no position table but NEOX RoPE on Q and K ({arch}.rope.freq_base), no biases, one fused
// attn_qkv, and ffn(x) = (silu(x W_gate) * (x W_up)) W_down (SwiGLU). Either way a bias or ffn_gate is
// used when the file has it, so the builder follows the tensors.
// jina-bert-v2 (jina-embeddings-v2, jina-reranker-v1): no positions at all but an ALiBi bias in
// attention (slopes from max bias 8, backend/alibi.h), attn_q/k/v and attn_output with biases,
// optional LayerNorms over the whole Q and K (attn_q_norm / attn_k_norm, the -code variant), an
// optional second post-attention norm (attn_norm_2: x = LN2(LN(x + a) + x), the -code variant's
// layer_norm_1), and a GEGLU FFN: gelu(x W_gate) * (x W_up) with ffn_gate and ffn_up, or one fused
// ffn_up of 2 x FFN rows whose first half is the gate (llama.cpp's geglu), or, with a plain ffn_up
// (+ bias), gelu(x W_up + b); ffn_down has a bias.
// The output is the hidden state of every pooled row (no final norm, no head): an embedding model.
// Positions are the learned table's rows from 0 (llama.cpp's converter drops RoBERTa's padding_idx + 1
// offset rows, so GGUF positions start at 0 for every family here). Token types: with one row
// (RoBERTa, XLM-R) every token is type 0, so that row is added as a bias; with more (BERT: 2) each
// token adds its type's row from the step's token types (a cross-encoder's text pair: 0 for the
// first text, 1 for the second; 0 for all when the step gives none). Q|K|V come as attn_q/k/v or
// one fused attn_qkv. The attention's causality comes from {arch}.attention.causal (false).
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/arch/graph_emitter.h"
#include "model/arch/rope_frequencies.h"
#include "model/arch/tensor_binder.h"

namespace pagoda::model {

namespace {

// jina-bert-v2's FFN forms (header comment).
enum class JinaFfn { none, gate_up, fused, gelu };

BuiltModel build_encoder(const gguf::File& file, const ModelConfig& c, backend::Backend& b) {
    const bool jina = c.arch == "jina-bert-v2";
    const bool learned_positions = !jina && file.find_tensor("position_embd.weight") != nullptr;
    const bool swiglu = !jina && file.find_tensor("blk.0.ffn_gate.weight") != nullptr;
    JinaFfn jina_ffn = JinaFfn::none;
    if (jina) {
        const auto* up = file.find_tensor("blk.0.ffn_up.weight");
        if (!up || up->shape.size() != 2) fail("{}: tensor blk.0.ffn_up.weight is missing or not 2-D", file.name());
        jina_ffn = file.find_tensor("blk.0.ffn_gate.weight") ? JinaFfn::gate_up
                   : up->shape[1] == 2 * c.ffn_dim           ? JinaFfn::fused
                                                             : JinaFfn::gelu;
    }
    std::vector<backend::OpKind> needed = {backend::OpKind::layer_norm};
    if (!swiglu && (!jina || jina_ffn == JinaFfn::gelu)) needed.push_back(backend::OpKind::gelu);
    const auto* types_info = file.find_tensor("token_types.weight");
    const bool typed = types_info && types_info->shape.size() == 2 && types_info->shape[1] > 1;
    if (learned_positions) needed.push_back(backend::OpKind::position_embedding);
    if (typed) needed.push_back(backend::OpKind::token_type_embedding);
    for (auto op : needed)
        if (!b.supports(op))
            fail("{}: the {} backend cannot run {} models: it has no {} op (use --backend cpu)", file.name(), b.name(),
                 c.arch, backend::op_name(op));
    const auto heads = int32_t(c.n_heads), hd = int32_t(c.head_dim);
    // llama.cpp sets jina-bert-v2's max ALiBi bias to 8 (the ALiBi paper's); no key carries it.
    const backend::AttentionParams attention{.n_heads = heads, .scale = 1.0f / std::sqrt(float(c.head_dim)),
                                             .causal = c.causal, .alibi_max_bias = jina ? 8.0f : 0.0f};
    if (!b.supports_attention(attention))
        fail("{}: the {} backend cannot run {} models: it has no {} attention (use --backend cpu)", file.name(),
             b.name(), c.arch, jina ? "ALiBi" : "non-causal");
    if (c.n_kv_heads != c.n_heads) fail("{}: {} has {} KV heads for {} heads; BERT has no GQA", file.name(), c.arch,
                                        c.n_kv_heads, c.n_heads);
    BuiltModel m;
    TensorBinder bind(file, b, m);
    GraphEmitter e(m.graph);
    if (!learned_positions && c.arch == "bert") fail("{}: tensor position_embd.weight is missing", file.name());
    const auto& embd = bind.matrix({{"token_embd.weight", c.dim, c.vocab_size}}, backend::WeightUse::embedding);
    const backend::Weight* positions = nullptr;
    const backend::Rope* rope = nullptr;
    if (learned_positions) {
        const auto* info = file.find_tensor("position_embd.weight");
        if (info->shape.size() != 2) fail("{}: tensor position_embd.weight must be 2-D", file.name());
        m.max_positions = info->shape[1];
        positions = &bind.matrix({{"position_embd.weight", c.dim, m.max_positions}}, backend::WeightUse::embedding);
    } else if (!jina) {
        rope = &bind.rope(make_rope_spec(c.rope_dims, c.rope_style == RopeStyle::neox, c.rope_theta, c.rope_linear_scale, {}));
    }
    m.kv_dtype = file.find_tensor("token_embd.weight")->type == gguf::GgmlType::F32 ? kv::KvDtype::f32 : kv::KvDtype::f16;

    int x = e.embed(embd, "x");
    if (const auto* types = file.find_tensor("token_types.weight")) {
        if (types->shape.size() != 2 || types->shape[1] < 1 || types->shape[1] > 64)
            fail("{}: tensor token_types.weight must be 2-D with 1..64 rows", file.name());
        m.n_token_types = int32_t(types->shape[1]);
        if (m.n_token_types == 1) {
            const std::vector<float> type0 = bind.matrix_row("token_types.weight", c.dim, 1, 0);
            m.vectors.push_back(b.upload_vector(type0));
            e.add_bias(x, *m.vectors.back());
        } else {
            e.add_token_type_embedding(
                x, bind.matrix({{"token_types.weight", c.dim, m.n_token_types}}, backend::WeightUse::embedding));
        }
    }
    if (positions) e.add_position_embedding(x, *positions);
    auto norm = [&](int in, const std::string& name, const std::string& out) {
        return e.layer_norm(in, bind.vector(name + ".weight", c.dim), bind.vector(name + ".bias", c.dim), c.norm_eps, out);
    };
    auto optional_bias = [&](int y, const std::string& name, int64_t n) {
        if (bind.has(name)) e.add_bias(y, bind.vector(name, n));
    };
    x = norm(x, "token_embd_norm", "x_norm");
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const auto l = int32_t(i);
        const std::string p = fmt::format("blk.{}.", i);
        const bool fused = bind.has(p + "attn_qkv.weight");
        const auto& qkv = fused ? bind.split_matrix(p + "attn_qkv.weight", c.dim,
                                                    {{"q", c.q_dim()}, {"k", c.kv_dim()}, {"v", c.kv_dim()}})
                                : bind.matrix({{p + "attn_q.weight", c.dim, c.q_dim()},
                                               {p + "attn_k.weight", c.dim, c.kv_dim()},
                                               {p + "attn_v.weight", c.dim, c.kv_dim()}});
        const auto q_k_v = e.matmul(qkv, x, {p + "q", p + "k", p + "v"}, l, MatmulInput::attention);
        if (fused && bind.has(p + "attn_qkv.bias")) {
            const std::vector<float> bias = bind.floats(p + "attn_qkv.bias", c.q_dim() + 2 * c.kv_dim());
            const int64_t sizes[3] = {c.q_dim(), c.kv_dim(), c.kv_dim()};
            int64_t at = 0;
            for (int part = 0; part < 3; ++part) {
                m.vectors.push_back(b.upload_vector(std::span(bias).subspan(size_t(at), size_t(sizes[part]))));
                e.add_bias(q_k_v[size_t(part)], *m.vectors.back());
                at += sizes[part];
            }
        } else if (!fused && bind.has(p + "attn_q.bias")) {
            e.add_bias(q_k_v[0], bind.vector(p + "attn_q.bias", c.q_dim()));
            e.add_bias(q_k_v[1], bind.vector(p + "attn_k.bias", c.kv_dim()));
            e.add_bias(q_k_v[2], bind.vector(p + "attn_v.bias", c.kv_dim()));
        }
        if (rope) {
            e.rope(q_k_v[0], *rope, heads, hd);
            e.rope(q_k_v[1], *rope, heads, hd);
        }
        int q = q_k_v[0], k = q_k_v[1];
        // jina-bert-v2-code: LayerNorm over the whole Q and K rows (not per head), as llama.cpp does.
        if (jina && bind.has(p + "attn_q_norm.weight"))
            q = e.layer_norm(q, bind.vector(p + "attn_q_norm.weight", c.q_dim()), bind.vector(p + "attn_q_norm.bias", c.q_dim()),
                             c.norm_eps, p + "q_normed");
        if (jina && bind.has(p + "attn_k_norm.weight"))
            k = e.layer_norm(k, bind.vector(p + "attn_k_norm.weight", c.kv_dim()), bind.vector(p + "attn_k_norm.bias", c.kv_dim()),
                             c.norm_eps, p + "k_normed");
        e.kv_write(l, k, q_k_v[2]);
        const int a = e.attention(l, q, attention, hd, p + "attn");
        const auto& wo = bind.matrix({{p + "attn_output.weight", c.q_dim(), c.dim}});
        const int o = e.matmul(wo, a, {p + "attn_out"}, l, MatmulInput::attention_output)[0];
        optional_bias(o, p + "attn_output.bias", c.dim);
        if (jina && bind.has(p + "attn_norm_2.weight")) {  // the layer input is added twice
            e.add(o, x);
            const int once = norm(o, p + "attn_output_norm", p + "attn_normed");
            e.add(once, x);
            x = norm(once, p + "attn_norm_2", p + "attn_normed_2");
        } else {
            e.add(x, o);
            x = norm(x, p + "attn_output_norm", p + "attn_normed");
        }
        const auto& down = bind.matrix({{p + "ffn_down.weight", c.ffn_dim, c.dim}});
        int h;
        if (jina_ffn == JinaFfn::gate_up || jina_ffn == JinaFfn::fused) {
            if (bind.has(p + "ffn_up.bias"))
                fail("{}: tensor {}ffn_up.bias: a bias on jina-bert-v2's gated FFN is not supported", file.name(), p);
            const auto& gate_up =
                jina_ffn == JinaFfn::fused
                    ? bind.split_matrix(p + "ffn_up.weight", c.dim, {{"gate", c.ffn_dim}, {"up", c.ffn_dim}})
                    : bind.matrix({{p + "ffn_gate.weight", c.dim, c.ffn_dim}, {p + "ffn_up.weight", c.dim, c.ffn_dim}});
            const auto g_u = e.matmul(gate_up, x, {p + "gate", p + "up"}, l, MatmulInput::ffn);
            h = e.gelu_mul(g_u[0], g_u[1], p + "ffn_act");
        } else if (swiglu) {
            const auto& gate_up = bind.matrix({{p + "ffn_gate.weight", c.dim, c.ffn_dim}, {p + "ffn_up.weight", c.dim, c.ffn_dim}});
            const auto g_u = e.matmul(gate_up, x, {p + "gate", p + "up"}, l, MatmulInput::ffn);
            h = e.silu_mul(g_u[0], g_u[1], p + "ffn_act");
        } else {
            h = e.matmul(bind.matrix({{p + "ffn_up.weight", c.dim, c.ffn_dim}}), x, {p + "ffn_up"}, l, MatmulInput::ffn)[0];
            optional_bias(h, p + "ffn_up.bias", c.ffn_dim);
            e.gelu(h);
        }
        const int f = e.matmul(down, h, {p + "ffn_out"}, l, MatmulInput::ffn_down)[0];
        optional_bias(f, p + "ffn_down.bias", c.dim);
        e.add(x, f);
        x = norm(x, p + "layer_output_norm", p + "out");
    }
    m.graph.hidden = e.gather_hidden_rows(x, "hidden");
    return m;
}

}  // namespace

BuiltModel build_bert(const gguf::File& file, const ModelConfig& c, backend::Backend& b) { return build_encoder(file, c, b); }
BuiltModel build_nomic_bert(const gguf::File& file, const ModelConfig& c, backend::Backend& b) {
    return build_encoder(file, c, b);
}
BuiltModel build_jina_bert_v2(const gguf::File& file, const ModelConfig& c, backend::Backend& b) {
    return build_encoder(file, c, b);
}

}  // namespace pagoda::model
