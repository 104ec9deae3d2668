// The CPU backend's objects behind backend.h's handles: a weight packed for the matmul kernels
// (the packing policy: stacked parts, panels or the file's view, by the kernel plan), a vector, a
// RoPE table cached per step, a KV cache over KvPool; and the casts from the handles and
// tensors to them.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kv/kv_pool.h"
#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "core/error.h"

namespace pagoda::backend::cpu {

class CpuWeight final : public Weight {
public:
    // Packs the parts as the backend's kernel plan's method for their type wants (see
    // cpu_weight.cpp); an embedding-only table stays a view of the file.
    CpuWeight(std::vector<MatrixSource> parts, WeightUse use, const PlanSettings& plan);

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
    const std::vector<PackedWeight>& packed() const { return packed_; }
    const WeightView& view(size_t part) const { return views_[part]; }

private:
    std::vector<WeightView> views_;
    std::vector<PackedWeight> packed_;  // empty for an embedding-only table
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
    KvPool pool;
};

inline const float* f32(const Tensor& t) { return static_cast<const float*>(t.data); }
inline float* f32w(const Tensor& t) { return static_cast<float*>(t.data); }
inline const CpuWeight& cpu(const Weight& w) { return static_cast<const CpuWeight&>(w); }
inline const float* cpu(const Vector& v) { return static_cast<const CpuVector&>(v).values.data(); }
inline KvPool& cpu(KvCache& c) { return static_cast<CpuKvCache&>(c).pool; }
const inline KvPool& cpu(const KvCache& c) { return static_cast<const CpuKvCache&>(c).pool; }

inline void check_cols(const Tensor& t, int64_t cols, const char* op, const char* what) {
    if (t.cols != cols) fail("cpu backend: {} expects {} with {} columns, got {}", op, what, cols, t.cols);
}

}  // namespace pagoda::backend::cpu
