// deepseek2 (llama.cpp's LLM_ARCH_DEEPSEEK2: DeepSeek V2 / V2-Lite / V3 / R1, Kimi K2 and kin): multi-head
// latent attention (MLA), leading dense layers, then routed experts plus ungated shared experts. Per
// layer, with llama.cpp's tensor names (H heads, nope + rope = the key's head size, v the value's):
//   h = rms_norm(x, attn_norm)
//   q = rms_norm(h W_q_a, attn_q_a_norm) W_q_b      (V2-Lite: q = h W_q)      per head [q_nope, q_pe]
//   [c, k_pe] = h W_kv_a_mqa ; c = rms_norm(c, attn_kv_a_norm)                 the latent, one RoPE key
//   [k_nope, v] = c W_kv_b per head (or newer converters' attn_k_b / attn_v_b, the same matrices split)
//   rope(q_pe), rope(k_pe) (adjacent pairs); k = [k_nope, k_pe] per head, k_pe shared by all heads
//   x += attention(q, k, v) W_o, scale mscale^2 / sqrt(nope + rope) (YaRN's mscale, 1 without it); with
//   attention.temperature_scale (Mistral-Large-3) q is first multiplied by its position's temperature
//   f = rms_norm(x, ffn_norm) ; x += dense SwiGLU FFN (the first leading_dense_block_count layers), else
//   the routed experts (softmax or sigmoid scores, V3's correction bias, groups, routed scale) plus
//   the shared experts' SwiGLU (ffn_*_shexp, not gated).
// Two forms on pagoda's paged attention (ModelConfig::mla_absorbed, --mla):
// - naive (decompressed): the cache holds each head's K (nope + rope) and V padded with zeros to that
//   width. At load the Q rows are regrouped per head so the RoPE part leads (the rope op rotates a
//   head's leading dims), K's no-RoPE rows and V's rows of kv_b become two operands, V's with zero rows
//   for the padding (row moves and zero rows are exact in every block format); copy_columns assembles K
//   and compacts the attention output back to H x v columns.
// - absorbed (llama.cpp's and vLLM's MLA): the cache holds one row [k_pe, c] (rope + kv_lora values) a
//   token and layer, one KV head whose V rows are its K rows (KvLayout::v_is_k). Each head's query is
//   [q_pe, q_nope W_UK] (W_UK: the head's K block of kv_b, "absorbed" into the query), so its scores are
//   q_nope.k_nope + q_pe.k_pe as in the naive form; its output's latent part (softmax . c) times the
//   head's V block W_UV gives its v values. The per-head products are one matmul a head (Q's no-RoPE
//   rows come out of the Q projection as one part a head) and copy_columns moves the columns.
#include <climits>
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

// Rows [first, first + count) of `t` (`cols` values a row), read in place.
backend::MatrixSource rows_of(const gguf::File& f, const gguf::TensorInfo& t, int64_t cols, int64_t first, int64_t count,
                              const std::string& name) {
    const auto row_bytes = gguf::row_size(t.type, cols);
    if (!row_bytes) fail("{}: tensor {}: {} columns are not whole blocks of {}", f.name(), t.name, cols,
                         gguf::type_name(uint32_t(t.type)));
    return {t.type, t.data + size_t(first) * size_t(*row_bytes), count, cols, name, f.is_mapped()};
}

// The absorbed form's Q operand parts: every head's RoPE rows (H x rope), then one part of no-RoPE rows a
// head (nope), so each head's q_nope is its own tensor for its absorbing matmul.
std::vector<backend::MatrixSource> absorbed_q_parts(BuiltModel& m, const gguf::File& f, const gguf::TensorInfo& t,
                                                    int64_t cols, const Dims& d) {
    std::vector<RowRun> pe;
    for (int64_t h = 0; h < d.heads; ++h) pe.push_back({h * d.hk + d.nope, d.rope});
    std::vector<backend::MatrixSource> parts{regrouped(m, f, t, cols, pe, t.name + "[q_pe]")};
    for (int64_t h = 0; h < d.heads; ++h) parts.push_back(rows_of(f, t, cols, h * d.hk, d.nope, fmt::format("{}[q_nope.{}]", t.name, h)));
    return parts;
}

// Per head: W_UK^T (kv_lora rows of nope values: q_nope -> the latent query) and W_UV (v rows of kv_lora
// values: the latent output -> v values), from attn_kv_b or from attn_k_b / attn_v_b.
struct AbsorbedHeads {
    std::vector<const backend::Weight*> uk, uv;
};
AbsorbedHeads absorbed_heads(TensorBinder& bind, BuiltModel& m, const gguf::File& f, const std::string& p, const Dims& d) {
    AbsorbedHeads w;
    if (bind.has(p + "attn_kv_b.weight")) {
        const auto& t = bind.tensor(p + "attn_kv_b.weight", {d.kv_lora, d.heads * (d.nope + d.v)});
        // K's rows are per head nope rows of kv_lora values: transposed through f32 (exact for every type).
        const std::vector<float> kv = bind.all_floats(t.name, {d.kv_lora, d.heads * (d.nope + d.v)});
        for (int64_t h = 0; h < d.heads; ++h) {
            std::vector<float> uk(size_t(d.kv_lora * d.nope));
            for (int64_t j = 0; j < d.nope; ++j)
                for (int64_t i = 0; i < d.kv_lora; ++i)
                    uk[size_t(i * d.nope + j)] = kv[size_t((h * (d.nope + d.v) + j) * d.kv_lora + i)];
            w.uk.push_back(&bind.upload({f32_matrix(m, uk, d.kv_lora, d.nope, fmt::format("{}[k^T.{}]", t.name, h))}));
            w.uv.push_back(&bind.upload(
                {rows_of(f, t, d.kv_lora, h * (d.nope + d.v) + d.nope, d.v, fmt::format("{}[v.{}]", t.name, h))}));
        }
        return w;
    }
    if (!bind.has(p + "attn_k_b.weight"))
        fail("{}: tensor {}attn_kv_b.weight is missing (and no attn_k_b / attn_v_b pair)", f.name(), p);
    // attn_k_b [nope, kv_lora, H] is W_UK^T a head as stored; attn_v_b [kv_lora, v, H] is W_UV a head.
    const auto& kb = bind.tensor(p + "attn_k_b.weight", {d.nope, d.kv_lora, d.heads});
    const auto& vb = bind.tensor(p + "attn_v_b.weight", {d.kv_lora, d.v, d.heads});
    for (int64_t h = 0; h < d.heads; ++h) {
        w.uk.push_back(&bind.upload({rows_of(f, kb, d.nope, h * d.kv_lora, d.kv_lora, fmt::format("{}[{}]", kb.name, h))}));
        w.uv.push_back(&bind.upload({rows_of(f, vb, d.kv_lora, h * d.v, d.v, fmt::format("{}[{}]", vb.name, h))}));
    }
    return w;
}

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

// Mistral-Large-3's Llama-4 attention temperature tuning, as llama.cpp's deepseek2 reads it:
// {arch}.attention.temperature_scale (beta; absent or 0: none) and attention.temperature_length (the
// floor's length, required with a beta), no position offset.
backend::AttnTemperature read_attn_temperature(const gguf::File& file, const std::string& arch) {
    const std::string a = arch + ".";
    const double beta = file.get_float_or(a + "attention.temperature_scale", 0.0);
    if (!std::isfinite(beta)) fail("{}: {}attention.temperature_scale = {} is not a number", file.name(), a, beta);
    if (beta == 0) return {};
    const int64_t length = file.get_int_or(a + "attention.temperature_length", 0);
    if (length < 1 || length > INT32_MAX)
        fail("{}: {}attention.temperature_scale needs a positive {}attention.temperature_length, got {}", file.name(), a,
             a, length);
    return {.beta = float(beta), .length = int32_t(length)};
}

// One layer's attention context.
struct Layer {
    TensorBinder& bind;
    BuiltModel& m;
    const gguf::File& file;
    const ModelConfig& c;
    const Dims& d;
    GraphEmitter& e;
    const backend::Rope& rope;
    const backend::AttentionParams& attention;
    int32_t l;
    const std::string& p;
    const backend::AttnTemperature& temperature;  // beta 0: none
};

// Mistral-Large-3's attention temperature on the whole query (after RoPE; a per-row factor, so the
// absorbed query takes it as the naive one would).
void temper(const Layer& y, int q) {
    if (y.temperature.beta != 0) y.e.attn_temperature(q, y.temperature, y.l);
}

// One operand for everything h feeds: `q_parts` (Q, or Q's bottleneck), then the latent and the RoPE key
// (attn_kv_a_mqa's rows, contiguous, read in place).
const backend::Weight& first_operand(const Layer& y, std::vector<backend::MatrixSource> q_parts) {
    const auto& kv_a = y.bind.tensor(y.p + "attn_kv_a_mqa.weight", {y.c.dim, y.d.kv_lora + y.d.rope});
    q_parts.push_back(rows_of(y.file, kv_a, y.c.dim, 0, y.d.kv_lora, kv_a.name + "[latent]"));
    q_parts.push_back(rows_of(y.file, kv_a, y.c.dim, y.d.kv_lora, y.d.rope, kv_a.name + "[k_pe]"));
    return y.bind.upload(std::move(q_parts));
}

// V3's Q bottleneck: q_a's output normed (attn_q_a_norm), the input of attn_q_b.
int q_bottleneck(const Layer& y, int q_a) {
    const auto& q_a_norm = y.bind.vector(y.p + "attn_q_a_norm.weight", y.c.q_lora_rank);
    return y.e.rms_norm(q_a, q_a_norm, y.c.rms_eps, y.p + "q_a_normed");
}

// With q_lora, Q's first matmul part: attn_q_a, read as it is stored.
backend::MatrixSource q_a_part(const Layer& y) {
    const auto& qa = y.bind.tensor(y.p + "attn_q_a.weight", {y.c.dim, y.c.q_lora_rank});
    return rows_of(y.file, qa, y.c.dim, 0, y.c.q_lora_rank, qa.name);
}

// The naive form: per-head K and V in the cache; returns the attention output, H x v columns.
int naive_attention(const Layer& y, int h) {
    const ModelConfig& c = y.c;
    const Dims& d = y.d;
    GraphEmitter& e = y.e;
    const std::string& p = y.p;
    const auto heads = int32_t(d.heads), hk = int32_t(d.hk);
    std::vector<backend::MatrixSource> q_parts;
    if (c.q_lora_rank > 0) {
        q_parts.push_back(q_a_part(y));
    } else {
        const auto& q = y.bind.tensor(p + "attn_q.weight", {c.dim, d.heads * d.hk});
        q_parts.push_back(regrouped(y.m, y.file, q, c.dim, q_runs(d), q.name + "[rope|nope]"));
    }
    const auto& w_first = first_operand(y, std::move(q_parts));
    const auto& kv_a_norm = y.bind.vector(p + "attn_kv_a_norm.weight", d.kv_lora);
    const auto& w_kv_b = y.bind.upload(kv_b_parts(y.bind, y.m, y.file, p, d));
    const auto outs = e.matmul(w_first, h, {p + (c.q_lora_rank > 0 ? "q_a" : "q"), p + "kv_latent", p + "k_pe"}, y.l,
                               MatmulInput::attention);
    int q = outs[0];
    if (c.q_lora_rank > 0) {
        const auto& qb = y.bind.tensor(p + "attn_q_b.weight", {c.q_lora_rank, d.heads * d.hk});
        const auto& w_qb = y.bind.upload({regrouped(y.m, y.file, qb, c.q_lora_rank, q_runs(d), qb.name + "[rope|nope]")});
        q = e.matmul(w_qb, q_bottleneck(y, q), {p + "q"}, y.l, MatmulInput::none)[0];
    }
    const int latent = e.rms_norm(outs[1], kv_a_norm, c.rms_eps, p + "kv_latent_normed");
    const auto k_v = e.matmul(w_kv_b, latent, {p + "k_nope", p + "v"}, y.l, MatmulInput::none);
    e.rope(q, y.rope, heads, hk);
    e.rope(outs[2], y.rope, 1, int32_t(d.rope));
    // k per head = [k_pe (shared), k_nope]
    int k = e.copy_columns(outs[2], -1, {.n_heads = heads, .width = d.rope, .dst_stride = d.hk}, d.heads * d.hk, p + "k");
    k = e.copy_columns(k_v[0], k,
                       {.n_heads = heads, .width = d.nope, .src_stride = d.nope, .dst_stride = d.hk, .dst_offset = d.rope},
                       d.heads * d.hk, p + "k");
    e.kv_write(y.l, k, k_v[1]);
    temper(y, q);
    const int a = e.attention(y.l, q, y.attention, hk, p + "attn");
    return e.copy_columns(a, -1, {.n_heads = heads, .width = d.v, .src_stride = d.hk, .dst_stride = d.v},
                          d.heads * d.v, p + "attn_v");
}

// The absorbed form: one latent row [k_pe, c] a token in the cache (V = K); returns the attention
// output, H x v columns.
int absorbed_attention(const Layer& y, int h) {
    const ModelConfig& c = y.c;
    const Dims& d = y.d;
    GraphEmitter& e = y.e;
    const std::string& p = y.p;
    const auto heads = int32_t(d.heads);
    const int64_t width = d.rope + d.kv_lora;  // the cache row and each head's query and output
    std::vector<backend::MatrixSource> q_parts;
    if (c.q_lora_rank > 0) {
        q_parts.push_back(q_a_part(y));
    } else {
        const auto& q = y.bind.tensor(p + "attn_q.weight", {c.dim, d.heads * d.hk});
        q_parts = absorbed_q_parts(y.m, y.file, q, c.dim, d);
    }
    const size_t n_q = q_parts.size();
    const auto& w_first = first_operand(y, std::move(q_parts));
    const auto& kv_a_norm = y.bind.vector(p + "attn_kv_a_norm.weight", d.kv_lora);
    const AbsorbedHeads w = absorbed_heads(y.bind, y.m, y.file, p, d);
    // Q's parts: [q_pe of every head, q_nope of head 0, 1, ...] (or V3's bottleneck, then attn_q_b's).
    std::vector<std::string> q_names{p + "q_pe"};
    for (int64_t i = 0; i < d.heads; ++i) q_names.push_back(fmt::format("{}q_nope.{}", p, i));
    std::vector<std::string> names;
    if (c.q_lora_rank > 0)
        names.push_back(p + "q_a");
    else
        names = q_names;
    names.push_back(p + "kv_latent");
    names.push_back(p + "k_pe");
    const auto outs = e.matmul(w_first, h, names, y.l, MatmulInput::attention);
    std::vector<int> q(outs.begin(), outs.begin() + std::ptrdiff_t(n_q));
    if (c.q_lora_rank > 0) {
        const auto& qb = y.bind.tensor(p + "attn_q_b.weight", {c.q_lora_rank, d.heads * d.hk});
        const auto& w_qb = y.bind.upload(absorbed_q_parts(y.m, y.file, qb, c.q_lora_rank, d));
        q = e.matmul(w_qb, q_bottleneck(y, q[0]), q_names, y.l, MatmulInput::none);
    }
    const int latent = e.rms_norm(outs[n_q], kv_a_norm, c.rms_eps, p + "kv_latent_normed");
    const int k_pe = outs[n_q + 1];
    e.rope(q[0], y.rope, heads, int32_t(d.rope));
    e.rope(k_pe, y.rope, 1, int32_t(d.rope));
    // The cache row [k_pe, c], written as K (and V: the layout reads K's rows as V's).
    int kv = e.copy_columns(k_pe, -1, {.n_heads = 1, .width = d.rope}, width, p + "kv");
    kv = e.copy_columns(latent, kv, {.n_heads = 1, .width = d.kv_lora, .dst_offset = d.rope}, width, p + "kv");
    e.kv_write(y.l, kv, kv);
    // Each head's query [q_pe, q_nope W_UK^T].
    int qa = e.copy_columns(q[0], -1, {.n_heads = heads, .width = d.rope, .src_stride = d.rope, .dst_stride = width},
                            d.heads * width, p + "q_absorbed");
    for (int64_t i = 0; i < d.heads; ++i) {
        const int q_lat = e.matmul(*w.uk[size_t(i)], q[size_t(i) + 1], {fmt::format("{}q_latent.{}", p, i)}, y.l,
                                   MatmulInput::none)[0];
        qa = e.copy_columns(q_lat, qa, {.n_heads = 1, .width = d.kv_lora, .dst_offset = i * width + d.rope},
                            d.heads * width, p + "q_absorbed");
    }
    temper(y, qa);
    // Per head [softmax . k_pe, softmax . c]: the latent part through W_UV gives the head's v values.
    const int a = e.attention(y.l, qa, y.attention, int32_t(width), p + "attn");
    int a_v = -1;
    for (int64_t i = 0; i < d.heads; ++i) {
        const int a_lat = e.copy_columns(a, -1, {.n_heads = 1, .width = d.kv_lora, .src_offset = i * width + d.rope},
                                         d.kv_lora, fmt::format("{}attn_latent.{}", p, i));
        const int v = e.matmul(*w.uv[size_t(i)], a_lat, {fmt::format("{}attn_v.{}", p, i)}, y.l, MatmulInput::none)[0];
        a_v = e.copy_columns(v, a_v, {.n_heads = 1, .width = d.v, .dst_offset = i * d.v}, d.heads * d.v, p + "attn_v");
    }
    return a_v;
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

    if (c.mla_absorbed) {  // one latent KV head [k_pe, c] whose V rows are its K rows
        m.kv_heads = 1;
        m.kv_head_dim = int32_t(d.rope + d.kv_lora);
        m.kv_v_is_k = true;
    }
    const backend::AttentionParams attention{.n_heads = int32_t(d.heads), .scale = float(mscale * mscale / std::sqrt(double(d.hk)))};
    const backend::AttnTemperature temperature = read_attn_temperature(file, c.arch);
    int x = e.embed(head.embedding, "x");
    int residual = -1;
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const auto l = int32_t(i);
        const std::string p = fmt::format("blk.{}.", i);
        const auto& attn_norm = bind.vector(p + "attn_norm.weight", c.dim);
        const auto& wo = bind.matrix({{p + "attn_output.weight", d.heads * d.v, c.dim}});
        const auto& ffn_norm = bind.vector(p + "ffn_norm.weight", c.dim);
        if (residual >= 0) e.add(x, residual);
        const int h = e.rms_norm(x, attn_norm, c.rms_eps, p + "attn_in");
        const Layer layer{bind, m, file, c, d, e, rope, attention, l, p, temperature};
        const int a_v = c.mla_absorbed ? absorbed_attention(layer, h) : naive_attention(layer, h);
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
