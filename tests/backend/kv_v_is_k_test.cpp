// KvLayout::v_is_k (DeepSeek's absorbed MLA: the cache stores K only and V rows are the K rows): half
// the bytes a block, the CPU pool and the reference cache read V back as the written K row, and their
// block payloads (K only, per layer) are the same bytes, so they exchange blocks (the prefix tier).
#include <gtest/gtest.h>
#include <vector>

#include "backend/cpu/kv/kv_pool.h"
#include "backend/reference/reference_kv_cache.h"
#include "kv/kv_layout.h"

namespace pagoda::kv {
namespace {

KvLayout latent_layout(KvDtype dtype) {
    return {.n_layers = 2, .n_kv_heads = 1, .head_dim = 10, .block_size = 4, .dtype = dtype, .v_is_k = true};
}

TEST(KvVIsK, BlocksHoldKOnly) {
    for (const KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8}) {
        KvLayout with = latent_layout(dtype), without = with;
        without.v_is_k = false;
        EXPECT_EQ(2 * with.bytes_per_block(), without.bytes_per_block()) << kv_dtype_name(dtype);
        EXPECT_EQ(with.bytes_per_token_layer(), with.row_bytes());
        EXPECT_EQ(without.bytes_per_token_layer(), 2 * without.row_bytes());
        EXPECT_EQ(blocks_for_budget(with.bytes_per_block() * 7 + 1, with), 7);
    }
}

TEST(KvVIsK, CpuPoolAndReferenceCacheReadKAsV) {
    for (const KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16}) {
        const KvLayout L = latent_layout(dtype);
        backend::cpu::KvPool pool(L, 3);
        backend::reference::ReferenceKvCache ref(L, 3);
        // Three tokens in slots 1, 5, 6 of layer 1 (blocks 0 and 1).
        const std::vector<int64_t> slots{1, 5, 6};
        std::vector<float> k(3 * 10);
        for (size_t i = 0; i < k.size(); ++i) k[i] = 0.25f * float(i % 7) - 0.6f + 0.01f * float(i);
        pool.write(1, slots.data(), 3, k.data(), nullptr);
        for (size_t t = 0; t < 3; ++t) {
            std::vector<double> row(k.begin() + std::ptrdiff_t(t * 10), k.begin() + std::ptrdiff_t(t * 10 + 10));
            ref.store(1, slots[t], 0, row.data(), nullptr);
        }
        for (const int64_t slot : slots) {
            std::vector<float> pk(10), pv(10), rk(10), rv(10);
            pool.read_k(1, slot, 0, pk.data());
            pool.read_v(1, slot, 0, pv.data());
            ref.read_k(1, slot, 0, rk.data());
            ref.read_v(1, slot, 0, rv.data());
            EXPECT_EQ(pk, pv) << kv_dtype_name(dtype);
            EXPECT_EQ(rk, rv) << kv_dtype_name(dtype);
            EXPECT_EQ(pk, rk) << kv_dtype_name(dtype) << " slot " << slot;
        }
        // The same payload bytes; a block copied, exported and imported keeps its rows.
        std::vector<uint8_t> a(L.bytes_per_block()), b(L.bytes_per_block());
        pool.export_block(1, a);
        ref.export_block(1, b);
        EXPECT_EQ(a, b) << kv_dtype_name(dtype);
        pool.copy_block(1, 2);
        ref.import_block(2, a);
        std::vector<float> copied(10), imported(10), original(10);
        pool.read_v(1, 9, 0, copied.data());   // slot 5 -> 9
        ref.read_v(1, 9, 0, imported.data());
        pool.read_k(1, 5, 0, original.data());
        EXPECT_EQ(copied, original);
        EXPECT_EQ(imported, original);
    }
}

}  // namespace
}  // namespace pagoda::kv
