// IEEE fp16 and bfloat16 <-> fp32 conversion, bit-exact, round-to-nearest-even on the way down.
#pragma once
#include <cstdint>
#include <cstring>

namespace pagoda {

using f16_bits = uint16_t;
using bf16_bits = uint16_t;

inline float bits_to_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float bf16_to_f32(bf16_bits h) { return bits_to_float(uint32_t(h) << 16); }

inline bf16_bits f32_to_bf16(float f) {
    uint32_t u = float_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_bits((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return bf16_bits(u >> 16);
}

inline float f16_to_f32(f16_bits h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        if (man == 0) return bits_to_float(sign);
        // Subnormal: value = man * 2^-24.
        float v = float(man) * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31) return bits_to_float(sign | 0x7f800000u | (man << 13));
    return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
}

inline f16_bits f32_to_f16(float f) {
    uint32_t u = float_to_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return f16_bits(sign | 0x7e00u);        // NaN
    if (abs >= 0x477ff000u) return f16_bits(sign | 0x7c00u);       // overflow -> inf (>= 65520)
    if (abs < 0x38800000u) {                                       // below smallest normal: subnormal
        // Round abs * 2^24 to nearest even integer.
        float a = bits_to_float(abs) * 16777216.0f;
        uint32_t m = uint32_t(a);
        float rem = a - float(m);
        if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
        return f16_bits(sign | m);
    }
    uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
    return f16_bits(sign | ((rounded - (112u << 23)) >> 13));
}

}  // namespace pagoda
