// The backend conformance suite (conformance.h): multi-axis RoPE (M-RoPE: RopeSpec::pair_axis, the
// step's StepInputs::rope_positions) against the reference, over the pair layouts models send:
// Qwen3-VL's interleaved sections (model/arch/qwen3vl_rope.h) with and without a zero section,
// Qwen2-VL-style contiguous sections, the vision tower's 2D halves (no temporal pair) and a random
// axis per pair; both pairings, all or part of each head, positions that differ per axis (large
// temporal ones too). A step without rotary positions rotates as plain RoPE does, bitwise; and
// qkv_rope_kv_write with an M-RoPE is bitwise (or within the op tolerance) its unfused sequence and
// its Q within the matmul tolerance of the reference's.
#include "backend/conformance.h"
#include "model/arch/qwen3vl_rope.h"

namespace pagoda::backend::conformance {
namespace {

using gguf::GgmlType;
using kv::KvDtype;
using namespace testing;

constexpr int kLayouts = 6;

// Pair layout `which` over `pairs` rotary pairs, and its name.
std::pair<std::vector<uint8_t>, std::string> pair_layout(int which, int64_t pairs, std::mt19937& rng) {
    const int64_t third = pairs / 3;
    switch (which) {
        case 0: return {model::imrope_pair_axes({pairs - 2 * third, third, third}, pairs), "interleaved"};
        case 1: return {model::imrope_pair_axes({pairs / 2, 0, pairs - pairs / 2, 0}, pairs), "interleaved, no height section"};
        case 2: return {model::imrope_pair_axes({0, pairs / 2, pairs - pairs / 2}, pairs), "interleaved, no temporal section"};
        case 3: {  // [t | h | w] in order; an empty temporal section when pairs < 3
            std::vector<uint8_t> axes(static_cast<size_t>(pairs), 2);
            for (int64_t i = 0; i < pairs - third; ++i) axes[size_t(i)] = i < pairs - 2 * third ? 0 : 1;
            return {axes, "contiguous sections"};
        }
        case 4: {
            std::vector<uint8_t> axes(static_cast<size_t>(pairs));
            for (int64_t i = 0; i < pairs; ++i) axes[size_t(i)] = i < pairs / 2 ? 1 : 2;
            return {axes, "2D halves"};
        }
        default: {
            std::vector<uint8_t> axes(static_cast<size_t>(pairs));
            for (auto& a : axes) a = uint8_t(uniform(0, kRopeAxes - 1, rng));
            return {axes, "random axes"};
        }
    }
}

// Per token of `step`, its temporal position (large ones in the second sequence) and a height and
// width of their own; the first two tokens are text rows (p, p, p).
std::vector<int32_t> axis_positions(const Step& step, std::mt19937& rng) {
    std::vector<int32_t> axes;
    for (size_t t = 0; t < step.positions.size(); ++t) {
        const int32_t p = step.positions[t];
        if (t < 2) axes.insert(axes.end(), {p, p, p});
        else axes.insert(axes.end(), {p, uniform(0, 300, rng), uniform(0, 300, rng)});
    }
    return axes;
}

TEST_P(Conformance, MRopeSectionLayouts) {
    std::mt19937 rng(31);
    for (int trial = 0; trial < 2 * kLayouts; ++trial) {
        const bool neox = trial % 2 == 0;
        const int32_t head_dim = kHeadDims[size_t(trial) % 5], n_heads = uniform(1, 6, rng);
        const int64_t dims = trial % 3 == 2 ? head_dim / 2 / 2 * 2 : head_dim;  // part of each head now and then
        auto [pair_axis, layout] = pair_layout(trial / 2, dims / 2, rng);
        Step step = make_tables({uniform(1, 60, rng), uniform(4000, 5000, rng)}, 16, rng);
        step.add_tokens(0, 0, int32_t(step.block_tables[0].size()) * 16 / 2 + 1);
        const int32_t from = uniform(3900, 3990, rng);
        step.add_tokens(1, from, from + uniform(1, 9, rng));
        const std::vector<int32_t> axes = axis_positions(step, rng);
        const std::vector<float> x = random_values(step.n_tokens() * n_heads * head_dim, rng);
        RopeSpec spec = rope_spec(dims, neox, 10000.0);
        spec.pair_axis = pair_axis;
        auto [got, want] = both([&](Side& s) {
            auto rope = s->upload_rope(spec);
            StepInputs in = step.inputs();
            in.rope_positions = axes;
            s->begin_step(in);
            const Tensor t = s.input(step.n_tokens(), n_heads * head_dim, x);
            s->rope(t, *rope, n_heads, head_dim);
            return s.read(t);
        });
        const std::string label = fmt::format("{}, {}, {} of {} dims, {} heads", layout, neox ? "neox" : "normal", dims,
                                              head_dim, n_heads);
        EXPECT_TRUE(close(got, want, kOpTolerance)) << label;

        // Without rotary positions every axis is the token's position: plain RoPE, bitwise.
        test.reset();
        auto mrope = test->upload_rope(spec), plain = test->upload_rope(rope_spec(dims, neox, 10000.0));
        test->begin_step(step.inputs());
        const Tensor a = test.input(step.n_tokens(), n_heads * head_dim, x), b = test.input(step.n_tokens(), n_heads * head_dim, x);
        test->rope(a, *mrope, n_heads, head_dim);
        test->rope(b, *plain, n_heads, head_dim);
        EXPECT_TRUE(bitwise(test.read(a), test.read(b))) << "no rotary positions, " << label;
    }
}

TEST_P(Conformance, MRopeRefusesAnAxisPastTheThird) {
    RopeSpec spec = rope_spec(8, true, 10000.0);
    spec.pair_axis = {0, 1, 2, 3};
    try {
        test->upload_rope(spec);
        ADD_FAILURE() << "a fourth position axis was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("RoPE pair 3 reads position axis 3, expected below 3"), std::string::npos) << e.what();
    }
    spec.pair_axis = {0, 1, 2};
    EXPECT_THROW(test->upload_rope(spec), Error) << "3 pair axes for 4 pairs";
}

TEST_P(Conformance, FusedQkvMRopeKvWrite) {
    if (!test->supports(OpKind::qkv_rope_kv_write)) GTEST_SKIP() << GetParam() << " declares no qkv_rope_kv_write";
    std::mt19937 rng(32);
    for (int trial = 0; trial < 4; ++trial) {
        const GgmlType type = trial < 2 ? GgmlType::F32 : GgmlType::Q8_0;
        const kv::KvLayout layout = random_layout(kKvDtypes[trial % 3], kBlockSizes[trial % 3], rng);
        const int32_t n_heads = layout.n_kv_heads << (trial % 3), d = layout.head_dim;
        const int64_t cols = random_cols(type, rng);
        const HostMatrix wq = random_matrix(type, int64_t(n_heads) * d, cols, rng, "attn_q");
        const HostMatrix wk = random_matrix(type, int64_t(layout.n_kv_heads) * d, cols, rng, "attn_k");
        const HostMatrix wv = random_matrix(type, wk.rows, cols, rng, "attn_v");
        Step step = make_tables({uniform(1, 37, rng), uniform(1, 37, rng)}, layout.block_size, rng);
        for (int32_t seq = 0; seq < 2; ++seq)
            step.add_tokens(seq, 0, 1 + uniform(0, layout.block_size * int32_t(step.block_tables[size_t(seq)].size()) - 1, rng));
        const int64_t n = step.n_tokens();
        const std::vector<float> x = random_values(n * cols, rng), bq = random_values(wq.rows, rng);
        const std::vector<float> bk = random_values(wk.rows, rng), bv = random_values(wk.rows, rng);
        const std::vector<int32_t> axes = axis_positions(step, rng);
        RopeSpec spec = rope_spec(d, trial % 2 == 1, 10000.0);
        spec.pair_axis = pair_layout(trial == 3 ? kLayouts - 1 : trial, d / 2, rng).first;
        const bool biased = trial % 2 == 0;
        StepInputs in = step.inputs();
        in.rope_positions = axes;

        // Q through the unfused sequence on `s`: matmul ; [add_bias] ; rope.
        auto unfused_q = [&](Side& s, const Weight& weight, const Rope& rope, std::span<const std::shared_ptr<Vector>> biases,
                             const Tensor& input, const Tensor* kv_out) {
            const Tensor qkv[] = {s.tensor(n, wq.rows), kv_out ? kv_out[0] : s.tensor(n, wk.rows), kv_out ? kv_out[1] : s.tensor(n, wv.rows)};
            s->matmul(weight, input, qkv);
            if (biased)
                for (size_t p = 0; p < 3; ++p) s->add_bias(qkv[p], *biases[p]);
            s->rope(qkv[0], rope, n_heads, d);
            s->rope(qkv[1], rope, layout.n_kv_heads, d);
            return qkv[0];
        };
        auto upload_biases = [&](Side& s) {
            return std::vector<std::shared_ptr<Vector>>{s->upload_vector(bq), s->upload_vector(bk), s->upload_vector(bv)};
        };

        test.reset();
        auto weight = test->upload_weight({wq.source(), wk.source(), wv.source()}, WeightUse::matmul);
        auto rope = test->upload_rope(spec);
        const auto biases = upload_biases(test);
        QkvOp op{weight.get(), {}, rope.get(), 1, n_heads, layout.n_kv_heads, d};
        if (biased)
            for (size_t p = 0; p < 3; ++p) op.bias[p] = biases[p].get();
        test->begin_step(in);
        const Tensor input = test.input(n, cols, x);
        auto fused_cache = test->create_kv_cache(layout, step.n_blocks);
        const Tensor q_fused = test.tensor(n, wq.rows);
        test->qkv_rope_kv_write(*fused_cache, op, input, q_fused);
        auto plain_cache = test->create_kv_cache(layout, step.n_blocks);
        const Tensor kv_plain[] = {test.tensor(n, wk.rows), test.tensor(n, wv.rows)};
        const Tensor q_plain = unfused_q(test, *weight, *rope, biases, input, kv_plain);
        test->kv_write(*plain_cache, op.layer, kv_plain[0], kv_plain[1]);

        const std::string label = fmt::format("{} {} trial {}", type_name(type), kv::kv_dtype_name(layout.dtype), trial);
        const std::vector<float> got_q = test.read(q_fused);
        EXPECT_TRUE(same_as_unfused(got_q, test.read(q_plain))) << "q, " << label;
        for (bool is_v : {false, true})
            EXPECT_TRUE(same_as_unfused(read_kv(*fused_cache, step, op.layer, is_v), read_kv(*plain_cache, step, op.layer, is_v)))
                << (is_v ? "v, " : "k, ") << label;

        ref.reset();
        auto ref_weight = ref->upload_weight({wq.source(), wk.source(), wv.source()}, WeightUse::matmul);
        auto ref_rope = ref->upload_rope(spec);
        ref->begin_step(in);
        const auto want_q = ref.read(unfused_q(ref, *ref_weight, *ref_rope, upload_biases(ref), ref.input(n, cols, x), nullptr));
        EXPECT_TRUE(close(got_q, want_q, matmul_tolerance(type))) << "q against the reference, " << label;
    }
}

}  // namespace
}  // namespace pagoda::backend::conformance
