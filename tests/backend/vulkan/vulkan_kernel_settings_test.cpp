// The Vulkan shaders' tunable sizes (kernel_settings.h) are specialisation constants: GEMV and GEMM
// at other workgroup and shared-memory stage sizes give bitwise the outputs of the defaults (every
// output is summed over the columns in order), the backend names its sizes, and a size out of range
// is refused naming the variable. tests/CMakeLists.txt also runs the device suites at a second
// configuration (ctest vulkan_kernel_settings).
#include <cstdlib>
#include <cstring>
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

}  // namespace
}  // namespace pagoda::backend
