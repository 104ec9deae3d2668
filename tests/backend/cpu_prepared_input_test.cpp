// The CPU backend's own rewrite (Backend::prepared_input_cols): a norm that also writes its output's
// int8 rows (norm_prepare) and matmuls that read them, against its unfused twin (rms_norm, with the
// residual add before it, then matmuls quantising the f32 rows themselves) on the same backend,
// bitwise. Only the CPU keeps a prepared form, so only its ISA paths with packed int8 kernels run it.
#include "backend/conformance.h"

namespace pagoda::backend::conformance {
namespace {

using gguf::GgmlType;

class CpuPreparedInput : public Conformance {};

TEST_P(CpuPreparedInput, NormPrepareThenMatmulEqualsTheUnfusedSequence) {
    if (best_supported_isa() == Isa::scalar) GTEST_SKIP() << "no AVX2: no panel kernel runs here";
    std::mt19937 rng(17);
    const GgmlType types[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K};
    std::set<GgmlType> checked_types;  // a weight that takes no prepared input has nothing to check
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
        const Weight* readers[] = {weight.get()};
        const int64_t prepared_cols = test->prepared_input_cols(cols, readers);
        if (prepared_cols <= 0) continue;
        const Tensor residual = test.input(n, cols, r);
        const Tensor x_fused = test.input(n, cols, x), h_fused = test.tensor(n, cols);
        const Tensor q = test.tensor(n, prepared_cols);
        test->norm_prepare(x_fused, with_add ? &residual : nullptr, *norm, 1e-5f, h_fused, q);
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
    // The packed int8 paths take prepared rows for some block type: at least one type's cases, both
    // with and without the residual add, must have been checked.
    EXPECT_GE(checked, 2) << GetParam() << ": only " << checked << " of 8 cases took prepared input";
    EXPECT_GE(checked_types.size(), 1u);
    std::cout << "[ CHECKED  ] " << checked << " of 8 cases, " << checked_types.size() << " of 4 block types\n";
}

// A weight the int8 kernels do not read (f32) gets no prepared form, nor does a norm with no readers.
TEST_P(CpuPreparedInput, NoPreparedFormForAWeightThatDoesNotTakeIt) {
    std::mt19937 rng(3);
    const HostMatrix f = random_matrix(GgmlType::F32, 8, 256, rng, "f");
    auto weight = test->upload_weight({f.source()}, WeightUse::matmul);
    const Weight* readers[] = {weight.get()};
    EXPECT_EQ(test->prepared_input_cols(256, readers), 0);
    EXPECT_EQ(test->prepared_input_cols(256, {}), 0);
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpuPreparedInput, ::testing::Values("cpu", "cpu_avx2"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pagoda::backend::conformance
