// The SigLIP tower and Gemma 3 projector on backend ops (see vision_tower.h).
#include "vision/vision_tower.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "vision/mmproj_tensors.h"
#include "vision/vit_block.h"

namespace pagoda::vision {

namespace {

using backend::MatrixSource;
using backend::Tensor;
using backend::WeightUse;

}  // namespace

struct VisionTower::Weights {
    std::shared_ptr<backend::Weight> patch, positions, projection;
    std::shared_ptr<backend::Vector> patch_b, post_w, post_b, soft_norm;
    std::vector<VitLayer> layers;
    std::vector<float> projection_rows;  // mm.input_projection transposed: text_dim rows of n_embd
    std::unique_ptr<backend::KvCache> cache;
    std::vector<float> ones;             // the up operand of gelu_mul: gelu(h) * 1
    size_t arena_elements = 0;
};

VisionTower::VisionTower(const gguf::File& file, backend::Backend& b) : VisionTower(file, read_vision_config(file), b) {}

VisionTower::VisionTower(const gguf::File& file, VisionConfig config, backend::Backend& b)
    : backend_(b), config_(std::move(config)), w_(std::make_unique<Weights>()) {
    const VisionConfig& c = config_;
    if (c.projector != "gemma3")
        fail("{}: the {} projector does not run in run, chat and serve yet (Gemma 3's does)", file.name(), c.projector);
    for (auto op : {backend::OpKind::layer_norm, backend::OpKind::position_embedding})
        if (!b.supports(op))
            fail("{}: the {} backend cannot run the vision tower: it has no {} op (use --backend cpu)", file.name(),
                 b.name(), backend::op_name(op));
    const backend::AttentionParams attention{.n_heads = int32_t(c.n_heads), .scale = 0, .causal = false};
    if (!b.supports_attention(attention))
        fail("{}: the {} backend cannot run the vision tower: it has no non-causal attention (use --backend cpu)",
             file.name(), b.name());
    const int64_t d = c.n_embd;
    auto vec = [&](const std::string& name) { return b.upload_vector(tensor_floats(file, name)); };
    auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
        return b.upload_weight({matrix_source(file, name, rows, cols)}, WeightUse::matmul);
    };
    // The conv weight [p, p, 3, d] is d rows of (c, ky, kx): the patch rows' order (preprocess.h).
    w_->patch = matrix("v.patch_embd.weight", d, 3 * c.patch_size * c.patch_size);
    if (file.find_tensor("v.patch_embd.bias")) w_->patch_b = vec("v.patch_embd.bias");
    w_->positions = b.upload_weight({matrix_source(file, "v.position_embd.weight", c.n_patches(), d)}, WeightUse::embedding);
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const std::string p = fmt::format("v.blk.{}.", l);
        w_->layers.push_back(load_vit_layer(file, b, p, d, c.n_ff, {.ffn_up = c.ffn_up, .ffn_down = c.ffn_down}));
    }
    w_->post_w = vec("v.post_ln.weight");
    w_->post_b = vec("v.post_ln.bias");
    w_->soft_norm = vec("mm.soft_emb_norm.weight");
    // [text_dim, n_embd] in ggml order is n_embd rows of text_dim (x W): transpose to text_dim rows.
    const std::vector<float> proj = tensor_floats(file, "mm.input_projection.weight");
    w_->projection_rows.resize(proj.size());
    for (int64_t i = 0; i < d; ++i)
        for (int64_t o = 0; o < c.text_dim; ++o)
            w_->projection_rows[size_t(o * d + i)] = proj[size_t(i * c.text_dim + o)];
    w_->projection = b.upload_weight({MatrixSource{gguf::GgmlType::F32, w_->projection_rows.data(), c.text_dim, d,
                                                   "mm.input_projection.weight (transposed)", false}},
                                     WeightUse::matmul);

    const int64_t n = c.n_patches(), t = c.n_image_tokens();
    kv::KvLayout layout{.n_layers = int32_t(c.n_layers), .n_kv_heads = int32_t(c.n_heads),
                        .head_dim = int32_t(c.head_dim()), .block_size = kv::kDefaultBlockSize, .dtype = kv::KvDtype::f32};
    layout.validate();
    w_->cache = b.create_kv_cache(layout, (n + layout.block_size - 1) / layout.block_size);
    w_->ones.assign(size_t(n * c.n_ff), 1.0f);
    // x, h, q, k, v, attn, o: 7 n x d; up and ones: 2 n x ff; pixels n x 3p^2; pooled, normed: 2 t x d;
    // out t x text.
    w_->arena_elements = size_t(7 * n * d + 2 * n * c.n_ff + n * 3 * c.patch_size * c.patch_size + 2 * t * d +
                                t * c.text_dim);
    b.reserve_activations(w_->arena_elements * b.activation_size(), n);
}

VisionTower::~VisionTower() = default;

TowerInput VisionTower::preprocess(const Image& image) const {
    const VisionConfig& c = config_;
    return {.patches = siglip_preprocess(image, c.image_size, c.patch_size, c.norm), .grid_h = c.tokens_per_side(),
            .grid_w = c.tokens_per_side()};
}

std::vector<float> VisionTower::encode(const Patches& patches) {
    const VisionConfig& c = config_;
    if (patches.patch != c.patch_size || patches.count() != c.n_patches())
        fail("vision tower: {} patches of {}x{} given, the tower takes {} of {}x{}", patches.count(), patches.patch,
             patches.patch, c.n_patches(), c.patch_size, c.patch_size);
    backend::Backend& b = backend_;
    const int64_t n = c.n_patches(), d = c.n_embd, t = c.n_image_tokens();
    // One sequence of n positions over the cache's blocks, every row a "token" of the step.
    std::vector<int32_t> tokens(static_cast<size_t>(n), 0), positions(static_cast<size_t>(n)), seq(static_cast<size_t>(n), 0), no_rows;
    std::iota(positions.begin(), positions.end(), 0);
    std::vector<int64_t> slots(positions.begin(), positions.end());
    std::vector<std::vector<int32_t>> tables(1);
    for (int32_t i = 0; i < w_->cache->n_blocks(); ++i) tables[0].push_back(i);
    b.begin_step({tokens, positions, seq, slots, no_rows, tables, no_rows});

    ActivationArena arena(b, w_->arena_elements);
    Tensor x = arena.tensor(n, d), h = arena.tensor(n, d), attn = arena.tensor(n, d), o = arena.tensor(n, d);
    Tensor q = arena.tensor(n, d), k = arena.tensor(n, d), v = arena.tensor(n, d);
    Tensor up = arena.tensor(n, c.n_ff), ones = arena.tensor(n, c.n_ff);
    b.write(ones, w_->ones.data());
    Tensor pixels = arena.tensor(n, patches.row_size());
    b.write(pixels, patches.rows.data());
    const Tensor x_out[1] = {x};
    b.matmul(*w_->patch, pixels, x_out);
    if (w_->patch_b) b.add_bias(x, *w_->patch_b);
    b.add_position_embedding(*w_->positions, x);
    const backend::AttentionParams params{.n_heads = int32_t(c.n_heads),
                                          .scale = 1.0f / std::sqrt(float(c.head_dim())), .causal = false};
    const VitScratch scratch{h, q, k, v, attn, o, up, ones};
    const VitAttention attention{.cache = w_->cache.get(), .params = params};
    for (size_t l = 0; l < w_->layers.size(); ++l) run_vit_block(b, w_->layers[l], int32_t(l), x, scratch, attention, c.eps);
    b.layer_norm(x, *w_->post_w, *w_->post_b, c.eps, h);

    // Average pooling of the patch grid (row-major, side s) into (s / pool)^2 cells, in double.
    std::vector<float> hidden(size_t(n * d));
    b.read(h, hidden.data());
    const int64_t side = c.patches_per_side(), cells = c.tokens_per_side(), k_pool = c.pool;
    std::vector<float> pooled(size_t(t * d));
    std::vector<double> acc(static_cast<size_t>(d));
    for (int64_t cy = 0; cy < cells; ++cy)
        for (int64_t cx = 0; cx < cells; ++cx) {
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int64_t dy = 0; dy < k_pool; ++dy)
                for (int64_t dx = 0; dx < k_pool; ++dx) {
                    const float* row = &hidden[size_t(((cy * k_pool + dy) * side + cx * k_pool + dx) * d)];
                    for (int64_t i = 0; i < d; ++i) acc[size_t(i)] += row[i];
                }
            for (int64_t i = 0; i < d; ++i)
                pooled[size_t((cy * cells + cx) * d + i)] = float(acc[size_t(i)] / double(k_pool * k_pool));
        }
    Tensor pool_t = arena.tensor(t, d), normed = arena.tensor(t, d), out = arena.tensor(t, c.text_dim);
    b.write(pool_t, pooled.data());
    b.rms_norm(pool_t, *w_->soft_norm, c.eps, normed);
    const Tensor proj_out[1] = {out};
    b.matmul(*w_->projection, normed, proj_out);
    std::vector<float> result(size_t(t * c.text_dim));
    b.read(out, result.data());
    return result;
}

}  // namespace pagoda::vision
