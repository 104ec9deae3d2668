// safetensors files, index files and folders that are wrong in one way each: every one is a
// pagoda::Error whose message names the file, the tensor or the key — never a crash.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "hf/hf_folder.h"
#include "hf/safetensors.h"
#include "model/random_model.h"

namespace pagoda::hf {
namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;

std::vector<uint8_t> with_header(const std::string& json, size_t data_bytes) {
    std::vector<uint8_t> out(8 + json.size() + data_bytes);
    const uint64_t n = json.size();
    std::memcpy(out.data(), &n, 8);
    std::memcpy(out.data() + 8, json.data(), json.size());
    return out;
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
    try {
        SafetensorsFile::parse(bytes.data(), bytes.size(), "bad.safetensors");
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(Safetensors, RoundTripsTensorsAndMetadata) {
    const std::vector<float> a = {1, 2, 3, 4, 5, 6};
    const std::vector<uint16_t> b = {7, 8};
    const auto bytes = encode_safetensors(
        {{"a", GgmlType::F32, {2, 3}, {reinterpret_cast<const uint8_t*>(a.data()), 24}},
         {"b", GgmlType::BF16, {2}, {reinterpret_cast<const uint8_t*>(b.data()), 4}}},
        {{"format", "pt"}});
    auto f = SafetensorsFile::parse(bytes.data(), bytes.size(), "ok");
    ASSERT_EQ(f->tensors().size(), 2u);
    EXPECT_EQ(f->tensors()[0].name, "a");
    EXPECT_EQ(f->find("a")->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(std::memcmp(f->find("a")->data, a.data(), 24), 0);
    EXPECT_EQ(f->find("b")->type, GgmlType::BF16);
    EXPECT_EQ(f->metadata().at("format"), "pt");
    EXPECT_EQ((8 + bytes[0]) % 8, 0);  // the data section starts 8-byte aligned
}

TEST(Safetensors, CorruptFilesAreNamedErrors) {
    EXPECT_NE(parse_error({1, 2, 3}).find("shorter than the 8-byte header length"), std::string::npos);
    auto past = with_header("{}", 0);
    past[0] = 200;  // header length past the end
    EXPECT_NE(parse_error(past).find("runs past the end of the file"), std::string::npos);
    auto truncated = with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
    truncated.resize(20);  // header cut short
    EXPECT_NE(parse_error(truncated).find("bad.safetensors"), std::string::npos);
    EXPECT_NE(parse_error(with_header("{not json", 0)).find("not valid JSON"), std::string::npos);
    EXPECT_NE(parse_error(with_header("[1]", 0)).find("not a JSON object"), std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"w":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}})", 1)).find("tensor 'w': unknown dtype 'Q9'"),
              std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"w":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}})", 1)).find("dtype I8 is not supported"),
              std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", 1)).find("F8_E4M3 is not supported"),
              std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)).find("tensor 'w': shape [3] of F32 needs 12 bytes, data_offsets give 8"),
              std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8)).find("runs past the data section"),
              std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12)).find("overlaps"),
              std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)).find("hole"), std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8)).find("4 bytes after its last tensor"),
              std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)).find("'a' appears twice"),
              std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)).find("not a non-negative integer"),
              std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8)).find("run backwards"),
              std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[1]}})", 4)).find("'data_offsets' is missing"),
              std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4)).find("unknown field 'x'"),
              std::string::npos);
    EXPECT_NE(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}})", 4)).find("overflows"),
              std::string::npos);
}

std::string folder_error(const std::string& dir) {
    try {
        open_hf_folder(dir);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

std::string fresh_folder(const std::string& name, int shards) {
    const std::string dir = test::temp_path(name);
    fs::remove_all(dir);
    model::RandomModelSpec s;
    s.n_layers = 2; s.dim = 32; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 48; s.vocab_size = 300;
    model::write_random_model_hf(s, dir, shards);
    return dir;
}

nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in);
}
void write_json(const fs::path& p, const nlohmann::json& j) { std::ofstream(p) << j.dump(); }

TEST(HfFolder, ShardAndIndexDefectsAreNamed) {
    EXPECT_NE(folder_error(test::temp_path("hf-no-such-folder")).find("no config.json"), std::string::npos);
    {
        const std::string dir = fresh_folder("hf-bad-missing-shard", 3);
        fs::remove(fs::path(dir) / "model-00002-of-00003.safetensors");
        EXPECT_NE(folder_error(dir).find("shard model-00002-of-00003.safetensors"), std::string::npos) << folder_error(dir);
    }
    {
        const std::string dir = fresh_folder("hf-bad-index-extra", 2);
        auto j = read_json(fs::path(dir) / "model.safetensors.index.json");
        j["weight_map"]["model.layers.0.self_attn.q_proj.weight2"] = "model-00001-of-00002.safetensors";
        write_json(fs::path(dir) / "model.safetensors.index.json", j);
        EXPECT_NE(folder_error(dir).find("tensor 'model.layers.0.self_attn.q_proj.weight2' is missing from shard"), std::string::npos)
            << folder_error(dir);
    }
    {
        const std::string dir = fresh_folder("hf-bad-index-missing", 2);
        auto j = read_json(fs::path(dir) / "model.safetensors.index.json");
        j["weight_map"].erase("model.norm.weight");
        write_json(fs::path(dir) / "model.safetensors.index.json", j);
        EXPECT_NE(folder_error(dir).find("tensor 'model.norm.weight' of shard"), std::string::npos) << folder_error(dir);
    }
    {
        const std::string dir = fresh_folder("hf-bad-index-escape", 2);
        auto j = read_json(fs::path(dir) / "model.safetensors.index.json");
        j["weight_map"]["model.norm.weight"] = "../elsewhere.safetensors";
        write_json(fs::path(dir) / "model.safetensors.index.json", j);
        EXPECT_NE(folder_error(dir).find("not a file of the folder"), std::string::npos) << folder_error(dir);
    }
    {
        const std::string dir = fresh_folder("hf-bad-no-weights", 1);
        fs::remove(fs::path(dir) / "model.safetensors");
        EXPECT_NE(folder_error(dir).find("no model.safetensors or model.safetensors.index.json"), std::string::npos);
    }
    {
        const std::string dir = fresh_folder("hf-bad-config-key", 1);
        auto j = read_json(fs::path(dir) / "config.json");
        j.erase("num_attention_heads");
        write_json(fs::path(dir) / "config.json", j);
        EXPECT_NE(folder_error(dir).find("key 'num_attention_heads' is missing"), std::string::npos) << folder_error(dir);
    }
    {
        const std::string dir = fresh_folder("hf-bad-arch", 1);
        auto j = read_json(fs::path(dir) / "config.json");
        j["architectures"] = {"MambaForCausalLM"};
        write_json(fs::path(dir) / "config.json", j);
        EXPECT_NE(folder_error(dir).find("architectures[0] 'MambaForCausalLM' is not supported"), std::string::npos)
            << folder_error(dir);
    }
    {
        const std::string dir = fresh_folder("hf-bad-head", 1);
        auto j = read_json(fs::path(dir) / "config.json");
        j["tie_word_embeddings"] = false;
        j["architectures"] = {"LlamaForCausalLM"};
        write_json(fs::path(dir) / "config.json", j);
        // The folder's model has an untied head; drop it by rewriting the file without lm_head.weight.
        auto st = SafetensorsFile::open((fs::path(dir) / "model.safetensors").string());
        std::vector<SafetensorsEntry> keep;
        for (const auto& t : st->tensors())
            if (t.name != "lm_head.weight") keep.push_back({t.name, t.type, t.shape, {t.data, size_t(t.n_bytes)}});
        const auto bytes = encode_safetensors(keep);
        st.reset();
        std::ofstream((fs::path(dir) / "model.safetensors"), std::ios::binary)
            .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        EXPECT_NE(folder_error(dir).find("lm_head.weight is missing"), std::string::npos) << folder_error(dir);
    }
}

// Rewriting a folder unsharded after a sharded write must not leave the old index to be read.
TEST(HfFolder, ARewriteReplacesEarlierWeightFiles) {
    const std::string dir = fresh_folder("hf-rewrite", 3);
    model::RandomModelSpec s;
    s.n_layers = 2; s.dim = 32; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 48; s.vocab_size = 300;
    model::write_random_model_hf(s, dir, 1);
    EXPECT_FALSE(fs::exists(fs::path(dir) / "model.safetensors.index.json"));
    EXPECT_FALSE(fs::exists(fs::path(dir) / "model-00001-of-00003.safetensors"));
    EXPECT_EQ(open_hf_folder(dir)->find_tensor("blk.0.attn_q.weight")->shape, (std::vector<int64_t>{32, 32}));
}

TEST(HfFolder, ATokenizerKeyOnAFolderNamesTokenizerJson) {
    const std::string dir = fresh_folder("hf-no-tokenizer", 1);
    fs::remove(fs::path(dir) / "tokenizer.json");
    auto f = open_hf_folder(dir);
    try {
        f->get_string("tokenizer.ggml.model");
        FAIL() << "no tokenizer key expected";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace pagoda::hf
