// LoRA adapters on whole models (issue 47): the adapted model equals the merged one (the base with
// W + s·B·A written by lora::merge_adapter, an independent path through plain weights) on the CPU
// and reference backends; the two backends agree; the GGUF and PEFT forms of one adapter load the
// same numbers and give the same output; a sequence's output is bitwise the same alone and batched
// with other adapters and base rows; the prefix cache never serves KV across adapters; and every
// malformed adapter is refused naming the file and the tensor.
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>
#include <gtest/gtest.h>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "lora/adapter.h"
#include "lora/merge.h"
#include "lora/random_adapter.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/lora_greedy.h"
#include "model/sequence_runner.h"

namespace pagoda::model {
namespace {

struct Fixture {
    std::string base, lora_gguf, lora_peft, lora2_gguf;
};

const Fixture& fixture() {
    static const Fixture f = [] {
        Fixture f;
        RandomModelSpec s;
        s.n_layers = 2; s.dim = 48; s.n_heads = 6; s.n_kv_heads = 2; s.ffn_dim = 72; s.vocab_size = 300; s.seed = 11;
        f.base = test::temp_path("lora-base.gguf");
        write_random_model(s, nullptr, f.base);
        auto base = gguf::File::open(f.base);
        f.lora_gguf = test::temp_path("lora-a.gguf");
        f.lora_peft = test::temp_path("lora-a-peft");
        lora::write_random_adapter(*base, {.rank = 8, .alpha = 16, .seed = 3}, f.lora_gguf, f.lora_peft);
        f.lora2_gguf = test::temp_path("lora-b.gguf");
        lora::write_random_adapter(*base, {.rank = 4, .alpha = 4, .seed = 4, .modules = {"attn_q", "attn_v", "ffn_down"}},
                                   f.lora2_gguf, "");
        return f;
    }();
    return f;
}

std::unique_ptr<StepModel> open(const std::string& path, const std::string& backend, bool lora,
                                lora::LoraStorage storage = lora::LoraStorage::exact) {
    return open_step_model(path, {.backend = backend, .threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                  .tokens_wanted = 256, .lora = lora, .lora_storage = storage});
}

using lora_test::greedy;
using lora_test::GreedyRun;
using lora_test::kPrompt;
using lora_test::max_rel_diff;

std::string merged_model(const std::string& adapter_path, float scale, const std::string& name) {
    auto base = gguf::File::open(fixture().base);
    const lora::Adapter a = lora::load_adapter(adapter_path, *base, "a", scale);
    const std::string out = test::temp_path(name);
    lora::merge_adapter(*base, a, scale).write(out);
    return out;
}

TEST(Lora, AdaptedModelEqualsMergedModelOnBothBackends) {
    const std::string merged = merged_model(fixture().lora_gguf, 0.8f, "lora-merged.gguf");
    for (const std::string backend : {"cpu", "reference"}) {
        auto model = open(fixture().base, backend, true);
        auto adapter = model->load_lora(fixture().lora_gguf, "a", 0.8f);
        const GreedyRun adapted = greedy(*model, {adapter, 0.8f});
        const GreedyRun base = greedy(*model, {});
        auto merged_model = open(merged, backend, false);
        const GreedyRun want = greedy(*merged_model, {});
        EXPECT_EQ(adapted.tokens, want.tokens) << backend;
        EXPECT_LT(max_rel_diff(adapted.logits, want.logits), backend == "cpu" ? 1e-4 : 1e-5) << backend;
        // The adapter matters: the base model's logits are far from the adapted ones.
        EXPECT_GT(max_rel_diff(base.logits, want.logits), 1e-2) << backend;
    }
}

TEST(Lora, CpuAgreesWithReference) {
    auto cpu = open(fixture().base, "cpu", true);
    auto ref = open(fixture().base, "reference", true);
    const GreedyRun got = greedy(*cpu, {cpu->load_lora(fixture().lora_gguf, "a", 1.0f), 1.0f});
    const GreedyRun want = greedy(*ref, {ref->load_lora(fixture().lora_gguf, "a", 1.0f), 1.0f});
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_LT(max_rel_diff(got.logits, want.logits), 1e-4);
}

TEST(Lora, GgufAndPeftFormsAreTheSameAdapter) {
    auto base = gguf::File::open(fixture().base);
    const lora::Adapter g = lora::load_adapter(fixture().lora_gguf, *base, "g", 1);
    const lora::Adapter p = lora::load_adapter(fixture().lora_peft, *base, "p", 1);
    ASSERT_EQ(g.pairs.size(), p.pairs.size());
    EXPECT_EQ(g.pairs.size(), 14u);  // 7 projections x 2 layers
    for (size_t i = 0; i < g.pairs.size(); ++i) {
        EXPECT_EQ(g.pairs[i].target, p.pairs[i].target);
        EXPECT_EQ(g.pairs[i].factor, p.pairs[i].factor) << g.pairs[i].target;
        EXPECT_EQ(g.pairs[i].a, p.pairs[i].a) << g.pairs[i].target;
        EXPECT_EQ(g.pairs[i].b, p.pairs[i].b) << g.pairs[i].target;
    }
    EXPECT_EQ(g.content_hash, p.content_hash);
    auto model = open(fixture().base, "cpu", true);
    const GreedyRun from_gguf = greedy(*model, {model->load_lora(fixture().lora_gguf, "g", 1), 1});
    const GreedyRun from_peft = greedy(*model, {model->load_lora(fixture().lora_peft, "p", 1), 1});
    EXPECT_EQ(from_gguf.tokens, from_peft.tokens);
    EXPECT_EQ(from_gguf.logits, from_peft.logits);
}

// Adapters stored as F16 or BF16 (the CPU then streams them in that type, B transposed: the
// numbers are exactly those) give the merged model's output, and the CPU agrees with the reference.
TEST(Lora, HalfPrecisionAdaptersEqualTheMergedModel) {
    auto base = gguf::File::open(fixture().base);
    for (const gguf::GgmlType type : {gguf::GgmlType::F16, gguf::GgmlType::BF16}) {
        const std::string name = type == gguf::GgmlType::F16 ? "lora-f16" : "lora-bf16";
        const std::string file = test::temp_path(name + ".gguf");
        lora::write_random_adapter(*base, {.rank = 8, .alpha = 16, .seed = 9, .type = type}, file, "");
        const std::string merged = merged_model(file, 0.8f, name + "-merged.gguf");
        auto cpu = open(fixture().base, "cpu", true);
        const GreedyRun adapted = greedy(*cpu, {cpu->load_lora(file, "h", 0.8f), 0.8f});
        auto merged_cpu = open(merged, "cpu", false);
        const GreedyRun want = greedy(*merged_cpu, {});
        EXPECT_EQ(adapted.tokens, want.tokens) << name;
        EXPECT_LT(max_rel_diff(adapted.logits, want.logits), 1e-4) << name;
        auto ref = open(fixture().base, "reference", true);
        const GreedyRun oracle = greedy(*ref, {ref->load_lora(file, "h", 0.8f), 0.8f});
        EXPECT_EQ(adapted.tokens, oracle.tokens) << name;
        EXPECT_LT(max_rel_diff(adapted.logits, oracle.logits), 1e-4) << name;
        EXPECT_GT(max_rel_diff(greedy(*cpu, {}).logits, want.logits), 1e-2) << name << ": the adapter changes nothing";
    }
}

TEST(Lora, RsLoraScalesByTheSquareRootOfTheRank) {
    auto base = gguf::File::open(fixture().base);
    const std::string dir = test::temp_path("lora-rs-peft"), file = test::temp_path("lora-rs.gguf");
    lora::write_random_adapter(*base, {.rank = 16, .alpha = 8, .rslora = true, .seed = 5}, file, dir);
    const lora::Adapter p = lora::load_adapter(dir, *base, "p", 1);
    const lora::Adapter g = lora::load_adapter(file, *base, "g", 1);
    EXPECT_FLOAT_EQ(p.pairs[0].factor, 8.0f / 4.0f);
    EXPECT_FLOAT_EQ(g.pairs[0].factor, p.pairs[0].factor);
}

// An f32 adapter stored rounded (--lora-dtype bf16 / f16: half the bytes each step) stays within
// the 16-bit type's rounding of the reference backend's exact adapter, with the same tokens; the
// rounding acts (the logits differ from the exact storage's); other backends refuse it.
TEST(Lora, RoundedStorageStaysNearTheReference) {
    auto ref = open(fixture().base, "reference", true);
    const GreedyRun want = greedy(*ref, {ref->load_lora(fixture().lora_gguf, "a", 1.0f), 1.0f});
    auto exact = open(fixture().base, "cpu", true);
    const GreedyRun exact_run = greedy(*exact, {exact->load_lora(fixture().lora_gguf, "a", 1.0f), 1.0f});
    for (const auto& [storage, tolerance] : {std::pair{lora::LoraStorage::bf16, 2e-2}, std::pair{lora::LoraStorage::f16, 2e-3}}) {
        const char* name = storage == lora::LoraStorage::bf16 ? "bf16" : "f16";
        auto cpu = open(fixture().base, "cpu", true, storage);
        const GreedyRun got = greedy(*cpu, {cpu->load_lora(fixture().lora_gguf, "a", 1.0f), 1.0f});
        EXPECT_EQ(got.tokens, want.tokens) << name;
        EXPECT_LT(max_rel_diff(got.logits, want.logits), tolerance) << name;
        EXPECT_NE(got.logits, exact_run.logits) << name << ": nothing was rounded";
    }
    EXPECT_THROW(lora::parse_lora_storage("fp8", "--lora-dtype"), Error);
    // The reference backend reads adapters as f32: a rounded storage there is refused, not ignored.
    EXPECT_THROW(open(fixture().base, "reference", true, lora::LoraStorage::bf16), Error);
}

// One step mixing adapters and base rows gives each sequence bitwise what it gets alone, with the
// adapters stored exactly and rounded to bf16.
TEST(Lora, MixedBatchIsBatchInvariant) {
    for (const lora::LoraStorage storage : {lora::LoraStorage::exact, lora::LoraStorage::bf16}) {
        SCOPED_TRACE(storage == lora::LoraStorage::exact ? "exact" : "bf16");
        auto model = open(fixture().base, "cpu", true, storage);
        auto a = model->load_lora(fixture().lora_gguf, "a", 1);
        auto b = model->load_lora(fixture().lora2_gguf, "b", 1);
        const std::vector<lora::AdapterRef> refs = {{a, 1.0f}, {}, {b, 1.0f}, {a, 0.5f}};
        const int32_t block = model->info().block_size;
        // Alone: each sequence in its own step, on fresh blocks.
        auto run_step = [&](const std::vector<size_t>& which) {
            Batch batch;
            for (size_t k = 0; k < which.size(); ++k) {
                const size_t i = which[k];
                std::vector<int32_t> table;
                const int32_t first = int32_t(i) * 4;
                for (int32_t j = 0; j < 3; ++j) table.push_back(first + j);
                const int32_t s = batch.add_sequence(table, refs[i]);
                for (int32_t p = 0; p < int32_t(kPrompt.size()); ++p)
                    batch.add(kPrompt[size_t(p)] + int32_t(i % 2), p, s, int64_t(table[size_t(p / block)]) * block + p % block,
                              true);
            }
            return model->forward(batch);
        };
        const std::vector<float> together = run_step({0, 1, 2, 3});
        const size_t per = kPrompt.size() * size_t(model->info().vocab_size);
        for (size_t i = 0; i < refs.size(); ++i) {
            const std::vector<float> alone = run_step({i});
            const std::vector<float> in_batch(together.begin() + long(i * per), together.begin() + long((i + 1) * per));
            EXPECT_EQ(alone, in_batch) << "sequence " << i;
        }
        // Sequences 0 and 2 (adapters a and b) and 1 and 3 (base and a at 0.5) read the same tokens: the
        // adapters and the scale act.
        auto part = [&](size_t i) { return std::vector<float>(together.begin() + long(i * per), together.begin() + long((i + 1) * per)); };
        EXPECT_NE(part(0), part(2));
        EXPECT_NE(part(1), part(3));
    }
}

TEST(Lora, PrefixCacheIsKeyedByAdapter) {
    auto model = open(fixture().base, "cpu", true);
    auto a = model->load_lora(fixture().lora_gguf, "a", 1);
    auto b = model->load_lora(fixture().lora2_gguf, "b", 1);
    SequenceRunner runner(*model, true);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 20; ++i) prompt.push_back(3 + i);
    runner.set_lora(0, {a, 1});
    const std::vector<float> first = runner.prefill(0, prompt);
    EXPECT_EQ(runner.last_cached_tokens(), 0);
    runner.set_lora(1, {b, 1});
    runner.prefill(1, prompt);
    EXPECT_EQ(runner.last_cached_tokens(), 0) << "adapter b reused adapter a's KV";
    runner.prefill(2, prompt);  // the base model
    EXPECT_EQ(runner.last_cached_tokens(), 0) << "the base model reused an adapter's KV";
    runner.set_lora(3, {a, 0.5f});
    runner.prefill(3, prompt);
    EXPECT_EQ(runner.last_cached_tokens(), 0) << "another scale reused adapter a's KV";
    runner.set_lora(4, {a, 1});
    const std::vector<float> again = runner.prefill(4, prompt);
    EXPECT_EQ(runner.last_cached_tokens(), 16) << "the same adapter and scale should hit its 4 full blocks";
    EXPECT_EQ(first, again);
}

TEST(Lora, ModelWithoutLoraRefusesAdapters) {
    auto model = open(fixture().base, "cpu", false);
    EXPECT_FALSE(model->supports_lora());
    try {
        model->load_lora(fixture().lora_gguf, "a", 1);
        ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("without LoRA"), std::string::npos) << e.what();
    }
}

// Writes a copy of the adapter file with `edit` applied to its tensor list and metadata.
std::string edited(const std::string& name, const std::function<void(const gguf::File&, gguf::Writer&)>& edit,
                   const std::set<std::string>& drop = {}) {
    auto in = gguf::File::open(fixture().lora_gguf);
    gguf::Writer w;
    for (const auto& [key, value] : in->metadata())
        if (!drop.count(key)) w.set(key, value);
    for (const auto& t : in->tensors())
        if (!drop.count(t.name)) w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    if (edit) edit(*in, w);
    const std::string path = test::temp_path(name);
    w.write(path);
    return path;
}

void expect_refused(const std::string& path, const std::vector<std::string>& words) {
    auto base = gguf::File::open(fixture().base);
    try {
        lora::load_adapter(path, *base, "x", 1);
        ADD_FAILURE() << path << " was accepted";
    } catch (const Error& e) {
        for (const auto& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
}

TEST(LoraErrors, MalformedGgufAdaptersAreNamed) {
    expect_refused(edited("e-missing-b.gguf", {}, {"blk.1.attn_q.weight.lora_b"}),
                   {"e-missing-b.gguf", "blk.1.attn_q.weight.lora_a has no blk.1.attn_q.weight.lora_b"});
    expect_refused(edited("e-type.gguf", [](const gguf::File&, gguf::Writer& w) {
                       w.set("general.type", gguf::Value::string("model"));
                   }),
                   {"e-type.gguf", "general.type"});
    expect_refused(edited("e-arch.gguf", [](const gguf::File&, gguf::Writer& w) {
                       w.set("general.architecture", gguf::Value::string("qwen2"));
                   }),
                   {"e-arch.gguf", "qwen2"});
    static std::vector<float> zeros(48 * 8 + 300 * 8, 0.0f);
    expect_refused(edited("e-target.gguf", [](const gguf::File&, gguf::Writer& w) {
                       w.add_tensor("blk.7.attn_q.weight.lora_a", gguf::GgmlType::F32, {48, 8}, zeros.data(), 48 * 8 * 4);
                       w.add_tensor("blk.7.attn_q.weight.lora_b", gguf::GgmlType::F32, {8, 48}, zeros.data(), 48 * 8 * 4);
                   }),
                   {"e-target.gguf", "blk.7.attn_q.weight", "does not have"});
    expect_refused(edited("e-shape.gguf", [](const gguf::File&, gguf::Writer& w) {
                       w.add_tensor("blk.0.attn_k.weight.lora_a", gguf::GgmlType::F32, {48, 8}, zeros.data(), 48 * 8 * 4);
                       w.add_tensor("blk.0.attn_k.weight.lora_b", gguf::GgmlType::F32, {8, 40}, zeros.data(), 40 * 8 * 4);
                   }, {"blk.0.attn_k.weight.lora_a", "blk.0.attn_k.weight.lora_b"}),
                   {"e-shape.gguf", "blk.0.attn_k.weight", "40 x 48"});
    expect_refused(edited("e-rank.gguf", [](const gguf::File&, gguf::Writer& w) {
                       w.add_tensor("blk.0.attn_k.weight.lora_a", gguf::GgmlType::F32, {48, 8}, zeros.data(), 48 * 8 * 4);
                       w.add_tensor("blk.0.attn_k.weight.lora_b", gguf::GgmlType::F32, {4, 16}, zeros.data(), 16 * 4 * 4);
                   }, {"blk.0.attn_k.weight.lora_a", "blk.0.attn_k.weight.lora_b"}),
                   {"e-rank.gguf", "blk.0.attn_k.weight", "ranks differ"});
    expect_refused(edited("e-f64.gguf", [](const gguf::File&, gguf::Writer& w) {
                       static std::vector<uint8_t> f64(48 * 8 * 8);
                       w.add_tensor("blk.0.attn_k.weight.lora_a", gguf::GgmlType::F64, {48, 8}, f64.data(), f64.size());
                   }, {"blk.0.attn_k.weight.lora_a"}),
                   {"e-f64.gguf", "blk.0.attn_k.weight.lora_a", "F32, F16 or BF16"});
    expect_refused(test::temp_path("no-such-adapter.gguf"), {"no-such-adapter.gguf", "does not exist"});
}

TEST(LoraErrors, MalformedPeftConfigsAreNamed) {
    auto write_config = [](const std::string& name, const std::string& json) {
        const std::string dir = test::temp_path(name);
        std::filesystem::create_directories(dir);
        std::filesystem::copy_file(fixture().lora_peft + "/adapter_model.safetensors", dir + "/adapter_model.safetensors",
                                   std::filesystem::copy_options::overwrite_existing);
        std::FILE* f = std::fopen((dir + "/adapter_config.json").c_str(), "wb");
        std::fwrite(json.data(), 1, json.size(), f);
        std::fclose(f);
        return dir;
    };
    const std::string ok = R"("peft_type": "LORA", "lora_alpha": 16, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])";
    expect_refused(write_config("p-fan", "{" + ok + R"(, "r": 8, "fan_in_fan_out": true})"), {"adapter_config.json", "fan_in_fan_out"});
    expect_refused(write_config("p-save", "{" + ok + R"(, "r": 8, "modules_to_save": ["lm_head"]})"), {"modules_to_save"});
    expect_refused(write_config("p-rank", "{" + ok + R"(, "r": 4})"), {"adapter_model.safetensors", "rank 8 differs from the config's r = 4"});
    expect_refused(write_config("p-r-type", "{" + ok + R"(, "r": "eight"})"), {"adapter_config.json", "'r' must be an integer"});
    expect_refused(write_config("p-targets", R"({"lora_alpha": 16, "r": 8, "target_modules": ["q_proj"]})"),
                   {"adapter_model.safetensors", "is not among the config's target_modules"});
    expect_refused(write_config("p-json", "{"), {"adapter_config.json", "not valid JSON"});
}

}  // namespace
}  // namespace pagoda::model
