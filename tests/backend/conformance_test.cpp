// The backend conformance suite, part one (conformance.h describes the suite): matmul, embed and
// row ops, the contract's errors, and the instantiation for every backend under test.
#include "backend/conformance.h"

namespace pagoda::backend::conformance {
namespace {

using gguf::GgmlType;
using kv::KvDtype;
using namespace testing;

Tensor matmul_one(Side& s, const Weight& w, const Tensor& x) {
    Tensor out = s.tensor(x.rows, w.rows());
    s->matmul(w, x, std::span(&out, 1));
    return out;
}

TEST_P(Conformance, Matmul) {
    std::mt19937 rng(1);
    for (GgmlType type : kWeightTypes)
        for (int trial = 0; trial < 4; ++trial) {
            const int64_t cols = random_cols(type, rng), rows = uniform(1, 37, rng);
            const int64_t n = trial == 0 ? 1 : uniform(2, 37, rng);
            const HostMatrix w = random_matrix(type, rows, cols, rng);
            const std::vector<float> x = random_values(n * cols, rng);
            auto [got, want] = both([&](Side& s) {
                auto weight = s->upload_weight({w.source()}, WeightUse::matmul);
                return s.read(matmul_one(s, *weight, s.input(n, cols, x)));
            });
            EXPECT_TRUE(close(got, want, matmul_tolerance(type))) << type_name(type) << " " << rows << "x" << cols << ", " << n << " tokens";
        }
}

// A weight of three stacked parts computes what its parts compute one by one, bitwise.
TEST_P(Contract, MultiPartMatmulEqualsItsParts) {
    std::mt19937 rng(2);
    for (GgmlType type : kWeightTypes) {
        const int64_t cols = random_cols(type, rng), n = uniform(1, 37, rng);
        std::vector<HostMatrix> parts;
        for (const char* name : {"q", "k", "v"}) parts.push_back(random_matrix(type, uniform(1, 37, rng), cols, rng, name));
        const std::vector<float> x = random_values(n * cols, rng);
        test.reset();
        const Tensor in = test.input(n, cols, x);
        auto stacked = test->upload_weight({parts[0].source(), parts[1].source(), parts[2].source()}, WeightUse::matmul);
        std::vector<Tensor> outs;
        for (const auto& p : parts) outs.push_back(test.tensor(n, p.rows));
        test->matmul(*stacked, in, outs);
        for (size_t p = 0; p < parts.size(); ++p) {
            auto alone = test->upload_weight({parts[p].source()}, WeightUse::matmul);
            EXPECT_TRUE(bitwise(test.read(outs[p]), test.read(matmul_one(test, *alone, in))))
                << type_name(type) << " part " << parts[p].name << ", " << n << " tokens";
        }
    }
}

// Each token's output is the same alone as inside a batch (batch invariance), bitwise.
TEST_P(Contract, MatmulIsBatchInvariant) {
    std::mt19937 rng(3);
    for (GgmlType type : kWeightTypes) {
        const int64_t cols = random_cols(type, rng), rows = uniform(1, 37, rng), n = uniform(2, 37, rng);
        const HostMatrix w = random_matrix(type, rows, cols, rng);
        const std::vector<float> x = random_values(n * cols, rng);
        test.reset();
        auto weight = test->upload_weight({w.source()}, WeightUse::matmul);
        const std::vector<float> batch = test.read(matmul_one(test, *weight, test.input(n, cols, x)));
        for (int64_t t = 0; t < n; ++t) {
            const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
            const std::vector<float> alone = test.read(matmul_one(test, *weight, test.input(1, cols, xt)));
            EXPECT_TRUE(bitwise(alone, {batch.begin() + t * rows, batch.begin() + (t + 1) * rows}))
                << type_name(type) << " token " << t << " of " << n;
        }
    }
}

TEST_P(Conformance, Embed) {
    std::mt19937 rng(4);
    for (GgmlType type : kWeightTypes)
        for (WeightUse use : {WeightUse::embedding, WeightUse::both}) {
            const int64_t vocab = uniform(5, 40, rng), cols = random_cols(type, rng);
            const HostMatrix table = random_matrix(type, vocab, cols, rng, "token_embd.weight");
            const int32_t n = uniform(1, 37, rng);
            Step step = make_tables({n}, 16, rng);
            step.add_tokens(0, 0, n);
            for (auto& token : step.tokens) token = uniform(0, int32_t(vocab) - 1, rng);
            auto [got, want] = both([&](Side& s) {
                auto weight = s->upload_weight({table.source()}, use);
                s->begin_step(step.inputs());
                const Tensor out = s.tensor(step.n_tokens(), cols);
                s->embed(*weight, out);
                return s.read(out);
            });
            EXPECT_TRUE(close(got, want, kEmbedTolerance)) << type_name(type) << " " << vocab << "x" << cols;
        }
}

TEST_P(Conformance, RmsNormInPlaceAndNot) {
    std::mt19937 rng(5);
    for (int trial = 0; trial < 8; ++trial) {
        const int64_t n = uniform(1, 37, rng), cols = uniform(1, 300, rng);
        const bool in_place = trial % 2 == 0;
        const float eps = trial % 4 < 2 ? 1e-5f : 1e-6f;
        const std::vector<float> x = random_values(n * cols, rng, 2.0f), w = random_values(cols, rng);
        auto [got, want] = both([&](Side& s) {
            const Tensor in = s.input(n, cols, x), out = in_place ? in : s.tensor(n, cols);
            s->rms_norm(in, *s->upload_vector(w), eps, out);
            return s.read(out);
        });
        EXPECT_TRUE(close(got, want, kOpTolerance)) << n << "x" << cols << (in_place ? " in place" : "");
    }
}

TEST_P(Conformance, AddAndAddBias) {
    std::mt19937 rng(6);
    for (int trial = 0; trial < 6; ++trial) {
        const int64_t n = uniform(1, 37, rng), cols = uniform(1, 300, rng);
        const std::vector<float> y = random_values(n * cols, rng), x = random_values(n * cols, rng), b = random_values(cols, rng);
        auto [got, want] = both([&](Side& s) {
            const Tensor out = s.input(n, cols, y);
            s->add(out, s.input(n, cols, x));
            s->add_bias(out, *s->upload_vector(b));
            return s.read(out);
        });
        EXPECT_TRUE(close(got, want, kOpTolerance)) << n << "x" << cols;
    }
}

TEST_P(Conformance, RopeBothPairings) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 8; ++trial) {
        const bool neox = trial % 2 == 1;
        const int32_t head_dim = kHeadDims[trial % 5], n_heads = uniform(1, 8, rng);
        const int64_t dims = trial % 4 < 2 ? head_dim : head_dim / 2 / 2 * 2;  // all or part of each head
        Step step = make_tables({uniform(1, 5000, rng), uniform(1, 40, rng)}, 16, rng);
        for (int32_t seq = 0; seq < 2; ++seq) {
            const int32_t len = int32_t(step.block_tables[size_t(seq)].size()) * 16;
            const int32_t from = uniform(0, len - 1, rng);
            step.add_tokens(seq, from, std::min(len, from + uniform(1, 18, rng)));
        }
        const std::vector<float> x = random_values(step.n_tokens() * n_heads * head_dim, rng);
        auto [got, want] = both([&](Side& s) {
            auto rope = s->upload_rope(rope_spec(dims, neox, 10000.0));
            s->begin_step(step.inputs());
            const Tensor t = s.input(step.n_tokens(), n_heads * head_dim, x);
            s->rope(t, *rope, n_heads, head_dim);
            return s.read(t);
        });
        EXPECT_TRUE(close(got, want, kOpTolerance))
            << (neox ? "neox" : "normal") << ", " << dims << " of " << head_dim << " dims, " << n_heads << " heads";
    }
}

TEST_P(Conformance, GatedActivations) {
    std::mt19937 rng(8);
    for (int trial = 0; trial < 8; ++trial) {
        const int64_t n = uniform(1, 37, rng), cols = uniform(1, 300, rng);
        const bool gelu = trial % 2 == 1, in_place = trial % 4 < 2;
        const std::vector<float> g = random_values(n * cols, rng, 3.0f), u = random_values(n * cols, rng);
        auto [got, want] = both([&](Side& s) {
            const Tensor gate = s.input(n, cols, g), up = s.input(n, cols, u);
            const Tensor out = in_place ? gate : s.tensor(n, cols);
            if (gelu) s->gelu_mul(gate, up, out);
            else s->silu_mul(gate, up, out);
            return s.read(out);
        });
        EXPECT_TRUE(close(got, want, kOpTolerance)) << (gelu ? "gelu" : "silu") << " " << n << "x" << cols;
    }
}

TEST_P(Conformance, Softmax) {
    std::mt19937 rng(9);
    for (int trial = 0; trial < 6; ++trial) {
        const int64_t n = uniform(1, 37, rng), cols = uniform(1, 300, rng);
        const std::vector<float> x = random_values(n * cols, rng, 5.0f);
        auto [got, want] = both([&](Side& s) {
            const Tensor t = s.input(n, cols, x);
            s->softmax(t);
            return s.read(t);
        });
        EXPECT_TRUE(close(got, want, kOpTolerance)) << n << "x" << cols;
    }
}

TEST_P(Conformance, GatherLogitRows) {
    std::mt19937 rng(10);
    Step step = make_tables({20, 3, 9}, 4, rng);
    step.add_tokens(0, 0, 20);
    step.add_tokens(1, 2, 3);
    step.add_tokens(2, 4, 9);
    const int64_t cols = 77;
    const std::vector<float> x = random_values(step.n_tokens() * cols, rng);
    auto [got, want] = both([&](Side& s) {
        s->begin_step(step.inputs());
        const Tensor out = s.tensor(int64_t(step.logit_rows.size()), cols);
        s->gather_logit_rows(s.input(step.n_tokens(), cols, x), out);
        return s.read(out);
    });
    EXPECT_TRUE(bitwise(got, want));
}

// Every row of one sequence and the first of another: the rows an embedding's pooling reads.
TEST_P(Conformance, GatherHiddenRows) {
    std::mt19937 rng(12);
    Step step = make_tables({20, 9}, 4, rng);
    step.add_tokens(0, 0, 20);
    step.add_tokens(1, 0, 9);
    for (int32_t t = 0; t < 20; ++t) step.hidden_rows.push_back(t);
    step.hidden_rows.push_back(20);
    const int64_t cols = 53;
    const std::vector<float> x = random_values(step.n_tokens() * cols, rng);
    auto [got, want] = both([&](Side& s) {
        s->begin_step(step.inputs());
        const Tensor out = s.tensor(int64_t(step.hidden_rows.size()), cols);
        s->gather_hidden_rows(s.input(step.n_tokens(), cols, x), out);
        return s.read(out);
    });
    ASSERT_EQ(got.size(), size_t(21 * cols));
    EXPECT_TRUE(bitwise(got, want));
    EXPECT_TRUE(std::equal(got.begin() + 20 * cols, got.end(), x.begin() + 20 * cols));  // token 20 = seq 1, pos 0
}

TEST_P(Contract, UnsupportedWeightTypeNamesTheTensor) {
    const std::vector<uint8_t> bytes(4 * 8 * 2);
    const MatrixSource source{GgmlType::I32, bytes.data(), 2, 8, "blk.3.odd.weight"};
    try {
        test->upload_weight({source}, WeightUse::matmul);
        ADD_FAILURE() << "an I32 weight was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("blk.3.odd.weight"), std::string::npos) << e.what();
    }
}

// A backend is tested by adding its name to kBackends (a name "cpu_ISA" runs the CPU backend on
// that ISA path). The reference is the oracle: it takes only the contract's invariants.
const std::vector<std::string> kBackends = {
    "cpu",
    "cpu_avx2",
    "cpu_scalar",
};
std::vector<std::string> with_reference(std::vector<std::string> names) {
    names.insert(names.begin(), "reference");
    return names;
}
auto param_name = [](const auto& info) { return info.param; };
INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::ValuesIn(kBackends), param_name);
INSTANTIATE_TEST_SUITE_P(Backends, Contract, ::testing::ValuesIn(with_reference(kBackends)), param_name);
// Device backends ("vulkan"), where this build and machine have them (backend/vulkan/vulkan_test_env.h).
INSTANTIATE_TEST_SUITE_P(Devices, Conformance, ::testing::ValuesIn(testing::device_backends_under_test()), param_name);
INSTANTIATE_TEST_SUITE_P(Devices, Contract, ::testing::ValuesIn(testing::device_backends_under_test()), param_name);

}  // namespace
}  // namespace pagoda::backend::conformance
