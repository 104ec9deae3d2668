// The Vulkan MoE FFN routes on the device (vulkan_moe.h): every routing MoeRouting describes
// (softmax, sigmoid, softmax over the selected, score-correction bias, group-limited top-k,
// renormalisation on and off, routed scale, ties to the lower index) picks the experts route_token
// picks, checked through the whole op against the CPU backend's (which routes with route_token), and
// recording the op never waits on the device (no submission between its first and last command).
#include <gtest/gtest.h>

#include "backend/backend_test_util.h"
#include "backend/vulkan/vulkan_test_env.h"
#ifdef PAGODA_HAVE_VULKAN
#include "backend/vulkan/vk_context.h"
#endif

namespace pagoda::backend {
namespace {

#ifdef PAGODA_HAVE_VULKAN
using gguf::GgmlType;
using namespace testing;

constexpr int64_t kDim = 32, kFfn = 16, kExperts = 16;

struct Experts {
    std::vector<HostMatrix> gate, up, down;
    explicit Experts(std::mt19937& rng) {
        for (int64_t e = 0; e < kExperts; ++e) {
            gate.push_back(random_matrix(GgmlType::F32, kFfn, kDim, rng, "gate"));
            up.push_back(random_matrix(GgmlType::F32, kFfn, kDim, rng, "up"));
            down.push_back(random_matrix(GgmlType::F32, kDim, kFfn, rng, "down"));
        }
    }
};

struct Uploaded {
    std::vector<std::shared_ptr<Weight>> keep;
    MoeOp op;
};

Uploaded upload(Backend& b, const Experts& x, int32_t k, bool normalize, const MoeRouting& routing) {
    Uploaded u;
    u.op.n_used = k;
    u.op.normalize = normalize;
    u.op.routing = routing;
    for (int64_t e = 0; e < kExperts; ++e) {
        u.keep.push_back(b.upload_weight({x.gate[size_t(e)].source(), x.up[size_t(e)].source()}, WeightUse::matmul));
        u.op.gate_up.push_back(u.keep.back().get());
        u.keep.push_back(b.upload_weight({x.down[size_t(e)].source()}, WeightUse::matmul));
        u.op.down.push_back(u.keep.back().get());
    }
    return u;
}

std::vector<float> run(Side& s, const MoeOp& op, int64_t n, const std::vector<float>& x, const std::vector<float>& logits) {
    s.reset();
    const Tensor xt = s.input(n, kDim, x), lt = s.input(n, kExperts, logits);
    const Tensor out = s.tensor(n, kDim), ws = s.tensor(n, s->moe_workspace_cols(op));
    s->moe_ffn(op, xt, lt, out, ws);
    return s.read(out);
}

struct RoutingCase {
    const char* name;
    int32_t k;
    bool normalize;
    MoeRouting routing;
};

std::vector<RoutingCase> routing_cases(std::mt19937& rng) {
    std::vector<float> bias = random_values(kExperts, rng, 0.5f);
    return {
        {"softmax, renormalised", 2, true, {}},
        {"softmax, scaled 2.5", 4, false, {MoeScoring::softmax, 2.5f, 0, 0, {}}},
        {"softmax with a correction bias", 3, true, {MoeScoring::softmax, 1.0f, 0, 0, bias}},
        {"sigmoid, bias, 4 groups of which 2", 4, true, {MoeScoring::sigmoid, 2.5f, 4, 2, bias}},
        {"sigmoid, not renormalised", 2, false, {MoeScoring::sigmoid, 1.0f, 0, 0, {}}},
        {"softmax over the selected", 3, false, {MoeScoring::softmax_selected, 1.0f, 0, 0, {}}},
        {"softmax over the selected, 8 groups of which 3", 4, true, {MoeScoring::softmax_selected, 1.0f, 8, 3, {}}},
    };
}

TEST(VulkanMoeRouter, EveryRoutingPicksTheExpertsRouteTokenPicks) {
    PAGODA_REQUIRE_VULKAN();
    std::mt19937 rng(44);
    Side vk{make_backend("vulkan")}, cpu{make_backend("cpu")};
    const Experts experts(rng);
    const int64_t n = 37;
    const std::vector<float> x = random_values(n * kDim, rng, 1.0f);
    std::vector<float> logits = random_values(n * kExperts, rng, 3.0f);
    for (int64_t e = 0; e < kExperts; ++e) logits[size_t(e)] = 0.25f;  // token 0: all tied, the lowest indices win
    for (int64_t e = 0; e < kExperts; ++e) logits[size_t(kExperts + e)] = e % 3 == 0 ? 1.5f : -1.0f;  // token 1: ties of 1.5
    for (const RoutingCase& c : routing_cases(rng)) {
        const Uploaded on_vk = upload(*vk, experts, c.k, c.normalize, c.routing);
        const Uploaded on_cpu = upload(*cpu, experts, c.k, c.normalize, c.routing);
        const std::vector<float> got = run(vk, on_vk.op, n, x, logits), want = run(cpu, on_cpu.op, n, x, logits);
        // f32 routing and matmuls in another order: ~1e-6; one expert picked differently: O(1).
        EXPECT_TRUE(close(got, want, 2e-5)) << c.name;
        // Batch invariance: token 5 alone gives its row of the batch bit for bit.
        const std::vector<float> one = run(vk, on_vk.op, 1, std::vector<float>(x.begin() + 5 * kDim, x.begin() + 6 * kDim),
                                           std::vector<float>(logits.begin() + 5 * kExperts, logits.begin() + 6 * kExperts));
        EXPECT_EQ(0, std::memcmp(one.data(), got.data() + 5 * kDim, kDim * sizeof(float))) << c.name << ": token 5 alone";
    }
}

// Recording the op (routing, slots, gathers, every expert's GEMMs, the combine) submits nothing: the
// step's command buffer is recorded without a wait (after the first call, which uploads the
// correction bias), and reading the result is the one submission.
TEST(VulkanMoeRouter, RecordingTheOpNeverWaitsOnTheDevice) {
    PAGODA_REQUIRE_VULKAN();
    std::mt19937 rng(45);
    Side vk{make_backend("vulkan")};
    const Experts experts(rng);
    const RoutingCase c = routing_cases(rng)[3];
    const Uploaded u = upload(*vk, experts, c.k, c.normalize, c.routing);
    const int64_t n = 9;
    const std::vector<float> x = random_values(n * kDim, rng, 1.0f), logits = random_values(n * kExperts, rng, 3.0f);
    const std::vector<float> first = run(vk, u.op, n, x, logits);  // pipelines built, the bias uploaded
    vk.reset();
    const Tensor xt = vk.input(n, kDim, x), lt = vk.input(n, kExperts, logits);
    const Tensor out = vk.tensor(n, kDim), ws = vk.tensor(n, vk->moe_workspace_cols(u.op));
    const uint64_t before = vulkan::Stream::submissions();
    vk->moe_ffn(u.op, xt, lt, out, ws);
    vk->moe_ffn(u.op, out, lt, xt, ws);  // a second MoE layer in the same step
    EXPECT_EQ(vulkan::Stream::submissions(), before) << "moe_ffn waited on the device";
    const std::vector<float> second = vk.read(out);
    EXPECT_EQ(vulkan::Stream::submissions(), before + 1) << "the read is the step's one submission";
    EXPECT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * sizeof(float)));
}
#endif

}  // namespace
}  // namespace pagoda::backend
