// Qwen3-VL's vision tower and mergers on backend ops (see qwen3vl_tower.h).
#include "vision/qwen3vl_tower.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "vision/mmproj_tensors.h"
#include "vision/qwen3vl_preprocess.h"
#include "vision/vit_block.h"

namespace pagoda::vision {

namespace {

using backend::Tensor;
using backend::WeightUse;

struct Merger {
    std::shared_ptr<backend::Weight> fc1, fc2;
    std::shared_ptr<backend::Vector> norm_w, norm_b, fc1_b, fc2_b;
    bool norm_after_shuffle = false;
};

}  // namespace

struct Qwen3VlTower::Weights {
    struct Layer : VitLayer {
        int deepstack = -1;  // index into deepstack
    };
    std::vector<float> patch_sum;  // W0 + W1, d rows of 3 p^2
    std::shared_ptr<backend::Weight> patch;
    std::shared_ptr<backend::Vector> patch_b;
    std::vector<float> positions;  // G^2 rows of d
    std::shared_ptr<backend::Rope> rope;
    std::vector<Layer> layers;
    Merger main;
    std::vector<Merger> deepstack;
    std::unique_ptr<backend::KvCache> cache;
    int64_t reserved_patches = 0;
    size_t arena_elements = 0;
};

Qwen3VlTower::Qwen3VlTower(const gguf::File& file, backend::Backend& b) : Qwen3VlTower(file, read_vision_config(file), b) {}

Qwen3VlTower::Qwen3VlTower(const gguf::File& file, VisionConfig config, backend::Backend& b)
    : backend_(b), config_(std::move(config)), w_(std::make_unique<Weights>()) {
    const VisionConfig& c = config_;
    if (!c.qwen3vl()) fail("{}: a {} projector is not Qwen3-VL's (qwen3vl_merger)", file.name(), c.projector);
    for (auto op : {backend::OpKind::layer_norm, backend::OpKind::gelu})
        if (!b.supports(op))
            fail("{}: the {} backend cannot run the vision tower: it has no {} op (use --backend cpu)", file.name(),
                 b.name(), backend::op_name(op));
    if (!b.supports_attention({.n_heads = int32_t(c.n_heads), .scale = 0, .causal = false}))
        fail("{}: the {} backend cannot run the vision tower: it has no non-causal attention (use --backend cpu)",
             file.name(), b.name());
    const int64_t d = c.n_embd, row = 3 * c.patch_size * c.patch_size, m = c.merge * c.merge * d;
    auto vec = [&](const std::string& name) { return b.upload_vector(tensor_floats(file, name)); };
    auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
        return b.upload_weight({matrix_source(file, name, rows, cols)}, WeightUse::matmul);
    };
    // Both temporal kernels see the same picture: one kernel of their sum, in f32.
    w_->patch_sum = tensor_floats(file, "v.patch_embd.weight");
    const std::vector<float> second = tensor_floats(file, "v.patch_embd.weight.1");
    for (size_t i = 0; i < second.size(); ++i) w_->patch_sum[i] += second[i];
    w_->patch = b.upload_weight({backend::MatrixSource{gguf::GgmlType::F32, w_->patch_sum.data(), d, row,
                                                       "v.patch_embd.weight + v.patch_embd.weight.1", false}},
                                WeightUse::matmul);
    w_->patch_b = vec("v.patch_embd.bias");
    w_->positions = tensor_floats(file, "v.position_embd.weight");
    // 2D RoPE: NEOX halves over the head; pairs [0, q) read the row (axis 1), [q, 2q) the column (axis 2).
    const int64_t hd = c.head_dim(), q = hd / 4;
    backend::RopeSpec spec{.dims = hd, .neox = true};
    for (int64_t i = 0; i < 2 * q; ++i) {
        spec.inv_freq.push_back(std::pow(double(c.rope_theta), -double(2 * (i % q)) / double(2 * q)));
        spec.pair_axis.push_back(i < q ? 1 : 2);
    }
    w_->rope = b.upload_rope(std::move(spec));
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const std::string p = fmt::format("v.blk.{}.", l);
        w_->layers.push_back({load_vit_layer(file, b, p, d, c.n_ff, {.fused_qkv = true})});
    }
    auto merger = [&](const std::string& norm, const std::string& fc1, const std::string& fc2, bool after) {
        return Merger{.fc1 = matrix(fc1 + ".weight", m, m), .fc2 = matrix(fc2 + ".weight", c.text_dim, m),
                      .norm_w = vec(norm + ".weight"), .norm_b = vec(norm + ".bias"), .fc1_b = vec(fc1 + ".bias"),
                      .fc2_b = vec(fc2 + ".bias"), .norm_after_shuffle = after};
    };
    w_->main = merger("v.post_ln", "mm.0", "mm.2", false);
    for (int32_t l : c.deepstack_layers) {
        const std::string p = fmt::format("v.deepstack.{}.", l);
        w_->layers[size_t(l)].deepstack = int(w_->deepstack.size());
        w_->deepstack.push_back(merger(p + "norm", p + "fc1", p + "fc2", true));
    }
}

Qwen3VlTower::~Qwen3VlTower() = default;

TowerInput Qwen3VlTower::preprocess(const Image& image) const {
    const VisionConfig& c = config_;
    TowerInput in{.patches = qwen3vl_preprocess(image, c.patch_size, c.merge, c.min_pixels, c.max_pixels, c.norm)};
    in.grid_h = in.patches.grid_h / c.merge;
    in.grid_w = in.patches.grid_w / c.merge;
    return in;
}

std::vector<float> Qwen3VlTower::interpolated_positions(int64_t gh, int64_t gw) const {
    const VisionConfig& c = config_;
    const int64_t g = c.pos_grid, d = c.n_embd, mg = c.merge;
    // torch.linspace(0, G - 1, n) in float32, then floor / ceil (clipped) and the fractions.
    auto axis = [&](int64_t n) {
        std::vector<float> at(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) at[size_t(i)] = n == 1 ? 0.0f : float(double(i) * double(g - 1) / double(n - 1));
        return at;
    };
    const std::vector<float> ys = axis(gh), xs = axis(gw);
    std::vector<float> out(size_t(gh * gw * d));
    int64_t r = 0;
    for (int64_t by = 0; by < gh / mg; ++by)
        for (int64_t bx = 0; bx < gw / mg; ++bx)
            for (int64_t dy = 0; dy < mg; ++dy)
                for (int64_t dx = 0; dx < mg; ++dx, ++r) {
                    const float y = ys[size_t(by * mg + dy)], x = xs[size_t(bx * mg + dx)];
                    const int64_t y0 = int64_t(y), x0 = int64_t(x);
                    const int64_t y1 = std::min(y0 + 1, g - 1), x1 = std::min(x0 + 1, g - 1);
                    const double fy = double(y - float(y0)), fx = double(x - float(x0));
                    const double wts[4] = {(1 - fy) * (1 - fx), (1 - fy) * fx, fy * (1 - fx), fy * fx};
                    const int64_t idx[4] = {y0 * g + x0, y0 * g + x1, y1 * g + x0, y1 * g + x1};
                    for (int64_t i = 0; i < d; ++i) {
                        double v = 0;
                        for (int k = 0; k < 4; ++k) v += wts[k] * double(w_->positions[size_t(idx[k] * d + i)]);
                        out[size_t(r * d + i)] = float(v);
                    }
                }
    return out;
}

void Qwen3VlTower::reserve(int64_t n) {
    if (n <= w_->reserved_patches) return;
    const VisionConfig& c = config_;
    backend::Backend& b = backend_;
    const int64_t d = c.n_embd, t = n / (c.merge * c.merge), slices = 1 + int64_t(c.deepstack_layers.size());
    kv::KvLayout layout{.n_layers = int32_t(c.n_layers), .n_kv_heads = int32_t(c.n_heads),
                        .head_dim = int32_t(c.head_dim()), .block_size = kv::kDefaultBlockSize, .dtype = kv::KvDtype::f32};
    layout.validate();
    w_->cache.reset();
    w_->cache = b.create_kv_cache(layout, (n + layout.block_size - 1) / layout.block_size);
    // x, h, q, k, v, attn, o, positions: 8 n x d; up and ones: 2 n x ff; pixels n x 3p^2; a merger's
    // normed input and hidden: 2 n x d; the outputs: slices x t x text.
    w_->arena_elements = size_t(10 * n * d + 2 * n * c.n_ff + n * 3 * c.patch_size * c.patch_size +
                                slices * t * c.text_dim);
    b.reserve_activations(w_->arena_elements * b.activation_size(), n);
    w_->reserved_patches = n;
}

std::vector<float> Qwen3VlTower::encode(const Patches& patches) {
    const VisionConfig& c = config_;
    const int64_t mg = c.merge;
    if (patches.patch != c.patch_size || patches.grid_w % mg || patches.grid_h % mg || patches.grid_w < mg ||
        patches.grid_h < mg || int64_t(patches.rows.size()) != patches.count() * patches.row_size())
        fail("qwen3vl vision tower: a {}x{} grid of {}x{} patches given; the tower takes {}x{} patches in a grid of "
             "multiples of {}", patches.grid_w, patches.grid_h, patches.patch, patches.patch, c.patch_size, c.patch_size, mg);
    backend::Backend& b = backend_;
    const int64_t n = patches.count(), d = c.n_embd, t = n / (mg * mg), m = mg * mg * d;
    reserve(n);
    std::vector<int32_t> tokens(static_cast<size_t>(n), 0), positions(static_cast<size_t>(n)),
        seq(static_cast<size_t>(n), 0), axes(static_cast<size_t>(3 * n)), no_rows;
    std::iota(positions.begin(), positions.end(), 0);
    std::vector<int64_t> slots(positions.begin(), positions.end());
    int64_t r = 0;
    for (int64_t by = 0; by < patches.grid_h / mg; ++by)
        for (int64_t bx = 0; bx < patches.grid_w / mg; ++bx)
            for (int64_t dy = 0; dy < mg; ++dy)
                for (int64_t dx = 0; dx < mg; ++dx, ++r) {
                    axes[size_t(3 * r + 1)] = int32_t(by * mg + dy);  // the patch's row and column
                    axes[size_t(3 * r + 2)] = int32_t(bx * mg + dx);
                }
    std::vector<std::vector<int32_t>> tables(1);
    for (int32_t i = 0; i < w_->cache->n_blocks(); ++i) tables[0].push_back(i);
    backend::StepInputs in{.tokens = tokens, .positions = positions, .seq_index = seq, .slots = slots,
                           .logit_rows = no_rows, .block_tables = tables, .hidden_rows = no_rows};
    in.rope_positions = axes;
    b.begin_step(in);

    ActivationArena arena(b, w_->arena_elements);
    const Tensor x = arena.tensor(n, d), h = arena.tensor(n, d), attn = arena.tensor(n, d), o = arena.tensor(n, d);
    const Tensor q = arena.tensor(n, d), k = arena.tensor(n, d), v = arena.tensor(n, d), pos = arena.tensor(n, d);
    const Tensor up = arena.tensor(n, c.n_ff), ones = arena.tensor(n, c.n_ff);
    const Tensor merged_norm = arena.tensor(t, m), merged_hidden = arena.tensor(t, m);
    const std::vector<float> one(size_t(n * c.n_ff), 1.0f);
    b.write(ones, one.data());
    const Tensor pixels = arena.tensor(n, patches.row_size());
    b.write(pixels, patches.rows.data());
    const Tensor x_out[1] = {x};
    b.matmul(*w_->patch, pixels, x_out);
    b.add_bias(x, *w_->patch_b);
    const std::vector<float> table = interpolated_positions(patches.grid_h, patches.grid_w);
    b.write(pos, table.data());
    b.add(x, pos);

    std::vector<Tensor> outputs;  // main, then each deep-stack merger's
    for (size_t s = 0; s <= w_->deepstack.size(); ++s) outputs.push_back(arena.tensor(t, c.text_dim));
    // A merger reads the n x d patch rows as t rows of merge^2 d values, as they lie (merge order).
    auto run_merger = [&](const Merger& mw, const Tensor& out) {
        Tensor in;
        if (mw.norm_after_shuffle) {
            b.layer_norm({x.data, t, m}, *mw.norm_w, *mw.norm_b, c.eps, merged_norm);
            in = merged_norm;
        } else {
            b.layer_norm(x, *mw.norm_w, *mw.norm_b, c.eps, h);
            in = {h.data, t, m};
        }
        const Tensor hidden_out[1] = {merged_hidden}, out1[1] = {out};
        b.matmul(*mw.fc1, in, hidden_out);
        b.add_bias(merged_hidden, *mw.fc1_b);
        b.gelu(merged_hidden);  // nn.GELU(): the erf form
        b.matmul(*mw.fc2, merged_hidden, out1);
        b.add_bias(out, *mw.fc2_b);
    };
    const backend::AttentionParams params{.n_heads = int32_t(c.n_heads),
                                          .scale = 1.0f / std::sqrt(float(c.head_dim())), .causal = false};
    const VitScratch scratch{h, q, k, v, attn, o, up, ones};
    const VitAttention attention{.cache = w_->cache.get(), .params = params, .rope = w_->rope.get(),
                                 .heads = int32_t(c.n_heads), .head_dim = int32_t(c.head_dim())};
    for (size_t l = 0; l < w_->layers.size(); ++l) {
        const auto& L = w_->layers[l];
        run_vit_block(b, L, int32_t(l), x, scratch, attention, c.eps);
        if (L.deepstack >= 0) run_merger(w_->deepstack[size_t(L.deepstack)], outputs[size_t(L.deepstack) + 1]);
    }
    run_merger(w_->main, outputs[0]);

    const int64_t width = c.token_width();
    std::vector<float> slice(size_t(t * c.text_dim)), result(size_t(t * width));
    for (size_t s = 0; s < outputs.size(); ++s) {
        b.read(outputs[s], slice.data());
        for (int64_t r2 = 0; r2 < t; ++r2)
            std::copy_n(&slice[size_t(r2 * c.text_dim)], c.text_dim, &result[size_t(r2 * width + int64_t(s) * c.text_dim)]);
    }
    return result;
}

}  // namespace pagoda::vision
