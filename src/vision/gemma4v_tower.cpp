// Gemma 4's vision tower and embedder on backend ops (see gemma4v_tower.h).
#include "vision/gemma4v_tower.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "vision/gemma4v_preprocess.h"
#include "vision/mmproj_tensors.h"
#include "vision/vit_block.h"

namespace pagoda::vision {

namespace {

using backend::Tensor;
using backend::WeightUse;

constexpr float kInf = std::numeric_limits<float>::infinity();

// A matrix and its Gemma4ClippableLinear bounds (infinite when the file has none).
struct Linear {
    std::shared_ptr<backend::Weight> w;
    float in_lo = -kInf, in_hi = kInf, out_lo = -kInf, out_hi = kInf;
    bool clamps_input() const { return in_lo > -kInf || in_hi < kInf; }
    bool clamps_output() const { return out_lo > -kInf || out_hi < kInf; }
};

// Where dimension j of a permuted head reads from the file's head: quarters 0, 2, 1, 3 (gemma4v_tower.h).
int64_t rope_source(int64_t j, int64_t hd) {
    const int64_t q = hd / 4, quarter = j / q;
    return (quarter == 1 ? 2 : quarter == 2 ? 1 : quarter) * q + j % q;
}

void clamp_host(backend::Backend& b, const Tensor& t, float lo, float hi, std::vector<float>& tmp, const Tensor* dst) {
    tmp.resize(size_t(t.rows * t.cols));
    b.read(t, tmp.data());
    for (float& v : tmp) v = std::clamp(v, lo, hi);
    b.write(dst ? *dst : t, tmp.data());
}

}  // namespace

struct Gemma4vTower::Weights {
    struct Layer {
        Linear q, k, v, out, gate, up, down;
        std::shared_ptr<backend::Vector> ln1, ln2, post_attn, post_ffn, q_norm, k_norm;
    };
    std::shared_ptr<backend::Weight> patch;
    std::vector<float> positions;  // [2][pos_size][d]: column table, then row table
    std::shared_ptr<backend::Rope> rope;
    std::shared_ptr<backend::Vector> ones_head, ones_width;  // the unweighted RMS norms
    std::vector<Layer> layers;
    Linear projection;
    std::vector<float> std_bias, std_scale;
    std::vector<std::vector<uint8_t>> permuted;  // W_q and W_k rows in RoPE order, kept for the backend
    std::unique_ptr<backend::KvCache> cache;
    std::vector<float> clamp_tmp;
    int64_t reserved_patches = 0;
    size_t arena_elements = 0;
};

Gemma4vTower::Gemma4vTower(const gguf::File& file, backend::Backend& b) : Gemma4vTower(file, read_vision_config(file), b) {}

Gemma4vTower::Gemma4vTower(const gguf::File& file, VisionConfig config, backend::Backend& b)
    : backend_(b), config_(std::move(config)), w_(std::make_unique<Weights>()) {
    const VisionConfig& c = config_;
    if (!c.gemma4v()) fail("{}: a {} projector is not Gemma 4's (gemma4v)", file.name(), c.projector);
    if (!b.supports_attention({.n_heads = int32_t(c.n_heads), .scale = 1.0f, .causal = false}))
        fail("{}: the {} backend cannot run the vision tower: it has no non-causal attention (use --backend cpu)",
             file.name(), b.name());
    const int64_t d = c.n_embd, hd = c.head_dim(), row = 3 * c.patch_size * c.patch_size;
    auto vec = [&](const std::string& name) { return b.upload_vector(tensor_floats(file, name)); };
    auto scalar = [&](const std::string& name, float fallback) {
        return file.find_tensor(name) ? tensor_floats(file, name).at(0) : fallback;
    };
    auto linear_from = [&](const std::string& name, std::vector<backend::MatrixSource> parts) {
        const std::string stem = name.substr(0, name.size() - std::string_view(".weight").size());
        Linear l{.w = b.upload_weight(std::move(parts), WeightUse::matmul), .in_lo = scalar(stem + ".input_min", -kInf),
                 .in_hi = scalar(stem + ".input_max", kInf), .out_lo = scalar(stem + ".output_min", -kInf),
                 .out_hi = scalar(stem + ".output_max", kInf)};
        return l;
    };
    auto linear = [&](const std::string& name, int64_t rows, int64_t cols) {
        return linear_from(name, {matrix_source(file, name, rows, cols)});
    };
    // W_q / W_k with each head's rows in the backend's RoPE order (whole quant rows move, any type).
    auto permuted_linear = [&](const std::string& name) {
        const auto* t = file.find_tensor(name);
        if (!t) fail("{}: tensor {} is missing", file.name(), name);
        const auto bytes = gguf::row_size(t->type, d);
        if (!bytes) fail("{}: tensor {}: rows of {} values do not fit its type's blocks", file.name(), name, d);
        std::vector<uint8_t>& buf = w_->permuted.emplace_back(size_t(d) * *bytes);
        for (int64_t r = 0; r < d; ++r) {
            const int64_t src = (r / hd) * hd + rope_source(r % hd, hd);
            std::memcpy(buf.data() + size_t(r) * *bytes, t->data + size_t(src) * *bytes, *bytes);
        }
        return linear_from(name, {backend::MatrixSource{t->type, buf.data(), d, d, name + " (RoPE order)", false}});
    };
    auto permuted_vec = [&](const std::string& name) {
        const std::vector<float> v = tensor_floats(file, name);
        std::vector<float> out(v.size());
        for (int64_t j = 0; j < hd; ++j) out[size_t(j)] = v[size_t(rope_source(j, hd))];
        return b.upload_vector(out);
    };
    // The conv weight [p, p, 3, d] is d rows of (c, ky, kx): the patch rows' order (preprocess.h).
    w_->patch = b.upload_weight({matrix_source(file, "v.patch_embd.weight", d, row)}, WeightUse::matmul);
    w_->positions = tensor_floats(file, "v.position_embd.weight");
    backend::RopeSpec spec{.dims = hd, .neox = true};
    for (int64_t j = 0; j < hd / 2; ++j) {
        spec.inv_freq.push_back(std::pow(double(c.rope_theta), -double(4 * (j % (hd / 4))) / double(hd)));
        spec.pair_axis.push_back(j < hd / 4 ? 2 : 1);  // the column (axis 2), then the row (axis 1)
    }
    w_->rope = b.upload_rope(std::move(spec));
    w_->ones_head = b.upload_vector(std::vector<float>(size_t(hd), 1.0f));
    w_->ones_width = b.upload_vector(std::vector<float>(size_t(d), 1.0f));
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const std::string p = fmt::format("v.blk.{}.", l);
        Weights::Layer L;
        L.q = permuted_linear(p + "attn_q.weight");
        L.k = permuted_linear(p + "attn_k.weight");
        L.v = linear(p + "attn_v.weight", d, d);
        L.out = linear(p + "attn_out.weight", d, d);
        L.gate = linear(p + "ffn_gate.weight", c.n_ff, d);
        L.up = linear(p + "ffn_up.weight", c.n_ff, d);
        L.down = linear(p + "ffn_down.weight", d, c.n_ff);
        L.ln1 = vec(p + "ln1.weight");
        L.ln2 = vec(p + "ln2.weight");
        L.post_attn = vec(p + "attn_post_norm.weight");
        L.post_ffn = vec(p + "ffn_post_norm.weight");
        L.q_norm = permuted_vec(p + "attn_q_norm.weight");
        L.k_norm = permuted_vec(p + "attn_k_norm.weight");
        w_->layers.push_back(std::move(L));
    }
    w_->projection = linear("mm.input_projection.weight", c.text_dim, d);
    if (c.standardize) {
        w_->std_bias = tensor_floats(file, "v.std_bias");
        w_->std_scale = tensor_floats(file, "v.std_scale");
    }
}

Gemma4vTower::~Gemma4vTower() = default;

TowerInput Gemma4vTower::preprocess(const Image& image) const {
    const VisionConfig& c = config_;
    TowerInput in{.patches = gemma4v_preprocess(image, c.patch_size, c.pool, c.max_soft_tokens, c.norm)};
    in.grid_h = in.patches.grid_h / c.pool;
    in.grid_w = in.patches.grid_w / c.pool;
    return in;
}

void Gemma4vTower::reserve(int64_t n) {
    if (n <= w_->reserved_patches) return;
    const VisionConfig& c = config_;
    backend::Backend& b = backend_;
    const int64_t d = c.n_embd, t = n / (c.pool * c.pool), wide = std::max(d, c.n_ff);
    kv::KvLayout layout{.n_layers = int32_t(c.n_layers), .n_kv_heads = int32_t(c.n_heads),
                        .head_dim = int32_t(c.head_dim()), .block_size = kv::kDefaultBlockSize, .dtype = kv::KvDtype::f32};
    layout.validate();
    w_->cache.reset();
    w_->cache = b.create_kv_cache(layout, (n + layout.block_size - 1) / layout.block_size);
    // x, h, q, k, v, qn, kn, vn, attn, o: 10 n x d; gate, up: 2 n x ff; a clamped input n x max(d, ff);
    // pixels n x 3p^2; pooled, normed: 2 t x d; out t x text.
    w_->arena_elements = size_t(10 * n * d + 2 * n * c.n_ff + n * wide + n * 3 * c.patch_size * c.patch_size +
                                2 * t * d + t * c.text_dim);
    b.reserve_activations(w_->arena_elements * b.activation_size(), n);
    w_->reserved_patches = n;
}

std::vector<float> Gemma4vTower::encode(const Patches& patches) {
    const VisionConfig& c = config_;
    const int64_t k_pool = c.pool;
    if (patches.patch != c.patch_size || patches.grid_w % k_pool || patches.grid_h % k_pool || patches.grid_w < k_pool ||
        patches.grid_h < k_pool || int64_t(patches.rows.size()) != patches.count() * patches.row_size())
        fail("gemma4v vision tower: a {}x{} grid of {}x{} patches given; the tower takes {}x{} patches in a grid of "
             "multiples of {}", patches.grid_w, patches.grid_h, patches.patch, patches.patch, c.patch_size, c.patch_size,
             k_pool);
    if (patches.grid_w > c.pos_size || patches.grid_h > c.pos_size)
        fail("gemma4v vision tower: a {}x{} patch grid is past the {} learned positions per axis", patches.grid_w,
             patches.grid_h, c.pos_size);
    backend::Backend& b = backend_;
    const int64_t n = patches.count(), d = c.n_embd, hd = c.head_dim(), heads = c.n_heads, gw = patches.grid_w;
    const int64_t out_w = gw / k_pool, out_h = patches.grid_h / k_pool, t = out_w * out_h;
    reserve(n);
    std::vector<int32_t> tokens(static_cast<size_t>(n), 0), positions(static_cast<size_t>(n)), seq(static_cast<size_t>(n), 0),
        axes(static_cast<size_t>(3 * n)), no_rows;
    std::iota(positions.begin(), positions.end(), 0);
    std::vector<int64_t> slots(positions.begin(), positions.end());
    for (int64_t r = 0; r < n; ++r) {
        axes[size_t(3 * r + 1)] = int32_t(r / gw);  // the patch's row and column
        axes[size_t(3 * r + 2)] = int32_t(r % gw);
    }
    std::vector<std::vector<int32_t>> tables(1);
    for (int32_t i = 0; i < w_->cache->n_blocks(); ++i) tables[0].push_back(i);
    backend::StepInputs in{.tokens = tokens, .positions = positions, .seq_index = seq, .slots = slots,
                           .logit_rows = no_rows, .block_tables = tables, .hidden_rows = no_rows};
    in.rope_positions = axes;
    b.begin_step(in);

    ActivationArena arena(b, w_->arena_elements);
    const Tensor x = arena.tensor(n, d), h = arena.tensor(n, d), attn = arena.tensor(n, d), o = arena.tensor(n, d);
    const Tensor q = arena.tensor(n, d), k = arena.tensor(n, d), v = arena.tensor(n, d);
    const Tensor qn = arena.tensor(n, d), kn = arena.tensor(n, d), vn = arena.tensor(n, d);
    const Tensor gate = arena.tensor(n, c.n_ff), up = arena.tensor(n, c.n_ff);
    const Tensor clamped_storage = arena.tensor(n, std::max(d, c.n_ff));
    std::vector<float>& tmp = w_->clamp_tmp;
    // One Linear: out = clamp(clamp(x) W^T), the clamps only where the file bounds the matrix.
    auto apply = [&](const Linear& l, const Tensor& xin, const Tensor& out) {
        Tensor src = xin;
        if (l.clamps_input()) {
            src = {clamped_storage.data, xin.rows, xin.cols};
            clamp_host(b, xin, l.in_lo, l.in_hi, tmp, &src);
        }
        const Tensor outs[1] = {out};
        b.matmul(*l.w, src, outs);
        if (l.clamps_output()) clamp_host(b, out, l.out_lo, l.out_hi, tmp, nullptr);
    };

    // Patch embedding of 2 p - 1, then the two position tables.
    std::vector<float> pixels(patches.rows.size());
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = 2.0f * patches.rows[i] - 1.0f;
    const Tensor pixel_t = arena.tensor(n, patches.row_size());
    b.write(pixel_t, pixels.data());
    const Tensor x_out[1] = {x};
    b.matmul(*w_->patch, pixel_t, x_out);
    std::vector<float> pos(size_t(n * d));
    const float* column_table = w_->positions.data();
    const float* row_table = column_table + size_t(c.pos_size * d);
    for (int64_t r = 0; r < n; ++r)
        for (int64_t i = 0; i < d; ++i)
            pos[size_t(r * d + i)] = column_table[size_t((r % gw) * d + i)] + row_table[size_t((r / gw) * d + i)];
    b.write(h, pos.data());
    b.add(x, h);

    const backend::AttentionParams params{.n_heads = int32_t(heads), .scale = 1.0f, .causal = false};
    auto per_head = [&](const Tensor& a) { return Tensor{a.data, a.rows * heads, hd}; };
    for (size_t l = 0; l < w_->layers.size(); ++l) {
        const auto& L = w_->layers[l];
        b.rms_norm(x, *L.ln1, c.eps, h);
        apply(L.q, h, q);
        apply(L.k, h, k);
        apply(L.v, h, v);
        b.rms_norm(per_head(q), *L.q_norm, c.eps, per_head(qn));
        b.rms_norm(per_head(k), *L.k_norm, c.eps, per_head(kn));
        b.rms_norm(per_head(v), *w_->ones_head, c.eps, per_head(vn));
        b.rope(qn, *w_->rope, int32_t(heads), int32_t(hd));
        b.rope(kn, *w_->rope, int32_t(heads), int32_t(hd));
        b.kv_write(*w_->cache, int32_t(l), kn, vn);
        b.attention(*w_->cache, int32_t(l), qn, attn, params);
        apply(L.out, attn, o);
        b.rms_norm(o, *L.post_attn, c.eps, h);
        b.add(x, h);
        b.rms_norm(x, *L.ln2, c.eps, h);
        apply(L.gate, h, gate);
        apply(L.up, h, up);
        b.gelu_mul(gate, up, gate);  // gelu_pytorch_tanh(gate) * up
        apply(L.down, gate, o);
        b.rms_norm(o, *L.post_ffn, c.eps, h);
        b.add(x, h);
    }

    // Gemma4VisionPooler: the mean of each pool x pool window (in double), times sqrt(d); then the
    // optional standardisation.
    std::vector<float> hidden(size_t(n * d));
    b.read(x, hidden.data());
    std::vector<float> pooled(size_t(t * d));
    std::vector<double> acc(static_cast<size_t>(d));
    const double scale = std::sqrt(double(d)) / double(k_pool * k_pool);
    for (int64_t cy = 0; cy < out_h; ++cy)
        for (int64_t cx = 0; cx < out_w; ++cx) {
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int64_t dy = 0; dy < k_pool; ++dy)
                for (int64_t dx = 0; dx < k_pool; ++dx) {
                    const float* src = &hidden[size_t(((cy * k_pool + dy) * gw + cx * k_pool + dx) * d)];
                    for (int64_t i = 0; i < d; ++i) acc[size_t(i)] += src[i];
                }
            float* dst = &pooled[size_t((cy * out_w + cx) * d)];
            for (int64_t i = 0; i < d; ++i) {
                float value = float(acc[size_t(i)] * scale);
                if (c.standardize) value = (value - w_->std_bias[size_t(i)]) * w_->std_scale[size_t(i)];
                dst[i] = value;
            }
        }
    const Tensor pool_t = arena.tensor(t, d), normed = arena.tensor(t, d), out = arena.tensor(t, c.text_dim);
    b.write(pool_t, pooled.data());
    b.rms_norm(pool_t, *w_->ones_width, c.eps, normed);
    apply(w_->projection, normed, out);
    std::vector<float> result(size_t(t * c.text_dim));
    b.read(out, result.data());
    return result;
}

}  // namespace pagoda::vision
