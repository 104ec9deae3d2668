#version 450
// Stores each token's K and V rows in its slot: one invocation per (token, kv head, K or V) row; a
// slot of -1 (a padding row) stores nothing.
// Rounding is bit-exact and round-to-nearest-even (core/half.h's rules), so every backend stores the
// same bits: f16 and bf16 by integer arithmetic; q8 by the format's rule (kv/kv_layout.h): scale
// max|x| / 127, codes round(x / scale) ties to even, clamped to +-127; a row with inf or NaN gets a
// NaN scale and zero codes.
#include "common.glsl"
#include "kv.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
    uint64_t k, v, cache, slots;
    uint n, n_kv_heads, layer_offset;
    uint block_size, dtype, head_dim, row_bytes, head_block_bytes, layer_block_bytes, bytes_per_block;
} pc;

uint f32_to_f16(float f) {
    const uint u = floatBitsToUint(f);
    const uint sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;
    if (a >= 0x477ff000u) return sign | 0x7c00u;
    if (a < 0x38800000u) {
        const float v = uintBitsToFloat(a) * 16777216.0;
        uint m = uint(v);
        const float rem = v - float(m);
        if (rem > 0.5 || (rem == 0.5 && (m & 1u) != 0u)) ++m;
        return sign | m;
    }
    const uint rounded = a + 0xfffu + ((a >> 13) & 1u);
    return sign | ((rounded - (112u << 23)) >> 13);
}

uint f32_to_bf16(float f) {
    uint u = floatBitsToUint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    u += 0x7fffu + ((u >> 16) & 1u);
    return u >> 16;
}

// a / s rounded to the nearest float (ties to even) for a >= 0 and s > 0 normal, by integer
// arithmetic: a shader's float division may be off by 2.5 ulp (Vulkan's precision rules), and q8's
// codes and scale must be the bits the host rule gives. With for_code, quotients below 1/4 return 0
// (the code they give is 0 either way; it keeps ldexp away from subnormal results).
float div_rn(float a, float s, bool for_code) {
    const uint ua = floatBitsToUint(a), us = floatBitsToUint(s);
    if (a == 0.0) return 0.0;
    const int ea = int(ua >> 23) - 127, es = int(us >> 23) - 127;
    if (for_code && ea - es < -3) return 0.0;
    const uint64_t ma = uint64_t((ua & 0x7fffffu) | 0x800000u), ms = uint64_t((us & 0x7fffffu) | 0x800000u);
    const uint64_t num = ma << 40, n = num / ms;  // ma/ms in (1/2, 2): n has 40 or 41 bits
    const bool inexact = num % ms != 0ul;
    const int sh = n >= (1ul << 40) ? 17 : 16;     // keep 24 significant bits
    uint64_t keep = n >> sh;
    const uint64_t rem = n & ((1ul << sh) - 1ul), half_ = 1ul << (sh - 1);
    if (rem > half_ || (rem == half_ && (inexact || (keep & 1ul) != 0ul))) keep += 1ul;
    return ldexp(float(keep), ea - es + sh - 40);
}

void main() {
    const uint i = gl_GlobalInvocationID.x;
    if (i >= pc.n * pc.n_kv_heads * 2u) return;
    const bool is_v = (i & 1u) != 0u;
    const uint h = (i / 2u) % pc.n_kv_heads, t = i / (2u * pc.n_kv_heads);
    KvGeometry g = KvGeometry(pc.block_size, pc.dtype, pc.head_dim, pc.row_bytes, pc.head_block_bytes,
                              pc.layer_block_bytes, pc.bytes_per_block);
    const int slot = Ints(pc.slots).v[t];
    if (slot < 0) return;  // a padding row of a replay bucket (vulkan_step_inputs.h) stores nothing
    const uint64_t row = kv_row_address(pc.cache, g, pc.layer_offset, slot, h, is_v);
    Floats src = Floats(is_v ? pc.v : pc.k);
    const uint base = (t * pc.n_kv_heads + h) * pc.head_dim;
    Uints dst = Uints(row);
    if (pc.dtype == 0u) {
        for (uint d = 0; d < pc.head_dim; ++d) Floats(row).v[d] = src.v[base + d];
    } else if (pc.dtype == 1u || pc.dtype == 2u) {
        for (uint d = 0; d < pc.head_dim; d += 2u) {
            const float a = src.v[base + d], b = src.v[base + d + 1u];
            dst.v[d / 2u] = pc.dtype == 1u ? (f32_to_f16(a) | (f32_to_f16(b) << 16)) : (f32_to_bf16(a) | (f32_to_bf16(b) << 16));
        }
    } else {
        float amax = 0.0;
        bool finite = true;
        for (uint d = 0; d < pc.head_dim; ++d) {
            const float x = src.v[base + d];
            finite = finite && !isnan(x) && !isinf(x);
            amax = max(amax, abs(x));
        }
        const float scale = finite ? div_rn(amax, 127.0, false) : uintBitsToFloat(0x7fc00000u);
        const uint words = q8_scale_offset(pc.head_dim) / 4u;
        for (uint w = 0; w < words; ++w) {
            uint packed = 0u;
            for (uint j = 0; j < 4u; ++j) {
                const uint d = 4u * w + j;
                int code = 0;
                if (d < pc.head_dim && finite && scale > 0.0) {
                    const float x = src.v[base + d], q = div_rn(abs(x), scale, true);
                    code = int(clamp(roundEven(x < 0.0 ? -q : q), -127.0, 127.0));
                }
                packed |= (uint(code) & 0xffu) << (8u * j);
            }
            dst.v[w] = packed;
        }
        Floats(row).v[words] = scale;
    }
}
