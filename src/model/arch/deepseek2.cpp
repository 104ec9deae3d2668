// deepseek2 (llama.cpp's LLM_ARCH_DEEPSEEK2: DeepSeek V2 / V2-Lite / V3 / R1, Kimi K2 and kin): multi-head
// latent attention (MLA), leading dense layers, then routed experts plus ungated shared experts. Per
// layer, with llama.cpp's tensor names (H heads, nope + rope = the key's head size, v the value's):
//   h = rms_norm(x, attn_norm)
//   q = rms_norm(h W_q_a, attn_q_a_norm) W_q_b      (V2-Lite: q = h W_q)      per head [q_nope, q_pe]
//   [c, k_pe] = h W_kv_a_mqa ; c = rms_norm(c, attn_kv_a_norm)                 the latent, one RoPE key
//   [k_nope, v] = c W_kv_b per head (or newer converters' attn_k_b / attn_v_b, the same matrices split)
//   rope(q_pe), rope(k_pe) (adjacent pairs); k = [k_nope, k_pe] per head, k_pe shared by all heads
//   x += attention(q, k, v) W_o, scale mscale^2 / sqrt(nope + rope) (YaRN's mscale, 1 without it)
//   f = rms_norm(x, ffn_norm) ; x += dense SwiGLU FFN (the first leading_dense_block_count layers), else
//   the routed experts (softmax or sigmoid scores, V3's correction bias, groups, routed scale) plus
//   the shared experts' SwiGLU (ffn_*_shexp, not gated).
// This is the naive (decompressed) form on pagoda's paged attention: the cache holds each head's K
// (nope + rope) and V padded with zeros to that width. At load the Q rows are regrouped per head so the
// RoPE part leads (the rope op rotates a head's leading dims), K's no-RoPE rows and V's rows of kv_b
// become two operands, V's with zero rows for the padding (row moves and zero rows are exact in every
// block format); copy_columns assembles K and compacts the attention output back to H x v columns.
// The absorbed form (a latent cache of kv_lora + rope values per token) is not built yet.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/arch/graph_emitter.h"
#include "model/arch/model_head.h"
#include "model/arch/moe_ffn.h"
#include "model/arch/rope_frequencies.h"
#include "model/arch/tensor_binder.h"

namespace pagoda::model {
namespace {

// A run of rows of a stored matrix (first < 0: `count` zero rows).
struct RowRun {
    int64_t first = 0, count = 0;
};

// A matrix of `cols` columns whose rows are the runs of `t`'s rows (bytes copied, zero rows zero bytes),
// kept alive by the model.
backend::MatrixSource regrouped(BuiltModel& m, const gguf::File& f, const gguf::TensorInfo& t, int64_t cols,
                                const std::vector<RowRun>& runs, const std::string& name) {
    const auto row_bytes_or = gguf::row_size(t.type, cols);
    if (!row_bytes_or) fail("{}: tensor {}: {} columns are not whole blocks of {}", f.name(), t.name, cols,
                            gguf::type_name(uint32_t(t.type)));
    const size_t row_bytes = size_t(*row_bytes_or);
    int64_t rows = 0;
    for (const RowRun& r : runs) rows += r.count;
    std::vector<uint8_t>& bytes = m.host_buffers.emplace_back(size_t(rows) * row_bytes, uint8_t(0));
    size_t at = 0;
    for (const RowRun& r : runs) {
        if (r.first >= 0) std::memcpy(bytes.data() + at, t.data + size_t(r.first) * row_bytes, size_t(r.count) * row_bytes);
        at += size_t(r.count) * row_bytes;
    }
    return {t.type, bytes.data(), rows, cols, name, false};
}

// Host f32 rows as a matrix source kept alive by the model.
backend::MatrixSource f32_matrix(BuiltModel& m, const std::vector<float>& values, int64_t rows, int64_t cols,
                                 const std::string& name) {
    std::vector<uint8_t>& bytes = m.host_buffers.emplace_back(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return {gguf::GgmlType::F32, bytes.data(), rows, cols, name, false};
}

struct Dims {
    int64_t heads, nope, rope, v, hk, kv_lora;
};

// The per-head Q rows [nope, rope] regrouped as [rope, nope] (the rope op rotates the leading dims).
std::vector<RowRun> q_runs(const Dims& d) {
    std::vector<RowRun> runs;
    for (int64_t h = 0; h < d.heads; ++h) {
        runs.push_back({h * d.hk + d.nope, d.rope});
        runs.push_back({h * d.hk, d.nope});
    }
    return runs;
}

// The two operands K's no-RoPE part (H x nope rows) and V padded to the key width (H x hk rows) that
// the latent multiplies, from attn_kv_b or from attn_k_b / attn_v_b.
std::vector<backend::MatrixSource> kv_b_parts(TensorBinder& bind, BuiltModel& m, const gguf::File& f,
                                              const std::string& p, const Dims& d) {
    std::vector<RowRun> k_runs, v_runs;
    if (bind.has(p + "attn_kv_b.weight")) {
        const auto& t = bind.tensor(p + "attn_kv_b.weight", {d.kv_lora, d.heads * (d.nope + d.v)});
        for (int64_t h = 0; h < d.heads; ++h) {
            k_runs.push_back({h * (d.nope + d.v), d.nope});
            v_runs.push_back({h * (d.nope + d.v) + d.nope, d.v});
            if (d.hk > d.v) v_runs.push_back({-1, d.hk - d.v});
        }
        return {regrouped(m, f, t, d.kv_lora, k_runs, t.name + "[k_nope]"),
                regrouped(m, f, t, d.kv_lora, v_runs, t.name + "[v]")};
    }
    if (!bind.has(p + "attn_k_b.weight"))
        fail("{}: tensor {}attn_kv_b.weight is missing (and no attn_k_b / attn_v_b pair)", f.name(), p);
    // attn_k_b [nope, kv_lora, H]: per head kv_lora rows of nope values, the transpose of K's rows:
    // transposed through f32 (exact for every stored type).
    const std::vector<float> kb = bind.all_floats(p + "attn_k_b.weight", {d.nope, d.kv_lora, d.heads});
    std::vector<float> k(kb.size());
    for (int64_t h = 0; h < d.heads; ++h)
        for (int64_t i = 0; i < d.kv_lora; ++i)
            for (int64_t j = 0; j < d.nope; ++j)
                k[size_t((h * d.nope + j) * d.kv_lora + i)] = kb[size_t((h * d.kv_lora + i) * d.nope + j)];
    // attn_v_b [kv_lora, v, H]: per head v rows of kv_lora values, as V's rows.
    const auto& vt = bind.tensor(p + "attn_v_b.weight", {d.kv_lora, d.v, d.heads});
    for (int64_t h = 0; h < d.heads; ++h) {
        v_runs.push_back({h * d.v, d.v});
        if (d.hk > d.v) v_runs.push_back({-1, d.hk - d.v});
    }
    return {f32_matrix(m, k, d.heads * d.nope, d.kv_lora, p + "attn_k_b.weight^T"),
            regrouped(m, f, vt, d.kv_lora, v_runs, vt.name + "[v]")};
}

}  // namespace

BuiltModel build_deepseek2(const gguf::File& file, const ModelConfig& c, backend::Backend& b) {
    if (!b.supports(backend::OpKind::copy_columns))
        fail("{}: backend {} has no copy_columns op, which deepseek2's multi-head latent attention needs", file.name(),
             b.name());
    BuiltModel m;
    TensorBinder bind(file, b, m);
    GraphEmitter e(m.graph);
    const ModelHead head = bind_model_head(bind, c);
    const Dims d{c.n_heads, c.qk_nope_dim, c.rope_dims, c.v_head_dim, c.head_dim, c.kv_lora_rank};
    // YaRN as DeepSeek's reference code (and llama.cpp) runs it: the rotation is not scaled, the scores
    // take mscale^2 with mscale = 1 + 0.1 mscale_all_dim ln factor; the converter stores
    // 0.1 mscale_all_dim as yarn_log_multiplier. Files that would need the other branches of that
    // logic (no multiplier, or an attn_factor beside it) are refused rather than guessed.
    backend::RopeSpec spec = make_rope_spec(d.rope, false, c.rope_theta, c.rope_linear_scale, {});
    double mscale = 1;
    if (c.rope_scaling == "yarn") {
        const YarnRopeScaling yarn = read_yarn_rope_scaling(file, c.arch, c.context_length, true);
        if (c.yarn_log_multiplier == 0 || yarn.attn_factor != 1)
            fail("{}: deepseek2 YaRN needs {}.rope.scaling.yarn_log_multiplier (> 0) and no attn_factor other than 1 "
                 "(got {} and {})", file.name(), c.arch, c.yarn_log_multiplier, yarn.attn_factor);
        spec = yarn_rope_spec(d.rope, false, c.rope_theta, yarn);
        mscale = 1 + c.yarn_log_multiplier * std::log(yarn.factor);
    }
    const auto& rope = bind.rope(std::move(spec));
    const auto* kv_a_info = file.find_tensor("blk.0.attn_kv_a_mqa.weight");
    m.kv_dtype = kv_a_info && kv_a_info->type == gguf::GgmlType::F32 ? kv::KvDtype::f32 : kv::KvDtype::f16;

    const auto heads = int32_t(d.heads), hk = int32_t(d.hk);
    const backend::AttentionParams attention{.n_heads = heads, .scale = float(mscale * mscale / std::sqrt(double(d.hk)))};
    int x = e.embed(head.embedding, "x");
    int residual = -1;
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const auto l = int32_t(i);
        const std::string p = fmt::format("blk.{}.", i);
        const auto& attn_norm = bind.vector(p + "attn_norm.weight", c.dim);
        // One operand for everything h feeds: Q (or Q's bottleneck), the latent and the RoPE key.
        const auto& kv_a = bind.tensor(p + "attn_kv_a_mqa.weight", {c.dim, d.kv_lora + d.rope});
        std::vector<backend::MatrixSource> first;
        if (c.q_lora_rank > 0) {
            const auto& qa = bind.tensor(p + "attn_q_a.weight", {c.dim, c.q_lora_rank});
            first.push_back({qa.type, qa.data, c.q_lora_rank, c.dim, qa.name, file.is_mapped()});
        } else {
            const auto& q = bind.tensor(p + "attn_q.weight", {c.dim, d.heads * d.hk});
            first.push_back(regrouped(m, file, q, c.dim, q_runs(d), q.name + "[rope|nope]"));
        }
        // The latent's rows, then the RoPE key's: contiguous, read in place.
        const auto kv_a_row = gguf::row_size(kv_a.type, c.dim);
        if (!kv_a_row) fail("{}: tensor {}: {} columns are not whole blocks of {}", file.name(), kv_a.name, c.dim,
                            gguf::type_name(uint32_t(kv_a.type)));
        first.push_back({kv_a.type, kv_a.data, d.kv_lora, c.dim, kv_a.name + "[latent]", file.is_mapped()});
        first.push_back({kv_a.type, kv_a.data + size_t(d.kv_lora) * size_t(*kv_a_row), d.rope, c.dim, kv_a.name + "[k_pe]",
                         file.is_mapped()});
        const auto& w_first = bind.upload(std::move(first));
        const auto& kv_a_norm = bind.vector(p + "attn_kv_a_norm.weight", d.kv_lora);
        const auto& w_kv_b = bind.upload(kv_b_parts(bind, m, file, p, d));
        const auto& wo = bind.matrix({{p + "attn_output.weight", d.heads * d.v, c.dim}});
        const auto& ffn_norm = bind.vector(p + "ffn_norm.weight", c.dim);

        if (residual >= 0) e.add(x, residual);
        const int h = e.rms_norm(x, attn_norm, c.rms_eps, p + "attn_in");
        const auto outs = e.matmul(w_first, h, {p + (c.q_lora_rank > 0 ? "q_a" : "q"), p + "kv_latent", p + "k_pe"}, l,
                                   MatmulInput::attention);
        int q = outs[0];
        if (c.q_lora_rank > 0) {
            const auto& q_a_norm = bind.vector(p + "attn_q_a_norm.weight", c.q_lora_rank);
            const auto& qb = bind.tensor(p + "attn_q_b.weight", {c.q_lora_rank, d.heads * d.hk});
            const auto& w_qb = bind.upload({regrouped(m, file, qb, c.q_lora_rank, q_runs(d), qb.name + "[rope|nope]")});
            const int qa = e.rms_norm(q, q_a_norm, c.rms_eps, p + "q_a_normed");
            q = e.matmul(w_qb, qa, {p + "q"}, l, MatmulInput::none)[0];
        }
        const int latent = e.rms_norm(outs[1], kv_a_norm, c.rms_eps, p + "kv_latent_normed");
        const auto k_v = e.matmul(w_kv_b, latent, {p + "k_nope", p + "v"}, l, MatmulInput::none);
        e.rope(q, rope, heads, hk);
        e.rope(outs[2], rope, 1, int32_t(d.rope));
        // k per head = [k_pe (shared), k_nope]
        int k = e.copy_columns(outs[2], -1, {.n_heads = heads, .width = d.rope, .dst_stride = d.hk}, d.heads * d.hk, p + "k");
        k = e.copy_columns(k_v[0], k,
                           {.n_heads = heads, .width = d.nope, .src_stride = d.nope, .dst_stride = d.hk, .dst_offset = d.rope},
                           d.heads * d.hk, p + "k");
        e.kv_write(l, k, k_v[1]);
        const int a = e.attention(l, q, attention, hk, p + "attn");
        const int a_v = e.copy_columns(a, -1, {.n_heads = heads, .width = d.v, .src_stride = d.hk, .dst_stride = d.v},
                                       d.heads * d.v, p + "attn_v");
        const int o = e.matmul(wo, a_v, {p + "attn_out"}, l, MatmulInput::attention_output)[0];
        e.add(x, o);
        const int f = e.rms_norm(x, ffn_norm, c.rms_eps, p + "ffn_in");
        if (i >= c.leading_dense_layers) {
            residual = emit_moe_ffn(e, bind, file, c, b, m, i, f,
                                    {.shared_expert = c.n_shared_experts > 0, .shared_gate = false});
            continue;
        }
        residual = emit_swiglu_ffn(e, bind, c, l, f);
    }
    e.add(x, residual);
    emit_model_head(e, m, head, x, c.rms_eps);
    return m;
}

}  // namespace pagoda::model
