#include "backend/cpu/cpu_backend_base.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "core/error.h"

namespace pagoda::backend::cpu {

CpuBackendBase::CpuBackendBase(const BackendOptions& o, PlanSettings plan)
    : threads_(o.n_threads > 0 ? o.n_threads : default_thread_count()), plan_(std::move(plan)) {
    log_kernel_paths();  // once per process: which ISA and quantised path the matmuls use
    log_kernel_plan();   // and which method and tiles each weight type takes (profile or CPUID)
}

std::string CpuBackendBase::describe() const {
    return fmt::format("cpu backend, {} threads; {}", threads_.size(), describe_kernel_paths());
}

std::shared_ptr<Weight> CpuBackendBase::upload_weight(std::vector<MatrixSource> parts, WeightUse use) {
    if (parts.empty()) fail("cpu backend: a weight needs at least one part");
    for (const auto& p : parts) {
        require_matmul_support(p.type, fmt::format("tensor {}", p.name));
        if (p.cols != parts[0].cols) fail("cpu backend: stacked tensor {} has {} columns, {} has {}", p.name, p.cols,
                                          parts[0].name, parts[0].cols);
    }
    auto w = std::make_shared<CpuWeight>(std::move(parts), use, plan_);
    if (w->parts().size() > 1) stacked_width_ = std::max(stacked_width_, w->rows());
    if (w->parts().size() == 3) kv_width_ = std::max(kv_width_, w->parts()[1].rows + w->parts()[2].rows);
    size_scratch();  // a weight uploaded after reserve_activations widens the scratch now, not in a step
    return w;
}

std::shared_ptr<Rope> CpuBackendBase::upload_rope(RopeSpec spec) {
    if (spec.dims <= 0 || spec.dims % 2 || int64_t(spec.inv_freq.size()) != spec.dims / 2)
        fail("cpu backend: RoPE needs an even dimension count and dims/2 frequencies");
    check_rope_spec(spec, "cpu");
    return std::make_shared<CpuRope>(std::move(spec));
}

void CpuBackendBase::reserve_activations(size_t bytes, int64_t max_tokens) {
    if (arena_.size() < bytes) arena_.resize(bytes);
    reserved_tokens_ = std::max(reserved_tokens_, max_tokens);
    size_scratch();
}

void CpuBackendBase::read(const Tensor& t, float* out) const {
    std::memcpy(out, t.data, size_t(t.rows * t.cols) * sizeof(float));
}

void CpuBackendBase::write(const Tensor& t, const float* in) {
    std::memcpy(t.data, in, size_t(t.rows * t.cols) * sizeof(float));
}

void CpuBackendBase::begin_step(const StepInputs& in) {
    step_ = in;
    if (!in.attend_from.empty() && in.attend_from.size() != in.positions.size())
        fail("cpu begin_step: {} span starts for {} tokens", in.attend_from.size(), in.positions.size());
    ++step_id_;
    seqs_.clear();
    for (const auto& table : in.block_tables) seqs_.push_back({table.data(), int32_t(table.size())});
}

void CpuBackendBase::size_scratch() {
    const int64_t tokens = std::max<int64_t>(reserved_tokens_, 1);
    if (scratch_.size() < size_t(tokens * std::max<int64_t>(stacked_width_, 1)))
        scratch_.resize(size_t(tokens * std::max<int64_t>(stacked_width_, 1)));
    if (kv_scratch_.size() < size_t(tokens * kv_width_)) kv_scratch_.resize(size_t(tokens * kv_width_));
}

float* CpuBackendBase::scratch_for(int64_t floats) {
    if (int64_t(scratch_.size()) < floats)
        fail("cpu backend: a step needs {} scratch floats, {} reserved (reserve_activations first)", floats,
             scratch_.size());
    return scratch_.data();
}

float* CpuBackendBase::stacked_output(const CpuWeight& w, const Tensor& x, const Tensor* xq) {
    float* y = scratch_for(x.rows * w.rows());
    multiply(w.packed()[0], x, xq, y);
    return y;
}

const CpuRope& CpuBackendBase::rope_tables(const Rope& r, int64_t n) {
    const auto& t = static_cast<const CpuRope&>(r);
    if (t.step == step_id_ && int64_t(t.cos.size()) >= n * (r.spec().dims / 2)) return t;
    const int64_t half = r.spec().dims / 2;
    t.cos.resize(size_t(n * half));
    t.sin.resize(size_t(n * half));
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < half; ++j) {
            const double angle = double(rope_position(step_, r.spec(), size_t(i), size_t(j))) * r.spec().inv_freq[size_t(j)];
            t.cos[size_t(i * half + j)] = float(std::cos(angle));
            t.sin[size_t(i * half + j)] = float(std::sin(angle));
        }
    }
    t.step = step_id_;
    return t;
}

void CpuBackendBase::gather_rows(const Tensor& x, std::span<const int32_t> rows, const Tensor& out) {
    for (size_t i = 0; i < rows.size(); ++i)
        std::memcpy(f32w(out) + int64_t(i) * x.cols, f32(x) + int64_t(rows[i]) * x.cols, size_t(x.cols) * sizeof(float));
}

const int32_t* CpuBackendBase::sequence_ends() {
    if (ends_step_ != step_id_) {
        std::vector<int32_t> last(seqs_.size(), -1);
        for (size_t t = 0; t < step_.positions.size(); ++t) {
            const auto s = size_t(step_.seq_index[t]);
            if (s < last.size()) last[s] = std::max(last[s], step_.positions[t]);
        }
        sequence_ends_.resize(step_.positions.size());
        for (size_t t = 0; t < step_.positions.size(); ++t) {
            const auto s = size_t(step_.seq_index[t]);
            sequence_ends_[t] = s < last.size() ? last[s] : step_.positions[t];  // a bad index: the kernel refuses it
        }
        ends_step_ = step_id_;
    }
    return sequence_ends_.data();
}

}  // namespace pagoda::backend::cpu
