// One weight element, by the format the shader is built for (-DFORMAT_F32 / F16 / Q):
//   F32: f32 rows (BF16 weights are widened to these exactly at upload);
//   F16: f16 rows, two to a 32-bit word;
//   Q:   int8 codes, four to a word, and per group of 16 elements a (scale, offset) f32 pair:
//        value = code * scale + offset (every GGML block type is repacked to this at upload).
// `e` is the element's index in the weight (row * cols + col).
float weight_at(uint64_t data, uint64_t groups, uint e) {
#if defined(FORMAT_F32)
    return Floats(data).v[e];
#elif defined(FORMAT_F16)
    const vec2 pair = unpackHalf2x16(Uints(data).v[e >> 1]);
    return (e & 1u) == 0u ? pair.x : pair.y;
#else
    const int code = bitfieldExtract(int(Uints(data).v[e >> 2]), int((e & 3u) * 8u), 8);
    const uint g = e >> 4;
    Floats p = Floats(groups);
    // precise: never contracted to an fma, so every shader reads the same value of a weight.
    precise float value = float(code) * p.v[2u * g] + p.v[2u * g + 1u];
    return value;
#endif
}
