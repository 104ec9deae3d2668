#include "model/model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/ops.h"

namespace pagoda::model {

std::unique_ptr<Model> Model::load(const std::string& path, const ModelOptions& options) {
    std::shared_ptr<const gguf::File> file = gguf::File::open(path);
    return from_file(std::move(file), options);
}

std::unique_ptr<Model> Model::from_file(std::shared_ptr<const gguf::File> file, const ModelOptions& options) {
    std::unique_ptr<Model> m(new Model());
    m->file_ = std::move(file);
    m->config_ = read_config(*m->file_);
    m->weights_ = bind_weights(*m->file_, m->config_);
    const auto& c = m->config_;
    // Frequencies in double: positions up to 10^5 times a frequency must keep their fraction.
    for (int64_t i = 0; i < c.rope_dims / 2; ++i) {
        double inv = std::pow(double(c.rope_theta), -2.0 * double(i) / double(c.rope_dims));
        if (!m->weights_.rope_freq_factors.empty()) inv /= m->weights_.rope_freq_factors[size_t(i)];
        m->rope_inv_freq_.push_back(inv / c.rope_linear_scale);
    }
    kernels::log_kernel_paths();  // once per process: which ISA and quantised path the matmuls use
    m->pool_ = std::make_unique<ThreadPool>(options.n_threads > 0 ? options.n_threads : default_thread_count());
    return m;
}

kv::KvLayout Model::kv_layout(int32_t block_size, std::optional<kv::KvDtype> dtype) const {
    kv::KvLayout l;
    l.n_layers = int32_t(config_.n_layers);
    l.n_kv_heads = int32_t(config_.n_kv_heads);
    l.head_dim = int32_t(config_.head_dim);
    l.block_size = block_size;
    l.dtype = dtype ? *dtype : weights_.layers[0].qkv[0].source().type == gguf::GgmlType::F32 ? kv::KvDtype::f32 : kv::KvDtype::f16;
    l.validate();
    return l;
}

std::vector<std::span<const uint8_t>> Model::weight_memory() const {
    std::vector<std::span<const uint8_t>> out;
    auto add = [&](const kernels::PackedWeight& w) {
        if (w.is_packed()) {
            out.emplace_back(w.data(), w.packed_bytes());
            return;
        }
        for (const auto& part : w.parts()) out.emplace_back(static_cast<const uint8_t*>(part.data), part.bytes());
    };
    for (const auto& l : weights_.layers) {
        for (const auto& w : l.qkv) add(w);
        add(l.wo);
        for (const auto& w : l.gate_up) add(w);
        add(l.w_down);
    }
    add(weights_.output);
    return out;
}

void Model::validate(const Batch& batch, const kv::KvPool& pool) const {
    const int64_t n = batch.size();
    if (int64_t(batch.positions.size()) != n || int64_t(batch.seq_index.size()) != n ||
        int64_t(batch.slots.size()) != n || int64_t(batch.want_logits.size()) != n)
        fail("malformed batch: field lengths differ");
    const auto& l = pool.layout();
    if (l.n_layers != config_.n_layers || l.n_kv_heads != config_.n_kv_heads || l.head_dim != config_.head_dim)
        fail("the KV pool's shape does not match the model");
    for (int64_t t = 0; t < n; ++t) {
        if (batch.tokens[t] < 0 || batch.tokens[t] >= config_.vocab_size)
            fail("token id {} is outside the vocabulary of {} tokens", batch.tokens[t], config_.vocab_size);
        if (batch.seq_index[t] < 0 || batch.seq_index[t] >= int64_t(batch.block_tables.size()))
            fail("token {} names sequence {} but the batch has {} block tables", t, batch.seq_index[t],
                 batch.block_tables.size());
        const auto& table = batch.block_tables[size_t(batch.seq_index[t])];
        const int64_t pos = batch.positions[t];
        if (pos < 0 || pos >= int64_t(table.size()) * pool.block_size())
            fail("position {} is outside its sequence's {} KV blocks", pos, table.size());
        if (batch.slots[t] < 0 || batch.slots[t] >= pool.n_slots())
            fail("KV slot {} is outside the pool of {} slots", batch.slots[t], pool.n_slots());
    }
    for (const auto& table : batch.block_tables)
        for (int32_t b : table)
            if (b < 0 || b >= pool.n_blocks()) fail("block id {} is outside the pool of {} blocks", b, pool.n_blocks());
    for (const auto& c : batch.block_copies)
        if (c.src < 0 || c.src >= pool.n_blocks() || c.dst < 0 || c.dst >= pool.n_blocks())
            fail("block copy {} -> {} is outside the pool", c.src, c.dst);
}

void Model::compute_rope_tables(const Batch& batch) {
    // Positions are the same in every layer: the angles are computed once per forward step.
    const int64_t half = config_.rope_dims / 2;
    rope_cos_.resize(size_t(batch.size() * half));
    rope_sin_.resize(size_t(batch.size() * half));
    for (int64_t t = 0; t < batch.size(); ++t) {
        for (int64_t i = 0; i < half; ++i) {
            double angle = double(batch.positions[t]) * rope_inv_freq_[size_t(i)];
            rope_cos_[size_t(t * half + i)] = float(std::cos(angle));
            rope_sin_[size_t(t * half + i)] = float(std::sin(angle));
        }
    }
}

std::vector<float> Model::forward(const Batch& batch, kv::KvPool& pool) {
    validate(batch, pool);
    for (const auto& c : batch.block_copies) pool.copy_block(c.src, c.dst);
    const auto& c = config_;
    const int64_t n = batch.size();
    if (n == 0) return {};
    auto grow = [](std::vector<float>& b, int64_t size) { if (int64_t(b.size()) < size) b.resize(size_t(size)); };
    grow(x_, n * c.dim); grow(h_, n * c.dim); grow(q_, n * c.q_dim()); grow(k_, n * c.kv_dim());
    grow(v_, n * c.kv_dim()); grow(attn_, n * c.q_dim()); grow(gate_, n * c.ffn_dim); grow(up_, n * c.ffn_dim);
    float* x = x_.data();
    float* h = h_.data();
    compute_rope_tables(batch);

    std::vector<kernels::AttentionSeq> seqs;
    for (const auto& table : batch.block_tables) seqs.push_back({table.data(), int32_t(table.size())});
    kernels::PagedAttentionBatch attention;
    attention.q = q_.data();
    attention.n_tokens = n;
    attention.n_heads = int32_t(c.n_heads);
    attention.token_seq = batch.seq_index.data();
    attention.token_pos = batch.positions.data();
    attention.seqs = seqs.data();
    attention.n_seqs = int32_t(seqs.size());
    attention.scale = 1.0f / std::sqrt(float(c.head_dim));

    for (int64_t t = 0; t < n; ++t) kernels::dequantize_row(weights_.token_embd, batch.tokens[t], x + t * c.dim);

    // Per-token elementwise work (norms, residuals, RoPE, SwiGLU) between the matmuls: spread over the
    // pool for prefill, inline for a decode step (one parallel region per step is worth it only when
    // there are enough tokens). Each token's arithmetic is the same either way.
    auto per_token = [&](const auto& fn) {
        if (n < 8) {
            for (int64_t t = 0; t < n; ++t) fn(t);
            return;
        }
        pool_->parallel_for(n, 4, [&](int64_t begin, int64_t end, int) {
            for (int64_t t = begin; t < end; ++t) fn(t);
        });
    };
    const int64_t half = c.rope_dims / 2;
    const bool neox = c.rope_style == RopeStyle::neox;
    const int64_t qkv_width = c.q_dim() + 2 * c.kv_dim();

    for (int64_t l = 0; l < c.n_layers; ++l) {
        const LayerWeights& w = weights_.layers[size_t(l)];
        per_token([&](int64_t t) {
            if (l > 0) kernels::add_inplace(x + t * c.dim, h + t * c.dim, c.dim);  // previous FFN's residual
            kernels::rms_norm(x + t * c.dim, w.attn_norm.data(), c.dim, c.rms_eps, h + t * c.dim);
        });
        observe(l, MatmulInput::attention, h, n, c.dim);
        const bool stacked_qkv = w.qkv.size() == 1;
        if (stacked_qkv) {
            grow(fused_, n * qkv_width);
            kernels::matmul(w.qkv[0], h, n, fused_.data(), *pool_);
        } else {
            kernels::matmul(w.qkv[0], h, n, q_.data(), *pool_);
            kernels::matmul(w.qkv[1], h, n, k_.data(), *pool_);
            kernels::matmul(w.qkv[2], h, n, v_.data(), *pool_);
        }
        per_token([&](int64_t t) {
            float* q = q_.data() + t * c.q_dim();
            float* k = k_.data() + t * c.kv_dim();
            float* v = v_.data() + t * c.kv_dim();
            if (stacked_qkv) {
                // Each token's row holds [q | k | v]: split into the per-projection buffers.
                const float* row = fused_.data() + t * qkv_width;
                std::copy(row, row + c.q_dim(), q);
                std::copy(row + c.q_dim(), row + c.q_dim() + c.kv_dim(), k);
                std::copy(row + c.q_dim() + c.kv_dim(), row + qkv_width, v);
            }
            if (!w.bq.empty()) {
                kernels::add_inplace(q, w.bq.data(), c.q_dim());
                kernels::add_inplace(k, w.bk.data(), c.kv_dim());
                kernels::add_inplace(v, w.bv.data(), c.kv_dim());
            }
            const float* cos = rope_cos_.data() + t * half;
            const float* sin = rope_sin_.data() + t * half;
            kernels::rope(q, c.n_heads, c.head_dim, c.rope_dims, cos, sin, neox);
            kernels::rope(k, c.n_kv_heads, c.head_dim, c.rope_dims, cos, sin, neox);
        });
        pool.write(int32_t(l), batch.slots.data(), n, k_.data(), v_.data());
        kernels::paged_attention(attention, pool, int32_t(l), attn_.data(), *pool_);
        observe(l, MatmulInput::attention_output, attn_.data(), n, c.q_dim());
        kernels::matmul(w.wo, attn_.data(), n, h, *pool_);
        per_token([&](int64_t t) {
            kernels::add_inplace(x + t * c.dim, h + t * c.dim, c.dim);
            kernels::rms_norm(x + t * c.dim, w.ffn_norm.data(), c.dim, c.rms_eps, h + t * c.dim);
        });
        observe(l, MatmulInput::ffn, h, n, c.dim);
        if (w.gate_up.size() == 1) {
            grow(fused_, n * 2 * c.ffn_dim);
            kernels::matmul(w.gate_up[0], h, n, fused_.data(), *pool_);
            per_token([&](int64_t t) {
                // Each token's row holds [gate | up].
                const float* row = fused_.data() + t * 2 * c.ffn_dim;
                kernels::silu_mul(row, row + c.ffn_dim, c.ffn_dim, gate_.data() + t * c.ffn_dim);
            });
        } else {
            kernels::matmul(w.gate_up[0], h, n, gate_.data(), *pool_);
            kernels::matmul(w.gate_up[1], h, n, up_.data(), *pool_);
            per_token([&](int64_t t) {
                const int64_t o = t * c.ffn_dim;
                kernels::silu_mul(gate_.data() + o, up_.data() + o, c.ffn_dim, gate_.data() + o);
            });
        }
        observe(l, MatmulInput::ffn_down, gate_.data(), n, c.ffn_dim);
        kernels::matmul(w.w_down, gate_.data(), n, h, *pool_);
    }
    per_token([&](int64_t t) { kernels::add_inplace(x + t * c.dim, h + t * c.dim, c.dim); });  // last FFN's residual

    const int64_t rows = batch.n_logit_rows();
    std::vector<float> normed(static_cast<size_t>(rows * c.dim));
    int64_t r = 0;
    for (int64_t t = 0; t < n; ++t) {
        if (!batch.want_logits[t]) continue;
        kernels::rms_norm(x + t * c.dim, weights_.output_norm.data(), c.dim, c.rms_eps, normed.data() + r * c.dim);
        ++r;
    }
    std::vector<float> logits(static_cast<size_t>(rows * c.vocab_size));
    observe(-1, MatmulInput::output, normed.data(), rows, c.dim);
    kernels::matmul(weights_.output, normed.data(), rows, logits.data(), *pool_);
    return logits;
}

}  // namespace pagoda::model
