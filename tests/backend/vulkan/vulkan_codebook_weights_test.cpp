// The codebook weight types on Vulkan, each in the file's own blocks (IQ4_NL, IQ4_XS, MXFP4 through a
// 16-entry table; IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M through their grid, uploaded
// from the CPU's quant/iq_grids.h): the grouped layout's codes times scales equal dequantize_row bit
// for bit, the native variants read bitwise what the grouped layout reads, and matmul (GEMV and GEMM)
// and embedding agree with the reference backend (double) to f32 rounding: the weights are exact on
// both sides.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>

#include "backend/backend_test_util.h"
#include "backend/vulkan/vulkan_test_env.h"
#include "quant/dequantize.h"
#include "quant/random_codebook_blocks.h"
#ifdef PAGODA_HAVE_VULKAN
#include "backend/vulkan/vulkan_handles.h"
#include "backend/vulkan/repack_check.h"
#include "backend/vulkan/weight_repack.h"
#endif

namespace pagoda::backend {
namespace {

#ifdef PAGODA_HAVE_VULKAN
using gguf::GgmlType;
using namespace testing;

const GgmlType kCodebookTypes[] = {GgmlType::IQ4_NL,  GgmlType::IQ4_XS, GgmlType::MXFP4, GgmlType::IQ2_XXS, GgmlType::IQ2_XS,
                                   GgmlType::IQ2_S,   GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ1_S,   GgmlType::IQ1_M};

std::string lower_name(GgmlType type) {
    std::string name = gguf::type_name(uint32_t(type));
    for (char& ch : name) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return name;
}

// A weight of `type`: quantised from random values where pagoda has a quantiser (IQ4_*, MXFP4),
// else random codes with sane scales (tests/quant/random_codebook_blocks.h).
HostMatrix codebook_matrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
    if (type == GgmlType::IQ4_NL || type == GgmlType::IQ4_XS || type == GgmlType::MXFP4)
        return random_matrix(type, rows, cols, rng, "blk.0." + lower_name(type) + ".weight");
    HostMatrix m{type, rows, cols, "blk.0." + lower_name(type) + ".weight",
                 std::vector<uint8_t>(size_t(*gguf::row_size(type, cols) * uint64_t(rows)))};
    for (int64_t r = 0; r < rows; ++r)
        quant::testing::random_codebook_row(type, cols, rng, m.bytes.data() + size_t(r) * (m.bytes.size() / size_t(rows)));
    return m;
}

// The grouped layout's code * scale + offset per element is dequantize_row's value, bit for bit.
TEST(VulkanCodebookWeights, RepackedCodesEqualTheDequantisation) {
    std::mt19937 rng(46);
    for (GgmlType type : kCodebookTypes) {
        const int64_t rows = 3, cols = 512;
        const HostMatrix m = codebook_matrix(type, rows, cols, rng);
        ASSERT_NO_FATAL_FAILURE(expect_repack_equals_dequantization(m, lower_name(type)));
    }
}

TEST(VulkanCodebookWeights, LayoutPerType) {
    std::mt19937 rng(47);
    for (GgmlType type : kCodebookTypes) {
        const HostMatrix m = codebook_matrix(type, 2, 256, rng);
        EXPECT_EQ(vulkan::weight_format_name(vulkan::weight_format(m.source())), lower_name(type)) << "the file's own blocks";
        const vulkan::Repacked r = vulkan::repack({m.source()});
        EXPECT_EQ(r.data.size(), (m.bytes.size() + 3) / 4 * 4) << lower_name(type) << ": the file's bytes";
        const bool grid = type != GgmlType::IQ4_NL && type != GgmlType::IQ4_XS && type != GgmlType::MXFP4;
        EXPECT_EQ(!r.grid.empty(), grid) << lower_name(type) << ": its grid rides along";
    }
}

// Sets PAGODA_VULKAN_WEIGHTS for its lifetime.
struct WeightsLayoutEnv {
    explicit WeightsLayoutEnv(const char* value) { setenv("PAGODA_VULKAN_WEIGHTS", value, 1); }
    ~WeightsLayoutEnv() { unsetenv("PAGODA_VULKAN_WEIGHTS"); }
};

// Each codebook type's native variant: GEMV, GEMM and embed bitwise the grouped layout's.
TEST(VulkanCodebookWeights, NativeVariantsReadBitwiseWhatTheGroupedLayoutReads) {
    PAGODA_REQUIRE_VULKAN();
    Side s{make_backend("vulkan")};
    std::mt19937 rng(48);
    for (GgmlType type : kCodebookTypes) {
        const HostMatrix m = codebook_matrix(type, 37, 512, rng);
        std::shared_ptr<Weight> native, grouped;
        {
            WeightsLayoutEnv env("native");
            native = s->upload_weight({m.source()}, WeightUse::matmul);
        }
        {
            WeightsLayoutEnv env("grouped");
            grouped = s->upload_weight({m.source()}, WeightUse::matmul);
        }
        ASSERT_TRUE(vulkan::is_native(vulkan::weight(*native).format)) << lower_name(type);
        EXPECT_NE(s->describe_matmul(*native, 1).find("vulkan " + lower_name(type) + " gemv"), std::string::npos)
            << s->describe_matmul(*native, 1);
        for (int32_t n : {3, 40}) {
            s.reset();
            Step step = make_tables({n}, 16, rng);
            step.add_tokens(0, 0, n);
            for (int32_t t = 0; t < n; ++t) step.tokens[size_t(t)] = int32_t(rng() % 37u);
            s->begin_step(step.inputs());
            const Tensor x = s.input(n, 512, random_values(n * 512, rng, 1.0f));
            Tensor a = s.tensor(n, 37), b = s.tensor(n, 37);
            s->matmul(*native, x, std::span(&a, 1));
            s->matmul(*grouped, x, std::span(&b, 1));
            EXPECT_TRUE(bitwise(s.read(a), s.read(b))) << lower_name(type) << " matmul of " << n << " tokens";
            const Tensor ea = s.tensor(n, 512), eb = s.tensor(n, 512);
            s->embed(*native, ea);
            s->embed(*grouped, eb);
            EXPECT_TRUE(bitwise(s.read(ea), s.read(eb))) << lower_name(type) << " embed of " << n << " tokens";
        }
    }
}

// Every codebook type's matmul (GEMV: 1 and 5 tokens; GEMM: 40) and embedding against the reference.
TEST(VulkanCodebookWeights, MatmulAndEmbedAgreeWithTheReference) {
    PAGODA_REQUIRE_VULKAN();
    Side dev{make_backend("vulkan")}, ref{make_backend("reference")};
    std::mt19937 rng(49);
    for (GgmlType type : kCodebookTypes) {
        const int64_t rows = 29, cols = 512;
        const HostMatrix m = codebook_matrix(type, rows, cols, rng);
        auto wd = dev->upload_weight({m.source()}, WeightUse::both);
        auto wr = ref->upload_weight({m.source()}, WeightUse::both);
        for (int32_t n : {1, 5, 40}) {
            const std::vector<float> x = random_values(n * cols, rng, 1.0f);
            Step step = make_tables({n}, 16, rng);
            step.add_tokens(0, 0, n);
            for (int32_t t = 0; t < n; ++t) step.tokens[size_t(t)] = int32_t(rng() % uint32_t(rows));
            std::vector<float> got[2], want[2];
            for (Side* s : {&dev, &ref}) {
                s->reset();
                (*s)->begin_step(step.inputs());
                const Weight& w = s == &dev ? *wd : *wr;
                Tensor out = s->tensor(n, rows), emb = s->tensor(n, cols);
                (*s)->matmul(w, s->input(n, cols, x), std::span(&out, 1));
                (*s)->embed(w, emb);
                (s == &dev ? got : want)[0] = s->read(out);
                (s == &dev ? got : want)[1] = s->read(emb);
            }
            EXPECT_TRUE(close(got[0], want[0], 1e-5)) << lower_name(type) << " matmul of " << n << " tokens";
            EXPECT_TRUE(bitwise(got[1], want[1])) << lower_name(type) << " embed of " << n << " tokens";
        }
    }
}
#endif

}  // namespace
}  // namespace pagoda::backend
