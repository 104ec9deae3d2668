#include "backend/cpu/kv/kv_pool.h"

#include <cstring>
#include <limits>

#include "backend/cpu/kv/kv_rows.h"
#include "core/error.h"
#include "core/half.h"
#include "kv/kv_q8.h"

namespace pagoda::backend::cpu {

void kv_store_row(KvDtype dtype, const float* src, void* dst, int64_t n) {
    switch (dtype) {
        case KvDtype::f32: std::memcpy(dst, src, size_t(n) * 4); return;
        case KvDtype::f16: f32_to_f16_row(src, n, static_cast<uint16_t*>(dst)); return;
        case KvDtype::bf16: f32_to_bf16_row(src, n, static_cast<uint16_t*>(dst)); return;
        case KvDtype::q8: {
            auto* d = static_cast<uint8_t*>(dst);
            const size_t at = kv::q8_scale_offset(int32_t(n));
            const float scale = quantize_row_q8(src, reinterpret_cast<int8_t*>(d), n);
            std::memset(d + n, 0, at - size_t(n));  // the padding: rows compare and copy as whole bytes
            std::memcpy(d + at, &scale, 4);
            return;
        }
    }
}

void kv_load_row(KvDtype dtype, const void* src, float* dst, int64_t n) {
    switch (dtype) {
        case KvDtype::f32: std::memcpy(dst, src, size_t(n) * 4); return;
        case KvDtype::f16: {
            auto* s = static_cast<const f16_bits*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
            return;
        }
        case KvDtype::bf16: {
            auto* s = static_cast<const bf16_bits*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
            return;
        }
        case KvDtype::q8: {
            auto* s = static_cast<const uint8_t*>(src);
            float scale;
            std::memcpy(&scale, s + kv::q8_scale_offset(int32_t(n)), 4);
            kv::dequantize_row_q8(reinterpret_cast<const int8_t*>(s), scale, dst, n);
            return;
        }
    }
}

KvPool::KvPool(const KvLayout& layout, int64_t n_blocks) : layout_(layout) {
    layout_.validate();
    if (n_blocks < 1 || n_blocks > std::numeric_limits<int32_t>::max())
        fail("KV pool: block count must be in 1..{}, got {}", std::numeric_limits<int32_t>::max(), n_blocks);
    size_t per_layer = layout_.layer_block_bytes();
    if (uint64_t(n_blocks) > std::numeric_limits<uint64_t>::max() / 4 / per_layer / uint64_t(layout_.n_layers))
        fail("KV pool: {} blocks of {} bytes overflow the address space", n_blocks, layout_.bytes_per_block());
    n_blocks_ = int32_t(n_blocks);
    k_.resize(size_t(layout_.n_layers));
    v_.resize(layout_.v_is_k ? 0 : size_t(layout_.n_layers));  // V = K: no V storage
    for (int32_t l = 0; l < layout_.n_layers; ++l) {
        k_[size_t(l)].resize(per_layer * size_t(n_blocks));
        if (!layout_.v_is_k) v_[size_t(l)].resize(per_layer * size_t(n_blocks));
    }
}

void KvPool::check_layer(int32_t layer) const {
    if (layer < 0 || layer >= layout_.n_layers) fail("KV pool: layer {} out of range 0..{}", layer, layout_.n_layers - 1);
}

void KvPool::check_slot(int64_t slot) const {
    if (slot < 0 || slot >= n_slots()) fail("KV pool: slot {} out of range 0..{}", slot, n_slots() - 1);
}

namespace {
constexpr int64_t kPrefetchWriteTokens = 16;  // decode and batched decode
}  // namespace

size_t KvPool::row_offset(int64_t slot, int32_t kv_head) const {
    int64_t block = slot / layout_.block_size;
    int64_t offset = slot % layout_.block_size;
    return size_t(block) * layout_.layer_block_bytes() + size_t(kv_head) * layout_.head_block_bytes() +
           size_t(offset) * layout_.row_bytes();
}

void KvPool::write(int32_t layer, const int64_t* slots, int64_t n_tokens, const float* k, const float* v,
                   ThreadPool* threads) {
    check_layer(layer);
    for (int64_t i = 0; i < n_tokens; ++i)
        if (slots[i] >= 0) check_slot(slots[i]);  // every slot first: a worker must not throw
    const int64_t width = int64_t(layout_.n_kv_heads) * layout_.head_dim;
    uint8_t* kd = k_[size_t(layer)].data();
    uint8_t* vd = layout_.v_is_k ? nullptr : v_[size_t(layer)].data();
    auto store = [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const int64_t slot = slots[i];
            if (slot < 0) continue;
            for (int32_t h = 0; h < layout_.n_kv_heads; ++h) {
                size_t off = row_offset(slot, h);
                kv_store_row(layout_.dtype, k + i * width + int64_t(h) * layout_.head_dim, kd + off, layout_.head_dim);
                if (vd) kv_store_row(layout_.dtype, v + i * width + int64_t(h) * layout_.head_dim, vd + off, layout_.head_dim);
            }
        }
    };
    // Below a few dozen tokens (decode) the pool's round trip costs more than the stores.
    if (threads && threads->size() > 1 && n_tokens >= 32)
        threads->parallel_for(n_tokens, 16, [&](int64_t begin, int64_t end, int) { store(begin, end); });
    else
        store(0, n_tokens);
}

void KvPool::prefetch_write(int32_t layer, const int64_t* slots, int64_t n_tokens) const {
    if (layer < 0 || layer >= layout_.n_layers || n_tokens > kPrefetchWriteTokens) return;
    const uint8_t* kd = k_[size_t(layer)].data();
    const uint8_t* vd = layout_.v_is_k ? nullptr : v_[size_t(layer)].data();
    const size_t row = layout_.row_bytes();
    for (int64_t i = 0; i < n_tokens; ++i) {
        if (slots[i] < 0 || slots[i] >= n_slots()) continue;
        for (int32_t h = 0; h < layout_.n_kv_heads; ++h) {
            const size_t off = row_offset(slots[i], h);
            for (size_t b = off & ~size_t(63); b < off + row; b += 64) {  // every line the row touches
                __builtin_prefetch(kd + b, 1, 3);
                if (vd) __builtin_prefetch(vd + b, 1, 3);
            }
        }
    }
}

void KvPool::copy_block(int32_t src, int32_t dst) {
    if (src < 0 || src >= n_blocks_ || dst < 0 || dst >= n_blocks_)
        fail("KV pool: block copy {} -> {} out of range 0..{}", src, dst, n_blocks_ - 1);
    if (src == dst) return;
    size_t bytes = layout_.layer_block_bytes();
    for (int32_t l = 0; l < layout_.n_layers; ++l) {
        std::memcpy(k_[size_t(l)].data() + size_t(dst) * bytes, k_[size_t(l)].data() + size_t(src) * bytes, bytes);
        if (!layout_.v_is_k)
            std::memcpy(v_[size_t(l)].data() + size_t(dst) * bytes, v_[size_t(l)].data() + size_t(src) * bytes, bytes);
    }
}

void KvPool::export_block(int32_t block, std::span<uint8_t> out) const {
    if (block < 0 || block >= n_blocks_) fail("KV pool: block {} out of range 0..{}", block, n_blocks_ - 1);
    if (out.size() != layout_.bytes_per_block())
        fail("KV pool: a block export needs {} bytes, got {}", layout_.bytes_per_block(), out.size());
    const size_t bytes = layout_.layer_block_bytes();
    uint8_t* dst = out.data();
    for (int32_t l = 0; l < layout_.n_layers; ++l) {
        std::memcpy(dst, k_[size_t(l)].data() + size_t(block) * bytes, bytes);
        if (layout_.v_is_k) {
            dst += bytes;
            continue;
        }
        std::memcpy(dst + bytes, v_[size_t(l)].data() + size_t(block) * bytes, bytes);
        dst += 2 * bytes;
    }
}

void KvPool::import_block(int32_t block, std::span<const uint8_t> in) {
    if (block < 0 || block >= n_blocks_) fail("KV pool: block {} out of range 0..{}", block, n_blocks_ - 1);
    if (in.size() != layout_.bytes_per_block())
        fail("KV pool: a block import needs {} bytes, got {}", layout_.bytes_per_block(), in.size());
    const size_t bytes = layout_.layer_block_bytes();
    const uint8_t* src = in.data();
    for (int32_t l = 0; l < layout_.n_layers; ++l) {
        std::memcpy(k_[size_t(l)].data() + size_t(block) * bytes, src, bytes);
        if (layout_.v_is_k) {
            src += bytes;
            continue;
        }
        std::memcpy(v_[size_t(l)].data() + size_t(block) * bytes, src + bytes, bytes);
        src += 2 * bytes;
    }
}

void KvPool::read_k(int32_t layer, int64_t slot, int32_t kv_head, float* out) const {
    check_layer(layer);
    check_slot(slot);
    if (kv_head < 0 || kv_head >= layout_.n_kv_heads) fail("KV pool: kv head {} out of range", kv_head);
    kv_load_row(layout_.dtype, k_[size_t(layer)].data() + row_offset(slot, kv_head), out, layout_.head_dim);
}

void KvPool::read_v(int32_t layer, int64_t slot, int32_t kv_head, float* out) const {
    check_layer(layer);
    check_slot(slot);
    if (kv_head < 0 || kv_head >= layout_.n_kv_heads) fail("KV pool: kv head {} out of range", kv_head);
    kv_load_row(layout_.dtype, v_data(layer) + row_offset(slot, kv_head), out, layout_.head_dim);
}

}  // namespace pagoda::backend::cpu
