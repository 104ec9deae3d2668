// The backend conformance suite: every op of a backend against the reference backend on the same
// inputs, over random shapes that avoid any vector width (odd column counts, 1..37 tokens, several
// sequences with scattered block tables, GQA groups 1/2/4, block sizes 1/4/16, sliding windows and
// softcaps); each fused op a backend declares against its unfused sequence on that backend; and
// the contract's invariants (multi-part matmul, batch invariance, errors naming the tensor), which
// the reference keeps too. A backend is tested by adding its name to kBackends at the bottom.
//
// Tolerances (max |got - want| relative to max |want| of the output):
//   matmul, F32 weights        1e-4  f32 accumulation over a few hundred terms
//   matmul, F16/BF16 weights   1e-2  a backend may round activations to bf16 (2^-9 per element)
//   matmul, block types        2e-2  a backend may quantise activations to int8 per 32 values
//                                    (up to max|x| / 254 per element)
//   embed                      1e-6  both dequantise the same stored values
//   row ops, RoPE              1e-5  f32 arithmetic
//   attention                  3e-5  f32 dot products, exp and sums over up to ~50 keys (q8 too:
//                                    both read the same stored codes x scales)
//   attention, q8 vs f16       5e-2  each q8 value moves by up to max|row| / 254 (~1 % of a normal
//                                    row's spread), and these queries are large (sd 3) so the
//                                    softmax is peaky and a score shift moves weight between
//                                    near-tied keys; the worst seen is 2.1e-2
//   kv_write, gather           exact the same floats stored or copied (K/V rounded the same way;
//                                    q8 rows quantised by the format's float rule)
#include <fmt/format.h>
#include <cstdlib>
#include <gtest/gtest.h>
#include <iterator>
#include <iostream>
#include <optional>
#include <set>

#include "core/cpu_features.h"
#include "backend/backend_test_util.h"
#include "core/error.h"
#include "backend/vulkan/vulkan_test_env.h"

namespace pagoda::backend {
namespace {

using gguf::GgmlType;
using kv::KvDtype;
using namespace testing;

const GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                                 GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K};
const KvDtype kKvDtypes[] = {KvDtype::f32, KvDtype::f16, KvDtype::bf16};
const KvDtype kAllKvDtypes[] = {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8};
const int32_t kBlockSizes[] = {1, 4, 16};
const int32_t kHeadDims[] = {8, 24, 40, 64, 80};

constexpr double kEmbedTolerance = 1e-6;
constexpr double kOpTolerance = 1e-5;
constexpr double kAttentionTolerance = 3e-5;
// PAGODA_ATTENTION=amx_bf16 in the environment makes the CPU backend round f16 and bf16 caches'
// attention to bf16 on AMX tiles where they run (backend/cpu/attention.h): bf16's error, not f32's.
// That method is held to its own references in tests/backend/cpu/amx_attention_test.cpp; here such a
// run is compared at bf16's tolerance (the worst seen: 0.8 % of max |want|).
constexpr double kBf16AttentionTolerance = 3e-2;
double attention_tolerance(KvDtype dtype) {
    const char* env = std::getenv("PAGODA_ATTENTION");
    const bool bf16_method = env && std::string(env) == "amx_bf16";
    return bf16_method && (dtype == KvDtype::f16 || dtype == KvDtype::bf16) ? kBf16AttentionTolerance : kAttentionTolerance;
}
constexpr double kQ8VersusF16Tolerance = 5e-2;

double matmul_tolerance(GgmlType type) {
    if (type == GgmlType::F32) return 1e-4;
    if (type == GgmlType::F16 || type == GgmlType::BF16) return 1e-2;
    return 2e-2;
}

std::string type_name(GgmlType type) { return gguf::type_name(uint32_t(type)); }

int32_t uniform(int32_t lo, int32_t hi, std::mt19937& rng) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); }

// Columns for a weight type: any count for float types, a random number of blocks otherwise.
int64_t random_cols(GgmlType type, std::mt19937& rng) {
    const int64_t block = gguf::type_traits(type).block_size;
    if (block == 1) return uniform(1, 300, rng);
    return block * uniform(1, block == 32 ? 12 : 3, rng);
}

std::unique_ptr<Backend> make_under_test(const std::string& name) { return make_backend(name.substr(0, name.find('_'))); }

// "cpu_avx2" / "cpu_scalar": the CPU backend on a lower ISA path, for the test's lifetime (weights
// are packed for the path active at upload). Paths the machine lacks are skipped.
class IsaForTest {
public:
    explicit IsaForTest(const std::string& name) : saved_(active_isa()) {
        const size_t sep = name.find('_');
        if (name.rfind("cpu_", 0) != 0 || sep == std::string::npos) return;
        const Isa isa = parse_isa(name.substr(sep + 1));
        if (int(isa) > int(best_supported_isa())) {
            unavailable_ = true;
            return;
        }
        set_isa(isa);
    }
    ~IsaForTest() { set_isa(saved_); }
    bool unavailable() const { return unavailable_; }

private:
    Isa saved_;
    bool unavailable_ = false;
};

// Conformance: the backend under test against the reference backend. both() runs `op` on each
// (each with a fresh arena) and returns both results: {test, reference}. Never instantiated for the
// reference itself (it would compare the oracle with itself): tests/backend/reference_ops_test.cpp
// checks the reference against hand-computed cases.
class Conformance : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        if (isa_.unavailable()) GTEST_SKIP() << GetParam() << ": this CPU lacks the path";
    }
    IsaForTest isa_{GetParam()};  // before the backends: they pack for the active path
    Side test{make_under_test(GetParam())};
    Side ref{make_backend("reference")};

    template <class Op>
    auto both(Op op) {
        test.reset();
        ref.reset();
        auto got = op(test);
        auto want = op(ref);
        return std::pair{std::move(got), std::move(want)};
    }
    // A fused op against its unfused sequence on the backend under test.
    ::testing::AssertionResult same_as_unfused(const std::vector<float>& fused, const std::vector<float>& unfused) {
        return test->fused_bitwise() ? bitwise(fused, unfused) : close(fused, unfused, kOpTolerance);
    }
};

// Contract: invariants a backend must keep on its own (bitwise batch invariance, multi-part weights,
// errors naming the tensor), checked on the reference too.
class Contract : public Conformance {};

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

RopeSpec rope_spec(int64_t dims, bool neox, double base) {
    RopeSpec spec{dims, neox, {}};
    for (int64_t i = 0; i < dims / 2; ++i) spec.inv_freq.push_back(std::pow(base, -2.0 * double(i) / double(dims)));
    return spec;
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

// K and V rows of every token of `step` in `layer`, [token][kv_head][head_dim].
std::vector<float> read_kv(const KvCache& cache, const Step& step, int32_t layer, bool v) {
    const auto& layout = cache.layout();
    std::vector<float> out(size_t(step.n_tokens()) * size_t(layout.n_kv_heads * layout.head_dim));
    float* at = out.data();
    for (int64_t slot : step.slots)
        for (int32_t h = 0; h < layout.n_kv_heads; ++h, at += layout.head_dim)
            v ? cache.read_v(layer, slot, h, at) : cache.read_k(layer, slot, h, at);
    return out;
}

kv::KvLayout random_layout(KvDtype dtype, int32_t block_size, std::mt19937& rng) {
    return {2, uniform(1, 4, rng), kHeadDims[size_t(uniform(0, 4, rng))], block_size, dtype};
}

// kv_write stores what the reference stores, bitwise; copy_block copies every layer's K and V.
TEST_P(Conformance, KvWriteAndCopyBlock) {
    std::mt19937 rng(11);
    for (KvDtype dtype : kAllKvDtypes)
        for (int32_t block_size : kBlockSizes) {
            const kv::KvLayout layout = random_layout(dtype, block_size, rng);
            Step step = make_tables({uniform(1, 37, rng), uniform(1, 37, rng)}, block_size, rng);
            for (int32_t seq = 0; seq < 2; ++seq) step.add_tokens(seq, 0, 1 + uniform(0, block_size * int32_t(step.block_tables[size_t(seq)].size()) - 1, rng));
            const int64_t width = int64_t(layout.n_kv_heads) * layout.head_dim;
            const std::vector<float> k = random_values(step.n_tokens() * width, rng), v = random_values(step.n_tokens() * width, rng);
            // Copy the first block of sequence 0 to one nobody owns; read it back through a step
            // whose slots are that block's.
            const int32_t src = step.block_tables[0][0], dst = step.spare_blocks[0];
            Step copied = step;
            for (auto& slot : copied.slots) slot = slot / block_size == src ? int64_t(dst) * block_size + slot % block_size : slot;
            auto [got, want] = both([&](Side& s) {
                auto cache = s->create_kv_cache(layout, step.n_blocks);
                s->begin_step(step.inputs());
                s->kv_write(*cache, 1, s.input(step.n_tokens(), width, k), s.input(step.n_tokens(), width, v));
                s->kv_write(*cache, 0, s.input(step.n_tokens(), width, v), s.input(step.n_tokens(), width, k));
                cache->copy_block(src, dst);
                std::vector<float> out;
                for (const Step* st : {&step, &copied})
                    for (int32_t layer : {0, 1})
                        for (bool is_v : {false, true}) {
                            auto rows = read_kv(*cache, *st, layer, is_v);
                            out.insert(out.end(), rows.begin(), rows.end());
                        }
                return out;
            });
            EXPECT_TRUE(bitwise(got, want)) << kv::kv_dtype_name(dtype) << ", block size " << block_size;
            // In the copy, the tokens of block src read back as themselves.
            const size_t half = got.size() / 2;
            EXPECT_TRUE(bitwise({got.begin() + long(half), got.end()}, {got.begin(), got.begin() + long(half)}));
        }
}

// export_block gives the same bytes on every backend (per layer K then V, [kv_head][slot][head_dim]
// in the element encoding: the prefix tier's payload), and import_block puts a block back exactly.
TEST_P(Conformance, KvBlockExportAndImport) {
    std::mt19937 rng(12);
    for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8})
        for (int32_t block_size : kBlockSizes) {
            const kv::KvLayout layout = random_layout(dtype, block_size, rng);
            Step step = make_tables({uniform(1, 37, rng), uniform(1, 37, rng)}, block_size, rng);
            for (int32_t seq = 0; seq < 2; ++seq) step.add_tokens(seq, 0, 1 + uniform(0, block_size * int32_t(step.block_tables[size_t(seq)].size()) - 1, rng));
            const int64_t width = int64_t(layout.n_kv_heads) * layout.head_dim;
            const std::vector<float> k = random_values(step.n_tokens() * width, rng), v = random_values(step.n_tokens() * width, rng);
            const int32_t src = step.block_tables[0][0], dst = step.spare_blocks[0];
            Step moved = step;
            for (auto& slot : moved.slots) slot = slot / block_size == src ? int64_t(dst) * block_size + slot % block_size : slot;
            auto [got, want] = both([&](Side& s) {
                auto cache = s->create_kv_cache(layout, step.n_blocks);
                s->begin_step(step.inputs());
                s->kv_write(*cache, 0, s.input(step.n_tokens(), width, k), s.input(step.n_tokens(), width, v));
                s->kv_write(*cache, 1, s.input(step.n_tokens(), width, v), s.input(step.n_tokens(), width, k));
                std::vector<uint8_t> bytes(layout.bytes_per_block());
                cache->export_block(src, bytes);
                cache->import_block(dst, bytes);
                std::vector<float> out(bytes.begin(), bytes.end());  // the payload, byte by byte
                for (const Step* st : {&step, &moved})
                    for (int32_t layer : {0, 1})
                        for (bool is_v : {false, true}) {
                            auto rows = read_kv(*cache, *st, layer, is_v);
                            out.insert(out.end(), rows.begin(), rows.end());
                        }
                EXPECT_THROW(cache->export_block(step.n_blocks, bytes), Error);
                std::vector<uint8_t> short_bytes(bytes.size() - 1);
                EXPECT_THROW(cache->import_block(0, short_bytes), Error);
                return out;
            });
            EXPECT_TRUE(bitwise(got, want)) << kv::kv_dtype_name(dtype) << ", block size " << block_size;
            // The imported block reads back as the exported one.
            const size_t payload = layout.bytes_per_block(), half = (got.size() - payload) / 2;
            EXPECT_TRUE(bitwise({got.begin() + long(payload + half), got.end()},
                                {got.begin() + long(payload), got.begin() + long(payload + half)}));
        }
}

struct AttentionCase {
    kv::KvLayout layout;
    AttentionParams params;
    std::vector<int32_t> context, fresh;
    std::string label() const {
        return fmt::format("{} block {} kv_heads {} head_dim {} heads {} window {} softcap {}", kv::kv_dtype_name(layout.dtype),
                           layout.block_size, layout.n_kv_heads, layout.head_dim, params.n_heads, params.sliding_window,
                           params.softcap);
    }
};

// dtype: the cycle of f32, f16, bf16 by trial unless given.
AttentionCase random_attention_case(int trial, std::mt19937& rng, std::optional<KvDtype> dtype = std::nullopt) {
    AttentionCase c;
    c.layout = random_layout(dtype ? *dtype : kKvDtypes[trial % 3], kBlockSizes[(trial / 3) % 3], rng);
    const int32_t group = 1 << ((trial / 9) % 3);
    c.params = {c.layout.n_kv_heads * group, 1.0f / std::sqrt(float(c.layout.head_dim)),
                trial % 4 == 1 ? uniform(1, 8, rng) : 0, trial % 4 == 2 ? 1.5f : 0.0f};
    const int32_t n_seqs = uniform(1, 3, rng);
    for (int32_t i = 0; i < n_seqs; ++i) {
        c.context.push_back(uniform(0, 40, rng));
        c.fresh.push_back(uniform(1, 5, rng));
    }
    return c;
}

// Writes every sequence's context in one step, then runs a step of the fresh tokens (each
// sequence's next 1..5 positions: decode and chunked prefill) that writes its K/V and attends:
// all tokens in one call, or (one_by_one) each token alone in a step of its own.
std::vector<float> run_attention(Side& s, const AttentionCase& c, uint32_t seed, bool one_by_one = false) {
    std::mt19937 rng(seed);
    std::vector<int32_t> lengths;
    for (size_t i = 0; i < c.context.size(); ++i) lengths.push_back(c.context[i] + c.fresh[i]);
    const Step tables = make_tables(lengths, c.layout.block_size, rng);
    Step prefix = tables, step = tables;
    for (int32_t i = 0; i < int32_t(lengths.size()); ++i) {
        prefix.add_tokens(i, 0, c.context[size_t(i)]);
        step.add_tokens(i, c.context[size_t(i)], lengths[size_t(i)]);
    }
    const int64_t width = int64_t(c.layout.n_kv_heads) * c.layout.head_dim;
    auto cache = s->create_kv_cache(c.layout, tables.n_blocks);
    const int32_t layer = 1;
    for (const Step* st : {&prefix, &step}) {
        const int64_t n = st->n_tokens();
        if (n == 0) continue;
        const std::vector<float> k = random_values(n * width, rng), v = random_values(n * width, rng);
        s->begin_step(st->inputs());
        s->kv_write(*cache, layer, s.input(n, width, k), s.input(n, width, v));
    }
    // Large queries so that softcaps bite and the softmax is peaky.
    const int64_t q_width = int64_t(c.params.n_heads) * c.layout.head_dim;
    const std::vector<float> q = random_values(step.n_tokens() * q_width, rng, 3.0f);
    if (!one_by_one) {
        const Tensor out = s.tensor(step.n_tokens(), q_width);
        s->attention(*cache, layer, s.input(step.n_tokens(), q_width, q), out, c.params);
        return s.read(out);
    }
    std::vector<float> rows;
    for (int64_t t = 0; t < step.n_tokens(); ++t) {
        Step alone = tables;
        alone.add_tokens(step.seq_index[size_t(t)], step.positions[size_t(t)], step.positions[size_t(t)] + 1);
        s->begin_step(alone.inputs());
        const Tensor out = s.tensor(1, q_width);
        s->attention(*cache, layer, s.input(1, q_width, {q.begin() + t * q_width, q.begin() + (t + 1) * q_width}), out, c.params);
        const std::vector<float> row = s.read(out);
        rows.insert(rows.end(), row.begin(), row.end());
    }
    return rows;
}

TEST_P(Conformance, PagedAttention) {
    std::mt19937 rng(12);
    for (int trial = 0; trial < 36; ++trial) {
        const AttentionCase c = random_attention_case(trial, rng);
        if (!test->supports_attention(c.params)) {  // refused clearly, never computed wrongly
            EXPECT_THROW(run_attention(test, c, uint32_t(100 + trial)), Error) << c.label();
            test.reset();
            continue;
        }
        auto [got, want] = both([&](Side& s) { return run_attention(s, c, uint32_t(100 + trial)); });
        EXPECT_TRUE(close(got, want, attention_tolerance(c.layout.dtype))) << c.label();
    }
}

// Over a q8 cache: against the reference's q8 within the f32 tolerance (both read the same stored
// values), and against the same case over an f16 cache within the q8 one.
TEST_P(Conformance, PagedAttentionQ8) {
    std::mt19937 rng(17);
    int checked = 0;
    for (int trial = 0; trial < 18; ++trial) {
        AttentionCase c = random_attention_case(trial * 2 + trial / 9, rng, KvDtype::q8);
        if (!test->supports_attention(c.params)) continue;  // PagedAttention checks the refusal
        ++checked;
        auto [got, want] = both([&](Side& s) { return run_attention(s, c, uint32_t(300 + trial)); });
        EXPECT_TRUE(close(got, want, kAttentionTolerance)) << c.label();
        c.layout.dtype = KvDtype::f16;
        test.reset();
        const std::vector<float> f16 = run_attention(test, c, uint32_t(300 + trial));
        EXPECT_TRUE(close(got, f16, kQ8VersusF16Tolerance)) << c.label() << " vs f16";
        EXPECT_FALSE(bitwise(got, f16)) << c.label() << ": q8 gave f16's bits";
    }
    EXPECT_GE(checked, 6) << "the cases without window or softcap (a third) are any backend's";
}

// Each token attends the same alone as inside the step (batch invariance), bitwise.
TEST_P(Contract, AttentionIsBatchInvariant) {
    std::mt19937 rng(16);
    int checked = 0;
    for (int trial = 0; trial < 16; ++trial) {
        const AttentionCase c = random_attention_case(trial * 5 + 1, rng, trial >= 12 ? std::optional(KvDtype::q8) : std::nullopt);
        if (!test->supports_attention(c.params)) continue;  // PagedAttention checks the refusal
        ++checked;
        test.reset();
        const std::vector<float> batch = run_attention(test, c, uint32_t(200 + trial));
        test.reset();
        EXPECT_TRUE(bitwise(run_attention(test, c, uint32_t(200 + trial), true), batch)) << c.label();
    }
    EXPECT_GE(checked, 4) << "the cases without window or softcap are any backend's";
}

// --- fused ops, each against its unfused sequence on the backend under test ---

// rms_norm_quantize (with and without the residual add) then matmuls reading the quantised form
// equal rms_norm then matmuls from f32, for one-part, stacked and unstacked (mixed-type) weights.
TEST_P(Conformance, FusedNormQuantize) {
    if (!test->supports(FusedOp::norm_quantize)) GTEST_SKIP() << GetParam() << " declares no norm_quantize";
    std::mt19937 rng(17);
    const GgmlType types[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K};
    std::set<GgmlType> checked_types;  // a weight that takes no quantised input has nothing to check
    int checked = 0;
    for (int trial = 0; trial < 8; ++trial) {
        const GgmlType type = types[trial % 4];
        const int64_t n = trial % 3 == 0 ? 1 : uniform(2, 37, rng), cols = 256 * uniform(1, 3, rng);
        const bool with_add = trial % 2 == 1;
        const std::vector<float> x = random_values(n * cols, rng), r = random_values(n * cols, rng), w = random_values(cols, rng);
        const HostMatrix a = random_matrix(type, uniform(1, 40, rng), cols, rng, "a");
        const HostMatrix b = random_matrix(trial % 4 == 3 ? GgmlType::Q8_0 : type, uniform(1, 40, rng), cols, rng, "b");
        test.reset();
        auto norm = test->upload_vector(w);
        auto weight = test->upload_weight({a.source(), b.source()}, WeightUse::matmul);
        if (!test->takes_quantized_input(*weight)) continue;
        const Tensor residual = test.input(n, cols, r);
        const Tensor x_fused = test.input(n, cols, x), h_fused = test.tensor(n, cols);
        const Tensor q = test.tensor(n, test->quantized_row_elements(cols));
        test->rms_norm_quantize(x_fused, with_add ? &residual : nullptr, *norm, 1e-5f, h_fused, q);
        const Tensor fused[] = {test.tensor(n, a.rows), test.tensor(n, b.rows)};
        test->matmul(*weight, h_fused, fused, &q);

        const Tensor x_plain = test.input(n, cols, x), h_plain = test.tensor(n, cols);
        if (with_add) test->add(x_plain, residual);
        test->rms_norm(x_plain, *norm, 1e-5f, h_plain);
        const Tensor plain[] = {test.tensor(n, a.rows), test.tensor(n, b.rows)};
        test->matmul(*weight, h_plain, plain);
        const std::string label = fmt::format("{}, {} tokens, add {}", type_name(type), n, with_add);
        EXPECT_TRUE(bitwise(test.read(h_fused), test.read(h_plain))) << "norm, " << label;
        EXPECT_TRUE(bitwise(test.read(x_fused), test.read(x_plain))) << "residual, " << label;
        for (size_t p = 0; p < 2; ++p) EXPECT_TRUE(bitwise(test.read(fused[p]), test.read(plain[p]))) << "part " << p << ", " << label;
        ++checked;
        checked_types.insert(type);
    }
    // A backend that declares norm_quantize takes quantised input for some block type: at least
    // one type's cases, both with and without the residual add, must have been checked.
    EXPECT_GE(checked, 2) << GetParam() << ": only " << checked << " of 8 cases took quantised input";
    EXPECT_GE(checked_types.size(), 1u);
    std::cout << "[ CHECKED  ] " << checked << " of 8 cases, " << checked_types.size() << " of 4 block types\n";
}

TEST_P(Conformance, FusedAddRmsNorm) {
    if (!test->supports(FusedOp::add_rms_norm)) GTEST_SKIP() << GetParam() << " declares no add_rms_norm";
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
    if (!test->supports(FusedOp::matmul_silu_mul)) GTEST_SKIP() << GetParam() << " declares no matmul_silu_mul";
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
    if (!test->supports(FusedOp::qkv_rope_kv_write)) GTEST_SKIP() << GetParam() << " declares no qkv_rope_kv_write";
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
}  // namespace pagoda::backend
