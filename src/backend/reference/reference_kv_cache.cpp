#include "backend/reference/reference_kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/half.h"

namespace pagoda::backend::reference {
namespace {

using kv::KvDtype;

// What a cache of `dtype` holds after storing x: rounded through float (what a backend with f32
// activations stores) and then to the dtype.
double stored_value(KvDtype dtype, double x) {
    const float f = float(x);
    switch (dtype) {
        case KvDtype::f16: return f16_to_f32(f32_to_f16(f));
        case KvDtype::bf16: return bf16_to_f32(f32_to_bf16(f));
        case KvDtype::f32: break;
        case KvDtype::q8: fail("reference KV cache: q8 values are stored a row at a time");
    }
    return f;
}

// What a q8 cache holds after storing a row, by the format's definition (kv/kv_layout.h): each
// value rounded through float, the row's scale the fp32 max|x| / 127, each value's code the float
// quotient x / scale rounded to the nearest integer (ties to even) and held in -127..127; the row
// holds code * scale. A row with inf or NaN holds NaN.
void store_q8_row(const double* x, int32_t n, double* out) {
    float amax = 0.0f;
    bool finite = true;
    for (int32_t i = 0; i < n; ++i) {
        const float f = float(x[i]);
        finite = finite && std::isfinite(f);
        if (std::abs(f) > amax) amax = std::abs(f);
    }
    const float scale = amax / 127.0f;
    for (int32_t i = 0; i < n; ++i) {
        if (!finite) {
            out[i] = std::numeric_limits<double>::quiet_NaN();
            continue;
        }
        // An integer code (never -0), as the int8 the format stores.
        const int code = scale > 0.0f ? int(std::clamp(std::nearbyint(float(x[i]) / scale), -127.0f, 127.0f)) : 0;
        out[i] = double(code) * double(scale);
    }
}

// The bytes of a stored q8 row (store_q8_row's output) in kv_layout.h's layout: int8 codes, zero
// padding, the fp32 scale. The row's doubles are code * scale with the largest |code| 127 (or all
// zero), so the scale is max|value| / 127 and every code value / scale, recovered exactly: this
// re-encodes what store_q8_row quantised, it does not quantise again.
uint8_t* encode_q8_row(const double* row, int32_t n, uint8_t* at) {
    double amax = 0;
    bool finite = true;
    for (int32_t i = 0; i < n; ++i) {
        finite = finite && std::isfinite(row[i]);
        amax = std::max(amax, std::abs(row[i]));
    }
    const float scale = finite ? float(amax / 127.0) : std::numeric_limits<float>::quiet_NaN();
    const size_t scale_at = kv::q8_scale_offset(n);
    std::memset(at, 0, scale_at);
    for (int32_t i = 0; i < n && finite && scale > 0.0f; ++i)
        at[i] = uint8_t(int8_t(std::lround(row[i] / double(scale))));
    std::memcpy(at + scale_at, &scale, 4);
    return at + scale_at + 4;
}

const uint8_t* decode_q8_row(const uint8_t* at, int32_t n, double* row) {
    const size_t scale_at = kv::q8_scale_offset(n);
    float scale;
    std::memcpy(&scale, at + scale_at, 4);
    for (int32_t i = 0; i < n; ++i) {
        const int8_t code = int8_t(at[i]);
        row[i] = std::isfinite(scale) ? double(code) * double(scale) : std::numeric_limits<double>::quiet_NaN();
    }
    return at + scale_at + 4;
}

}  // namespace

void ReferenceKvCache::copy_block(int32_t src, int32_t dst) {
    check_block(src);
    check_block(dst);
    const size_t block = size_t(layout().block_size) * row_stride();
    for (int32_t layer = 0; layer < layout().n_layers; ++layer) {
        const size_t base = size_t(layer) * size_t(n_slots()) * row_stride();
        std::copy_n(k_.begin() + base + size_t(src) * block, block, k_.begin() + base + size_t(dst) * block);
        if (!layout().v_is_k)
            std::copy_n(v_.begin() + base + size_t(src) * block, block, v_.begin() + base + size_t(dst) * block);
    }
}

void ReferenceKvCache::export_block(int32_t block, std::span<uint8_t> out) const {
    check_block(block);
    if (out.size() != layout().bytes_per_block())
        fail("reference KV cache: a block export needs {} bytes, got {}", layout().bytes_per_block(), out.size());
    uint8_t* at = out.data();
    for (int32_t layer = 0; layer < layout().n_layers; ++layer)
        for (const std::vector<double>* side : {&k_, &v_}) {
            if (side == &v_ && layout().v_is_k) continue;  // V = K: K only
            for (int32_t h = 0; h < layout().n_kv_heads; ++h)
                for (int32_t t = 0; t < layout().block_size; ++t) {
                    const double* row = &(*side)[index(layer, int64_t(block) * layout().block_size + t, h)];
                    at = encode_row(row, at);
                }
        }
}

void ReferenceKvCache::import_block(int32_t block, std::span<const uint8_t> in) {
    check_block(block);
    if (in.size() != layout().bytes_per_block())
        fail("reference KV cache: a block import needs {} bytes, got {}", layout().bytes_per_block(), in.size());
    const uint8_t* at = in.data();
    for (int32_t layer = 0; layer < layout().n_layers; ++layer)
        for (std::vector<double>* side : {&k_, &v_}) {
            if (side == &v_ && layout().v_is_k) continue;
            for (int32_t h = 0; h < layout().n_kv_heads; ++h)
                for (int32_t t = 0; t < layout().block_size; ++t) {
                    double* row = &(*side)[index(layer, int64_t(block) * layout().block_size + t, h)];
                    at = decode_row(at, row);
                }
        }
}

void ReferenceKvCache::read_k(int32_t layer, int64_t slot, int32_t kv_head, float* out) const {
    const double* row = k_row(layer, slot, kv_head);
    for (int32_t i = 0; i < layout().head_dim; ++i) out[i] = float(row[i]);
}

void ReferenceKvCache::read_v(int32_t layer, int64_t slot, int32_t kv_head, float* out) const {
    const double* row = v_row(layer, slot, kv_head);
    for (int32_t i = 0; i < layout().head_dim; ++i) out[i] = float(row[i]);
}

void ReferenceKvCache::store(int32_t layer, int64_t slot, int32_t kv_head, const double* k, const double* v) {
    const size_t at = index(layer, slot, kv_head);
    if (layout().dtype == KvDtype::q8) {
        store_q8_row(k, layout().head_dim, &k_[at]);
        if (!layout().v_is_k) store_q8_row(v, layout().head_dim, &v_[at]);
        return;
    }
    for (int32_t i = 0; i < layout().head_dim; ++i) {
        k_[at + size_t(i)] = stored_value(layout().dtype, k[i]);
        if (!layout().v_is_k) v_[at + size_t(i)] = stored_value(layout().dtype, v[i]);
    }
}

void ReferenceKvCache::check_layer(int32_t layer, const char* op) const {
    if (layer < 0 || layer >= layout().n_layers)
        fail("reference {}: layer {} is outside the cache's {} layers", op, layer, layout().n_layers);
}

uint8_t* ReferenceKvCache::encode_row(const double* row, uint8_t* at) const {
    const int32_t n = layout().head_dim;
    if (layout().dtype != KvDtype::q8) {
        for (int32_t i = 0; i < n; ++i) at = encode(row[i], at);
        return at;
    }
    return encode_q8_row(row, n, at);
}

const uint8_t* ReferenceKvCache::decode_row(const uint8_t* at, double* row) const {
    const int32_t n = layout().head_dim;
    if (layout().dtype != KvDtype::q8) {
        for (int32_t i = 0; i < n; ++i) at = decode(at, row[i]);
        return at;
    }
    return decode_q8_row(at, n, row);
}

uint8_t* ReferenceKvCache::encode(double x, uint8_t* at) const {
    const float f = float(x);
    switch (layout().dtype) {
        case KvDtype::f32: std::memcpy(at, &f, 4); return at + 4;
        case KvDtype::f16: { const uint16_t h = f32_to_f16(f); std::memcpy(at, &h, 2); return at + 2; }
        case KvDtype::bf16: { const uint16_t h = f32_to_bf16(f); std::memcpy(at, &h, 2); return at + 2; }
        case KvDtype::q8: break;  // a row at a time: encode_row
    }
    fail("reference KV cache: cannot encode element type {}", kv::kv_dtype_name(layout().dtype));
}

const uint8_t* ReferenceKvCache::decode(const uint8_t* at, double& x) const {
    switch (layout().dtype) {
        case KvDtype::f32: { float f; std::memcpy(&f, at, 4); x = f; return at + 4; }
        case KvDtype::f16: { uint16_t h; std::memcpy(&h, at, 2); x = f16_to_f32(h); return at + 2; }
        case KvDtype::bf16: { uint16_t h; std::memcpy(&h, at, 2); x = bf16_to_f32(h); return at + 2; }
        case KvDtype::q8: break;  // a row at a time: decode_row
    }
    fail("reference KV cache: cannot decode element type {}", kv::kv_dtype_name(layout().dtype));
}

size_t ReferenceKvCache::index(int32_t layer, int64_t slot, int32_t kv_head) const {
    check_layer(layer, "KV cache");
    if (slot < 0 || slot >= n_slots()) fail("reference KV cache: slot {} is outside its {} slots", slot, n_slots());
    if (kv_head < 0 || kv_head >= layout().n_kv_heads)
        fail("reference KV cache: KV head {} is outside its {} heads", kv_head, layout().n_kv_heads);
    return (size_t(layer) * size_t(n_slots()) + size_t(slot)) * row_stride() + size_t(kv_head) * size_t(layout().head_dim);
}

void ReferenceKvCache::check_block(int32_t block) const {
    if (block < 0 || block >= n_blocks())
        fail("reference KV cache: block {} is outside its {} blocks", block, n_blocks());
}

}  // namespace pagoda::backend::reference
