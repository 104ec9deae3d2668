#include "model/model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/log.h"
#include "gguf/gguf.h"
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
    m->pool_ = std::make_unique<ThreadPool>(options.n_threads > 0 ? options.n_threads : default_thread_count());
    return m;
}

void Model::validate(const Batch& batch, const ContiguousKvCache& cache) const {
    const int64_t n = batch.size();
    if (int64_t(batch.positions.size()) != n || int64_t(batch.seq_ids.size()) != n ||
        int64_t(batch.want_logits.size()) != n)
        fail("malformed batch: field lengths differ");
    for (int64_t t = 0; t < n; ++t) {
        if (batch.tokens[t] < 0 || batch.tokens[t] >= config_.vocab_size)
            fail("token id {} is outside the vocabulary of {} tokens", batch.tokens[t], config_.vocab_size);
        cache.check(batch.seq_ids[t], batch.positions[t]);
    }
}

void Model::rope_rows(float* rows, int64_t n_heads, const Batch& batch) {
    const auto& c = config_;
    const int64_t half = c.rope_dims / 2;
    const int64_t width = n_heads * c.head_dim;
    pool_->parallel_for(batch.size(), 1, [&](int64_t begin, int64_t end, int) {
        std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
        for (int64_t t = begin; t < end; ++t) {
            for (int64_t i = 0; i < half; ++i) {
                double angle = double(batch.positions[t]) * rope_inv_freq_[size_t(i)];
                cs[size_t(i)] = float(std::cos(angle));
                sn[size_t(i)] = float(std::sin(angle));
            }
            kernels::rope(rows + t * width, n_heads, c.head_dim, c.rope_dims, cs.data(), sn.data(),
                          c.rope_style == RopeStyle::neox);
        }
    });
}

void Model::attention(int64_t layer, const Batch& batch, ContiguousKvCache& cache) {
    const auto& c = config_;
    const int64_t n = batch.size(), hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
    const float scale = 1.0f / std::sqrt(float(hd));
    pool_->run(int(n * c.n_heads), [&](int task, int) {
        const int64_t t = task / c.n_heads, h = task % c.n_heads, kvh = h / group;
        const int64_t seq = batch.seq_ids[t], pos = batch.positions[t];
        const float* q = q_.data() + (t * c.n_heads + h) * hd;
        thread_local std::vector<float> scores;
        scores.resize(size_t(pos + 1));
        for (int64_t p = 0; p <= pos; ++p) {
            const float* k = cache.k(layer, seq, p) + kvh * hd;
            float s = 0;
            for (int64_t d = 0; d < hd; ++d) s += q[d] * k[d];
            scores[size_t(p)] = s * scale;
        }
        kernels::softmax(scores.data(), pos + 1);
        float* out = attn_.data() + (t * c.n_heads + h) * hd;
        std::fill(out, out + hd, 0.0f);
        for (int64_t p = 0; p <= pos; ++p) {
            const float* v = cache.v(layer, seq, p) + kvh * hd;
            const float w = scores[size_t(p)];
            for (int64_t d = 0; d < hd; ++d) out[d] += w * v[d];
        }
    });
}

std::vector<float> Model::forward(const Batch& batch, ContiguousKvCache& cache) {
    validate(batch, cache);
    const auto& c = config_;
    const int64_t n = batch.size();
    if (n == 0) return {};
    auto grow = [](std::vector<float>& b, int64_t size) { if (int64_t(b.size()) < size) b.resize(size_t(size)); };
    grow(x_, n * c.dim); grow(h_, n * c.dim); grow(q_, n * c.q_dim()); grow(k_, n * c.kv_dim());
    grow(v_, n * c.kv_dim()); grow(attn_, n * c.q_dim()); grow(gate_, n * c.ffn_dim); grow(up_, n * c.ffn_dim);
    float* x = x_.data();
    float* h = h_.data();

    for (int64_t t = 0; t < n; ++t) kernels::dequantize_row(weights_.token_embd, batch.tokens[t], x + t * c.dim);

    auto add_bias = [&](float* rows, const std::vector<float>& bias, int64_t width) {
        if (bias.empty()) return;
        for (int64_t t = 0; t < n; ++t) kernels::add_inplace(rows + t * width, bias.data(), width);
    };

    for (int64_t l = 0; l < c.n_layers; ++l) {
        const LayerWeights& w = weights_.layers[size_t(l)];
        for (int64_t t = 0; t < n; ++t)
            kernels::rms_norm(x + t * c.dim, w.attn_norm.data(), c.dim, c.rms_eps, h + t * c.dim);
        kernels::matmul(w.wq, h, n, q_.data(), *pool_);
        kernels::matmul(w.wk, h, n, k_.data(), *pool_);
        kernels::matmul(w.wv, h, n, v_.data(), *pool_);
        add_bias(q_.data(), w.bq, c.q_dim());
        add_bias(k_.data(), w.bk, c.kv_dim());
        add_bias(v_.data(), w.bv, c.kv_dim());
        rope_rows(q_.data(), c.n_heads, batch);
        rope_rows(k_.data(), c.n_kv_heads, batch);
        for (int64_t t = 0; t < n; ++t) {
            std::copy_n(k_.data() + t * c.kv_dim(), c.kv_dim(), cache.k(l, batch.seq_ids[t], batch.positions[t]));
            std::copy_n(v_.data() + t * c.kv_dim(), c.kv_dim(), cache.v(l, batch.seq_ids[t], batch.positions[t]));
        }
        attention(l, batch, cache);
        kernels::matmul(w.wo, attn_.data(), n, h, *pool_);
        kernels::add_inplace(x, h, n * c.dim);

        for (int64_t t = 0; t < n; ++t)
            kernels::rms_norm(x + t * c.dim, w.ffn_norm.data(), c.dim, c.rms_eps, h + t * c.dim);
        kernels::matmul(w.w_gate, h, n, gate_.data(), *pool_);
        kernels::matmul(w.w_up, h, n, up_.data(), *pool_);
        kernels::silu_mul(gate_.data(), up_.data(), n * c.ffn_dim, gate_.data());
        kernels::matmul(w.w_down, gate_.data(), n, h, *pool_);
        kernels::add_inplace(x, h, n * c.dim);
    }

    const int64_t rows = batch.n_logit_rows();
    std::vector<float> normed(static_cast<size_t>(rows * c.dim));
    int64_t r = 0;
    for (int64_t t = 0; t < n; ++t) {
        if (!batch.want_logits[t]) continue;
        kernels::rms_norm(x + t * c.dim, weights_.output_norm.data(), c.dim, c.rms_eps, normed.data() + r * c.dim);
        ++r;
    }
    std::vector<float> logits(static_cast<size_t>(rows * c.vocab_size));
    kernels::matmul(weights_.output, normed.data(), rows, logits.data(), *pool_);
    return logits;
}

}  // namespace pagoda::model
