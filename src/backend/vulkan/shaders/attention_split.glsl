// Split-KV decode attention (attention.comp's `partials`, attention_combine.comp): how a token's n
// keys are cut, computed the same way by both shaders and by the backend (vulkan_attention.cpp).
// split_keys 0: never split. Else n / split_keys splits (at least 1, at most max_splits), each a
// whole number of `wg`-key chunks, so that a token of one split runs the unsplit shader's chunks.
uint split_count(uint n, uint split_keys, uint max_splits) {
    return split_keys == 0u ? 1u : clamp(n / split_keys, 1u, max_splits);
}
int split_chunk(uint n, uint n_splits, uint wg) {
    return int(((n + n_splits - 1u) / n_splits + wg - 1u) / wg * wg);
}
// Where split s of (token t, head h) keeps its head_dim outputs, then m, then l.
uint partial_offset(uint t, uint h, uint s, uint n_heads, uint max_splits, uint head_dim) {
    return ((t * n_heads + h) * max_splits + s) * (head_dim + 2u);
}
