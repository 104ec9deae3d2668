// The CPU backend's forward pass against the reference backend (double-precision loops, the oracle)
// end to end, on random-weight models of every architecture the builders cover (llama, qwen2, qwen3,
// gemma2, gemma3, phi3) with GQA, both RoPE styles, QKV bias, tied and untied heads, sliding windows,
// soft caps, LongRoPE and llama3 RoPE scaling, each float weight type, Q8_0, IQ4_NL, IQ4_XS and MXFP4, fused and unfused; prompt processed as one batch and then token by token must both match.
#include <cmath>
#include <filesystem>
#include <tuple>
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "backend/cpu/amx_test_util.h"
#include "backend/cpu/matmul_test_util.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/sequence_runner.h"
#include "model/random_model.h"
#include "quant/quantize_model.h"

namespace pagoda::model {
namespace {

struct Case {
    std::string name;
    RandomModelSpec spec;
    double tolerance;  // max |engine - reference| relative to the largest |reference logit|
    // F16 / BF16 weights: f32_fma is exact up to f32 sums; bf16_dot (where the CPU has it) rounds the
    // activations (and F16 weights) to bf16, 8 significant bits, so its cases get a looser tolerance.
    backend::cpu::FloatMethod method = backend::cpu::FloatMethod::f32_fma;
    bool amx_emulated = false;  // amx_bf16 on the emulated tiles (any AVX-512 host)
    bool fusion = true;
    std::string quantize;  // a `pagoda quantize` target applied to the written model ("" = none)
};

std::vector<Case> cases() {
    std::vector<Case> out;
    RandomModelSpec base;
    base.n_layers = 2; base.dim = 48; base.n_heads = 6; base.n_kv_heads = 2; base.ffn_dim = 72; base.vocab_size = 300;
    {
        Case c{"llama_gqa3_untied_f32", base, 1e-5};
        out.push_back(c);
    }
    {
        Case c{"llama_mha_tied_f32", base, 1e-5};
        c.spec.n_kv_heads = 6; c.spec.tied_output = true; c.spec.seed = 2;
        out.push_back(c);
    }
    {
        Case c{"qwen2_bias_neox_f32", base, 1e-5};
        c.spec.arch = "qwen2"; c.spec.seed = 3; c.spec.rope_theta = 1e6f;
        out.push_back(c);
    }
    {
        Case c{"qwen3_qknorm_neox_f32", base, 1e-5};
        c.spec.arch = "qwen3"; c.spec.seed = 6; c.spec.head_dim = 16; c.spec.rope_theta = 1e6f;
        out.push_back(c);
    }
    {
        Case c{"llama_f16", base, 1e-4};
        c.spec.type = gguf::GgmlType::F16; c.spec.seed = 4;
        out.push_back(c);
    }
    {
        Case c{"qwen2_bf16_headdim16", base, 1e-4};
        c.spec.arch = "qwen2"; c.spec.type = gguf::GgmlType::BF16; c.spec.head_dim = 16; c.spec.seed = 5;
        out.push_back(c);
    }
    // The bf16 path: every product carries up to ~2^-8 relative rounding (activation and F16 weight
    // each rounded once to bf16), i.e. ~4e-3 of sum |w x| per matmul before cancellation; through two
    // layers the logits stay within 2e-2 of the largest logit (measured: 3.6e-3 F16, 3.4e-3 BF16).
    {
        Case c{"llama_f16_bf16dot", base, 2e-2};
        c.spec.type = gguf::GgmlType::F16; c.spec.seed = 4; c.method = backend::cpu::FloatMethod::bf16_dot;
        out.push_back(c);
    }
    {
        Case c{"qwen2_bf16_headdim16_bf16dot", base, 2e-2};
        c.spec.arch = "qwen2"; c.spec.type = gguf::GgmlType::BF16; c.spec.head_dim = 16; c.spec.seed = 5;
        c.method = backend::cpu::FloatMethod::bf16_dot;
        out.push_back(c);
    }
    // The AMX bf16 tiles (emulated here; the same operands as bf16_dot, summed in another order):
    // the same bound.
    {
        Case c{"llama_f16_amxbf16", base, 2e-2};
        c.spec.type = gguf::GgmlType::F16; c.spec.seed = 4; c.method = backend::cpu::FloatMethod::amx_bf16;
        c.amx_emulated = true;
        out.push_back(c);
    }
    {
        Case c{"qwen2_bf16_headdim16_amxbf16", base, 2e-2};
        c.spec.arch = "qwen2"; c.spec.type = gguf::GgmlType::BF16; c.spec.head_dim = 16; c.spec.seed = 5;
        c.method = backend::cpu::FloatMethod::amx_bf16;
        c.amx_emulated = true;
        out.push_back(c);
    }
    // The dense architectures beyond the llama family, with windows small enough that 19 tokens
    // cross them and soft caps small enough to bite: gemma2 (alternating sliding/global layers,
    // attention and final soft caps, post-norms, sqrt(dim) embedding scale, GELU), gemma3 (Q/K
    // norms, a local RoPE base on the sliding layers, layer 1 global by the period 2), phi3 (fused
    // QKV and gate|up, LongRoPE long factors and attention factor, every layer sliding), and llama
    // with Llama 3.1 RoPE scaling (rope_freqs.weight).
    RandomModelSpec gemma = base;
    gemma.arch = "gemma2"; gemma.head_dim = 16; gemma.sliding_window = 5; gemma.attn_softcap = 1.5f;
    gemma.final_softcap = 2.0f; gemma.seed = 11;
    for (auto [type, tol, suffix] : {std::tuple{gguf::GgmlType::F32, 1e-5, "f32"}, std::tuple{gguf::GgmlType::F16, 1e-4, "f16"}}) {
        Case g{std::string("gemma2_window_softcap_") + suffix, gemma, tol};
        g.spec.type = type;
        out.push_back(g);
        Case g3{std::string("gemma3_qknorm_local_rope_") + suffix, gemma, tol};
        g3.spec.arch = "gemma3"; g3.spec.swa_period = 2; g3.spec.rope_theta = 1e6f; g3.spec.type = type; g3.spec.seed = 12;
        out.push_back(g3);
        Case ph{std::string("phi3_fused_longrope_window_") + suffix, base, tol};
        ph.spec.arch = "phi3"; ph.spec.sliding_window = 6; ph.spec.type = type; ph.spec.seed = 13;
        out.push_back(ph);
        Case l3{std::string("llama_rope_llama3_") + suffix, base, tol};
        l3.spec.rope_scaling = "llama3"; l3.spec.rope_theta = 5e5f; l3.spec.context_length = 64; l3.spec.type = type;
        l3.spec.seed = 14;
        out.push_back(l3);
    }
    // A quantised type (Q8_0 through `pagoda quantize`'s driver). The CPU's int8 path rounds the
    // activations to int8 per 32 values (~0.4% each) and Gemma's post-norms (weights 8 in these
    // random models) amplify that: measured worst 3.5e-2 of the largest logit (gemma3), 2e-2 phi3.
    for (const char* arch : {"gemma2", "gemma3", "phi3"}) {
        Case q{std::string(arch) + "_q8_0", gemma, 5e-2};
        q.spec.arch = arch; q.spec.dim = 64; q.spec.ffn_dim = 96; q.spec.swa_period = 2; q.spec.seed = 15;
        q.spec.attn_softcap = 50.0f; q.spec.final_softcap = 30.0f;  // Gemma 2's own caps: the scale stays the logits'

        if (q.spec.arch == "phi3") q.spec.sliding_window = 6;
        q.quantize = "q8_0";
        out.push_back(q);
    }
    // The codebook types through `pagoda quantize`'s driver (dim 256: IQ4_XS's super-block fits the
    // rows; the int8 path's activation rounding as for Q8_0).
    for (const char* target : {"iq4_nl", "iq4_xs", "mxfp4"}) {
        Case q{std::string("llama_") + target, base, 5e-2};
        q.spec.dim = 256; q.spec.n_heads = 4; q.spec.n_kv_heads = 2; q.spec.ffn_dim = 512; q.spec.seed = 21;
        q.quantize = target;
        out.push_back(q);
    }
    // The unfused graph of each case too.
    const size_t fused = out.size();
    for (size_t i = 0; i < fused; ++i) {
        Case c = out[i];
        c.name += "_unfused";
        c.fusion = false;
        out.push_back(c);
    }
    return out;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ReferenceModel : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceModel, ForwardMatchesNaiveReference) {
    const Case& c = GetParam();
    backend::cpu::testing::KernelConfigGuard guard;  // packing (at load) follows the float method
    backend::cpu::testing::AmxGuard amx;
    if (c.amx_emulated) {
        if (active_isa() != Isa::avx512) GTEST_SKIP() << "the AMX bf16 kernel needs the avx512 path (PAGODA_ISA or the CPU chose another)";
        set_amx_enabled(true);
        backend::cpu::set_amx_emulation(true);
    }
    backend::cpu::set_float_method(c.method);
    const uint64_t tiles_before = backend::cpu::amx_bf16_dispatch_count();
    const std::string path = test::temp_path(c.name + ".gguf");
    write_random_model(c.spec, nullptr, path);
    if (!c.quantize.empty()) {
        ThreadPool pool(2);
        quant::quantize_model({.input = path, .output = path + ".q", .target = c.quantize}, pool);
        std::filesystem::rename(path + ".q", path);
    }
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(path));
    // F32 KV: this test checks the forward pass; KV rounding is covered by the attention tests.
    // Block size 4 so tables have several blocks.
    auto model = open_step_model(file, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                        .tokens_wanted = 64, .fusion = GetParam().fusion});
    const int64_t vocab = model->info().vocab_size;

    std::vector<int32_t> tokens;
    for (int i = 0; i < 19; ++i) tokens.push_back((i * 37 + 11) % int32_t(vocab));
    std::vector<std::vector<double>> expected;
    {
        auto reference = open_step_model(file, {.backend = "reference", .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                                .tokens_wanted = 64});
        SequenceRunner runner(*reference, false);
        const auto logits = runner.prefill(0, tokens, 64, true);
        for (size_t p = 0; p < tokens.size(); ++p)
            expected.emplace_back(logits.begin() + long(p * size_t(vocab)), logits.begin() + long((p + 1) * size_t(vocab)));
    }

    auto check = [&](const float* row, size_t pos) {
        double scale = 0;
        for (double v : expected[pos]) scale = std::max(scale, std::abs(v));
        for (int64_t i = 0; i < vocab; ++i)
            ASSERT_NEAR(row[i], expected[pos][size_t(i)], c.tolerance * scale) << "position " << pos << " logit " << i;
    };

    // Whole sequence as one batch (prefill).
    SequenceRunner runner(*model, false);
    std::vector<int32_t> ids(tokens.begin(), tokens.end());
    auto logits = runner.prefill(0, ids, 64, true);
    for (size_t p = 0; p < tokens.size(); ++p) check(logits.data() + p * vocab, p);

    // A prefix chunk then one token at a time, in another sequence.
    logits = runner.prefill(1, std::span<const int32_t>(ids.data(), 7));
    check(logits.data(), 6);
    for (size_t p = 7; p < tokens.size(); ++p) {
        logits = runner.decode(1, ids[p]);
        check(logits.data(), p);
    }
    if (c.amx_emulated) { EXPECT_GT(backend::cpu::amx_bf16_dispatch_count(), tiles_before) << "the AMX bf16 tiles were not used"; }
}

INSTANTIATE_TEST_SUITE_P(RandomModels, ReferenceModel, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(ModelErrors, RejectsOutOfRangeInput) {
    RandomModelSpec spec;
    const std::string path = test::temp_path("errors.gguf");
    write_random_model(spec, nullptr, path);
    auto model = open_step_model(path, {.threads = 1, .kv = {.block_size = 4}, .tokens_wanted = 8});  // 2 blocks
    Batch batch;
    int32_t s = batch.add_sequence({0});
    batch.add(int32_t(model->info().vocab_size), 0, s, 0, true);  // token outside the vocabulary
    EXPECT_THROW(model->forward(batch), Error);
    batch.clear();
    s = batch.add_sequence({0});
    batch.add(1, 4, s, 0, true);  // position beyond the block table
    EXPECT_THROW(model->forward(batch), Error);
    batch.clear();
    s = batch.add_sequence({0});
    batch.add(1, 0, s + 1, 0, true);  // no such sequence
    EXPECT_THROW(model->forward(batch), Error);
    batch.clear();
    s = batch.add_sequence({5});  // block outside the pool
    batch.add(1, 0, s, 0, true);
    EXPECT_THROW(model->forward(batch), Error);
    batch.clear();
    s = batch.add_sequence({1});
    batch.add(1, 0, s, 8, true);  // slot outside the pool
    EXPECT_THROW(model->forward(batch), Error);
}

}  // namespace
}  // namespace pagoda::model
