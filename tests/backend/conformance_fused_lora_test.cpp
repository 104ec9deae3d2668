// The backend conformance suite (conformance.h), LoRA inside fused ops (Backend::fuses_lora):
// matmul_silu_mul and qkv_rope_kv_write given a PartLora against their unfused twin on the same
// backend (matmul ; lora_add per part ; [add_bias] ; rope / silu_mul ; kv_write), over stacked and
// unstacked weights, several adapters over scattered rows and rows with none, plain RoPE and M-RoPE.
// The update must also show: adapted rows differ from the op without it, the other rows do not.
#include "backend/conformance.h"

namespace pagoda::backend::conformance {
namespace {

using gguf::GgmlType;
using kv::KvDtype;

struct HostAdapter {
    int64_t rank;
    std::vector<float> a, b;  // a: rank x in; b: out x rank
    float scale;
};

// Per part, random adapters (1-3, ranks 1-16) over a random subset of the n rows; parts may have none.
struct PartUpdates {
    std::vector<std::vector<HostAdapter>> adapters;  // per part
    std::vector<std::vector<std::vector<int32_t>>> rows;  // per part, per adapter
    std::vector<std::vector<LoraSegment>> segments;  // per part
    std::vector<bool> adapted;                        // per row: some part has an update

    PartUpdates(int64_t n, int64_t in, const std::vector<int64_t>& outs, std::mt19937& rng)
        : adapters(outs.size()), rows(outs.size()), segments(outs.size()), adapted(size_t(n), false) {
        // Rows choose their adapter index once, so the parts share the step's grouping as a real
        // step's would; part p skips adapters p mod 3 == 2 (an adapter that does not target it).
        const int32_t k = uniform(1, 3, rng);
        std::vector<int32_t> choice(static_cast<size_t>(n));
        for (auto& c : choice) c = uniform(-1, k - 1, rng);
        for (size_t p = 0; p < outs.size(); ++p) {
            for (int32_t i = 0; i < k; ++i) {
                const int64_t r = uniform(1, 16, rng);
                adapters[p].push_back({r, random_values(r * in, rng), random_values(outs[p] * r, rng), 0.5f + float(i)});
                rows[p].emplace_back();
            }
            if (p == 2 && k == 1) continue;  // a part no adapter targets
            for (int32_t t = 0; t < n; ++t)
                if (choice[size_t(t)] >= 0 && (choice[size_t(t)] + int32_t(p)) % 3 != 2) {
                    rows[p][size_t(choice[size_t(t)])].push_back(t);
                    adapted[size_t(t)] = true;
                }
        }
        for (size_t p = 0; p < outs.size(); ++p)
            for (size_t i = 0; i < adapters[p].size(); ++i)
                if (!rows[p][i].empty())
                    segments[p].push_back({adapters[p][i].a.data(), adapters[p][i].b.data(), adapters[p][i].rank,
                                           adapters[p][i].scale, rows[p][i]});
    }
    PartLora part_lora() const {
        PartLora l;
        for (size_t p = 0; p < segments.size(); ++p) l.parts[p] = segments[p];
        return l;
    }
};

// Rows of `with` equal those of `without` exactly where no update applies, and differ elsewhere.
void expect_update_shows(const std::vector<float>& with, const std::vector<float>& without, int64_t cols,
                         const std::vector<bool>& adapted, const std::string& label) {
    for (size_t t = 0; t < adapted.size(); ++t) {
        const std::vector<float> a(with.begin() + int64_t(t) * cols, with.begin() + int64_t(t + 1) * cols);
        const std::vector<float> b(without.begin() + int64_t(t) * cols, without.begin() + int64_t(t + 1) * cols);
        if (adapted[t])
            EXPECT_FALSE(bitwise(a, b)) << "row " << t << " lost its update, " << label;
        else
            EXPECT_TRUE(bitwise(a, b)) << "row " << t << " took an update, " << label;
    }
}

TEST_P(Conformance, FusedMatmulSiluMulLora) {
    if (!test->fuses_lora()) GTEST_SKIP() << GetParam() << " fuses no LoRA into its fused ops";
    std::mt19937 rng(147);
    int trial = 0;
    for (GgmlType type : kWeightTypes) {
        // Every third case mixes the parts' types (an unstacked weight on the CPU backend).
        const bool mixed = trial++ % 3 == 2;
        const int64_t cols = mixed ? 256 * uniform(1, 2, rng) : random_cols(type, rng), rows = uniform(1, 37, rng);
        const int64_t n = uniform(1, 37, rng);
        const HostMatrix gate = random_matrix(type, rows, cols, rng, "ffn_gate");
        const HostMatrix up = random_matrix(mixed ? GgmlType::Q8_0 : type, rows, cols, rng, "ffn_up");
        const std::vector<float> x = random_values(n * cols, rng);
        const PartUpdates updates(n, cols, {rows, rows}, rng);
        const PartLora lora = updates.part_lora();
        test.reset();
        auto weight = test->upload_weight({gate.source(), up.source()}, WeightUse::matmul);
        const Tensor in = test.input(n, cols, x), fused = test.tensor(n, rows), base = test.tensor(n, rows);
        test->matmul_silu_mul(*weight, in, fused, nullptr, &lora);
        test->matmul_silu_mul(*weight, in, base);
        const Tensor outs[] = {test.tensor(n, rows), test.tensor(n, rows)};
        test->matmul(*weight, in, outs);
        for (size_t p = 0; p < 2; ++p)
            if (!updates.segments[p].empty()) test->lora_add(in, outs[p], updates.segments[p]);
        test->silu_mul(outs[0], outs[1], outs[0]);
        const std::string label = fmt::format("{}{}, {} tokens", type_name(type), mixed ? " + q8_0" : "", n);
        EXPECT_TRUE(same_as_unfused(test.read(fused), test.read(outs[0]))) << label;
        expect_update_shows(test.read(fused), test.read(base), rows, updates.adapted, label);
    }
}

TEST_P(Conformance, FusedQkvRopeKvWriteLora) {
    if (!test->fuses_lora()) GTEST_SKIP() << GetParam() << " fuses no LoRA into its fused ops";
    std::mt19937 rng(148);
    for (int trial = 0; trial < 8; ++trial) {
        const GgmlType type = kWeightTypes[size_t(trial) % std::size(kWeightTypes)];
        const bool mixed = trial % 3 == 2;  // V in another type: an unstacked weight on the CPU backend
        const kv::KvLayout layout = random_layout(trial >= 6 ? KvDtype::q8 : kKvDtypes[trial % 3], kBlockSizes[(trial / 2) % 3], rng);
        const int32_t n_heads = layout.n_kv_heads << (trial % 3), d = layout.head_dim;
        const int64_t cols = mixed ? 256 * uniform(1, 2, rng) : random_cols(type, rng);
        const HostMatrix wq = random_matrix(type, int64_t(n_heads) * d, cols, rng, "attn_q");
        const HostMatrix wk = random_matrix(type, int64_t(layout.n_kv_heads) * d, cols, rng, "attn_k");
        const HostMatrix wv = random_matrix(mixed ? GgmlType::Q8_0 : type, wk.rows, cols, rng, "attn_v");
        Step step = make_tables({uniform(1, 37, rng), uniform(1, 37, rng)}, layout.block_size, rng);
        for (int32_t seq = 0; seq < 2; ++seq) step.add_tokens(seq, 0, 1 + uniform(0, layout.block_size * int32_t(step.block_tables[size_t(seq)].size()) - 1, rng));
        const int64_t n = step.n_tokens();
        const std::vector<float> x = random_values(n * cols, rng);
        const PartUpdates updates(n, cols, {wq.rows, wk.rows, wv.rows}, rng);
        const PartLora lora = updates.part_lora();
        test.reset();
        auto weight = test->upload_weight({wq.source(), wk.source(), wv.source()}, WeightUse::matmul);
        // Trials 4 and up rotate by an M-RoPE: a random axis per pair, each token's own height and width
        // (drawn from their own generator, so the other trials' draws stay as they were).
        RopeSpec spec = rope_spec(d, trial % 2 == 1, 10000.0);
        std::vector<int32_t> axes;
        if (trial >= 4) {
            std::mt19937 axis_rng(static_cast<uint32_t>(trial));
            for (int32_t i = 0; i < d / 2; ++i) spec.pair_axis.push_back(uint8_t(uniform(0, kRopeAxes - 1, axis_rng)));
            for (int32_t p : step.positions) axes.insert(axes.end(), {p, uniform(0, 300, axis_rng), uniform(0, 300, axis_rng)});
        }
        auto rope = test->upload_rope(spec);
        std::shared_ptr<Vector> biases[3];
        for (size_t p = 0; p < 3; ++p) biases[p] = test->upload_vector(random_values(p == 0 ? wq.rows : wk.rows, rng));
        QkvOp op{weight.get(), {}, rope.get(), 1, n_heads, layout.n_kv_heads, d};
        if (trial % 2 == 0)
            for (size_t p = 0; p < 3; ++p) op.bias[p] = biases[p].get();
        StepInputs inputs = step.inputs();
        inputs.rope_positions = axes;
        test->begin_step(inputs);
        const Tensor in = test.input(n, cols, x);

        auto fused_cache = test->create_kv_cache(layout, step.n_blocks);
        const Tensor q_fused = test.tensor(n, wq.rows);
        test->qkv_rope_kv_write(*fused_cache, op, in, q_fused, nullptr, &lora);
        auto base_cache = test->create_kv_cache(layout, step.n_blocks);
        const Tensor q_base = test.tensor(n, wq.rows);
        test->qkv_rope_kv_write(*base_cache, op, in, q_base);

        auto plain_cache = test->create_kv_cache(layout, step.n_blocks);
        const Tensor qkv[] = {test.tensor(n, wq.rows), test.tensor(n, wk.rows), test.tensor(n, wv.rows)};
        test->matmul(*weight, in, qkv);
        for (size_t p = 0; p < 3; ++p)
            if (!updates.segments[p].empty()) test->lora_add(in, qkv[p], updates.segments[p]);
        for (size_t p = 0; p < 3; ++p)
            if (op.bias[p]) test->add_bias(qkv[p], *op.bias[p]);
        test->rope(qkv[0], *rope, n_heads, d);
        test->rope(qkv[1], *rope, layout.n_kv_heads, d);
        test->kv_write(*plain_cache, op.layer, qkv[1], qkv[2]);

        const std::string label = fmt::format("{}{} {}{} trial {}", type_name(type), mixed ? " + q8_0" : "",
                                              kv::kv_dtype_name(layout.dtype), axes.empty() ? "" : " M-RoPE", trial);
        EXPECT_TRUE(same_as_unfused(test.read(q_fused), test.read(qkv[0]))) << "q, " << label;
        for (bool is_v : {false, true})
            EXPECT_TRUE(same_as_unfused(read_kv(*fused_cache, step, op.layer, is_v), read_kv(*plain_cache, step, op.layer, is_v)))
                << (is_v ? "v, " : "k, ") << label;
        // Q's update shows where its part has one (q8 K/V may round a small update away: Q only).
        std::vector<bool> q_adapted(size_t(n), false);
        for (const auto& r : updates.rows[0])
            for (int32_t t : r) q_adapted[size_t(t)] = true;
        expect_update_shows(test.read(q_fused), test.read(q_base), wq.rows, q_adapted, "q, " + label);
    }
}

}  // namespace
}  // namespace pagoda::backend::conformance
