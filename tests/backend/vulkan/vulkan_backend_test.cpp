// The Vulkan backend's own contract beyond the conformance suite: the weight repacking equals the
// file format's dequantisation bit for bit (host only, no device needed); what it refuses is named;
// validation errors fail; malformed step inputs are refused; `pagoda devices` lists the device
// with its limits.
#include <array>
#include <cstdio>
#include <gtest/gtest.h>

#include "backend/backend_test_util.h"
#include "backend/vulkan/vulkan_test_env.h"
#include "core/error.h"
#include "fixtures.h"
#include "model/devices.h"
#include "quant/dequantize.h"
#ifdef PAGODA_HAVE_VULKAN
#include "backend/vulkan/vk_context.h"
#include "backend/vulkan/repack_check.h"
#include "backend/vulkan/weight_repack.h"
#endif

namespace pagoda::backend {
namespace {

using gguf::GgmlType;
using namespace testing;

// `env` + the pagoda binary + args; its output (stdout and stderr) and exit status.
std::string run_binary(const std::string& args, int* status, const std::string& env = "") {
    FILE* pipe = popen((env + pagoda::test::pagoda_binary() + " " + args + " 2>&1").c_str(), "r");
    std::string out;
    if (!pipe) return "popen failed";
    std::array<char, 4096> buf;
    while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
    *status = pclose(pipe);
    return out;
}

#ifdef PAGODA_HAVE_VULKAN
// The grouped layout's code * scale + offset per element is dequantize_row's value (the native
// layouts read bitwise the same: vulkan_native_weights_test.cpp).
TEST(VulkanRepack, EveryBlockTypeEqualsItsDequantisation) {
    std::mt19937 rng(1);
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K,
                          GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
        const int64_t rows = 3, cols = 512;
        const HostMatrix m = random_matrix(type, rows, cols, rng);
        EXPECT_TRUE(vulkan::is_native(vulkan::weight_format(m.source()))) << "the file's layout by default";
        ASSERT_NO_FATAL_FAILURE(expect_repack_equals_dequantization(m, gguf::type_name(uint32_t(type))));
    }
}

TEST(VulkanRepack, RefusesTypesItCannotComputeNamingThem) {
    const std::vector<uint8_t> bytes(64);
    const MatrixSource source{GgmlType::I32, bytes.data(), 2, 8, "blk.0.odd.weight"};
    try {
        vulkan::weight_format(source);
        ADD_FAILURE() << "an I32 weight was accepted";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("blk.0.odd.weight"), std::string::npos) << what;
        EXPECT_NE(what.find("vulkan backend"), std::string::npos) << what;
        EXPECT_NE(what.find("i32"), std::string::npos) << what;
    }
}
#endif

// A malformed MoeOp is refused naming what is wrong (the op itself runs in tests/backend/moe_ffn_test.cpp).
TEST(VulkanBackend, MoeFfnRefusesMalformedOpsNamingThem) {
    PAGODA_REQUIRE_VULKAN();
    Side s{make_backend("vulkan")};
    std::mt19937 rng(2);
    Step step = make_tables({2}, 16, rng);
    step.add_tokens(0, 0, 2);
    s->begin_step(step.inputs());
    const Tensor x = s.tensor(2, 8), logits = s.tensor(2, 4), out = s.tensor(2, 8), work = s.tensor(2, 8);
    try {
        s->moe_ffn(MoeOp{}, x, logits, out, work);
        ADD_FAILURE() << "moe_ffn ran without experts";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("vulkan moe_ffn: gate|up and down per expert"), std::string::npos) << e.what();
    }
    const HostMatrix w = random_matrix(GgmlType::F32, 8, 8, rng);
    std::vector<std::shared_ptr<Weight>> keep;
    MoeOp op;
    op.n_used = 5;  // of 4 experts
    for (int e = 0; e < 4; ++e) {
        keep.push_back(s->upload_weight({w.source(), w.source()}, WeightUse::matmul));
        op.gate_up.push_back(keep.back().get());
        keep.push_back(s->upload_weight({w.source()}, WeightUse::matmul));
        op.down.push_back(keep.back().get());
    }
    EXPECT_THROW(s->moe_ffn(op, x, logits, out, s.tensor(2, s->moe_workspace_cols(op))), Error) << "5 of 4 experts";
    op.n_used = 2;
    EXPECT_THROW(s->moe_ffn(op, x, logits, out, work), Error) << "a workspace too narrow";
    // The fused ops it declares (run in conformance_fused_test.cpp and conformance_fused_lora_test.cpp);
    // it keeps no prepared matmul input (the CPU's own rewrite).
    for (OpKind op : {OpKind::add_rms_norm, OpKind::matmul_silu_mul, OpKind::qkv_rope_kv_write})
        EXPECT_TRUE(s->supports(op)) << op_name(op);
    EXPECT_TRUE(s->fuses_lora());
    const Weight* readers[] = {keep[0].get()};
    EXPECT_EQ(s->prepared_input_cols(8, readers), 0);
}

// A step whose M-RoPE positions are not kRopeAxes per token is refused naming the counts (the model
// layer checks batches first; this is the backend's own guard before it indexes them).
TEST(VulkanBackend, RefusesMalformedRotaryPositions) {
    PAGODA_REQUIRE_VULKAN();
    Side s{make_backend("vulkan")};
    std::mt19937 rng(3);
    Step step = make_tables({4}, 16, rng);
    step.add_tokens(0, 0, 4);
    const std::vector<int32_t> axes(11, 1);  // 3 per token for 4 tokens: 12
    StepInputs in = step.inputs();
    in.rope_positions = axes;
    try {
        s->begin_step(in);
        ADD_FAILURE() << "11 rotary positions for 4 tokens were taken";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "vulkan begin_step: 11 rotary positions for 4 tokens (3 each)");
    }
}

TEST(VulkanBackend, RunsUnderTheValidationLayerAndItsErrorsFail) {
    PAGODA_REQUIRE_VULKAN();
    auto b = make_backend("vulkan");
    EXPECT_NE(b->describe().find("validation layer on"), std::string::npos) << b->describe();
#ifdef PAGODA_HAVE_VULKAN
    // An error the layer reports surfaces at the next submission as a pagoda::Error.
    Side s{std::move(b)};
    const Tensor t = s.input(1, 4, {1, 2, 3, 4});
    vulkan::Context::get()->record_validation_error("VUID-test: a recorded error");
    EXPECT_NO_THROW(s->scale(t, 2.0f)) << "recording alone never submits";
    try {
        s.read(t);
        ADD_FAILURE() << "the recorded validation error was not reported";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("VUID-test"), std::string::npos) << e.what();
    }
#endif
}

TEST(VulkanDevices, ListsTheDeviceWithItsLimits) {
    PAGODA_REQUIRE_VULKAN();
    const model::DeviceReport report = model::compute_devices();
    ASSERT_FALSE(report.devices.empty());
    const auto& props = report.devices[0].properties;
    auto value = [&](const std::string& label) {
        for (const auto& [l, v] : props)
            if (l == label) return v;
        return std::string();
    };
    EXPECT_NE(value("subgroup size"), "");
    EXPECT_NE(value("subgroup size"), "0");
    EXPECT_NE(value("shared memory").find("KiB"), std::string::npos) << value("shared memory");
    EXPECT_EQ(value("usable by pagoda"), "yes");

    int status = -1;
    const std::string out = run_binary("devices", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("vulkan device 0: " + report.devices[0].name), std::string::npos) << out;
    EXPECT_NE(out.find("max storage buffer range:"), std::string::npos) << out;
}

#ifdef PAGODA_HAVE_VULKAN
// Where the loader finds no driver, the binary still runs: `devices` says why there is none and
// `--backend vulkan` fails naming what to install.
TEST(VulkanDevices, NoDriverIsNamedNotACrash) {
    const std::string model = test::fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    const std::string env = "env VK_ICD_FILENAMES=/nonexistent.json VK_DRIVER_FILES=/nonexistent.json ";
    int status = -1;
    std::string out = run_binary("devices", &status, env);
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("mesa-vulkan-drivers"), std::string::npos) << out;

    out = run_binary("run -m " + model + " --backend vulkan -p hi -n 2", &status, env);
    EXPECT_NE(status, 0) << out;
    EXPECT_NE(out.find("vulkan backend"), std::string::npos) << out;
    EXPECT_NE(out.find("mesa-vulkan-drivers"), std::string::npos) << out;
}
#endif

}  // namespace
}  // namespace pagoda::backend
