// Free device memory (vk_context.h): the Vulkan backend's memory_bytes(), what a fractional
// --kv-memory is a fraction of, is the free memory of its largest device-local heap now: budget less
// usage where the device has VK_EXT_memory_budget, else the heap less this process's allocations
// (lavapipe has no such extension, so CI runs the fallback; PAGODA_VULKAN_MEMORY_BUDGET=0 forces it
// on a GPU that has it). `pagoda devices` prints the budget and usage, or says they are not reported.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <gtest/gtest.h>

#include "backend/backend_test_util.h"
#include "backend/vulkan/vulkan_test_env.h"
#include "fixtures.h"
#include "model/kv_options.h"
#ifdef PAGODA_HAVE_VULKAN
#include "backend/vulkan/vk_context.h"
#include "backend/vulkan/vulkan_handles.h"
#endif

namespace pagoda::backend {
namespace {

#ifdef PAGODA_HAVE_VULKAN
using gguf::GgmlType;
using namespace testing;

constexpr uint64_t kMiB = uint64_t(1) << 20;

struct BudgetEnv {
    explicit BudgetEnv(const char* value) {
        if (value) setenv("PAGODA_VULKAN_MEMORY_BUDGET", value, 1);
        else unsetenv("PAGODA_VULKAN_MEMORY_BUDGET");
    }
    ~BudgetEnv() { unsetenv("PAGODA_VULKAN_MEMORY_BUDGET"); }
};

// The fallback: the heap's size less what this process holds of it, to the byte; a 16 MiB weight
// takes its allocation off, and freeing it gives it back.
TEST(VulkanMemory, FreeMemoryWithoutTheBudgetExtensionIsTheHeapLessOurAllocations) {
    PAGODA_REQUIRE_VULKAN();
    BudgetEnv env("0");
    auto ctx = vulkan::Context::get();
    Side s{make_backend("vulkan")};
    ASSERT_FALSE(ctx->uses_memory_budget());
    const uint32_t heap = ctx->largest_device_local_heap();
    const auto& heaps = ctx->info.device_local_heaps;
    const uint64_t heap_size = *std::max_element(heaps.begin(), heaps.end());
    const uint64_t before = s->memory_bytes();
    EXPECT_EQ(before, heap_size - ctx->allocated_bytes(heap));
    EXPECT_GT(ctx->allocated_bytes(heap), 0u) << "the arena and staging buffers are counted";
    std::mt19937 rng(1);
    const HostMatrix m = random_matrix(GgmlType::F32, 1024, 4096, rng);
    auto w = s->upload_weight({m.source()}, WeightUse::matmul);
    const uint64_t after = s->memory_bytes(), weight_bytes = vulkan::weight(*w).data.allocated;
    EXPECT_GE(weight_bytes, 16 * kMiB);
    EXPECT_LT(weight_bytes, 17 * kMiB);
    EXPECT_GE(before - after, weight_bytes) << "the weight (and the staging buffer it grew)";
    EXPECT_EQ(after, heap_size - ctx->allocated_bytes(heap));
    w.reset();
    EXPECT_EQ(s->memory_bytes(), after + weight_bytes) << "a freed weight's memory is free again";
    // A fractional --kv-memory is that fraction of it.
    const uint64_t now = s->memory_bytes();
    EXPECT_EQ(model::parse_memory_budget("50%", "--kv-memory", now), uint64_t(0.5 * double(now)));
}

// With VK_EXT_memory_budget (GPUs; not lavapipe): budget less usage, at most the heap, and a 16 MiB
// allocation is seen in the usage.
TEST(VulkanMemory, FreeMemoryWithTheBudgetExtensionIsBudgetLessUsage) {
    PAGODA_REQUIRE_VULKAN();
    BudgetEnv env(nullptr);
    auto ctx = vulkan::Context::get();
    if (!ctx->info.memory_budget) GTEST_SKIP() << "Vulkan device lacks VK_EXT_memory_budget (" << ctx->info.name << ")";
    Side s{make_backend("vulkan")};
    ASSERT_TRUE(ctx->uses_memory_budget());
    const auto& heaps = ctx->info.device_local_heaps;
    const uint64_t heap_size = *std::max_element(heaps.begin(), heaps.end());
    const uint64_t before = s->memory_bytes();
    EXPECT_GT(before, 0u);
    EXPECT_LE(before, heap_size);
    std::mt19937 rng(1);
    const HostMatrix m = random_matrix(GgmlType::F32, 1024, 4096, rng);
    auto w = s->upload_weight({m.source()}, WeightUse::matmul);
    EXPECT_LE(s->memory_bytes() + 16 * kMiB, before + 4 * kMiB) << "the weight's 16 MiB show in the usage";
}

std::string run_binary(const std::string& args, int* status) {
    FILE* pipe = popen((pagoda::test::pagoda_binary() + " " + args + " 2>&1").c_str(), "r");
    std::string out;
    if (!pipe) return "popen failed";
    std::array<char, 4096> buf;
    while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
    *status = pclose(pipe);
    return out;
}

TEST(VulkanMemory, DevicesPrintsTheBudgetAndUsageOrWhyNot) {
    PAGODA_REQUIRE_VULKAN();
    int status = -1;
    const std::string out = run_binary("devices", &status);
    EXPECT_EQ(status, 0) << out;
    const auto at = out.find("device-local budget / usage:");
    ASSERT_NE(at, std::string::npos) << out;
    const std::string line = out.substr(at, out.find('\n', at) - at);
    if (vulkan::Context::get()->info.memory_budget) EXPECT_NE(line.find("(VK_EXT_memory_budget)"), std::string::npos) << line;
    else EXPECT_NE(line.find("not reported (no VK_EXT_memory_budget)"), std::string::npos) << line;
}
#endif

}  // namespace
}  // namespace pagoda::backend
