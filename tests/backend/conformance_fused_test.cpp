// The backend conformance suite (conformance.h): each fused op a backend declares against its
// unfused sequence on that backend, and against the reference.
#include "backend/conformance.h"

namespace pagoda::backend::conformance {
namespace {

using gguf::GgmlType;
using kv::KvDtype;
using namespace testing;

TEST_P(Conformance, FusedAddRmsNorm) {
    if (!test->supports(OpKind::add_rms_norm)) GTEST_SKIP() << GetParam() << " declares no add_rms_norm";
    std::mt19937 rng(13);
    for (int trial = 0; trial < 6; ++trial) {
        const int64_t n = uniform(1, 37, rng), cols = uniform(1, 300, rng);
        const std::vector<float> x = random_values(n * cols, rng), r = random_values(n * cols, rng), w = random_values(cols, rng);
        test.reset();
        auto weight = test->upload_vector(w);
        const Tensor residual = test.input(n, cols, r);
        const Tensor x_fused = test.input(n, cols, x), out_fused = test.tensor(n, cols);
        test->add_rms_norm(x_fused, residual, *weight, 1e-5f, out_fused);
        const Tensor x_plain = test.input(n, cols, x), out_plain = test.tensor(n, cols);
        test->add(x_plain, residual);
        test->rms_norm(x_plain, *weight, 1e-5f, out_plain);
        EXPECT_TRUE(same_as_unfused(test.read(x_fused), test.read(x_plain))) << "sum, " << n << "x" << cols;
        EXPECT_TRUE(same_as_unfused(test.read(out_fused), test.read(out_plain))) << "norm, " << n << "x" << cols;
    }
}

TEST_P(Conformance, FusedMatmulSiluMul) {
    if (!test->supports(OpKind::matmul_silu_mul)) GTEST_SKIP() << GetParam() << " declares no matmul_silu_mul";
    std::mt19937 rng(14);
    for (GgmlType type : kWeightTypes) {
        const int64_t cols = random_cols(type, rng), rows = uniform(1, 37, rng), n = uniform(1, 37, rng);
        const HostMatrix gate = random_matrix(type, rows, cols, rng, "ffn_gate"), up = random_matrix(type, rows, cols, rng, "ffn_up");
        const std::vector<float> x = random_values(n * cols, rng);
        test.reset();
        auto weight = test->upload_weight({gate.source(), up.source()}, WeightUse::matmul);
        const Tensor in = test.input(n, cols, x), fused = test.tensor(n, rows);
        test->matmul_silu_mul(*weight, in, fused);
        const Tensor outs[] = {test.tensor(n, rows), test.tensor(n, rows)};
        test->matmul(*weight, in, outs);
        test->silu_mul(outs[0], outs[1], outs[0]);
        EXPECT_TRUE(same_as_unfused(test.read(fused), test.read(outs[0]))) << type_name(type) << ", " << n << " tokens";
    }
}

TEST_P(Conformance, FusedQkvRopeKvWrite) {
    if (!test->supports(OpKind::qkv_rope_kv_write)) GTEST_SKIP() << GetParam() << " declares no qkv_rope_kv_write";
    std::mt19937 rng(15);
    for (int trial = 0; trial < 8; ++trial) {
        const GgmlType type = kWeightTypes[size_t(trial) % std::size(kWeightTypes)];
        const kv::KvLayout layout = random_layout(trial >= 6 ? KvDtype::q8 : kKvDtypes[trial % 3], kBlockSizes[(trial / 2) % 3], rng);
        const int32_t n_heads = layout.n_kv_heads << (trial % 3), d = layout.head_dim;
        const int64_t cols = random_cols(type, rng);
        const HostMatrix wq = random_matrix(type, int64_t(n_heads) * d, cols, rng, "attn_q");
        const HostMatrix wk = random_matrix(type, int64_t(layout.n_kv_heads) * d, cols, rng, "attn_k");
        const HostMatrix wv = random_matrix(type, wk.rows, cols, rng, "attn_v");
        Step step = make_tables({uniform(1, 37, rng), uniform(1, 37, rng)}, layout.block_size, rng);
        for (int32_t seq = 0; seq < 2; ++seq) step.add_tokens(seq, 0, 1 + uniform(0, layout.block_size * int32_t(step.block_tables[size_t(seq)].size()) - 1, rng));
        const int64_t n = step.n_tokens();
        const std::vector<float> x = random_values(n * cols, rng);
        test.reset();
        auto weight = test->upload_weight({wq.source(), wk.source(), wv.source()}, WeightUse::matmul);
        auto rope = test->upload_rope(rope_spec(d, trial % 2 == 1, 10000.0));
        std::shared_ptr<Vector> biases[3];
        for (size_t p = 0; p < 3; ++p) biases[p] = test->upload_vector(random_values(p == 0 ? wq.rows : wk.rows, rng));
        QkvOp op{weight.get(), {}, rope.get(), 1, n_heads, layout.n_kv_heads, d};
        if (trial % 2 == 0)
            for (size_t p = 0; p < 3; ++p) op.bias[p] = biases[p].get();
        test->begin_step(step.inputs());
        const Tensor in = test.input(n, cols, x);

        auto fused_cache = test->create_kv_cache(layout, step.n_blocks);
        const Tensor q_fused = test.tensor(n, wq.rows);
        test->qkv_rope_kv_write(*fused_cache, op, in, q_fused);

        auto plain_cache = test->create_kv_cache(layout, step.n_blocks);
        const Tensor qkv[] = {test.tensor(n, wq.rows), test.tensor(n, wk.rows), test.tensor(n, wv.rows)};
        test->matmul(*weight, in, qkv);
        for (size_t p = 0; p < 3; ++p)
            if (op.bias[p]) test->add_bias(qkv[p], *op.bias[p]);
        test->rope(qkv[0], *rope, n_heads, d);
        test->rope(qkv[1], *rope, layout.n_kv_heads, d);
        test->kv_write(*plain_cache, op.layer, qkv[1], qkv[2]);

        const std::string label = fmt::format("{} {} trial {}", type_name(type), kv::kv_dtype_name(layout.dtype), trial);
        EXPECT_TRUE(same_as_unfused(test.read(q_fused), test.read(qkv[0]))) << "q, " << label;
        for (bool is_v : {false, true})
            EXPECT_TRUE(same_as_unfused(read_kv(*fused_cache, step, op.layer, is_v), read_kv(*plain_cache, step, op.layer, is_v)))
                << (is_v ? "v, " : "k, ") << label;
    }
}

// --- errors ---

}  // namespace
}  // namespace pagoda::backend::conformance
