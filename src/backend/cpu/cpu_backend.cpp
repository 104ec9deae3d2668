// The CPU backend's op adapters: each Backend op checked and spread over the step's tokens, onto
// this folder's kernels. State, uploads and the shared helpers: cpu_backend_base.h.
#include "backend/cpu/cpu_backend.h"

#include <cmath>
#include <cstring>

#include "backend/alibi.h"
#include "backend/cpu/attention/attention.h"
#include "backend/cpu/cpu_backend_base.h"
#include "backend/cpu/cpu_weight.h"
#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/moe/cpu_moe.h"
#include "backend/cpu/ops/copy_columns.h"
#include "backend/cpu/ops/recurrent.h"
#include "backend/cpu/ops/ops.h"
#include "backend/cpu/plan/cpu_matmul_path.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "core/error.h"

namespace pagoda::backend::cpu {
namespace {

class CpuBackend final : public CpuBackendBase {
public:
    using CpuBackendBase::CpuBackendBase;

    void embed(const Weight& table, const Tensor& out) override {
        const CpuWeight& w = cpu(table);
        check_cols(out, w.cols(), "embed", "an output");
        for (int64_t t = 0; t < out.rows; ++t)
            cpu::dequantize_row(w.view(0), step_.tokens[size_t(t)], f32w(out) + t * out.cols);
    }

    void matmul(const Weight& weight, const Tensor& x, std::span<const Tensor> outs, const Tensor* xq = nullptr) override {
        const CpuWeight& w = cpu(weight);
        check_cols(x, w.cols(), "matmul", "an input");
        if (outs.size() != w.parts().size())
            fail("cpu backend: matmul of {} parts given {} outputs", w.parts().size(), outs.size());
        for (size_t p = 0; p < outs.size(); ++p) check_cols(outs[p], w.parts()[p].rows, "matmul", "an output");
        const int64_t n = x.rows;
        if (!w.stacked()) {
            for (size_t p = 0; p < outs.size(); ++p) multiply(w.packed()[p], x, xq, f32w(outs[p]));
            return;
        }
        // One pass over the stacked weight; each token's row holds the parts side by side.
        const float* y = stacked_output(w, x, xq);
        const int64_t width = w.rows();
        per_token(n, [&](int64_t t) {
            int64_t offset = 0;
            for (size_t p = 0; p < outs.size(); ++p) {
                const int64_t cols = outs[p].cols;
                std::memcpy(f32w(outs[p]) + t * cols, y + t * width + offset, size_t(cols) * sizeof(float));
                offset += cols;
            }
        });
    }

    void rms_norm(const Tensor& x, const Vector& w, float eps, const Tensor& out) override {
        check_cols(x, w.size(), "rms_norm", "an input");
        per_token(x.rows, [&](int64_t t) {
            cpu::rms_norm(f32(x) + t * x.cols, cpu(w), x.cols, eps, f32w(out) + t * x.cols);
        });
    }
    void lora_add(const Tensor& x, const Tensor& y, std::span<const LoraSegment> segments) override {
        cpu::lora_add_f32(x, y, segments, threads_, lora_scratch_);
    }
    void add(const Tensor& y, const Tensor& x) override {
        check_cols(x, y.cols, "add", "an input");
        per_token(y.rows, [&](int64_t t) { cpu::add_inplace(f32w(y) + t * y.cols, f32(x) + t * y.cols, y.cols); });
    }
    void add_bias(const Tensor& y, const Vector& b) override {
        check_cols(y, b.size(), "add_bias", "an input");
        per_token(y.rows, [&](int64_t t) { cpu::add_inplace(f32w(y) + t * y.cols, cpu(b), y.cols); });
    }
    void rope(const Tensor& x, const Rope& r, int32_t n_heads, int32_t head_dim) override {
        check_cols(x, int64_t(n_heads) * head_dim, "rope", "an input");
        const CpuRope& tables = rope_tables(r, x.rows);
        const int64_t half = r.spec().dims / 2;
        per_token(x.rows, [&](int64_t t) {
            cpu::rope(f32w(x) + t * x.cols, n_heads, head_dim, r.spec().dims, tables.cos.data() + t * half,
                          tables.sin.data() + t * half, r.spec().neox);
        });
    }
    void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
        check_cols(up, gate.cols, "silu_mul", "an up input");
        per_token(gate.rows, [&](int64_t t) {
            const int64_t o = t * gate.cols;
            cpu::silu_mul(f32(gate) + o, f32(up) + o, gate.cols, f32w(out) + o);
        });
    }
    void sigmoid_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
        check_cols(up, gate.cols, "sigmoid_mul", "an up input");
        check_cols(out, gate.cols, "sigmoid_mul", "an output");
        per_token(gate.rows, [&](int64_t t) {
            const int64_t o = t * gate.cols;
            cpu::sigmoid_mul_f32(f32(gate) + o, f32(up) + o, gate.cols, f32w(out) + o);
        });
    }
    void gelu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
        check_cols(up, gate.cols, "gelu_mul", "an up input");
        per_token(gate.rows, [&](int64_t t) {
            const int64_t o = t * gate.cols;
            cpu::gelu_mul(f32(gate) + o, f32(up) + o, gate.cols, f32w(out) + o);
        });
    }
    void softmax(const Tensor& x) override {
        per_token(x.rows, [&](int64_t t) { cpu::softmax(f32w(x) + t * x.cols, x.cols); });
    }
    void scale(const Tensor& x, float s) override {
        per_token(x.rows, [&](int64_t t) { cpu::scale_inplace(f32w(x) + t * x.cols, s, x.cols); });
    }
    void softcap(const Tensor& x, float cap) override {
        if (!(cap > 0) || !std::isfinite(cap)) fail("cpu backend: the soft cap {} must be positive", cap);
        per_token(x.rows, [&](int64_t t) { cpu::softcap_inplace(f32w(x) + t * x.cols, cap, x.cols); });
    }
    // The factor in double, rounded once to f32 (as llama.cpp's attn_scale input), times each value.
    void attn_temperature(const Tensor& x, const AttnTemperature& temp) override {
        check_attn_temperature(temp, "cpu backend");
        if (x.rows != int64_t(step_.positions.size()))
            fail("cpu backend attn_temperature: {} rows for a step of {} tokens", x.rows, step_.positions.size());
        per_token(x.rows, [&](int64_t t) {
            const double steps = std::floor(double(step_.positions[size_t(t)]) / double(temp.length));
            cpu::scale_inplace(f32w(x) + t * x.cols, float(1 + double(temp.beta) * std::log(1 + steps)), x.cols);
        });
    }
    void kv_write(KvCache& cache, int32_t layer, const Tensor& k, const Tensor& v) override {
        const int64_t width = int64_t(cache.layout().n_kv_heads) * cache.layout().head_dim;
        check_cols(k, width, "kv_write", "keys");
        check_cols(v, width, "kv_write", "values");
        cpu(cache).write(layer, step_.slots.data(), k.rows, f32(k), f32(v), &threads_);
    }
    void attention(const KvCache& cache, int32_t layer, const Tensor& q, const Tensor& out,
                   const AttentionParams& p) override {
        if (p.sliding_window < 0 || !(p.softcap >= 0))
            fail("cpu backend: attention needs a sliding window >= 0 and a soft cap >= 0");
        check_cols(q, int64_t(p.n_heads) * cache.layout().head_dim, "attention", "queries");
        cpu::PagedAttentionBatch a;
        a.q = f32(q);
        a.n_tokens = q.rows;
        a.n_heads = p.n_heads;
        a.token_seq = step_.seq_index.data();
        a.token_pos = !p.causal ? sequence_ends()
                      : step_.attend_until.empty() ? step_.positions.data() : step_.attend_until.data();
        a.seqs = seqs_.data();
        a.n_seqs = int32_t(seqs_.size());
        a.scale = p.scale;
        a.sliding_window = p.sliding_window;
        // The window counts back from each row's own position (not from token_pos, which is an image's
        // end or a non-causal sequence's last), and an image's rows reach back to its start.
        if (p.sliding_window > 0 && (!p.causal || !step_.attend_from.empty())) {
            first_keys_.resize(step_.positions.size());
            for (size_t t = 0; t < first_keys_.size(); ++t)
                first_keys_[t] = window_first_key(step_.positions[t], step_.attend_from.empty() ? step_.positions[t] : step_.attend_from[t],
                                                  p.sliding_window);
            a.first_key = first_keys_.data();
        }
        a.softcap = p.softcap;
        a.method = plan_.attention;
        a.decode_kv_prefetch = plan_.decode_kv_prefetch;
        if (p.sinks) {
            if (p.sinks->size() != p.n_heads) fail("cpu backend: attention has {} sinks for {} heads", p.sinks->size(), p.n_heads);
            a.sinks = cpu(*p.sinks);
        }
        if (p.alibi_max_bias != 0) {  // the bias measures from each query's own position
            if (!(p.alibi_max_bias > 0) || !std::isfinite(p.alibi_max_bias))
                fail("cpu backend: ALiBi max bias {} is not > 0", p.alibi_max_bias);
            alibi_slopes_.resize(size_t(p.n_heads));
            for (int32_t h = 0; h < p.n_heads; ++h) alibi_slopes_[size_t(h)] = float(alibi_slope(h, p.n_heads, p.alibi_max_bias));
            a.alibi_slopes = alibi_slopes_.data();
            a.query_pos = step_.positions.data();
        }
        cpu::paged_attention(a, cpu(cache), layer, f32w(out), threads_);
    }
    void layer_norm(const Tensor& x, const Vector& w, const Vector& b, float eps, const Tensor& out) override {
        check_cols(x, w.size(), "layer_norm", "an input");
        check_cols(x, b.size(), "layer_norm", "an input (bias)");
        per_token(x.rows, [&](int64_t t) {
            cpu::layer_norm(f32(x) + t * x.cols, cpu(w), cpu(b), x.cols, eps, f32w(out) + t * x.cols);
        });
    }
    void add_position_embedding(const Weight& table, const Tensor& x) override {
        add_row_embedding(table, x, step_.positions, "position_embedding", "position");
    }
    void add_token_type_embedding(const Weight& table, const Tensor& x) override {
        add_row_embedding(table, x, step_.token_types, "token_type_embedding", "token type");
    }
    void copy_columns(const Tensor& src, const Tensor& dst, const ColumnCopy& c) override {
        check_column_copy(c, src, dst, "cpu backend");
        cpu::copy_columns_f32(f32(src), src.cols, f32w(dst), dst.cols, src.rows, c);
    }
    void causal_conv1d(const CausalConv1d& op, const Tensor& x, const Tensor& state, const Tensor& out) override {
        check_causal_conv1d(op, x, state, out, "cpu backend");
        // Split by channels: each thread runs every token of its channels in order. A few rows (decode)
        // cost less than waking the threads (per_token's rule).
        auto run = [&](int64_t begin, int64_t end, int) {
            cpu::causal_conv1d_f32(op, cpu(*op.weight), f32(x), x.rows, x.cols, f32w(state), f32w(out), begin, end);
        };
        if (x.rows < 8)
            run(0, x.cols, 0);
        else
            threads_.parallel_for(x.cols, 16, run);
    }
    void gated_delta_rule(const GatedDeltaRule& op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                          const Tensor& beta, const Tensor& state, const Tensor& out) override {
        check_gated_delta_rule(op, q, k, v, g, beta, state, out, "cpu backend");
        // Split by value heads: each thread runs every token of its heads in order.
        threads_.parallel_for(op.n_v_heads, 1, [&](int64_t begin, int64_t end, int) {
            cpu::gated_delta_rule_f32(op, q.rows, f32(q), f32(k), f32(v), f32(g), f32(beta), f32w(state), f32w(out),
                                      begin, end);
        });
    }
    // x[t] += table row keys[t] (row 0 for every token when keys is empty).
    void add_row_embedding(const Weight& table, const Tensor& x, std::span<const int32_t> keys, const char* op,
                           const char* key_name) {
        const CpuWeight& w = cpu(table);
        check_cols(x, w.cols(), op, "an input");
        if (!keys.empty() && int64_t(keys.size()) < x.rows)
            fail("cpu backend {}: {} {}s for {} rows", op, keys.size(), key_name, x.rows);
        const int64_t rows = w.parts()[0].rows;
        auto key = [&](int64_t t) { return keys.empty() ? 0 : keys[size_t(t)]; };
        for (int64_t t = 0; t < x.rows; ++t)
            if (key(t) < 0 || key(t) >= rows)
                fail("cpu backend: {} {} is outside the {} rows of {}", key_name, key(t), rows, w.parts()[0].name);
        per_token(x.rows, [&](int64_t t) {
            thread_local std::vector<float> row;  // grows once to the width, then is reused
            row.resize(size_t(x.cols));
            cpu::dequantize_row(w.view(0), key(t), row.data());
            cpu::add_inplace(f32w(x) + t * x.cols, row.data(), x.cols);
        });
    }
    void gelu(const Tensor& x) override {
        per_token(x.rows, [&](int64_t t) { cpu::gelu_inplace(f32w(x) + t * x.cols, x.cols); });
    }
    void gather_logit_rows(const Tensor& x, const Tensor& out) override {
        check_cols(out, x.cols, "gather_logit_rows", "an output");
        gather_rows(x, step_.logit_rows, out);
    }
    void gather_hidden_rows(const Tensor& x, const Tensor& out) override {
        check_cols(out, x.cols, "gather_hidden_rows", "an output");
        gather_rows(x, step_.hidden_rows, out);
    }

    bool supports(OpKind) const override { return true; }  // every op
    bool fuses_lora() const override { return true; }

    // The CPU's prepared matmul input: a norm's output quantised to the int8 rows (codes, scales,
    // sums) the packed int8_dot kernels read, so the rows are quantised once, in the norm's pass,
    // instead of once per matmul. Only when some reader's weight takes them.
    int64_t prepared_input_cols(int64_t cols, std::span<const Weight* const> readers) const override {
        const int64_t q_cols = quantized_row_elements(cols);
        if (q_cols <= 0) return 0;
        for (const Weight* w : readers)
            if (w && takes_quantized_input(*w)) return q_cols;
        return 0;
    }
    void norm_prepare(const Tensor& x, const Tensor* r, const Vector& w, float eps, const Tensor& out,
                      const Tensor& q) override {
        check_cols(x, w.size(), "norm_prepare", "an input");
        if (q.cols < quantized_row_elements(x.cols))
            fail("cpu backend: norm_prepare needs {} columns for the quantised rows, got {}",
                 quantized_row_elements(x.cols), q.cols);
        // Each row is quantised in the norm's pass, while it is still in cache.
        per_token(x.rows, [&](int64_t t) {
            float* xt = f32w(x) + t * x.cols;
            if (r) cpu::add_inplace(xt, f32(*r) + t * x.cols, x.cols);
            cpu::rms_norm(xt, cpu(w), x.cols, eps, f32w(out) + t * x.cols);
            cpu::prequantize_row(f32w(out) + t * x.cols, t, x.rows, x.cols, q.data);
        });
    }

    void add_rms_norm(const Tensor& x, const Tensor& r, const Vector& w, float eps, const Tensor& out) override {
        check_cols(r, x.cols, "add_rms_norm", "a residual");
        check_cols(x, w.size(), "add_rms_norm", "an input");
        per_token(x.rows, [&](int64_t t) {
            float* xt = f32w(x) + t * x.cols;
            cpu::add_inplace(xt, f32(r) + t * x.cols, x.cols);
            cpu::rms_norm(xt, cpu(w), x.cols, eps, f32w(out) + t * x.cols);
        });
    }

    void qkv_rope_kv_write(KvCache& cache, const QkvOp& op, const Tensor& x, const Tensor& q_out,
                           const Tensor* xq = nullptr, const PartLora* lora = nullptr) override {
        const CpuWeight& w = cpu(*op.qkv);
        if (w.parts().size() != 3) fail("cpu backend: qkv_rope_kv_write needs a weight of parts Q, K, V");
        check_cols(x, w.cols(), "qkv_rope_kv_write", "an input");
        const int64_t n = x.rows, q_dim = w.parts()[0].rows, kv_dim = w.parts()[1].rows;
        check_cols(q_out, q_dim, "qkv_rope_kv_write", "a query output");
        if (int64_t(kv_scratch_.size()) < 2 * kv_dim * n)
            fail("cpu backend: a step of {} tokens exceeds the reserved activations (reserve_activations first)", n);
        float* k = kv_scratch_.data();
        float* v = k + kv_dim * n;
        cpu(cache).prefetch_write(op.layer, step_.slots.data(), n);  // arrives during the matmul
        float* stacked = nullptr;
        const int64_t half = op.rope->spec().dims / 2, width = q_dim + 2 * kv_dim;
        if (w.stacked()) {
            stacked = stacked_output(w, x, xq);
            // The LoRA updates land in the stacked rows' parts, as the unfused lora_add after the
            // matmul's copy out would add them.
            if (lora) {
                add_lora(x, {{lora->parts[0], stacked, width, q_dim},
                             {lora->parts[1], stacked + q_dim, width, kv_dim},
                             {lora->parts[2], stacked + q_dim + kv_dim, width, kv_dim}});
            }
        } else {
            multiply(w.packed()[0], x, xq, f32w(q_out));
            multiply(w.packed()[1], x, xq, k);
            multiply(w.packed()[2], x, xq, v);
            if (lora) {
                add_lora(x, {{lora->parts[0], f32w(q_out), q_dim, q_dim},
                             {lora->parts[1], k, kv_dim, kv_dim},
                             {lora->parts[2], v, kv_dim, kv_dim}});
            }
        }
        const CpuRope& tables = rope_tables(*op.rope, n);
        per_token(n, [&](int64_t t) {
            float* qt = f32w(q_out) + t * q_dim;
            float* kt = k + t * kv_dim;
            float* vt = v + t * kv_dim;
            if (stacked) {
                const float* row = stacked + t * width;
                std::memcpy(qt, row, size_t(q_dim) * sizeof(float));
                std::memcpy(kt, row + q_dim, size_t(kv_dim) * sizeof(float));
                std::memcpy(vt, row + q_dim + kv_dim, size_t(kv_dim) * sizeof(float));
            }
            if (op.bias[0]) cpu::add_inplace(qt, cpu(*op.bias[0]), q_dim);
            if (op.bias[1]) cpu::add_inplace(kt, cpu(*op.bias[1]), kv_dim);
            if (op.bias[2]) cpu::add_inplace(vt, cpu(*op.bias[2]), kv_dim);
            const float* cos = tables.cos.data() + t * half;
            const float* sin = tables.sin.data() + t * half;
            cpu::rope(qt, op.n_heads, op.head_dim, op.rope->spec().dims, cos, sin, op.rope->spec().neox);
            cpu::rope(kt, op.n_kv_heads, op.head_dim, op.rope->spec().dims, cos, sin, op.rope->spec().neox);
        });
        cpu(cache).write(op.layer, step_.slots.data(), n, k, v, &threads_);
    }

    void matmul_silu_mul(const Weight& gate_up, const Tensor& x, const Tensor& out, const Tensor* xq = nullptr,
                         const PartLora* lora = nullptr) override {
        const CpuWeight& w = cpu(gate_up);
        if (w.parts().size() != 2) fail("cpu backend: matmul_silu_mul needs a weight of parts gate, up");
        check_cols(x, w.cols(), "matmul_silu_mul", "an input");
        const int64_t n = x.rows, f = w.parts()[0].rows;
        check_cols(out, f, "matmul_silu_mul", "an output");
        if (w.stacked()) {
            float* y = stacked_output(w, x, xq);
            if (lora) {
                add_lora(x, {{lora->parts[0], y, 2 * f, f}, {lora->parts[1], y + f, 2 * f, f}});
            }
            // Each token's row holds [gate | up].
            per_token(n, [&](int64_t t) {
                const float* row = y + t * 2 * f;
                cpu::silu_mul(row, row + f, f, f32w(out) + t * f);
            });
            return;
        }
        float* up = scratch_for(n * f);
        multiply(w.packed()[0], x, xq, f32w(out));
        multiply(w.packed()[1], x, xq, up);
        if (lora) {
            add_lora(x, {{lora->parts[0], f32w(out), f, f}, {lora->parts[1], up, f, f}});
        }
        per_token(n, [&](int64_t t) { cpu::silu_mul(f32w(out) + t * f, up + t * f, f, f32w(out) + t * f); });
    }
    // The parts' LoRA updates (fuses_lora): row t's `out` values at y + t * y_stride take
    // lora_add of the part's segments, as the unfused lora_add after the matmul would.
    void add_lora(const Tensor& x, std::initializer_list<cpu::LoraOutPart> parts) {
        cpu::lora_add_parts(f32(x), x.cols, x.cols, x.rows, {parts.begin(), parts.size()}, threads_, lora_scratch_);
    }
    int64_t moe_workspace_cols(const MoeOp& op) const override { return cpu::moe_workspace_cols(op); }
    void moe_ffn(const MoeOp& op, const Tensor& x, const Tensor& logits, const Tensor& out, const Tensor& ws) override {
        cpu::moe_ffn(op, x, logits, out, ws, threads_, plan_);
    }

    std::string describe_matmul(const Weight& weight, int64_t n_tokens) const override {
        return cpu::describe_matmul_path(cpu(weight), n_tokens, plan_);
    }
    MatmulArithmetic matmul_arithmetic(const Weight& weight, int64_t n_tokens) const override {
        return cpu::matmul_path_arithmetic(cpu(weight), n_tokens, plan_);
    }

private:
    // Columns of a cols-wide activation's quantised rows (0: the plan runs no int8_dot path, so no
    // weight takes them; each weight then says for itself, takes_quantized_input).
    int64_t quantized_row_elements(int64_t cols) const {
        if (!cpu::plan_uses_int8_dot(plan_)) return 0;
        const cpu::ScopedKernelChoice scope({cpu::PathMethod::int8_dot, cpu::gemm_tiles()});
        if (!cpu::packed_int8_path_active()) return 0;
        // One row's codes, scales and sums, plus room for the 64-byte alignment of the scales.
        return int64_t((cpu::prequantized_bytes(1, cols) + 3) / 4) + 16;
    }
    // Whether matmuls of `weight` read the quantised rows instead of quantising x themselves.
    bool takes_quantized_input(const Weight& weight) const {
        const CpuWeight& w = cpu(weight);
        if (w.packed().empty()) return false;
        const cpu::ScopedKernelChoice scope(cpu::kernel_choice(plan_, w.parts()[0].type, 1));
        for (const auto& p : w.packed())
            if (!cpu::takes_prequantized(p)) return false;
        return true;
    }
};

}  // namespace
}  // namespace pagoda::backend::cpu

namespace pagoda::backend {

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options) { return std::make_unique<cpu::CpuBackend>(options); }
std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options, const cpu::PlanSettings& plan) {
    return std::make_unique<cpu::CpuBackend>(options, plan);
}

}  // namespace pagoda::backend
