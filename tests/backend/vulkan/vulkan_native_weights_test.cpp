// Native-layout quantised weights (weight_repack.h): a block-type weight keeps the file's bytes on
// the device, and every shader that reads it (GEMV, GEMM, embedding gather) computes bitwise what it
// computes over the grouped layout (int8 codes + per-16 (scale, offset)), forced here through
// PAGODA_VULKAN_WEIGHTS=grouped. The grouped layout is itself tested against dequantize_row
// (vulkan_backend_test.cpp) and both against the reference backend by the conformance suite.
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>

#include "backend/backend_test_util.h"
#include "backend/vulkan/vulkan_test_env.h"
#include "core/error.h"
#ifdef PAGODA_HAVE_VULKAN
#include "backend/vulkan/vulkan_handles.h"
#include "backend/vulkan/weight_repack.h"
#endif

namespace pagoda::backend {
namespace {

#ifdef PAGODA_HAVE_VULKAN
using gguf::GgmlType;
using namespace testing;

// Sets PAGODA_VULKAN_WEIGHTS for its lifetime (restores "unset" after: the suite runs native).
struct WeightsLayoutEnv {
    explicit WeightsLayoutEnv(const char* value) { setenv("PAGODA_VULKAN_WEIGHTS", value, 1); }
    ~WeightsLayoutEnv() { unsetenv("PAGODA_VULKAN_WEIGHTS"); }
};

std::shared_ptr<Weight> upload(Side& s, const std::vector<MatrixSource>& parts, const char* layout) {
    WeightsLayoutEnv env(layout);
    return s->upload_weight(parts, WeightUse::matmul);
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const GgmlType kBlockTypes[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// Runs matmul (GEMV for 3 tokens, GEMM for 40) and embed through both weights; all bitwise equal.
void expect_layouts_agree(Side& s, const Weight& native, const Weight& grouped, const std::string& what, std::mt19937& rng) {
    const int64_t cols = native.cols();
    for (int32_t n : {3, 40}) {
        s.reset();
        Step step = make_tables({n}, 16, rng);
        step.add_tokens(0, 0, n);
        for (int32_t t = 0; t < n; ++t) step.tokens[size_t(t)] = int32_t(rng() % uint32_t(native.parts()[0].rows));
        s->begin_step(step.inputs());
        const Tensor x = s.input(n, cols, random_values(n * cols, rng, 1.0f));
        std::vector<Tensor> out_native, out_grouped;
        for (const auto& p : native.parts()) {
            out_native.push_back(s.tensor(n, p.rows));
            out_grouped.push_back(s.tensor(n, p.rows));
        }
        s->matmul(native, x, out_native);
        s->matmul(grouped, x, out_grouped);
        for (size_t p = 0; p < out_native.size(); ++p)
            EXPECT_TRUE(bitwise_equal(s.read(out_native[p]), s.read(out_grouped[p]))) << what << ": matmul of " << n
                                                                                        << " tokens, part " << p;
        if (native.parts().size() == 1) {
            const Tensor e_native = s.tensor(n, cols), e_grouped = s.tensor(n, cols);
            s->embed(native, e_native);
            s->embed(grouped, e_grouped);
            EXPECT_TRUE(bitwise_equal(s.read(e_native), s.read(e_grouped))) << what << ": embed of " << n << " tokens";
        }
    }
}

TEST(VulkanNativeWeights, EveryBlockTypeReadsBitwiseWhatTheGroupedLayoutReads) {
    PAGODA_REQUIRE_VULKAN();
    Side s{make_backend("vulkan")};
    std::mt19937 rng(44);
    for (GgmlType type : kBlockTypes) {
        std::string name = gguf::type_name(uint32_t(type));
        for (char& ch : name) ch = char(std::tolower(static_cast<unsigned char>(ch)));
        const HostMatrix m = random_matrix(type, 37, 512, rng, "blk.0." + name + ".weight");
        const auto native = upload(s, {m.source()}, "native");
        const auto grouped = upload(s, {m.source()}, "grouped");
        EXPECT_TRUE(vulkan::is_native(vulkan::weight(*native).format)) << name;
        EXPECT_EQ(vulkan::weight_format_name(vulkan::weight(*native).format), name) << "the variant named after the type";
        EXPECT_EQ(vulkan::weight(*grouped).format, vulkan::WeightFormat::q) << name;
        EXPECT_NE(s->describe_matmul(*native, 1).find("vulkan " + name + " gemv"), std::string::npos)
            << s->describe_matmul(*native, 1);
        expect_layouts_agree(s, *native, *grouped, name, rng);
    }
}

// A weight of parts with different block types (a fused Q4_K|Q6_K) takes the grouped layout, and a
// weight of parts of one type stays native across the parts.
TEST(VulkanNativeWeights, PartsOfDifferentTypesTakeTheGroupedLayout) {
    PAGODA_REQUIRE_VULKAN();
    Side s{make_backend("vulkan")};
    std::mt19937 rng(45);
    const HostMatrix a = random_matrix(GgmlType::Q4_K, 24, 256, rng, "a"), b = random_matrix(GgmlType::Q6_K, 40, 256, rng, "b");
    const HostMatrix c = random_matrix(GgmlType::Q4_K, 8, 256, rng, "c");
    const auto mixed = upload(s, {a.source(), b.source()}, "native");
    EXPECT_EQ(vulkan::weight(*mixed).format, vulkan::WeightFormat::q);
    const auto same = upload(s, {a.source(), c.source()}, "native");
    const auto same_grouped = upload(s, {a.source(), c.source()}, "grouped");
    EXPECT_EQ(vulkan::weight(*same).format, vulkan::WeightFormat::q4_k);
    expect_layouts_agree(s, *same, *same_grouped, "q4_k|q4_k", rng);
}

// Device memory per weight equals the file's: a Q4_0 weight's buffer holds its 18-byte blocks as
// stored (padded to a 32-bit word) and no scales buffer; the grouped layout takes 1.5 bytes a weight.
TEST(VulkanNativeWeights, AQ4_0WeightTakesTheFilesBytesOnTheDevice) {
    PAGODA_REQUIRE_VULKAN();
    Side s{make_backend("vulkan")};
    std::mt19937 rng(46);
    const HostMatrix m = random_matrix(GgmlType::Q4_0, 33, 1024, rng, "blk.0.ffn_down.weight");
    ASSERT_EQ(m.bytes.size(), size_t(33 * 1024 / 32 * 18));
    const auto native = upload(s, {m.source()}, "native");
    EXPECT_EQ(vulkan::weight(*native).data.size, (m.bytes.size() + 3) / 4 * 4);
    EXPECT_EQ(vulkan::weight(*native).groups.size, 0u);
    const auto grouped = upload(s, {m.source()}, "grouped");
    EXPECT_EQ(vulkan::weight(*grouped).data.size + vulkan::weight(*grouped).groups.size, size_t(33 * 1024) * 3 / 2);
}

TEST(VulkanNativeWeights, AnUnknownLayoutIsRefusedNamingTheVariable) {
    std::mt19937 rng(47);
    const HostMatrix m = random_matrix(GgmlType::Q4_0, 2, 32, rng);
    WeightsLayoutEnv env("packed");
    try {
        vulkan::weight_format(m.source());
        ADD_FAILURE() << "PAGODA_VULKAN_WEIGHTS=packed was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("PAGODA_VULKAN_WEIGHTS=packed"), std::string::npos) << e.what();
    }
}
#endif

}  // namespace
}  // namespace pagoda::backend
