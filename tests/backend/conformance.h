// The backend conformance suite: every op of a backend against the reference backend on the same
// inputs, over random shapes that avoid any vector width (odd column counts, 1..37 tokens, several
// sequences with scattered block tables, GQA groups 1/2/4, block sizes 1/4/16, sliding windows and
// softcaps); each fused op a backend declares against its unfused sequence on that backend; and
// the contract's invariants (multi-part matmul, batch invariance, errors naming the tensor), which
// the reference keeps too. A backend is tested by adding its name to kBackends at the bottom of
// conformance_test.cpp. The suite is split by op family: conformance_test.cpp (matmul, embed, row
// ops), conformance_kv_attention_test.cpp (KV writes, block export, paged attention) and
// conformance_fused_test.cpp (fused ops against their unfused sequences); this header holds the
// fixtures, tolerances and helpers they share.
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
#pragma once
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

namespace pagoda::backend::conformance {

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
// attention to bf16 on AMX tiles where they run (backend/cpu/attention/attention.h): bf16's error, not f32's.
// That method is held to its own references in tests/backend/cpu/amx_attention_test.cpp; here such a
// run is compared at bf16's tolerance (the worst seen: 0.8 % of max |want|).
constexpr double kBf16AttentionTolerance = 3e-2;
inline double attention_tolerance(KvDtype dtype) {
    const char* env = std::getenv("PAGODA_ATTENTION");
    const bool bf16_method = env && std::string(env) == "amx_bf16";
    return bf16_method && (dtype == KvDtype::f16 || dtype == KvDtype::bf16) ? kBf16AttentionTolerance : kAttentionTolerance;
}
constexpr double kQ8VersusF16Tolerance = 5e-2;

inline double matmul_tolerance(GgmlType type) {
    if (type == GgmlType::F32) return 1e-4;
    if (type == GgmlType::F16 || type == GgmlType::BF16) return 1e-2;
    return 2e-2;
}

inline std::string type_name(GgmlType type) { return gguf::type_name(uint32_t(type)); }

inline int32_t uniform(int32_t lo, int32_t hi, std::mt19937& rng) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); }

// Columns for a weight type: any count for float types, a random number of blocks otherwise.
inline int64_t random_cols(GgmlType type, std::mt19937& rng) {
    const int64_t block = gguf::type_traits(type).block_size;
    if (block == 1) return uniform(1, 300, rng);
    return block * uniform(1, block == 32 ? 12 : 3, rng);
}

inline std::unique_ptr<Backend> make_under_test(const std::string& name) { return make_backend(name.substr(0, name.find('_'))); }

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

inline RopeSpec rope_spec(int64_t dims, bool neox, double base) {
    RopeSpec spec{dims, neox, {}};
    for (int64_t i = 0; i < dims / 2; ++i) spec.inv_freq.push_back(std::pow(base, -2.0 * double(i) / double(dims)));
    return spec;
}

// K and V rows of every token of `step` in `layer`, [token][kv_head][head_dim].
inline std::vector<float> read_kv(const KvCache& cache, const Step& step, int32_t layer, bool v) {
    const auto& layout = cache.layout();
    std::vector<float> out(size_t(step.n_tokens()) * size_t(layout.n_kv_heads * layout.head_dim));
    float* at = out.data();
    for (int64_t slot : step.slots)
        for (int32_t h = 0; h < layout.n_kv_heads; ++h, at += layout.head_dim)
            v ? cache.read_v(layer, slot, h, at) : cache.read_k(layer, slot, h, at);
    return out;
}

inline kv::KvLayout random_layout(KvDtype dtype, int32_t block_size, std::mt19937& rng) {
    return {2, uniform(1, 4, rng), kHeadDims[size_t(uniform(0, 4, rng))], block_size, dtype};
}

}  // namespace pagoda::backend::conformance
