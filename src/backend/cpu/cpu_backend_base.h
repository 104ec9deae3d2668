// Internal: the CPU backend's state and lifetime, under the op adapters (cpu_backend.cpp derives
// from it): the thread pool, the activation arena and the scratch sized for the widest stacked
// weight and K + V, the step's inputs, the uploads (weights packed by cpu_weight.h's policy), and
// the helpers every op adapter shares (per-token work, one matmul, RoPE tables once per step, the
// sequence ends of non-causal attention, row gathers).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/attention_span.h"
#include "backend/backend.h"
#include "backend/cpu/attention/attention.h"
#include "backend/cpu/cpu_step_helpers.h"
#include "backend/cpu/cpu_weight.h"
#include "backend/cpu/lora/lora_add.h"
#include "core/aligned_buffer.h"
#include "core/thread_pool.h"

namespace pagoda::backend::cpu {

class CpuBackendBase : public Backend {
public:
    explicit CpuBackendBase(const BackendOptions& o, PlanSettings plan = process_plan_settings());

    std::string name() const override { return "cpu"; }
    std::string describe() const override;
    size_t activation_size() const override { return sizeof(float); }
    int n_threads() const override { return threads_.size(); }

    std::shared_ptr<Weight> upload_weight(std::vector<MatrixSource> parts, WeightUse use) override;
    std::shared_ptr<Vector> upload_vector(std::span<const float> v) override { return std::make_shared<CpuVector>(v); }
    std::shared_ptr<Rope> upload_rope(RopeSpec spec) override;
    std::unique_ptr<KvCache> create_kv_cache(const kv::KvLayout& layout, int64_t n_blocks) override {
        return std::make_unique<CpuKvCache>(layout, n_blocks);
    }

    void reserve_activations(size_t bytes, int64_t max_tokens) override;
    void* activations() override { return arena_.data(); }
    void read(const Tensor& t, float* out) const override;
    void write(const Tensor& t, const float* in) override;
    void begin_step(const StepInputs& in) override;

protected:
    template <class Fn>
    void per_token(int64_t n, const Fn& fn) {
        cpu::per_token(threads_, n, fn);
    }
    float* scratch_for(int64_t floats);
    // One pass over a stacked weight into the scratch: each token's row holds the parts side by side.
    float* stacked_output(const CpuWeight& w, const Tensor& x, const Tensor* xq);
    // From the quantised form of x when the norm made one and this weight reads it, else from x.
    void multiply(const PackedWeight& w, const Tensor& x, const Tensor* xq, float* y) {
        cpu::multiply(w, x, xq, y, threads_, plan_);
    }
    // The rope's cos / sin for this step's positions (the same in every layer: computed once a step).
    const CpuRope& rope_tables(const Rope& r, int64_t n);
    void gather_rows(const Tensor& x, std::span<const int32_t> rows, const Tensor& out);
    // Non-causal attention: every token of a sequence attends to the keys up to its sequence's last
    // position in the step, so the kernel is handed that position for each token (a run of equal
    // positions; attention.h). Computed once a step, on the first non-causal call.
    const int32_t* sequence_ends();

    ThreadPool threads_;
    const PlanSettings plan_;        // this backend's kernel plan and attention settings (kernel_plan.h)
    std::vector<float> kv_scratch_;  // K and V of a fused QKV op
    LoraScratch lora_scratch_;       // lora_add's intermediates
    StepInputs step_;
    std::vector<int32_t> first_keys_;   // an attention call's first key per token under its window
    std::vector<float> alibi_slopes_;   // an ALiBi attention call's head slopes
    std::vector<AttentionSeq> seqs_;

private:
    void size_scratch();

    AlignedBuffer<uint8_t> arena_;
    std::vector<float> scratch_;                // the stacked output of a multi-part matmul
    int64_t stacked_width_ = 0, kv_width_ = 0;  // widest stacked weight; widest K + V
    int64_t reserved_tokens_ = 0;
    uint64_t step_id_ = 0;
    std::vector<int32_t> sequence_ends_;
    uint64_t ends_step_ = 0;
};

}  // namespace pagoda::backend::cpu
