#include "backend/cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "backend/cpu/attention.h"
#include "backend/cpu/kv_pool.h"
#include "backend/cpu/kernel_plan.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "backend/moe_routing.h"
#include "core/aligned_buffer.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"

namespace pagoda::backend {
namespace {

kernels::WeightView view_of(const MatrixSource& s) { return {s.type, s.data, s.rows, s.cols}; }

// A packed weight never reads its source again (unless the kernel method changes at run time, when
// the pages fault back in from the page cache): drop the file pages it touched while packing from
// this process, so a model does not count twice in resident memory. Whole pages inside each part
// only; the file mapping is read-only.
void release_source_pages(const kernels::PackedWeight& w) {
    if (!w.is_packed()) return;
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    for (const auto& part : w.parts()) {
        const auto begin = reinterpret_cast<uintptr_t>(part.data);
        const uintptr_t bytes = part.bytes();
        const uintptr_t first = (begin + page - 1) / page * page, last = (begin + bytes) / page * page;
        if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
    }
}

class CpuWeight final : public Weight {
public:
    CpuWeight(std::vector<MatrixSource> parts, WeightUse use) : Weight(std::move(parts)) {
        for (const auto& p : this->parts()) views_.push_back(view_of(p));
        if (use == WeightUse::embedding) {  // read by rows only: stays in the file mapping,
            for (const auto& v : views_) populate_pages(v.data, size_t(v.bytes()));  // faulted in once
            return;
        }
        bool file_mapped = true;
        for (const auto& p : this->parts()) file_mapped = file_mapped && p.file_mapped;
        // Parts of one type are stacked into one packed weight when a packed kernel takes it: one
        // pass, the input quantised once, one parallel region. Otherwise (types differ, e.g. Q4_K_M's
        // Q6_K attn_v, or no packed kernel) one packed weight per part.
        bool same = true;
        for (const auto& v : views_) same = same && v.type == views_[0].type;
        // The plan's method decides the layout (kernel_plan.h): a quantised type planned for
        // dequant_fma keeps the file's view rather than panels it would never read; F16/BF16 pack
        // bf16 panels only under bf16_dot (the scope makes packing see the planned float method).
        if (views_.size() > 1 && same) {
            const kernels::KernelChoice choice = kernels::kernel_choice(views_[0].type, 1);
            const kernels::ScopedKernelChoice scope(choice);
            if (choice.method == kernels::PathMethod::dequant_fma) {
                packed_.push_back(kernels::keep_views(views_));
                return;
            }
            kernels::PackedWeight stacked = kernels::pack_weights(views_);
            if (stacked.is_packed()) {
                if (file_mapped) release_source_pages(stacked);
                packed_.push_back(std::move(stacked));
                return;
            }
        }
        for (const auto& v : views_) {
            const kernels::KernelChoice choice = kernels::kernel_choice(v.type, 1);
            const kernels::ScopedKernelChoice scope(choice);
            if (choice.method == kernels::PathMethod::dequant_fma) {
                packed_.push_back(kernels::keep_views(std::span(&v, 1)));
                continue;
            }
            packed_.push_back(kernels::pack_weight(v));
            if (file_mapped) release_source_pages(packed_.back());
        }
    }

    std::vector<std::span<const uint8_t>> host_memory() const override {
        std::vector<std::span<const uint8_t>> out;
        for (const auto& w : packed_) {
            if (w.is_packed()) {
                out.emplace_back(w.data(), w.packed_bytes());
                continue;
            }
            for (const auto& part : w.parts()) out.emplace_back(static_cast<const uint8_t*>(part.data), part.bytes());
        }
        return out;
    }

    bool stacked() const { return packed_.size() == 1 && views_.size() > 1; }
    const std::vector<kernels::PackedWeight>& packed() const { return packed_; }
    const kernels::WeightView& view(size_t part) const { return views_[part]; }

private:
    std::vector<kernels::WeightView> views_;
    std::vector<kernels::PackedWeight> packed_;  // empty for an embedding-only table
};

class CpuVector final : public Vector {
public:
    explicit CpuVector(std::span<const float> v) : Vector(int64_t(v.size())), values(v.begin(), v.end()) {}
    std::vector<float> values;
};

// cos / sin of every (token, pair) of the current step, computed once per step on first use.
class CpuRope final : public Rope {
public:
    explicit CpuRope(RopeSpec spec) : Rope(std::move(spec)) {}
    mutable uint64_t step = ~uint64_t(0);
    mutable std::vector<float> cos, sin;  // [token][dims / 2]
};

class CpuKvCache final : public KvCache {
public:
    CpuKvCache(const kv::KvLayout& layout, int64_t n_blocks)
        : KvCache(layout, int32_t(n_blocks)), pool(layout, n_blocks) {}
    void copy_block(int32_t src, int32_t dst) override { pool.copy_block(src, dst); }
    void export_block(int32_t block, std::span<uint8_t> out) const override { pool.export_block(block, out); }
    void import_block(int32_t block, std::span<const uint8_t> in) override { pool.import_block(block, in); }
    void read_k(int32_t layer, int64_t slot, int32_t head, float* out) const override { pool.read_k(layer, slot, head, out); }
    void read_v(int32_t layer, int64_t slot, int32_t head, float* out) const override { pool.read_v(layer, slot, head, out); }
    kernels::KvPool pool;
};

const float* f32(const Tensor& t) { return static_cast<const float*>(t.data); }
float* f32w(const Tensor& t) { return static_cast<float*>(t.data); }
const CpuWeight& cpu(const Weight& w) { return static_cast<const CpuWeight&>(w); }
const float* cpu(const Vector& v) { return static_cast<const CpuVector&>(v).values.data(); }
kernels::KvPool& cpu(KvCache& c) { return static_cast<CpuKvCache&>(c).pool; }
const kernels::KvPool& cpu(const KvCache& c) { return static_cast<const CpuKvCache&>(c).pool; }

void check_cols(const Tensor& t, int64_t cols, const char* op, const char* what) {
    if (t.cols != cols) fail("cpu backend: {} expects {} with {} columns, got {}", op, what, cols, t.cols);
}

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(const BackendOptions& o) : threads_(o.n_threads > 0 ? o.n_threads : default_thread_count()) {
        kernels::log_kernel_paths();  // once per process: which ISA and quantised path the matmuls use
        kernels::log_kernel_plan();   // and which method and tiles each weight type takes (profile or CPUID)
    }

    std::string name() const override { return "cpu"; }
    std::string describe() const override {
        return fmt::format("cpu backend, {} threads; {}", threads_.size(), kernels::describe_kernel_paths());
    }
    size_t activation_size() const override { return sizeof(float); }
    int n_threads() const override { return threads_.size(); }

    std::shared_ptr<Weight> upload_weight(std::vector<MatrixSource> parts, WeightUse use) override {
        if (parts.empty()) fail("cpu backend: a weight needs at least one part");
        for (const auto& p : parts) {
            kernels::require_matmul_support(p.type, fmt::format("tensor {}", p.name));
            if (p.cols != parts[0].cols) fail("cpu backend: stacked tensor {} has {} columns, {} has {}", p.name, p.cols,
                                              parts[0].name, parts[0].cols);
        }
        auto w = std::make_shared<CpuWeight>(std::move(parts), use);
        if (w->parts().size() > 1) stacked_width_ = std::max(stacked_width_, w->rows());
        if (w->parts().size() == 3) kv_width_ = std::max(kv_width_, w->parts()[1].rows + w->parts()[2].rows);
        size_scratch();  // a weight uploaded after reserve_activations widens the scratch now, not in a step
        return w;
    }
    std::shared_ptr<Vector> upload_vector(std::span<const float> v) override { return std::make_shared<CpuVector>(v); }
    std::shared_ptr<Rope> upload_rope(RopeSpec spec) override {
        if (spec.dims <= 0 || spec.dims % 2 || int64_t(spec.inv_freq.size()) != spec.dims / 2)
            fail("cpu backend: RoPE needs an even dimension count and dims/2 frequencies");
        return std::make_shared<CpuRope>(std::move(spec));
    }
    std::unique_ptr<KvCache> create_kv_cache(const kv::KvLayout& layout, int64_t n_blocks) override {
        return std::make_unique<CpuKvCache>(layout, n_blocks);
    }

    void reserve_activations(size_t bytes, int64_t max_tokens) override {
        if (arena_.size() < bytes) arena_.resize(bytes);
        reserved_tokens_ = std::max(reserved_tokens_, max_tokens);
        size_scratch();
    }
    void* activations() override { return arena_.data(); }
    void read(const Tensor& t, float* out) const override {
        std::memcpy(out, t.data, size_t(t.rows * t.cols) * sizeof(float));
    }
    void write(const Tensor& t, const float* in) override {
        std::memcpy(t.data, in, size_t(t.rows * t.cols) * sizeof(float));
    }

    void begin_step(const StepInputs& in) override {
        step_ = in;
        ++step_id_;
        seqs_.clear();
        for (const auto& table : in.block_tables) seqs_.push_back({table.data(), int32_t(table.size())});
    }

    void embed(const Weight& table, const Tensor& out) override {
        const CpuWeight& w = cpu(table);
        check_cols(out, w.cols(), "embed", "an output");
        for (int64_t t = 0; t < out.rows; ++t)
            kernels::dequantize_row(w.view(0), step_.tokens[size_t(t)], f32w(out) + t * out.cols);
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
            kernels::rms_norm(f32(x) + t * x.cols, cpu(w), x.cols, eps, f32w(out) + t * x.cols);
        });
    }
    void add(const Tensor& y, const Tensor& x) override {
        check_cols(x, y.cols, "add", "an input");
        per_token(y.rows, [&](int64_t t) { kernels::add_inplace(f32w(y) + t * y.cols, f32(x) + t * y.cols, y.cols); });
    }
    void add_bias(const Tensor& y, const Vector& b) override {
        check_cols(y, b.size(), "add_bias", "an input");
        per_token(y.rows, [&](int64_t t) { kernels::add_inplace(f32w(y) + t * y.cols, cpu(b), y.cols); });
    }
    void rope(const Tensor& x, const Rope& r, int32_t n_heads, int32_t head_dim) override {
        check_cols(x, int64_t(n_heads) * head_dim, "rope", "an input");
        const CpuRope& tables = rope_tables(r, x.rows);
        const int64_t half = r.spec().dims / 2;
        per_token(x.rows, [&](int64_t t) {
            kernels::rope(f32w(x) + t * x.cols, n_heads, head_dim, r.spec().dims, tables.cos.data() + t * half,
                          tables.sin.data() + t * half, r.spec().neox);
        });
    }
    void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
        check_cols(up, gate.cols, "silu_mul", "an up input");
        per_token(gate.rows, [&](int64_t t) {
            const int64_t o = t * gate.cols;
            kernels::silu_mul(f32(gate) + o, f32(up) + o, gate.cols, f32w(out) + o);
        });
    }
    void gelu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
        check_cols(up, gate.cols, "gelu_mul", "an up input");
        per_token(gate.rows, [&](int64_t t) {
            const int64_t o = t * gate.cols;
            kernels::gelu_mul(f32(gate) + o, f32(up) + o, gate.cols, f32w(out) + o);
        });
    }
    void softmax(const Tensor& x) override {
        per_token(x.rows, [&](int64_t t) { kernels::softmax(f32w(x) + t * x.cols, x.cols); });
    }
    void scale(const Tensor& x, float s) override {
        per_token(x.rows, [&](int64_t t) { kernels::scale_inplace(f32w(x) + t * x.cols, s, x.cols); });
    }
    void softcap(const Tensor& x, float cap) override {
        if (!(cap > 0) || !std::isfinite(cap)) fail("cpu backend: the soft cap {} must be positive", cap);
        per_token(x.rows, [&](int64_t t) { kernels::softcap_inplace(f32w(x) + t * x.cols, cap, x.cols); });
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
        kernels::PagedAttentionBatch a;
        a.q = f32(q);
        a.n_tokens = q.rows;
        a.n_heads = p.n_heads;
        a.token_seq = step_.seq_index.data();
        a.token_pos = step_.positions.data();
        a.seqs = seqs_.data();
        a.n_seqs = int32_t(seqs_.size());
        a.scale = p.scale;
        a.sliding_window = p.sliding_window;
        a.softcap = p.softcap;
        kernels::paged_attention(a, cpu(cache), layer, f32w(out), threads_);
    }
    void gather_logit_rows(const Tensor& x, const Tensor& out) override {
        check_cols(out, x.cols, "gather_logit_rows", "an output");
        gather_rows(x, step_.logit_rows, out);
    }
    void gather_hidden_rows(const Tensor& x, const Tensor& out) override {
        check_cols(out, x.cols, "gather_hidden_rows", "an output");
        gather_rows(x, step_.hidden_rows, out);
    }

    bool supports(FusedOp op) const override { return op != FusedOp::norm_quantize || quantized_row_elements(64) > 0; }

    int64_t quantized_row_elements(int64_t cols) const override {
        // Some weight type may take prequantised rows when the plan runs int8_dot for one (each
        // weight then says for itself, takes_quantized_input).
        if (!kernels::plan_uses_int8_dot()) return 0;
        const kernels::ScopedKernelChoice scope({kernels::PathMethod::int8_dot, kernels::gemm_tiles()});
        if (!kernels::packed_int8_path_active()) return 0;
        // One row's codes, scales and sums, plus room for the 64-byte alignment of the scales.
        return int64_t((kernels::prequantized_bytes(1, cols) + 3) / 4) + 16;
    }
    bool takes_quantized_input(const Weight& weight) const override {
        const CpuWeight& w = cpu(weight);
        if (w.packed().empty()) return false;
        const kernels::ScopedKernelChoice scope(kernels::kernel_choice(w.parts()[0].type, 1));
        for (const auto& p : w.packed())
            if (!kernels::takes_prequantized(p)) return false;
        return true;
    }
    void rms_norm_quantize(const Tensor& x, const Tensor* r, const Vector& w, float eps, const Tensor& out,
                           const Tensor& q) override {
        check_cols(x, w.size(), "rms_norm_quantize", "an input");
        if (q.cols < quantized_row_elements(x.cols))
            fail("cpu backend: rms_norm_quantize needs {} columns for the quantised rows, got {}",
                 quantized_row_elements(x.cols), q.cols);
        // Each row is quantised in the norm's pass, while it is still in cache.
        per_token(x.rows, [&](int64_t t) {
            float* xt = f32w(x) + t * x.cols;
            if (r) kernels::add_inplace(xt, f32(*r) + t * x.cols, x.cols);
            kernels::rms_norm(xt, cpu(w), x.cols, eps, f32w(out) + t * x.cols);
            kernels::prequantize_row(f32w(out) + t * x.cols, t, x.rows, x.cols, q.data);
        });
    }

    void add_rms_norm(const Tensor& x, const Tensor& r, const Vector& w, float eps, const Tensor& out) override {
        check_cols(r, x.cols, "add_rms_norm", "a residual");
        check_cols(x, w.size(), "add_rms_norm", "an input");
        per_token(x.rows, [&](int64_t t) {
            float* xt = f32w(x) + t * x.cols;
            kernels::add_inplace(xt, f32(r) + t * x.cols, x.cols);
            kernels::rms_norm(xt, cpu(w), x.cols, eps, f32w(out) + t * x.cols);
        });
    }

    void qkv_rope_kv_write(KvCache& cache, const QkvOp& op, const Tensor& x, const Tensor& q_out,
                           const Tensor* xq = nullptr) override {
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
        const float* stacked = nullptr;
        if (w.stacked()) {
            stacked = stacked_output(w, x, xq);
        } else {
            multiply(w.packed()[0], x, xq, f32w(q_out));
            multiply(w.packed()[1], x, xq, k);
            multiply(w.packed()[2], x, xq, v);
        }
        const CpuRope& tables = rope_tables(*op.rope, n);
        const int64_t half = op.rope->spec().dims / 2, width = q_dim + 2 * kv_dim;
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
            if (op.bias[0]) kernels::add_inplace(qt, cpu(*op.bias[0]), q_dim);
            if (op.bias[1]) kernels::add_inplace(kt, cpu(*op.bias[1]), kv_dim);
            if (op.bias[2]) kernels::add_inplace(vt, cpu(*op.bias[2]), kv_dim);
            const float* cos = tables.cos.data() + t * half;
            const float* sin = tables.sin.data() + t * half;
            kernels::rope(qt, op.n_heads, op.head_dim, op.rope->spec().dims, cos, sin, op.rope->spec().neox);
            kernels::rope(kt, op.n_kv_heads, op.head_dim, op.rope->spec().dims, cos, sin, op.rope->spec().neox);
        });
        cpu(cache).write(op.layer, step_.slots.data(), n, k, v, &threads_);
    }

    void matmul_silu_mul(const Weight& gate_up, const Tensor& x, const Tensor& out, const Tensor* xq = nullptr) override {
        const CpuWeight& w = cpu(gate_up);
        if (w.parts().size() != 2) fail("cpu backend: matmul_silu_mul needs a weight of parts gate, up");
        check_cols(x, w.cols(), "matmul_silu_mul", "an input");
        const int64_t n = x.rows, f = w.parts()[0].rows;
        check_cols(out, f, "matmul_silu_mul", "an output");
        if (w.stacked()) {
            const float* y = stacked_output(w, x, xq);
            // Each token's row holds [gate | up].
            per_token(n, [&](int64_t t) {
                const float* row = y + t * 2 * f;
                kernels::silu_mul(row, row + f, f, f32w(out) + t * f);
            });
            return;
        }
        float* up = scratch_for(n * f);
        multiply(w.packed()[0], x, xq, f32w(out));
        multiply(w.packed()[1], x, xq, up);
        per_token(n, [&](int64_t t) { kernels::silu_mul(f32w(out) + t * f, up + t * f, f, f32w(out) + t * f); });
    }

    // Workspace per token row (floats): gathered inputs [D] (then the experts' down outputs and the
    // shared expert's), gate|up [2F], activations [F], each rank's expert output [k D], the route
    // (k weights, k expert ids), this expert's tokens and their ranks [2]. F: the wider FFN.
    int64_t moe_workspace_cols(const MoeOp& op) const override {
        if (op.gate_up.empty()) return 1;
        const int64_t d = op.gate_up[0]->cols(), f = std::max(op.ffn(), op.shared_ffn()), k = op.n_used;
        return d + 3 * f + k * d + 2 * k + 2;
    }

    void moe_ffn(const MoeOp& op, const Tensor& x, const Tensor& logits, const Tensor& out, const Tensor& ws) override {
        const auto n_experts = int32_t(op.gate_up.size());
        if (n_experts == 0 || int32_t(op.down.size()) != n_experts) fail("cpu backend: moe_ffn needs gate|up and down per expert");
        const int64_t n = x.rows, d = x.cols, k = op.n_used, f = op.ffn();
        const int64_t fw = std::max(f, op.shared_ffn());
        check_cols(x, op.gate_up[0]->cols(), "moe_ffn", "an input");
        check_cols(logits, n_experts, "moe_ffn", "router logits");
        check_cols(out, d, "moe_ffn", "an output");
        check_cols(ws, moe_workspace_cols(op), "moe_ffn", "a workspace");
        if (n == 0) return;
        float* rows = f32w(ws);
        float* gu = rows + n * d;
        float* act = gu + n * 2 * fw;
        float* ranked = act + n * fw;  // [t][j][d]
        float* weights = ranked + n * k * d;
        auto* ids = reinterpret_cast<int32_t*>(weights + n * k);
        auto* tokens = ids + n * k;
        auto* ranks = tokens + n;
        per_token(n, [&](int64_t t) {
            route_token(f32(logits) + t * n_experts, n_experts, int32_t(k), op.normalize, ids + t * k, weights + t * k);
        });
        // One GEMM per expert over the tokens that chose it (decode: k GEMVs); unchosen experts'
        // weights are never read.
        for (int32_t e = 0; e < n_experts; ++e) {
            int64_t m = 0;
            for (int64_t t = 0; t < n; ++t)
                for (int64_t j = 0; j < k; ++j)
                    if (ids[t * k + j] == e) {
                        tokens[m] = int32_t(t);
                        ranks[m++] = int32_t(j);
                    }
            if (m == 0) continue;
            for (int64_t i = 0; i < m; ++i)
                std::memcpy(rows + i * d, f32(x) + int64_t(tokens[i]) * d, size_t(d) * sizeof(float));
            expert_ffn(cpu(*op.gate_up[size_t(e)]), cpu(*op.down[size_t(e)]), {rows, m, d}, gu, act, rows);
            for (int64_t i = 0; i < m; ++i)
                std::memcpy(ranked + (int64_t(tokens[i]) * k + ranks[i]) * d, rows + i * d, size_t(d) * sizeof(float));
        }
        // Each token's sum in rank order, then its gated shared expert.
        if (op.shared_gate_up) expert_ffn(cpu(*op.shared_gate_up), cpu(*op.shared_down), x, gu, act, rows);
        per_token(n, [&](int64_t t) {
            float* o = f32w(out) + t * d;
            const float* y = ranked + t * k * d;
            for (int64_t c = 0; c < d; ++c) o[c] = weights[t * k] * y[c];
            for (int64_t j = 1; j < k; ++j)
                for (int64_t c = 0; c < d; ++c) o[c] += weights[t * k + j] * y[j * d + c];
            if (!op.shared_gate_up) return;
            float s = 1.0f;
            if (op.shared_gate) {
                const float* g = cpu(*op.shared_gate);
                const float* xt = f32(x) + t * d;
                float dot = 0;
                for (int64_t c = 0; c < d; ++c) dot += g[c] * xt[c];
                s = 1.0f / (1.0f + std::exp(-dot));
            }
            const float* sh = rows + t * d;
            for (int64_t c = 0; c < d; ++c) o[c] += s * sh[c];
        });
    }

    std::string describe_matmul(const Weight& weight, int64_t n_tokens) const override {
        const CpuWeight& w = cpu(weight);
        const auto type = w.parts()[0].type;
        const kernels::ScopedKernelChoice scope(kernels::kernel_choice(type, n_tokens));
        std::string path;
        const bool packed = !w.packed().empty() && w.packed()[0].is_packed();
        const bool is_float = type == gguf::GgmlType::F32 || type == gguf::GgmlType::F16 || type == gguf::GgmlType::BF16;
        const auto layout = packed ? w.packed()[0].layout() : kernels::PackedWeight::Layout::view;
        if (layout == kernels::PackedWeight::Layout::bf16_panels && kernels::bf16_kernel_available()) path = "bf16 panels, vdpbf16ps";
        else if (layout == kernels::PackedWeight::Layout::bf16_tiles && kernels::bf16_tiles_available())
            path = kernels::amx_emulation() ? "bf16 tiles, AMX (emulated)" : "bf16 tiles, AMX (tdpbf16ps)";
        else if (packed && !is_float && kernels::amx_path_available() && n_tokens >= kernels::amx_min_tokens())
            path = kernels::amx_emulation() ? "packed int8 panels, AMX tiles (emulated)" : "packed int8 panels, AMX tiles (tdpbssd)";
        else if (packed && !is_float && kernels::packed_int8_path_active())
            path = kernels::vnni_panels_active() ? "packed int8 panels, vpdpbusd" : "packed int8 panels, vpmaddubsw";
        else if (!is_float && kernels::quant_method() == kernels::QuantMethod::int8_dot) path = "int8 dot";
        else path = "f32 fma";
        return fmt::format("{} {}{}, {} {}", gguf::type_name(uint32_t(type)), path, w.stacked() ? " (stacked)" : "",
                           isa_name(active_isa()), n_tokens == 1 ? "gemv" : "gemm");
    }

private:
    // Per-token work between the matmuls: spread over the pool when the step has enough tokens,
    // inline for a decode step (a parallel region per op is worth it only then). Each token's
    // arithmetic is the same either way.
    template <class Fn>
    void per_token(int64_t n, const Fn& fn) {
        if (n < 8) {
            for (int64_t t = 0; t < n; ++t) fn(t);
            return;
        }
        threads_.parallel_for(n, 4, [&](int64_t begin, int64_t end, int) {
            for (int64_t t = begin; t < end; ++t) fn(t);
        });
    }

    void size_scratch() {
        const int64_t tokens = std::max<int64_t>(reserved_tokens_, 1);
        if (scratch_.size() < size_t(tokens * std::max<int64_t>(stacked_width_, 1)))
            scratch_.resize(size_t(tokens * std::max<int64_t>(stacked_width_, 1)));
        if (kv_scratch_.size() < size_t(tokens * kv_width_)) kv_scratch_.resize(size_t(tokens * kv_width_));
    }

    float* scratch_for(int64_t floats) {
        if (int64_t(scratch_.size()) < floats)
            fail("cpu backend: a step needs {} scratch floats, {} reserved (reserve_activations first)", floats,
                 scratch_.size());
        return scratch_.data();
    }
    // One pass over a stacked weight into the scratch: each token's row holds the parts side by side.
    const float* stacked_output(const CpuWeight& w, const Tensor& x, const Tensor* xq) {
        float* y = scratch_for(x.rows * w.rows());
        multiply(w.packed()[0], x, xq, y);
        return y;
    }
    // From the quantised form of x when the norm made one and this weight reads it, else from x.
    // The plan's method and tiles for (type, tokens) hold on this thread for the call.
    void multiply(const kernels::PackedWeight& w, const Tensor& x, const Tensor* xq, float* y) {
        const kernels::KernelChoice choice = kernels::kernel_choice(w.source().type, x.rows);
        const kernels::ScopedKernelChoice scope(choice);
        kernels::count_dispatch(choice.method);
        if (xq && kernels::takes_prequantized(w)) return kernels::matmul_prequantized(w, xq->data, x.rows, y, threads_);
        kernels::matmul(w, f32(x), x.rows, y, threads_);
    }

    // One expert's SwiGLU FFN over the rows of x: gate|up into gu, silu * up into act, down into y.
    void expert_ffn(const CpuWeight& gate_up, const CpuWeight& down, const Tensor& x, float* gu, float* act, float* y) {
        const int64_t m = x.rows, f = gate_up.parts()[0].rows;
        if (gate_up.stacked()) {
            multiply(gate_up.packed()[0], x, nullptr, gu);
            per_token(m, [&](int64_t i) { kernels::silu_mul(gu + i * 2 * f, gu + i * 2 * f + f, f, act + i * f); });
        } else {
            multiply(gate_up.packed()[0], x, nullptr, gu);
            multiply(gate_up.packed()[1], x, nullptr, gu + m * f);
            per_token(m, [&](int64_t i) { kernels::silu_mul(gu + i * f, gu + m * f + i * f, f, act + i * f); });
        }
        multiply(down.packed()[0], {act, m, f}, nullptr, y);
    }

    const CpuRope& rope_tables(const Rope& r, int64_t n) {
        const auto& t = static_cast<const CpuRope&>(r);
        if (t.step == step_id_ && int64_t(t.cos.size()) >= n * (r.spec().dims / 2)) return t;
        // Positions are the same in every layer: the angles are computed once per step.
        const int64_t half = r.spec().dims / 2;
        t.cos.resize(size_t(n * half));
        t.sin.resize(size_t(n * half));
        for (int64_t i = 0; i < n; ++i) {
            for (int64_t j = 0; j < half; ++j) {
                const double angle = double(step_.positions[size_t(i)]) * r.spec().inv_freq[size_t(j)];
                t.cos[size_t(i * half + j)] = float(std::cos(angle));
                t.sin[size_t(i * half + j)] = float(std::sin(angle));
            }
        }
        t.step = step_id_;
        return t;
    }

    ThreadPool threads_;
    AlignedBuffer<uint8_t> arena_;
    std::vector<float> scratch_;     // the stacked output of a multi-part matmul
    std::vector<float> kv_scratch_;  // K and V of a fused QKV op
    int64_t stacked_width_ = 0, kv_width_ = 0;  // widest stacked weight; widest K + V
    int64_t reserved_tokens_ = 0;
    void gather_rows(const Tensor& x, std::span<const int32_t> rows, const Tensor& out) {
        for (size_t i = 0; i < rows.size(); ++i)
            std::memcpy(f32w(out) + int64_t(i) * x.cols, f32(x) + int64_t(rows[i]) * x.cols, size_t(x.cols) * sizeof(float));
    }

    StepInputs step_;
    uint64_t step_id_ = 0;
    std::vector<kernels::AttentionSeq> seqs_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options) { return std::make_unique<CpuBackend>(options); }

}  // namespace pagoda::backend
