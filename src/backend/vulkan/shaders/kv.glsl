// The paged KV cache in device memory, laid out as KvCache::export_block's payload: block after
// block, each holding per layer K then V, each [kv_head][slot in block][head_dim] in the cache's
// element encoding (dtype 0 f32, 1 f16, 2 bf16, 3 q8: int8 codes, zero padding to 4 bytes, the fp32
// scale). Rows start at multiples of 4 bytes (f16/bf16 rows need an even head_dim).
struct KvGeometry {
    uint block_size, dtype, head_dim, row_bytes, head_block_bytes, layer_block_bytes, bytes_per_block;
};

uint64_t kv_row_address(uint64_t cache, KvGeometry g, uint layer_offset, int slot, uint head, bool is_v) {
    const uint block = uint(slot) / g.block_size, in_block = uint(slot) % g.block_size;
    return cache + uint64_t(block) * uint64_t(g.bytes_per_block) + uint64_t(layer_offset) +
           uint64_t((is_v ? g.layer_block_bytes : 0u) + head * g.head_block_bytes + in_block * g.row_bytes);
}

uint q8_scale_offset(uint head_dim) { return (head_dim + 3u) / 4u * 4u; }

// Element d of a stored row (q8: `scale` is the row's scale, read once by the caller).
float kv_load(uint64_t row, uint dtype, uint d, float scale) {
    if (dtype == 0u) return Floats(row).v[d];
    const uint word = Uints(row).v[dtype == 3u ? d >> 2 : d >> 1];
    if (dtype == 1u) {
        const vec2 pair = unpackHalf2x16(word);
        return (d & 1u) == 0u ? pair.x : pair.y;
    }
    if (dtype == 2u) return uintBitsToFloat((d & 1u) == 0u ? word << 16 : word & 0xffff0000u);
    return float(bitfieldExtract(int(word), int((d & 3u) * 8u), 8)) * scale;
}

float kv_row_scale(uint64_t row, uint dtype, uint head_dim) {
    return dtype == 3u ? Floats(row + uint64_t(q8_scale_offset(head_dim))).v[0] : 1.0;
}
