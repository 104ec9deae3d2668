// One weight element, by the format the shader is built for (-DFORMAT_<name>):
//   F32: f32 rows (BF16 weights are widened to these exactly at upload);
//   F16: f16 rows, two to a 32-bit word;
//   Q:   int8 codes, four to a word, and per group of 16 elements a (scale, offset) f32 pair:
//        value = code * scale + offset (the grouped layout: any mix of block types in one weight);
//   Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4, IQ2_XXS,
//        IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M: the file's own blocks (the grid types with
//        their grid at `groups`), stacked row
//        after row as stored (rows hold whole blocks, so element e lies in block e / BLOCK). Each
//        element is decoded to the same code, scale and offset as the grouped layout's repacking
//        (weight_repack.cpp) and combined by the same `precise` product and sum, so both layouts give
//        bitwise the same value. Blocks are 18, 34, ... bytes (2-aligned, not 4-aligned): bytes and
//        halves are read out of the aligned 32-bit words that hold them.
// `e` is the element's index in the weight (row * cols + col).

// Byte / 16-bit half at byte `off` (even for halves) past `base` (a 4-aligned buffer address).
uint w_byte(uint64_t base, uint64_t off) {
    const uint64_t a = base + off;
    return (Uints(a & ~uint64_t(3)).v[0] >> (uint(a & uint64_t(3)) * 8u)) & 0xffu;
}
uint w_half(uint64_t base, uint64_t off) {
    const uint64_t a = base + off;
    return (Uints(a & ~uint64_t(3)).v[0] >> (uint(a & uint64_t(2)) * 8u)) & 0xffffu;
}
float w_f16(uint64_t base, uint64_t off) { return unpackHalf2x16(w_half(base, off)).x; }

// Sub-block j (0..7) of a Q4_K/Q5_K super-block: its 6-bit scale and min (the 12 bytes at `s`).
void k_scale_min(uint64_t blk, uint64_t s, uint j, out uint sc, out uint m) {
    if (j < 4u) {
        sc = w_byte(blk, s + j) & 63u;
        m = w_byte(blk, s + j + 4u) & 63u;
    } else {
        sc = (w_byte(blk, s + j + 4u) & 15u) | ((w_byte(blk, s + j - 4u) >> 6) << 4);
        m = (w_byte(blk, s + j + 4u) >> 4) | ((w_byte(blk, s + j) >> 6) << 4);
    }
}

// ggml's ksigns_iq2xs: a 7-bit sign index expands to 8 sign bits, the eighth making the count of
// negative values even (quant/iq_grids.h's iq_sign_bits).
uint iq_sign_bits(uint x) {
    const uint l = x & 127u;
    return l | ((uint(bitCount(l)) & 1u) << 7);
}

float weight_at(uint64_t data, uint64_t groups, uint e) {
#if defined(FORMAT_F32)
    return Floats(data).v[e];
#elif defined(FORMAT_F16)
    const vec2 pair = unpackHalf2x16(Uints(data).v[e >> 1]);
    return (e & 1u) == 0u ? pair.x : pair.y;
#else
    int code;
    float scale, offset;
#if defined(FORMAT_Q)
    code = bitfieldExtract(int(Uints(data).v[e >> 2]), int((e & 3u) * 8u), 8);
    const uint g = e >> 4;
    Floats p = Floats(groups);
    scale = p.v[2u * g];
    offset = p.v[2u * g + 1u];
#elif defined(FORMAT_Q8_0)
#define ZERO_OFFSET
    const uint64_t blk = data + uint64_t(e >> 5) * 34u;
    const uint i = e & 31u;
    code = bitfieldExtract(int(w_byte(blk, 2u + i)), 0, 8);
    scale = w_f16(blk, 0u);
    offset = 0.0;
#elif defined(FORMAT_Q4_0) || defined(FORMAT_Q4_1)
#if defined(FORMAT_Q4_0)
    const uint64_t blk = data + uint64_t(e >> 5) * 18u;
#define ZERO_OFFSET
    const uint qs = 2u;
    const int bias = 8;
    offset = 0.0;
#else
    const uint64_t blk = data + uint64_t(e >> 5) * 20u;
    const uint qs = 4u;
    const int bias = 0;
    offset = w_f16(blk, 2u);
#endif
    const uint i = e & 31u;
    code = int((w_byte(blk, qs + (i & 15u)) >> ((i >> 4) * 4u)) & 15u) - bias;
    scale = w_f16(blk, 0u);
#elif defined(FORMAT_Q5_0) || defined(FORMAT_Q5_1)
#if defined(FORMAT_Q5_0)
    const uint64_t blk = data + uint64_t(e >> 5) * 22u;
#define ZERO_OFFSET
    const uint qh = 2u;
    const int bias = 16;
    offset = 0.0;
#else
    const uint64_t blk = data + uint64_t(e >> 5) * 24u;
    const uint qh = 4u;
    const int bias = 0;
    offset = w_f16(blk, 2u);
#endif
    const uint i = e & 31u;
    const uint low = (w_byte(blk, qh + 4u + (i & 15u)) >> ((i >> 4) * 4u)) & 15u;
    const uint high = (w_byte(blk, qh + (i >> 3)) >> (i & 7u)) & 1u;
    code = int(low | (high << 4)) - bias;
    scale = w_f16(blk, 0u);
#elif defined(FORMAT_Q2_K)
    // scales[16] at 0, qs[64] at 16, d at 80, dmin at 82. Element i = 128 h + 32 s + l.
    const uint64_t blk = data + uint64_t(e >> 8) * 84u;
    const uint i = e & 255u, h = i >> 7, s = (i >> 5) & 3u, l = i & 31u;
    code = int((w_byte(blk, 16u + 32u * h + l) >> (2u * s)) & 3u);
    const uint sc = w_byte(blk, i >> 4);
    precise float sp = w_f16(blk, 80u) * float(sc & 15u);
    precise float mp = w_f16(blk, 82u) * float(sc >> 4);
    scale = sp;
    offset = -mp;
#elif defined(FORMAT_Q3_K)
#define ZERO_OFFSET
    // hmask[32] at 0, qs[64] at 32, scales[12] at 96, d at 108. Element i = 128 h + 32 s + l.
    const uint64_t blk = data + uint64_t(e >> 8) * 110u;
    const uint i = e & 255u, h = i >> 7, s = (i >> 5) & 3u, l = i & 31u, k = i >> 4;
    const uint low = (w_byte(blk, 32u + 32u * h + l) >> (2u * s)) & 3u;
    const uint high = (w_byte(blk, l) >> (4u * h + s)) & 1u;
    code = int(low | (high << 2)) - 4;
    const uint sl = (w_byte(blk, 96u + (k & 7u)) >> (4u * (k >> 3))) & 15u;
    const uint sh = (w_byte(blk, 96u + 8u + (k & 3u)) >> (2u * (k >> 2))) & 3u;
    precise float sp = w_f16(blk, 108u) * float(int(sl | (sh << 4)) - 32);
    scale = sp;
    offset = 0.0;
#elif defined(FORMAT_Q4_K) || defined(FORMAT_Q5_K)
    // d at 0, dmin at 2, scales[12] at 4, (Q5_K: qh[32] at 16,) qs[128] after. Element
    // i = 64 p + 32 half + l: nibble `half` of qs[32 p + l], sub-block 2 p + half = i / 32.
#if defined(FORMAT_Q4_K)
    const uint64_t blk = data + uint64_t(e >> 8) * 144u;
    const uint qs = 16u;
#else
    const uint64_t blk = data + uint64_t(e >> 8) * 176u;
    const uint qs = 48u;
#endif
    const uint i = e & 255u, p = i >> 6, half_ = (i >> 5) & 1u, l = i & 31u;
    uint q = (w_byte(blk, qs + 32u * p + l) >> (4u * half_)) & 15u;
#if defined(FORMAT_Q5_K)
    q |= ((w_byte(blk, 16u + l) >> (2u * p + half_)) & 1u) << 4;
#endif
    code = int(q);
    uint sc, m;
    k_scale_min(blk, 4u, i >> 5, sc, m);
    precise float sp = w_f16(blk, 0u) * float(sc);
    precise float mp = w_f16(blk, 2u) * float(m);
    scale = sp;
    offset = -mp;
#elif defined(FORMAT_Q6_K)
#define ZERO_OFFSET
    // ql[128] at 0, qh[64] at 128, int8 scales[16] at 192, d at 208. Element i = 128 h + 32 q + l:
    // low nibble (q < 2) or high nibble of ql[64 h + 32 (q & 1) + l], bits 2 q of qh[32 h + l].
    const uint64_t blk = data + uint64_t(e >> 8) * 210u;
    const uint i = e & 255u, h = i >> 7, qq = (i >> 5) & 3u, l = i & 31u;
    const uint low = (w_byte(blk, 64u * h + 32u * (qq & 1u) + l) >> (4u * (qq >> 1))) & 15u;
    const uint high = (w_byte(blk, 128u + 32u * h + l) >> (2u * qq)) & 3u;
    code = int(low | (high << 4)) - 32;
    precise float sp = w_f16(blk, 208u) * float(bitfieldExtract(int(w_byte(blk, 192u + (i >> 4))), 0, 8));
    scale = sp;
    offset = 0.0;
#elif defined(FORMAT_IQ4_NL) || defined(FORMAT_IQ4_XS) || defined(FORMAT_MXFP4)
#define ZERO_OFFSET
    // Nibbles as Q4_0's (low nibble: the first 16 of 32) through a 16-entry table
    // (quant/codebook_blocks.h's kValuesIq4nl / kValuesMxfp4, the E2M1 values doubled).
#if defined(FORMAT_MXFP4)
    const int table[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
#else
    const int table[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
#endif
#if defined(FORMAT_IQ4_NL)
    // d at 0, qs[16] at 2 (18 bytes).
    const uint64_t blk = data + uint64_t(e >> 5) * 18u;
    const uint i = e & 31u;
    const uint qs = 2u + (i & 15u);
    scale = w_f16(blk, 0u);
#elif defined(FORMAT_MXFP4)
    // E8M0 exponent at 0, qs[16] at 1 (17 bytes); scale 2^(e - 128), denormal below e = 2.
    const uint64_t blk = data + uint64_t(e >> 5) * 17u;
    const uint i = e & 31u;
    const uint qs = 1u + (i & 15u);
    const uint x = w_byte(blk, 0u);
    scale = uintBitsToFloat(x < 2u ? (0x00200000u << x) : ((x - 1u) << 23));
#else
    // d at 0, scales_h (u16) at 2, scales_l[4] at 4, qs[128] at 8 (136 bytes); sub-block j of 32
    // has the 6-bit ls = nibble j % 2 of scales_l[j / 2] | bits 2j, 2j+1 of scales_h << 4.
    const uint64_t blk = data + uint64_t(e >> 8) * 136u;
    const uint i = e & 255u, j = i >> 5;
    const uint qs = 8u + 16u * j + (i & 15u);
    const uint ls = ((w_byte(blk, 4u + (j >> 1)) >> (4u * (j & 1u))) & 15u) | (((w_half(blk, 2u) >> (2u * j)) & 3u) << 4);
    precise float sp = w_f16(blk, 0u) * float(int(ls) - 32);
    scale = sp;
#endif
    code = table[(w_byte(blk, qs) >> (4u * ((i >> 4) & 1u))) & 15u];
    offset = 0.0;
#elif defined(FORMAT_IQ2_XXS) || defined(FORMAT_IQ2_XS) || defined(FORMAT_IQ2_S) || defined(FORMAT_IQ3_XXS) || \
    defined(FORMAT_IQ3_S) || defined(FORMAT_IQ1_S) || defined(FORMAT_IQ1_M)
#define ZERO_OFFSET
    // The grid types (layouts: quant/codebook_blocks.h): `groups` holds the type's grid as bytes,
    // uploaded from quant/iq_grids.h (the CPU's one copy). Element i = 32 j + 8 l + k of a 256-value
    // super-block: sub-block j, group l of 8, value k; each decoded to codebook_codes' code and
    // codebook_scales' scale (the same f32 operations in the same order).
    const uint i = e & 255u, j = i >> 5, l = (i >> 3) & 3u, k = i & 7u, half_ = (i >> 4) & 1u;
    uint mag, sign_bits;
#if defined(FORMAT_IQ2_XXS)
    const uint64_t blk = data + uint64_t(e >> 8) * 66u;
    const uint aux = w_half(blk, 6u + 8u * j) | (w_half(blk, 8u + 8u * j) << 16);
    mag = w_byte(groups, 8u * w_byte(blk, 2u + 8u * j + l) + k);
    sign_bits = iq_sign_bits(aux >> (7u * l));
    precise float t = w_f16(blk, 0u) * (0.5 + float(aux >> 28));
    precise float sp = t * 0.25;
#elif defined(FORMAT_IQ2_XS)
    const uint64_t blk = data + uint64_t(e >> 8) * 74u;
    const uint q = w_half(blk, 2u + 2u * (4u * j + l));
    mag = w_byte(groups, 8u * (q & 511u) + k);
    sign_bits = iq_sign_bits(q >> 9);
    precise float t = w_f16(blk, 0u) * (0.5 + float((w_byte(blk, 66u + j) >> (4u * half_)) & 15u));
    precise float sp = t * 0.25;
#elif defined(FORMAT_IQ2_S)
    const uint64_t blk = data + uint64_t(e >> 8) * 82u;
    const uint idx = w_byte(blk, 2u + 4u * j + l) | ((w_byte(blk, 66u + j) << (8u - 2u * l)) & 0x300u);
    mag = w_byte(groups, 8u * idx + k);
    sign_bits = w_byte(blk, 34u + 4u * j + l);
    precise float t = w_f16(blk, 0u) * (0.5 + float((w_byte(blk, 74u + j) >> (4u * half_)) & 15u));
    precise float sp = t * 0.25;
#elif defined(FORMAT_IQ3_XXS)
    const uint64_t blk = data + uint64_t(e >> 8) * 98u;
    const uint aux = w_half(blk, 66u + 4u * j) | (w_half(blk, 68u + 4u * j) << 16);
    mag = w_byte(groups, 4u * w_byte(blk, 2u + 8u * j + 2u * l + (k >> 2)) + (k & 3u));
    sign_bits = iq_sign_bits(aux >> (7u * l));
    precise float t = w_f16(blk, 0u) * (0.5 + float(aux >> 28));
    precise float sp = t * 0.5;
#elif defined(FORMAT_IQ3_S)
    const uint64_t blk = data + uint64_t(e >> 8) * 110u;
    const uint qh = w_byte(blk, 66u + j);
    const uint idx = w_byte(blk, 2u + 8u * j + 2u * l + (k >> 2)) | ((qh << (8u - 2u * l - (k >> 2))) & 256u);
    mag = w_byte(groups, 4u * idx + (k & 3u));
    sign_bits = w_byte(blk, 74u + 4u * j + l);
    precise float sp = w_f16(blk, 0u) * float(1u + 2u * ((w_byte(blk, 106u + (j >> 1)) >> (4u * (j & 1u))) & 15u));
#elif defined(FORMAT_IQ1_S)
    const uint64_t blk = data + uint64_t(e >> 8) * 50u;
    const uint qh = w_half(blk, 34u + 2u * j);
    const uint idx = w_byte(blk, 2u + 4u * j + l) | (((qh >> (3u * l)) & 7u) << 8);
    mag = w_byte(groups, 8u * idx + k);
    sign_bits = (qh & 0x8000u) != 0u ? 0xffu : 0u;  // the delta's sign (IQ1's grid values are signed)
    precise float t = w_f16(blk, 0u) * float(2u * ((qh >> 12) & 7u) + 1u);
    precise float sp = t * 0.125;
#else  // IQ1_M
    const uint64_t blk = data + uint64_t(e >> 8) * 56u;
    const uint qh = w_byte(blk, 32u + 2u * j + (l >> 1));
    const uint idx = w_byte(blk, 4u * j + l) | ((qh << ((l & 1u) != 0u ? 4u : 8u)) & 0x700u);
    mag = w_byte(groups, 8u * idx + k);
    sign_bits = (qh & ((l & 1u) != 0u ? 0x80u : 0x08u)) != 0u ? 0xffu : 0u;
    const uint dbits = (w_half(blk, 48u) >> 12) | ((w_half(blk, 50u) >> 8) & 0xf0u) | ((w_half(blk, 52u) >> 4) & 0xf00u) |
                       (w_half(blk, 54u) & 0xf000u);
    const uint sc = w_half(blk, 48u + 2u * (j >> 1));
    precise float t = unpackHalf2x16(dbits).x * float(2u * ((sc >> (6u * (j & 1u) + 3u * half_)) & 7u) + 1u);
    precise float sp = t * 0.125;
#endif
#if defined(FORMAT_IQ1_S) || defined(FORMAT_IQ1_M)
    // code = 8 grid +- 1 (the grid's int8 value, the delta's sign): the ±0.125 folded in.
    code = 8 * bitfieldExtract(int(mag), 0, 8) + (sign_bits != 0u ? -1 : 1);
#else
    code = ((sign_bits >> k) & 1u) != 0u ? -int(mag) : int(mag);
#endif
    scale = sp;
    offset = 0.0;
#else
#error "weight.glsl: no FORMAT_ defined"
#endif
    // precise: never contracted to an fma, so every shader reads the same value of a weight.
    precise float value = float(code) * scale + offset;
#if defined(ZERO_OFFSET)
    // The grouped layout adds its stored 0.0, turning a -0.0 product into +0.0; the compiler folds
    // this variant's constant `+ 0.0` away, so the sign of a zero is set explicitly.
    value = value == 0.0 ? 0.0 : value;
#endif
    return value;
#endif
}
