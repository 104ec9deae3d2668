// The architecture descriptions (arch/arch_description.h) against everything that reads them: every
// description has a builder and a gen-model writer (and every builder a description); the facts the
// config reader derives equal the description's; gen-model's files hold exactly the manifest's tensors
// (every name listed, every required one present in every layer of its kind) and load through the
// builder. The facts are also checked against the per-architecture lists the code held before the
// table (written out here), so the table cannot drift from them unnoticed.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <gtest/gtest.h>
#include <set>
#include <string>
#include <vector>

#include "arch/arch_description.h"
#include "core/checksum.h"
#include "fixtures.h"
#include "gemma4_test_spec.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::model {
namespace {

using arch::ArchDescription;
using arch::Has;
using arch::Presence;

const ArchDescription& describe(const std::string& name) {
    const ArchDescription* d = arch::find_architecture(name);
    if (!d) throw std::runtime_error("no description of " + name);
    return *d;
}

TEST(ArchDescriptions, EveryDescriptionHasABuilderAndAWriterAndEveryBuilderADescription) {
    const std::vector<std::string> names = arch::architecture_names();
    EXPECT_EQ(names.size(), std::set<std::string>(names.begin(), names.end()).size()) << "a name is described twice";
    EXPECT_EQ(supported_architectures(), names);
    EXPECT_EQ(random_model_architectures(), names);
    for (const std::string& b : builder_names()) EXPECT_NE(arch::find_architecture(b), nullptr) << b << " has a builder but no description";
    for (const std::string& n : names) EXPECT_NO_THROW(find_arch_builder(n)) << n;
    EXPECT_THROW(find_arch_builder("gpt2"), Error);
}

// The lists config.cpp, hf_config.cpp and random_model.cpp held as string checks before the table.
TEST(ArchDescriptions, FactsEqualThePerArchitectureListsTheyReplace) {
    const std::set<std::string> neox = {"qwen2",  "qwen3",  "qwen2moe",   "qwen3moe", "gemma2",  "gemma3",   "gemma4",
                                        "phi3",   "nomic-bert", "gpt-oss", "glm4moe", "qwen35", "qwen35moe", "qwen3vl",
                                        "minimax-m2", "qwen3next"};
    const std::set<std::string> moe = {"qwen2moe", "qwen3moe", "gpt-oss", "deepseek2", "glm4moe", "qwen35moe", "minimax-m2", "qwen3next"};
    const std::set<std::string> encoder = {"bert", "nomic-bert", "jina-bert-v2"};
    const std::set<std::string> unnormalised = {"qwen2moe", "gpt-oss", "deepseek2", "glm4moe"};
    for (const ArchDescription& d : arch::architectures()) {
        const std::string n(d.name);
        EXPECT_EQ(d.rope == arch::Rope::neox, neox.count(n) == 1) << n;
        EXPECT_EQ(d.experts == Has::yes, moe.count(n) == 1) << n;
        EXPECT_EQ(d.kind == arch::Kind::encoder, encoder.count(n) == 1) << n;
        EXPECT_EQ(d.expert_weights_norm, unnormalised.count(n) == 0) << n;
        EXPECT_EQ(int(d.gating), n == "gpt-oss" ? 3 : n == "glm4moe" || n == "minimax-m2" ? 2 : 1) << n;
        EXPECT_EQ(d.allows_rope_scaling("llama3"), n == "llama") << n;
        EXPECT_EQ(d.allows_rope_scaling("longrope"), n == "phi3") << n;
        EXPECT_EQ(d.allows_rope_scaling("yarn"), n == "gpt-oss" || n == "deepseek2" || n == "mistral3") << n;
        EXPECT_TRUE(d.allows_rope_scaling("none") && d.allows_rope_scaling("linear")) << n;
        EXPECT_FALSE(d.allows_rope_scaling("dynamic")) << n;
    }
    // The Hugging Face classes of the decoders (the encoders' live in hf_encoder_config.cpp).
    const std::vector<std::pair<std::string, std::string>> hf = {
        {"LlamaForCausalLM", "llama"},       {"MistralForCausalLM", "llama"},      {"MixtralForCausalLM", "llama"},
        {"Qwen2ForCausalLM", "qwen2"},       {"Qwen2MoeForCausalLM", "qwen2moe"},  {"Qwen3ForCausalLM", "qwen3"},
        {"Qwen3MoeForCausalLM", "qwen3moe"}, {"Gemma2ForCausalLM", "gemma2"},      {"Gemma3ForCausalLM", "gemma3"},
        {"Gemma3ForConditionalGeneration", "gemma3"}, {"Phi3ForCausalLM", "phi3"}, {"SmolLM3ForCausalLM", "smollm3"},
        {"Glm4ForCausalLM", "glm4"},         {"Glm4MoeForCausalLM", "glm4moe"},    {"Qwen3_5ForCausalLM", "qwen35"},
        {"Qwen3_5ForConditionalGeneration", "qwen35"}, {"Qwen3_5MoeForCausalLM", "qwen35moe"},
        {"Qwen3_5MoeForConditionalGeneration", "qwen35moe"}, {"MiniMaxM2ForCausalLM", "minimax-m2"},
        {"DeepseekV3ForCausalLM", "deepseek2"}, {"DeepseekV2ForCausalLM", "deepseek2"},
        {"Glm4MoeLiteForCausalLM", "deepseek2"}, {"GptOssForCausalLM", "gpt-oss"},
        {"Qwen3NextForCausalLM", "qwen3next"}, {"Gemma4ForCausalLM", "gemma4"},
        {"Gemma4ForConditionalGeneration", "gemma4"}};
    size_t classes = 0;
    for (const ArchDescription& d : arch::architectures()) classes += d.hf_classes.size();
    EXPECT_EQ(classes, hf.size());
    for (const auto& [cls, gguf_arch] : hf) {
        const ArchDescription* d = arch::find_hf_class(cls);
        ASSERT_NE(d, nullptr) << cls;
        EXPECT_EQ(d->name, gguf_arch) << cls;
    }
    EXPECT_EQ(arch::find_hf_class("BertModel"), nullptr);
}

// The manifests agree with the description's own flags, name each tensor once, and give every
// architecture with experts an expert layer.
TEST(ArchDescriptions, ManifestsAgreeWithTheFlags) {
    for (const ArchDescription& d : arch::architectures()) {
        const std::string n(d.name);
        std::set<std::string_view> seen;
        for (const auto& t : d.layer_tensors) EXPECT_TRUE(seen.insert(t.name).second) << n << ": " << t.name << " twice";
        seen.clear();
        for (const auto& t : d.tensors) EXPECT_TRUE(seen.insert(t.name).second) << n << ": " << t.name << " twice";
        EXPECT_TRUE(d.names_tensor("token_embd.weight")) << n;
        const auto presence = [&](std::string_view t) { return d.layer_tensor(t) ? d.layer_tensor(t)->presence : Presence::optional; };
        if (d.qkv_bias == Has::yes) { EXPECT_EQ(presence("attn_q.bias"), Presence::required) << n; }
        EXPECT_EQ(d.qkv_bias != Has::no, d.has_layer_tensor("attn_q.bias")) << n;
        EXPECT_EQ(d.o_bias, d.layer_tensor("attn_output.bias") && presence("attn_output.bias") == Presence::required) << n;
        EXPECT_EQ(d.qk_norm != Has::no, d.has_layer_tensor("attn_q_norm.weight")) << n;
        const bool expert_entries = std::any_of(d.layer_tensors.begin(), d.layer_tensors.end(),
                                                [](const arch::TensorEntry& t) { return t.presence == Presence::experts; });
        EXPECT_EQ(d.experts != Has::no, expert_entries) << n;
        if (d.experts != Has::no) { EXPECT_EQ(presence("ffn_gate_inp.weight"), Presence::experts) << n; }
        if (!d.hf_classes.empty()) {
            EXPECT_EQ(std::count_if(d.hf_classes.begin(), d.hf_classes.end(),
                                    [](const arch::HfClass& c) { return c.role == arch::HfRole::main; }), 1) << n;
        }
    }
    EXPECT_TRUE(describe("llama").names_tensor("blk.12.ffn_gate_exps.weight"));
    EXPECT_FALSE(describe("llama").names_tensor("blk.0.attn_q.bias"));
    EXPECT_FALSE(describe("llama").names_tensor("blk..attn_q.weight"));
    EXPECT_TRUE(describe("qwen3").names_tensor("cls.output.weight"));
}

// --- gen-model's files against the manifest, the config and the builder ---------------------------

struct Variant {
    std::string name;
    RandomModelSpec spec;
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

RandomModelSpec base(const std::string& arch) {
    RandomModelSpec s;
    s.arch = arch;
    s.n_layers = 4; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.head_dim = 16; s.ffn_dim = 96; s.vocab_size = 300;
    s.seed = 7;
    return s;
}

RandomModelSpec with_experts(RandomModelSpec s, int64_t n = 4) {
    s.n_experts = n; s.n_experts_used = 2; s.expert_ffn_dim = 32;
    return s;
}

std::vector<Variant> variants() {
    std::vector<Variant> v;
    for (const char* a : {"llama", "qwen2", "qwen3", "qwen3vl", "gemma2", "gemma3", "phi3", "smollm3", "mistral3", "qwen35"})
        v.push_back({a, base(a)});
    RandomModelSpec glm4 = base("glm4");
    glm4.head_dim = 32;
    v.push_back({"glm4", glm4});
    v.push_back({"llama_experts", with_experts(base("llama"))});
    RandomModelSpec llama3 = base("llama");
    llama3.rope_scaling = "llama3";
    v.push_back({"llama_llama3", llama3});
    for (const char* a : {"qwen2moe", "qwen3moe"}) v.push_back({a, with_experts(base(a))});
    RandomModelSpec q35 = with_experts(base("qwen35moe"), 8);
    q35.shared_expert_ffn_dim = 48;
    v.push_back({"qwen35moe", q35});
    RandomModelSpec next = q35;
    next.arch = "qwen3next";
    v.push_back({"qwen3next", next});
    next.fused_qkvz = true;
    v.push_back({"qwen3next_fused_qkvz", next});
    RandomModelSpec oss = with_experts(base("gpt-oss"));
    oss.sliding_window = 6;
    v.push_back({"gpt_oss", oss});
    RandomModelSpec v3 = with_experts(base("deepseek2"), 8);
    v3.n_layers = 3; v3.head_dim = 24; v3.mla_rope_dims = 8; v3.v_head_dim = 16; v3.kv_lora_rank = 32; v3.q_lora_rank = 32;
    v3.n_shared_experts = 1; v3.leading_dense = 1; v3.expert_gating = 2; v3.expert_groups = 4; v3.expert_groups_used = 2;
    v3.expert_weights_norm = true; v3.yarn = true;
    v.push_back({"deepseek2_v3", v3});
    RandomModelSpec lite = v3;
    lite.q_lora_rank = 0; lite.expert_gating = 1; lite.expert_groups = 0; lite.expert_groups_used = 0; lite.yarn = false;
    lite.expert_weights_norm = false; lite.mla_split = true;
    v.push_back({"deepseek2_lite_split", lite});
    RandomModelSpec glm = with_experts(base("glm4moe"), 8);
    glm.n_layers = 3; glm.head_dim = 32; glm.n_shared_experts = 1; glm.leading_dense = 1; glm.qk_norm = true;
    v.push_back({"glm4moe", glm});
    RandomModelSpec minimax = with_experts(base("minimax-m2"), 8);
    minimax.head_dim = 32;
    v.push_back({"minimax_m2", minimax});
    v.push_back({"gemma4", gemma4_test::gemma4_spec(7)});
    v.push_back({"gemma4_experts", gemma4_test::gemma4_moe_spec(7)});
    v.push_back({"gemma4_per_layer", gemma4_test::gemma4_ple_spec(7)});
    for (const char* a : {"bert", "nomic-bert", "jina-bert-v2"}) {
        RandomModelSpec e;
        e.arch = a;
        e.n_layers = 2; e.dim = 48; e.n_heads = 6; e.ffn_dim = 72; e.vocab_size = 300; e.context_length = 96;
        v.push_back({a, e});
    }
    RandomModelSpec jina = v.back().spec;
    jina.qk_norm = true;
    v.push_back({"jina_qk_norm", jina});
    // The options each family's writer takes beyond the above.
    RandomModelSpec bert_rank = v[v.size() - 4].spec;
    bert_rank.rank_head = "dense"; bert_rank.rank_classes = 3;
    v.push_back({"bert_rank_dense", bert_rank});
    jina.rank_head = "output";
    v.push_back({"jina_rank", jina});
    RandomModelSpec qwen3_rank = base("qwen3");
    qwen3_rank.rank_head = "output";
    v.push_back({"qwen3_rank", qwen3_rank});
    RandomModelSpec glm_air = glm;
    glm_air.qk_norm = false; glm_air.nextn_layers = 1; glm_air.n_shared_experts = 0;
    v.push_back({"glm4moe_air_nextn", glm_air});
    RandomModelSpec q35_nextn = base("qwen35");
    q35_nextn.nextn_layers = 1;
    v.push_back({"qwen35_nextn", q35_nextn});
    q35.nextn_layers = 2;
    v.push_back({"qwen35moe_nextn", q35});
    oss.mxfp4_experts = true;
    v.push_back({"gpt_oss_mxfp4", oss});
    RandomModelSpec v2 = v3;
    v2.n_shared_experts = 0; v2.leading_dense = 0; v2.mla_split = true;
    v.push_back({"deepseek2_no_shared_split", v2});
    return v;
}

std::string variant_name(const ::testing::TestParamInfo<Variant>& i) {
    std::string n = i.param.name;
    std::replace(n.begin(), n.end(), '-', '_');
    return n;
}

class GenModelManifest : public ::testing::TestWithParam<Variant> {};

TEST_P(GenModelManifest, TensorsAreTheManifestsAndTheBuilderAcceptsThem) {
    const RandomModelSpec& spec = GetParam().spec;
    const ArchDescription& d = describe(spec.arch);
    const std::string path = test::temp_path("arch_manifest_" + GetParam().name + ".gguf");
    write_random_model(spec, nullptr, path);
    auto file = gguf::File::open(path);

    std::set<std::string> names;
    for (const auto& t : file->tensors()) {
        names.insert(t.name);
        EXPECT_TRUE(d.names_tensor(t.name)) << t.name << " is not in " << d.name << "'s manifest";
    }
    for (const auto& t : d.tensors)
        if (t.presence == Presence::required) { EXPECT_TRUE(names.count(std::string(t.name))) << t.name << " is missing"; }
    const int64_t blocks = file->get_int(std::string(d.name) + ".block_count");
    for (int64_t l = 0; l < blocks; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        const bool experts = names.count(p + "ffn_gate_inp.weight") == 1;
        for (const auto& t : d.layer_tensors) {
            const bool needed = t.presence == Presence::required || (t.presence == Presence::experts && experts) ||
                                (t.presence == Presence::dense && !experts);
            if (needed) { EXPECT_TRUE(names.count(p + std::string(t.name))) << p << t.name << " is missing"; }
        }
    }

    // The config reader's facts are the description's.
    const ModelConfig c = read_config(*file);
    const std::string a = c.arch + ".";
    EXPECT_EQ(c.rope_style == RopeStyle::neox, d.rope == arch::Rope::neox);
    EXPECT_EQ(c.qkv_bias, d.qkv_bias == Has::yes);
    EXPECT_EQ(c.causal, d.kind == arch::Kind::decoder);
    EXPECT_TRUE(d.allows_rope_scaling(c.rope_scaling)) << c.rope_scaling;
    if (d.experts == Has::yes) { EXPECT_GT(c.n_experts, 0); }
    if (d.experts == Has::no) { EXPECT_EQ(c.n_experts, 0); }
    if (c.n_experts > 0 && !file->has(a + "expert_gating_func")) { EXPECT_EQ(c.expert_gating, int64_t(d.gating)); }
    if (c.n_experts > 0 && !file->has(a + "expert_weights_norm")) { EXPECT_EQ(c.expert_weights_norm, d.expert_weights_norm); }

    // The builder takes it.
    EXPECT_NO_THROW(open_step_model(path, {.threads = 1, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                           .tokens_wanted = 64}));
}

INSTANTIATE_TEST_SUITE_P(Architectures, GenModelManifest, ::testing::ValuesIn(variants()), variant_name);

// The bytes each variant's file has, so that a change to a writer that moves the random stream (and
// with it every golden drawn from a generated model) shows here first. A deliberate change of a
// writer's output updates the table.
struct FileDigest {
    const char* variant;
    uint64_t checksum;
};
constexpr FileDigest kFileDigests[] = {
    {"llama", 0x5db7addef13cc795ull},
    {"qwen2", 0x54c050e0ccd7b37dull},
    {"qwen3", 0xedd1ed0f0c0d38f6ull},
    {"qwen3next", 0x63362048c8d62c9aull},
    {"qwen3next_fused_qkvz", 0x7a688cfc486c676dull},
    {"qwen3vl", 0xcbfee98802d05fc0ull},
    {"gemma2", 0xe16aaabbae5f1925ull},
    {"gemma3", 0xd6f9af9fc34b8e1full},
    {"phi3", 0x7ba83aa8ccda69feull},
    {"smollm3", 0x9985027b19626068ull},
    {"mistral3", 0x1692cd2fe09f1d47ull},
    {"qwen35", 0xf6f863e327c0c3a9ull},
    {"glm4", 0xdb9fd3ef92233a5bull},
    {"llama_experts", 0xb0ef3732957ca2c2ull},
    {"llama_llama3", 0x7d1ec6f99e63fba9ull},
    {"qwen2moe", 0xfb9ddb9f79001328ull},
    {"qwen3moe", 0xfb5f10216cbdd17dull},
    {"qwen35moe", 0x8601eb2f96c554c4ull},
    {"gpt_oss", 0x71d677cce1dcfad6ull},
    {"deepseek2_v3", 0x1ee4efe67ad1e36dull},
    {"deepseek2_lite_split", 0x47e269f24e0fe0fcull},
    {"glm4moe", 0x2adc4c3afb2965ddull},
    {"minimax_m2", 0x49ebfd3c5a37f0f5ull},
    {"gemma4", 0x17ddc482e846127bull},
    {"gemma4_experts", 0x2c8d9874208d6336ull},
    {"gemma4_per_layer", 0xe8996a30d1a08348ull},
    {"bert", 0x0261e40abef2ad53ull},
    {"nomic-bert", 0xa3b9ddc67ff04059ull},
    {"jina-bert-v2", 0x2928c8c0b825b72dull},
    {"jina_qk_norm", 0xef72d3ac1172c531ull},
    {"bert_rank_dense", 0x469af88398362817ull},
    {"jina_rank", 0xa76101c1e2800f3dull},
    {"qwen3_rank", 0xf4619ed9f3f05c2bull},
    {"glm4moe_air_nextn", 0xcdba7a923d772ddbull},
    {"qwen35_nextn", 0x6f07f412a24f9f23ull},
    {"qwen35moe_nextn", 0x7741f66e94941175ull},
    {"gpt_oss_mxfp4", 0xb48d700a43db1a84ull},
    {"deepseek2_no_shared_split", 0xfe2457e35534f734ull},
};

class GenModelBytes : public ::testing::TestWithParam<Variant> {};

TEST_P(GenModelBytes, FileIsByteStable) {
    const std::string path = test::temp_path("arch_bytes_" + GetParam().name + ".gguf");
    write_random_model(GetParam().spec, nullptr, path);
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(bytes.empty());
    const uint64_t sum = checksum64(bytes.data(), bytes.size());
    const auto* d = std::find_if(std::begin(kFileDigests), std::end(kFileDigests),
                                 [&](const FileDigest& f) { return GetParam().name == f.variant; });
    ASSERT_NE(d, std::end(kFileDigests)) << "no digest for " << GetParam().name << ": {\"" << GetParam().name << "\", 0x"
                                         << std::hex << sum << "ull},";
    EXPECT_EQ(sum, d->checksum) << GetParam().name << " now 0x" << std::hex << sum;
}

INSTANTIATE_TEST_SUITE_P(Architectures, GenModelBytes, ::testing::ValuesIn(variants()), variant_name);

// Every description is covered by a variant above.
TEST(ArchDescriptions, EveryArchitectureHasAGenModelVariant) {
    std::set<std::string> covered;
    for (const Variant& v : variants()) covered.insert(v.spec.arch);
    for (const std::string& n : arch::architecture_names()) EXPECT_TRUE(covered.count(n)) << n << " has no variant here";
}

}  // namespace
}  // namespace pagoda::model
