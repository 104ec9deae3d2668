// The reference backend's KV cache: doubles, [layer][slot][kv_head][head_dim], each value
// rounded on write to what the layout's dtype stores (f16, bf16, f32 through float; q8 a row at a
// time, its codes times its scale), so attention reads exactly the stored values. Blocks export
// and import in the payload layout of backend.h, the CPU pool's, so the two pools exchange blocks.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace pagoda::backend::reference {

class ReferenceKvCache final : public KvCache {
public:
    ReferenceKvCache(const kv::KvLayout& layout, int32_t n_blocks)
        : KvCache(layout, n_blocks),
          k_(size_t(layout.n_layers) * size_t(n_slots()) * row_stride()),
          v_(layout.v_is_k ? 0 : k_.size()) {}

    void copy_block(int32_t src, int32_t dst) override;
    // The payload layout of backend.h (what the CPU pool holds): per layer K then V, each
    // [kv_head][slot][head_dim] in the element encoding. The stored doubles are already rounded to
    // the element type, so encoding and decoding them is exact.
    void export_block(int32_t block, std::span<uint8_t> out) const override;
    void import_block(int32_t block, std::span<const uint8_t> in) override;
    void read_k(int32_t layer, int64_t slot, int32_t kv_head, float* out) const override;
    void read_v(int32_t layer, int64_t slot, int32_t kv_head, float* out) const override;

    const double* k_row(int32_t layer, int64_t slot, int32_t kv_head) const { return &k_[index(layer, slot, kv_head)]; }
    // layout().v_is_k: the V rows are the K rows (no V storage).
    const double* v_row(int32_t layer, int64_t slot, int32_t kv_head) const {
        return layout().v_is_k ? k_row(layer, slot, kv_head) : &v_[index(layer, slot, kv_head)];
    }
    // Stores one head's K and V rows, rounded as the dtype stores them (v unread when v_is_k).
    void store(int32_t layer, int64_t slot, int32_t kv_head, const double* k, const double* v);
    void check_layer(int32_t layer, const char* op) const;

private:
    // One stored row in the element encoding (kv_layout.h's).
    uint8_t* encode_row(const double* row, uint8_t* at) const;
    const uint8_t* decode_row(const uint8_t* at, double* row) const;
    uint8_t* encode(double x, uint8_t* at) const;
    const uint8_t* decode(const uint8_t* at, double& x) const;
    size_t row_stride() const { return size_t(layout().n_kv_heads) * size_t(layout().head_dim); }
    size_t index(int32_t layer, int64_t slot, int32_t kv_head) const;
    void check_block(int32_t block) const;

    std::vector<double> k_, v_;
};

}  // namespace pagoda::backend::reference
