#include "backend/reference/reference_backend.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <functional>
#include <limits>
#include <numbers>
#include <utility>

#include "backend/alibi.h"
#include "backend/attention_span.h"
#include "backend/reference/reference_attention.h"
#include "backend/reference/reference_kv_cache.h"
#include "backend/reference/reference_lora.h"
#include "backend/reference/reference_math.h"
#include "backend/reference/reference_moe.h"
#include "backend/reference/reference_recurrent.h"
#include "backend/reference/reference_weights.h"
#include "core/error.h"

namespace pagoda::backend {
namespace {

using reference::attend_head;
using reference::dequantize_row;
using reference::ReferenceKvCache;
using reference::ReferenceRope;
using reference::ReferenceVector;
using reference::ReferenceWeight;
using reference::validate_part;

using reference::gelu_tanh;
using reference::silu;
using reference::softmax_row;

void expect_shape(const Tensor& t, int64_t rows, int64_t cols, const char* op, const char* what) {
    if (t.rows != rows || t.cols != cols)
        fail("reference {}: {} is {}x{}, expected {}x{}", op, what, t.rows, t.cols, rows, cols);
}

// Ops that do not allow in-place use check their output against their inputs.
void expect_disjoint(const Tensor& a, const Tensor& b, const char* op) {
    const auto* a0 = static_cast<const double*>(a.data);
    const auto* b0 = static_cast<const double*>(b.data);
    if (a0 < b0 + b.rows * b.cols && b0 < a0 + a.rows * a.cols)
        fail("reference {}: the output overlaps an input", op);
}

class ReferenceBackend final : public Backend {
public:
    std::string name() const override { return "reference"; }
    std::string describe() const override { return "reference: double-precision loops"; }
    size_t activation_size() const override { return sizeof(double); }

    // --- memory ---

    std::shared_ptr<Weight> upload_weight(std::vector<MatrixSource> parts, WeightUse use) override {
        if (parts.empty()) fail("reference backend: a weight needs at least one part");
        for (const auto& m : parts) validate_part(m, parts[0].cols);
        if (use != WeightUse::matmul && parts.size() != 1)
            fail("reference backend: embedding {} must have one part, not {}", parts[0].name, parts.size());
        return std::make_shared<ReferenceWeight>(std::move(parts), use);
    }
    std::shared_ptr<Vector> upload_vector(std::span<const float> values) override {
        return std::make_shared<ReferenceVector>(values);
    }
    std::shared_ptr<Rope> upload_rope(RopeSpec spec) override {
        if (spec.dims <= 0 || spec.dims % 2 != 0)
            fail("reference backend: RoPE dimensions must be positive and even, got {}", spec.dims);
        if (int64_t(spec.inv_freq.size()) != spec.dims / 2)
            fail("reference backend: RoPE of {} dimensions needs {} frequencies, got {}", spec.dims, spec.dims / 2,
                 spec.inv_freq.size());
        return std::make_shared<ReferenceRope>(std::move(spec));
    }
    std::unique_ptr<KvCache> create_kv_cache(const kv::KvLayout& layout, int64_t n_blocks) override {
        layout.validate();
        if (n_blocks <= 0 || n_blocks > std::numeric_limits<int32_t>::max())
            fail("reference backend: a KV cache of {} blocks is out of range", n_blocks);
        return std::make_unique<ReferenceKvCache>(layout, int32_t(n_blocks));
    }
    void reserve_activations(size_t bytes, int64_t /*max_tokens*/) override {
        const size_t n = (bytes + sizeof(double) - 1) / sizeof(double);
        if (n > arena_.size()) arena_.assign(n, 0.0);
    }
    void* activations() override { return arena_.data(); }
    void read(const Tensor& t, float* out) const override {
        const double* x = elements(t, "read");
        for (int64_t i = 0; i < t.rows * t.cols; ++i) out[i] = float(x[i]);
    }
    void write(const Tensor& t, const float* in) override {
        double* x = elements(t, "write");
        for (int64_t i = 0; i < t.rows * t.cols; ++i) x[i] = in[i];
    }

    // --- a step ---

    void begin_step(const StepInputs& in) override {
        const size_t n = in.tokens.size();
        if (in.positions.size() != n || in.seq_index.size() != n || in.slots.size() != n)
            fail("reference begin_step: {} tokens but {} positions, {} sequence indices and {} slots", n,
                 in.positions.size(), in.seq_index.size(), in.slots.size());
        for (size_t t = 0; t < n; ++t)
            if (in.seq_index[t] < 0 || size_t(in.seq_index[t]) >= in.block_tables.size())
                fail("reference begin_step: token {} names sequence {} of {}", t, in.seq_index[t], in.block_tables.size());
        for (size_t i = 0; i < in.logit_rows.size(); ++i)
            if (in.logit_rows[i] < 0 || size_t(in.logit_rows[i]) >= n || (i > 0 && in.logit_rows[i] <= in.logit_rows[i - 1]))
                fail("reference begin_step: logit rows must be increasing token rows below {}", n);
        for (size_t i = 0; i < in.hidden_rows.size(); ++i)
            if (in.hidden_rows[i] < 0 || size_t(in.hidden_rows[i]) >= n || (i > 0 && in.hidden_rows[i] <= in.hidden_rows[i - 1]))
                fail("reference begin_step: hidden rows must be increasing token rows below {}", n);
        if (!in.token_types.empty() && in.token_types.size() != n)
            fail("reference begin_step: {} token types for {} tokens", in.token_types.size(), n);
        if (!in.attend_until.empty() && in.attend_until.size() != n)
            fail("reference begin_step: {} attention limits for {} tokens", in.attend_until.size(), n);
        if (!in.attend_from.empty() && in.attend_from.size() != n)
            fail("reference begin_step: {} span starts for {} tokens", in.attend_from.size(), n);
        step_ = in;
    }

    // --- ops ---

    void embed(const Weight& table, const Tensor& out) override {
        const ReferenceWeight& w = ours(table);
        if (w.use == WeightUse::matmul) fail("reference embed: {} was uploaded for matmul only", w.name());
        const MatrixSource& m = w.parts()[0];
        expect_shape(out, n_tokens(), m.cols, "embed", "out");
        double* y = elements(out, "embed");
        for (int64_t t = 0; t < n_tokens(); ++t) {
            const int32_t token = step_.tokens[size_t(t)];
            if (token < 0 || token >= m.rows) fail("reference embed: token {} is outside the {} rows of {}", token, m.rows, m.name);
            dequantize_row(m, token, y + t * m.cols);
        }
    }

    void matmul(const Weight& weight, const Tensor& x, std::span<const Tensor> outs, const Tensor* /*prepared*/ = nullptr) override {
        const ReferenceWeight& w = ours(weight);
        if (w.use == WeightUse::embedding) fail("reference matmul: {} was uploaded as an embedding only", w.name());
        if (outs.size() != w.parts().size())
            fail("reference matmul: {} has {} parts but {} outputs were given", w.name(), w.parts().size(), outs.size());
        if (x.cols != w.cols()) fail("reference matmul: input has {} columns, {} has {}", x.cols, w.name(), w.cols());
        const double* xs = elements(x, "matmul");
        std::vector<double> row(size_t(w.cols()));
        for (size_t p = 0; p < outs.size(); ++p) {
            const MatrixSource& m = w.parts()[p];
            expect_shape(outs[p], x.rows, m.rows, "matmul", "an output");
            expect_disjoint(outs[p], x, "matmul");
            double* y = elements(outs[p], "matmul");
            for (int64_t r = 0; r < m.rows; ++r) {
                dequantize_row(m, r, row.data());
                for (int64_t t = 0; t < x.rows; ++t) {
                    double acc = 0;
                    for (int64_t c = 0; c < m.cols; ++c) acc += row[size_t(c)] * xs[t * m.cols + c];
                    y[t * m.rows + r] = acc;
                }
            }
        }
    }

    void rms_norm(const Tensor& x, const Vector& weight, float eps, const Tensor& out) override {
        const auto& w = ours(weight).values;
        expect_shape(x, x.rows, int64_t(w.size()), "rms_norm", "x");
        expect_shape(out, x.rows, x.cols, "rms_norm", "out");
        const double* xs = elements(x, "rms_norm");
        double* ys = elements(out, "rms_norm");
        for (int64_t t = 0; t < x.rows; ++t) {
            const double* xt = xs + t * x.cols;
            double sum_sq = 0;
            for (int64_t c = 0; c < x.cols; ++c) sum_sq += xt[c] * xt[c];
            const double inv_rms = 1 / std::sqrt(sum_sq / double(x.cols) + double(eps));
            for (int64_t c = 0; c < x.cols; ++c) ys[t * x.cols + c] = xt[c] * inv_rms * w[size_t(c)];
        }
    }

    bool supports(OpKind op) const override { return !is_fused_op(op); }  // every optional op, no fused one
    void layer_norm(const Tensor& x, const Vector& weight, const Vector& bias, float eps, const Tensor& out) override {
        const auto& w = ours(weight).values;
        const auto& b = ours(bias).values;
        expect_shape(x, x.rows, int64_t(w.size()), "layer_norm", "x");
        if (b.size() != w.size()) fail("reference layer_norm: {} weights but {} biases", w.size(), b.size());
        expect_shape(out, x.rows, x.cols, "layer_norm", "out");
        const double* xs = elements(x, "layer_norm");
        double* ys = elements(out, "layer_norm");
        for (int64_t t = 0; t < x.rows; ++t) {
            const double* xt = xs + t * x.cols;
            double sum = 0, sum_sq = 0;
            for (int64_t c = 0; c < x.cols; ++c) sum += xt[c];
            const double mean = sum / double(x.cols);
            for (int64_t c = 0; c < x.cols; ++c) sum_sq += (xt[c] - mean) * (xt[c] - mean);
            const double inv_sd = 1 / std::sqrt(sum_sq / double(x.cols) + double(eps));
            for (int64_t c = 0; c < x.cols; ++c)
                ys[t * x.cols + c] = (xt[c] - mean) * inv_sd * w[size_t(c)] + b[size_t(c)];
        }
    }
    void copy_columns(const Tensor& src, const Tensor& dst, const ColumnCopy& c) override {
        check_column_copy(c, src, dst, "reference");
        const double* s = elements(src, "copy_columns");
        double* d = elements(dst, "copy_columns");
        for (int64_t t = 0; t < src.rows; ++t)
            for (int64_t h = 0; h < c.n_heads; ++h)
                for (int64_t j = 0; j < c.width; ++j)
                    d[t * dst.cols + h * c.dst_stride + c.dst_offset + j] = s[t * src.cols + h * c.src_stride + c.src_offset + j];
    }
    void causal_conv1d(const CausalConv1d& op, const Tensor& x, const Tensor& state, const Tensor& out) override {
        check_causal_conv1d(op, x, state, out, "reference");
        reference::causal_conv1d(op, ours(*op.weight).values, elements(x, "causal_conv1d"), x.rows, x.cols,
                                 elements(state, "causal_conv1d"), elements(out, "causal_conv1d"));
    }
    void gated_delta_rule(const GatedDeltaRule& op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                          const Tensor& beta, const Tensor& state, const Tensor& out) override {
        check_gated_delta_rule(op, q, k, v, g, beta, state, out, "reference");
        const char* name = "gated_delta_rule";
        reference::gated_delta_rule(op, q.rows, elements(q, name), elements(k, name), elements(v, name),
                                    elements(g, name), elements(beta, name), elements(state, name),
                                    elements(out, name));
    }
    void add_position_embedding(const Weight& table, const Tensor& x) override {
        add_row_embedding(table, x, step_.positions, "position_embedding", "position");
    }
    void add_token_type_embedding(const Weight& table, const Tensor& x) override {
        add_row_embedding(table, x, step_.token_types, "token_type_embedding", "token type");
    }
    // x[t] += table row keys[t] (row 0 for every token when keys is empty).
    void add_row_embedding(const Weight& table, const Tensor& x, std::span<const int32_t> keys, const char* op,
                           const char* key_name) {
        const ReferenceWeight& w = ours(table);
        if (w.use == WeightUse::matmul) fail("reference {}: {} was uploaded for matmul only", op, w.name());
        const MatrixSource& m = w.parts()[0];
        expect_shape(x, n_tokens(), m.cols, op, "x");
        if (!keys.empty() && int64_t(keys.size()) != n_tokens())
            fail("reference {}: {} {}s for {} tokens", op, keys.size(), key_name, n_tokens());
        double* y = elements(x, op);
        std::vector<double> row(size_t(m.cols));
        for (int64_t t = 0; t < n_tokens(); ++t) {
            const int32_t key = keys.empty() ? 0 : keys[size_t(t)];
            if (key < 0 || key >= m.rows) fail("reference {}: {} {} is outside the {} rows of {}", op, key_name, key, m.rows, m.name);
            dequantize_row(m, key, row.data());
            for (int64_t c = 0; c < m.cols; ++c) y[t * m.cols + c] += row[size_t(c)];
        }
    }
    void gelu(const Tensor& x) override {
        double* xs = elements(x, "gelu");
        for (int64_t i = 0; i < x.rows * x.cols; ++i) xs[i] = 0.5 * xs[i] * std::erfc(-xs[i] / std::numbers::sqrt2);
    }

    void lora_add(const Tensor& x, const Tensor& y, std::span<const LoraSegment> segments) override {
        if (x.rows != y.rows) fail("lora_add: x has {} rows but y {}", x.rows, y.rows);
        reference::lora_add(elements(x, "lora_add"), x.rows, x.cols, elements(y, "lora_add"), y.cols, segments);
    }
    void add(const Tensor& y, const Tensor& x) override {
        expect_shape(x, y.rows, y.cols, "add", "x");
        double* ys = elements(y, "add");
        const double* xs = elements(x, "add");
        for (int64_t i = 0; i < y.rows * y.cols; ++i) ys[i] += xs[i];
    }

    void add_bias(const Tensor& y, const Vector& bias) override {
        const auto& b = ours(bias).values;
        expect_shape(y, y.rows, int64_t(b.size()), "add_bias", "y");
        double* ys = elements(y, "add_bias");
        for (int64_t t = 0; t < y.rows; ++t)
            for (int64_t c = 0; c < y.cols; ++c) ys[t * y.cols + c] += b[size_t(c)];
    }

    void rope(const Tensor& x, const Rope& rope, int32_t n_heads, int32_t head_dim) override {
        const RopeSpec& spec = rope.spec();
        expect_shape(x, n_tokens(), int64_t(n_heads) * head_dim, "rope", "x");
        if (spec.dims > head_dim) fail("reference rope: {} rotary dimensions exceed the head size {}", spec.dims, head_dim);
        const int64_t half = spec.dims / 2;
        double* xs = elements(x, "rope");
        for (int64_t t = 0; t < n_tokens(); ++t) {
            for (int32_t h = 0; h < n_heads; ++h) {
                double* v = xs + t * x.cols + int64_t(h) * head_dim;
                for (int64_t i = 0; i < half; ++i) {
                    const double angle = double(rope_position(step_, spec, size_t(t), size_t(i))) * spec.inv_freq[size_t(i)];
                    const double c = std::cos(angle), s = std::sin(angle);
                    const int64_t a = spec.neox ? i : 2 * i, b = spec.neox ? i + half : 2 * i + 1;
                    const double x0 = v[a], x1 = v[b];
                    v[a] = x0 * c - x1 * s;
                    v[b] = x0 * s + x1 * c;
                }
            }
        }
    }

    void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
        gated(gate, up, out, silu, "silu_mul");
    }
    void gelu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
        gated(gate, up, out, gelu_tanh, "gelu_mul");
    }
    void sigmoid_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
        gated(gate, up, out, [](double g) { return 1 / (1 + std::exp(-g)); }, "sigmoid_mul");
    }

    void softmax(const Tensor& x) override {
        double* xs = elements(x, "softmax");
        for (int64_t t = 0; t < x.rows; ++t) softmax_row(xs + t * x.cols, x.cols);
    }

    void scale(const Tensor& x, float s) override {
        double* xs = elements(x, "scale");
        for (int64_t i = 0; i < x.rows * x.cols; ++i) xs[i] *= double(s);
    }
    void softcap(const Tensor& x, float cap) override {
        if (!(cap > 0) || !std::isfinite(cap)) fail("reference softcap: the cap {} must be positive", cap);
        double* xs = elements(x, "softcap");
        for (int64_t i = 0; i < x.rows * x.cols; ++i) xs[i] = double(cap) * std::tanh(xs[i] / double(cap));
    }
    void attn_temperature(const Tensor& x, const AttnTemperature& temp) override {
        check_attn_temperature(temp, "reference");
        expect_shape(x, n_tokens(), x.cols, "attn_temperature", "x");
        double* xs = elements(x, "attn_temperature");
        for (int64_t t = 0; t < x.rows; ++t) {
            const double f = 1 + double(temp.beta) * std::log(1 + std::floor(double(step_.positions[size_t(t)]) / temp.length));
            for (int64_t c = 0; c < x.cols; ++c) xs[t * x.cols + c] *= f;
        }
    }

    void kv_write(KvCache& kv_cache, int32_t layer, const Tensor& k, const Tensor& v) override {
        ReferenceKvCache& cache = ours(kv_cache);
        cache.check_layer(layer, "kv_write");
        const kv::KvLayout& layout = cache.layout();
        const int64_t width = int64_t(layout.n_kv_heads) * layout.head_dim;
        expect_shape(k, n_tokens(), width, "kv_write", "k");
        expect_shape(v, n_tokens(), width, "kv_write", "v");
        const double* ks = elements(k, "kv_write");
        const double* vs = elements(v, "kv_write");
        for (int64_t t = 0; t < n_tokens(); ++t)
            for (int32_t h = 0; h < layout.n_kv_heads; ++h) {
                const int64_t at = t * width + int64_t(h) * layout.head_dim;
                cache.store(layer, step_.slots[size_t(t)], h, ks + at, vs + at);
            }
    }

    void attention(const KvCache& kv_cache, int32_t layer, const Tensor& q, const Tensor& out,
                   const AttentionParams& params) override {
        const ReferenceKvCache& cache = ours(kv_cache);
        cache.check_layer(layer, "attention");
        const kv::KvLayout& layout = cache.layout();
        if (params.n_heads <= 0 || params.n_heads % layout.n_kv_heads != 0)
            fail("reference attention: {} query heads is not a multiple of the cache's {} KV heads", params.n_heads,
                 layout.n_kv_heads);
        const int64_t d = layout.head_dim, width = int64_t(params.n_heads) * d;
        expect_shape(q, n_tokens(), width, "attention", "q");
        expect_shape(out, n_tokens(), width, "attention", "out");
        expect_disjoint(out, q, "attention");
        const double* qs = elements(q, "attention");
        double* ys = elements(out, "attention");
        const int32_t group = params.n_heads / layout.n_kv_heads;
        const ReferenceVector* sinks = params.sinks ? &ours(*params.sinks) : nullptr;
        if (sinks && sinks->size() != params.n_heads)
            fail("reference attention: {} sinks for {} query heads", sinks->size(), params.n_heads);
        if (!(params.alibi_max_bias >= 0) || !std::isfinite(params.alibi_max_bias))
            fail("reference attention: ALiBi max bias {} is not >= 0", params.alibi_max_bias);
        // Non-causal: every token of a sequence reads up to the sequence's last position in the step.
        std::vector<int32_t> last(step_.block_tables.size(), -1);
        for (int64_t t = 0; t < n_tokens(); ++t) {
            int32_t& l = last[size_t(step_.seq_index[size_t(t)])];
            l = std::max(l, step_.positions[size_t(t)]);
        }
        for (int64_t t = 0; t < n_tokens(); ++t) {
            const int32_t pos = !params.causal ? last[size_t(step_.seq_index[size_t(t)])]
                                : step_.attend_until.empty() ? step_.positions[size_t(t)]
                                                             : step_.attend_until[size_t(t)];
            // Under a window: back from the row's own position, or to its image's start (attention_span.h).
            const int32_t own = step_.positions[size_t(t)];
            const int32_t first =
                window_first_key(own, step_.attend_from.empty() ? own : step_.attend_from[size_t(t)], params.sliding_window);
            std::vector<int64_t> slots;
            for (int32_t j = first; j <= pos; ++j) slots.push_back(key_slot(t, j, layout.block_size));
            std::vector<double> bias;  // ALiBi: -slope_h |pos_q - pos_k| per key
            for (int32_t h = 0; h < params.n_heads; ++h) {
                if (params.alibi_max_bias > 0) {
                    const double slope = alibi_slope(h, params.n_heads, params.alibi_max_bias);
                    const int32_t q_pos = step_.positions[size_t(t)];
                    bias.clear();
                    for (int32_t j = first; j <= pos; ++j) bias.push_back(-slope * std::abs(double(q_pos - j)));
                }
                attend_head(cache, layer, h / group, slots, qs + t * width + h * d, params, ys + t * width + h * d,
                            sinks ? &sinks->values[size_t(h)] : nullptr, bias);
            }
        }
    }

    void gather_logit_rows(const Tensor& x, const Tensor& out) override {
        gather_rows(x, step_.logit_rows, out, "gather_logit_rows");
    }
    void gather_hidden_rows(const Tensor& x, const Tensor& out) override {
        gather_rows(x, step_.hidden_rows, out, "gather_hidden_rows");
    }
    void gather_rows(const Tensor& x, std::span<const int32_t> rows, const Tensor& out, const char* op) {
        expect_shape(out, int64_t(rows.size()), x.cols, op, "out");
        expect_disjoint(out, x, op);
        const double* xs = elements(x, op);
        double* ys = elements(out, op);
        for (int64_t i = 0; i < out.rows; ++i) {
            const int32_t row = rows[size_t(i)];
            if (row >= x.rows) fail("reference {}: row {} is outside the {} rows of x", op, row, x.rows);
            std::copy_n(xs + int64_t(row) * x.cols, x.cols, ys + i * x.cols);
        }
    }

    // Token by token in doubles: its own top-k (largest logit first, the lower index on a tie), the
    // selected experts' FFNs from rows dequantised on the spot, summed in rank order.
    void moe_ffn(const MoeOp& op, const Tensor& x, const Tensor& logits, const Tensor& out, const Tensor&) override {
        const auto n_experts = int64_t(op.gate_up.size());
        if (n_experts == 0 || int64_t(op.down.size()) != n_experts) fail("reference moe_ffn: gate|up and down per expert");
        if (op.n_used < 1 || op.n_used > n_experts) fail("reference moe_ffn: {} of {} experts used", op.n_used, n_experts);
        const int64_t d = op.gate_up[0]->cols();
        expect_shape(x, x.rows, d, "moe_ffn", "x");
        expect_shape(logits, x.rows, n_experts, "moe_ffn", "logits");
        expect_shape(out, x.rows, d, "moe_ffn", "out");
        expect_disjoint(out, x, "moe_ffn");
        const double* xs = elements(x, "moe_ffn");
        const double* ls = elements(logits, "moe_ffn");
        double* ys = elements(out, "moe_ffn");
        std::vector<double> scratch;
        for (int64_t t = 0; t < x.rows; ++t)
            reference::moe_token(op, xs + t * d, ls + t * n_experts, n_experts, d, ys + t * d, scratch);
    }

    std::string describe_matmul(const Weight& weight, int64_t) const override {
        std::string types;
        for (const auto& m : weight.parts()) types += (types.empty() ? "" : "|") + gguf::type_name(uint32_t(m.type));
        return types + " rows dequantised to double, scalar loop";
    }

private:
    int64_t n_tokens() const { return int64_t(step_.tokens.size()); }

    // The tensor's elements, after checking that it lies inside the arena.
    double* elements(const Tensor& t, const char* op) const {
        const auto* begin = static_cast<const double*>(t.data);
        if (t.rows * t.cols == 0 && t.rows >= 0 && t.cols >= 0) return const_cast<double*>(begin);
        const double* arena = arena_.data();
        const bool inside = t.rows >= 0 && t.cols >= 0 && begin >= arena && begin <= arena + arena_.size() &&
                            t.rows * t.cols <= arena + arena_.size() - begin;
        if (!inside || reinterpret_cast<uintptr_t>(t.data) % alignof(double) != 0)
            fail("reference {}: a {}x{} tensor is not inside the activation arena", op, t.rows, t.cols);
        return const_cast<double*>(begin);
    }

    // The slot holding key position j of token t's sequence.
    int64_t key_slot(int64_t t, int32_t j, int32_t block_size) const {
        const int32_t seq = step_.seq_index[size_t(t)];
        const std::vector<int32_t>& table = step_.block_tables[size_t(seq)];
        if (size_t(j / block_size) >= table.size())
            fail("reference attention: position {} is past the {} blocks of sequence {}", j, table.size(), seq);
        if (table[size_t(j / block_size)] < 0)
            fail("reference attention: position {} of sequence {} is in a freed block", j, seq);
        return int64_t(table[size_t(j / block_size)]) * block_size + j % block_size;
    }

    void gated(const Tensor& gate, const Tensor& up, const Tensor& out, double (*act)(double), const char* op) {
        expect_shape(up, gate.rows, gate.cols, op, "up");
        expect_shape(out, gate.rows, gate.cols, op, "out");
        const double* g = elements(gate, op);
        const double* u = elements(up, op);
        double* y = elements(out, op);
        for (int64_t i = 0; i < gate.rows * gate.cols; ++i) y[i] = act(g[i]) * u[i];
    }

    static const ReferenceWeight& ours(const Weight& w) { return reference::ours(w); }
    static const ReferenceVector& ours(const Vector& v) { return reference::ours(v); }
    static const ReferenceKvCache& ours(const KvCache& c) { return reference::downcast<ReferenceKvCache>(c, "KV cache"); }
    static ReferenceKvCache& ours(KvCache& c) { return const_cast<ReferenceKvCache&>(ours(std::as_const(c))); }

    std::vector<double> arena_;
    StepInputs step_;
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend(const BackendOptions&) { return std::make_unique<ReferenceBackend>(); }

}  // namespace pagoda::backend
