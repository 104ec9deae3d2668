// The Vulkan shaders' tunable sizes (kernel_settings.h) are specialisation constants: GEMV and GEMM
// at other workgroup and shared-memory stage sizes give bitwise the outputs of the defaults (every
// output is summed over the columns in order), the backend names its sizes, and a size out of range
// is refused naming the variable. The row reductions (rms_norm, add_rms_norm, softmax) by subgroup
// operations and by the shared-memory tree (PAGODA_VULKAN_SUBGROUP_REDUCE) both match the
// reference. tests/CMakeLists.txt also runs the device suites at a second
// configuration (ctest vulkan_kernel_settings).
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <gtest/gtest.h>

#include "backend/backend_test_util.h"
#include "backend/vulkan/vulkan_test_env.h"
#include "core/error.h"

namespace pagoda::backend {
namespace {

using gguf::GgmlType;
using namespace testing;

// Sets the two variables for its lifetime (the settings are read when a backend is made).
struct SettingsEnv {
    SettingsEnv(const char* gemv, const char* gemm) {
        setenv("PAGODA_VULKAN_GEMV_WORKGROUP", gemv, 1);
        setenv("PAGODA_VULKAN_GEMM_STAGE", gemm, 1);
    }
    ~SettingsEnv() {
        unsetenv("PAGODA_VULKAN_GEMV_WORKGROUP");
        unsetenv("PAGODA_VULKAN_GEMM_STAGE");
    }
};

std::unique_ptr<Backend> backend_with(const char* gemv, const char* gemm) {
    SettingsEnv env(gemv, gemm);
    return make_backend("vulkan");
}

// Each matmul output of `n` tokens on `s`, for the weight m.
std::vector<float> matmul(Side& s, const HostMatrix& m, int32_t n, const std::vector<float>& x) {
    s.reset();
    std::mt19937 rng(1);
    Step step = make_tables({n}, 16, rng);
    step.add_tokens(0, 0, n);
    s->begin_step(step.inputs());
    auto w = s->upload_weight({m.source()}, WeightUse::matmul);
    const Tensor xt = s.input(n, m.cols, x), out = s.tensor(n, m.rows);
    s->matmul(*w, xt, {&out, 1});
    return s.read(out);
}

TEST(VulkanKernelSettings, OtherSizesGiveBitwiseTheSameMatmuls) {
    PAGODA_REQUIRE_VULKAN();
    Side base{make_backend("vulkan")}, small{backend_with("32", "8")}, large{backend_with("256", "64")};
    EXPECT_NE(small->describe().find("gemv workgroup 32, gemm stage 8"), std::string::npos) << small->describe();
    EXPECT_NE(large->describe().find("gemv workgroup 256, gemm stage 64"), std::string::npos) << large->describe();
    std::mt19937 rng(3);
    for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q6_K}) {
        const HostMatrix m = random_matrix(type, 300, 512, rng);  // rows: not a multiple of any workgroup
        for (int32_t n : {5, 45}) {
            const std::vector<float> x = random_values(n * m.cols, rng, 1.0f);
            const std::vector<float> want = matmul(base, m, n, x);
            for (Side* s : {&small, &large}) {
                const std::vector<float> got = matmul(*s, m, n, x);
                ASSERT_EQ(got.size(), want.size());
                EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4))
                    << gguf::type_name(uint32_t(type)) << ", " << n << " tokens, " << (*s)->describe();
            }
        }
    }
}

TEST(VulkanKernelSettings, SizesOutOfRangeAreRefusedNamingTheVariable) {
    PAGODA_REQUIRE_VULKAN();
    for (auto [gemv, gemm, name] : {std::tuple{"48", "16", "PAGODA_VULKAN_GEMV_WORKGROUP=48"},
                                    std::tuple{"512", "16", "PAGODA_VULKAN_GEMV_WORKGROUP=512"},
                                    std::tuple{"64", "12", "PAGODA_VULKAN_GEMM_STAGE=12"},
                                    std::tuple{"64", "128", "PAGODA_VULKAN_GEMM_STAGE=128"},
                                    std::tuple{"64", "x", "PAGODA_VULKAN_GEMM_STAGE=x"}}) {
        try {
            backend_with(gemv, gemm);
            ADD_FAILURE() << name << " was accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
        }
    }
}

// A backend made with PAGODA_VULKAN_SUBGROUP_REDUCE=value ("" unset).
std::unique_ptr<Backend> backend_reducing(const char* value) {
    if (*value) setenv("PAGODA_VULKAN_SUBGROUP_REDUCE", value, 1);
    std::unique_ptr<Backend> b;
    try {
        b = make_backend("vulkan");
    } catch (...) {
        unsetenv("PAGODA_VULKAN_SUBGROUP_REDUCE");
        throw;
    }
    unsetenv("PAGODA_VULKAN_SUBGROUP_REDUCE");
    return b;
}

// rms_norm, add_rms_norm (its sum, then its norm) and softmax of n rows of `cols` on `s`.
std::vector<std::vector<float>> row_reductions(Side& s, int64_t n, int64_t cols, const std::vector<float>& x,
                                               const std::vector<float>& r, const std::vector<float>& w) {
    s.reset();
    auto weight = s->upload_vector(w);
    const Tensor a = s.input(n, cols, x), norm = s.tensor(n, cols);
    s->rms_norm(a, *weight, 1e-5f, norm);
    const Tensor b = s.input(n, cols, x), residual = s.input(n, cols, r), fused = s.tensor(n, cols);
    if (s->supports(OpKind::add_rms_norm)) s->add_rms_norm(b, residual, *weight, 1e-5f, fused);
    else {
        s->add(b, residual);
        s->rms_norm(b, *weight, 1e-5f, fused);
    }
    s->softmax(a);
    return {s.read(norm), s.read(b), s.read(fused), s.read(a)};
}

TEST(VulkanKernelSettings, SubgroupAndSharedMemoryReductionsMatchTheReference) {
    PAGODA_REQUIRE_VULKAN();
    Side shared{backend_reducing("0")}, reference{make_backend("reference")};
    EXPECT_NE(shared->describe().find("shared-memory reductions"), std::string::npos) << shared->describe();
    std::vector<Side> sides;
    sides.push_back(std::move(shared));
    if (make_backend("vulkan")->describe().find("subgroup reductions") != std::string::npos) {
        sides.emplace_back(backend_reducing("1"));
        EXPECT_NE(sides.back()->describe().find("subgroup reductions"), std::string::npos) << sides.back()->describe();
    } else {
        std::cout << "[ NOTE     ] this Vulkan device has no subgroup arithmetic: only the shared-memory path runs\n";
    }
    std::mt19937 rng(21);
    // Row widths below, at and above a subgroup, a workgroup and several passes of it.
    for (int64_t cols : {1, 7, 8, 33, 256, 300, 1000}) {
        const int64_t n = 1 + int64_t(rng() % 9);
        const std::vector<float> x = random_values(n * cols, rng, 3.0f), r = random_values(n * cols, rng), w = random_values(cols, rng);
        const std::vector<std::vector<float>> want = row_reductions(reference, n, cols, x, r, w);
        for (Side& s : sides) {
            const std::vector<std::vector<float>> got = row_reductions(s, n, cols, x, r, w);
            for (size_t i = 0; i < want.size(); ++i)
                EXPECT_TRUE(close(got[i], want[i], 1e-5)) << "output " << i << ", " << cols << " columns, " << s->describe();
        }
    }
}

TEST(VulkanKernelSettings, ASubgroupSwitchOtherThan0Or1IsRefused) {
    PAGODA_REQUIRE_VULKAN();
    try {
        backend_reducing("yes");
        ADD_FAILURE() << "PAGODA_VULKAN_SUBGROUP_REDUCE=yes was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("PAGODA_VULKAN_SUBGROUP_REDUCE=yes"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace pagoda::backend
