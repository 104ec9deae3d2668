// DIR/models.json (server/models_json.h): the id -> path form, the id -> {"path", settings} form
// with every setting read as the serve flag of that name would, paths taken from DIR, and every
// error naming the file, the model id and the key.
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

#include "core/error.h"
#include "fixtures.h"
#include "server/models_json.h"

using namespace pagoda;
using namespace pagoda::server;
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

// A folder with an adapter file, a PEFT folder and a Jinja template, as models.json would name them.
const fs::path& dir() {
    static const fs::path d = [] {
        fs::path d = test::temp_path("models-json-dir");
        fs::create_directories(d / "peft");
        std::ofstream(d / "sql.gguf") << "x";
        std::ofstream(d / "tpl.jinja") << "{% for m in messages %}[{{ m.content }}]{% endfor %}";
        return d;
    }();
    return d;
}

std::string file() { return (dir() / "models.json").string(); }

std::vector<ModelsJsonEntry> parse(const std::string& text) {
    return parse_models_json(ojson::parse(text), dir(), file());
}

std::string error_of(const std::string& text) {
    try {
        parse(text);
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

TEST(ModelsJson, PathsAndSettingsInTheFilesOrder) {
    const auto entries = parse(R"({
        "zeta": "z.gguf",
        "chat": {"path": "/abs/chat.gguf", "ctx_size": 4096, "max_seqs": 4, "max_batched_tokens": 512,
                 "kv_memory": "256MiB", "chat_template": "llama2", "reasoning_format": "none",
                 "reasoning_budgets": "1,2,3", "aliases": ["c1", "c2"],
                 "lora": ["sql=sql.gguf:0.5", {"name": "py", "path": "peft", "scale": 2}, "raw=sql.gguf"]},
        "tpl": {"path": "t.gguf", "chat_template": "tpl.jinja"}})");
    ASSERT_EQ(entries.size(), 3u);
    EXPECT_EQ(entries[0].id, "zeta");
    EXPECT_EQ(entries[0].path, (dir() / "z.gguf").string());
    EXPECT_FALSE(entries[0].settings.ctx_size);
    EXPECT_TRUE(entries[0].settings.loras.empty());
    const ModelSettings& s = entries[1].settings;
    EXPECT_EQ(entries[1].path, "/abs/chat.gguf");
    EXPECT_EQ(s.ctx_size, 4096);
    EXPECT_EQ(s.max_seqs, 4);
    EXPECT_EQ(s.max_batched_tokens, 512);
    EXPECT_EQ(s.kv_memory, "256MiB");
    EXPECT_EQ(s.chat_template, "llama2");  // a builtin name stays a name
    EXPECT_EQ(s.reasoning_format, "none");
    EXPECT_EQ(s.reasoning_budgets, "1,2,3");
    EXPECT_EQ(s.aliases, (std::vector<std::string>{"c1", "c2"}));
    ASSERT_EQ(s.loras.size(), 3u);
    EXPECT_EQ(s.loras[0].name, "sql");
    EXPECT_EQ(s.loras[0].path, (dir() / "sql.gguf").string());
    EXPECT_EQ(s.loras[0].scale, 0.5f);
    EXPECT_EQ(s.loras[1].name, "py");
    EXPECT_EQ(s.loras[1].path, (dir() / "peft").string());
    EXPECT_EQ(s.loras[1].scale, 2.0f);
    EXPECT_EQ(s.loras[2].scale, 1.0f);
    EXPECT_EQ(entries[2].settings.chat_template, (dir() / "tpl.jinja").string());  // a file next to models.json
}

TEST(ModelsJson, EveryErrorNamesTheFileTheModelAndTheKey) {
    const std::string at = file() + ": model 'm': ";
    auto expect = [&](const std::string& entry, const std::string& words) {
        const std::string e = error_of(R"({"ok": "a.gguf", "m": )" + entry + "}");
        EXPECT_EQ(e, at + words) << entry;
    };
    expect("3", "must be a path string or an object with \"path\" and settings, got integer");
    expect(R"({"ctx_size": 1})", "'path' is required");
    expect(R"({"path": 7})", "'path' must be a string, got integer");
    expect(R"({"path": "m.gguf", "ctx": 1})",
           "'ctx' is not a model setting (the keys are path, ctx_size, max_seqs, max_batched_tokens, kv_memory, "
           "chat_template, reasoning_format, reasoning_budgets, aliases, lora)");
    expect(R"({"path": "m.gguf", "ctx_size": "big"})", "'ctx_size' must be an integer, got string");
    expect(R"({"path": "m.gguf", "ctx_size": -1})", "'ctx_size' must be between 0 and 16777216");
    expect(R"({"path": "m.gguf", "max_seqs": 0})", "'max_seqs' must be between 1 and 4096");
    expect(R"({"path": "m.gguf", "max_seqs": 2.5})", "'max_seqs' must be an integer, got number");
    expect(R"({"path": "m.gguf", "max_batched_tokens": 0})", "'max_batched_tokens' must be between 1 and 16777216");
    expect(R"({"path": "m.gguf", "kv_memory": "lots"})",
           "kv_memory 'lots' is not a size (use 512MiB, 8GiB, 2G, 1073741824B, or a fraction of free memory: 0.9 "
           "or 90%)");
    expect(R"({"path": "m.gguf", "chat_template": ""})", "'chat_template' must not be empty");
    expect(R"({"path": "m.gguf", "reasoning_format": "think"})",
           "'reasoning_format' must be none, deepseek or harmony");
    expect(R"({"path": "m.gguf", "reasoning_budgets": "1,2"})",
           "'reasoning_budgets': reasoning budgets '1,2': give three token counts, low,medium,high");
    expect(R"({"path": "m.gguf", "aliases": "x"})", "'aliases' must be an array of model ids, got string");
    expect(R"({"path": "m.gguf", "aliases": ["a b"]})",
           "'aliases[0]' 'a b' must be printable ASCII without spaces or '/'");
    expect(R"({"path": "m.gguf", "lora": "x"})",
           "'lora' must be an array of \"NAME=PATH[:SCALE]\" strings or {\"name\", \"path\", \"scale\"} objects, got "
           "string");
    expect(R"({"path": "m.gguf", "lora": ["sql.gguf"]})", "'lora[0]' 'sql.gguf' must be NAME=PATH[:SCALE]");
    expect(R"({"path": "m.gguf", "lora": ["x=sql.gguf:half"]})", "'lora[0]' the scale 'half' is not a number");
    expect(R"({"path": "m.gguf", "lora": ["x=none.gguf"]})",
           "'lora[0]' no adapter file or folder at '" + (dir() / "none.gguf").string() + "'");
    expect(R"({"path": "m.gguf", "lora": [{"name": "x"}]})", "'lora[0].path' is required");
    expect(R"({"path": "m.gguf", "lora": [{"name": "x", "path": "sql.gguf", "rank": 2}]})",
           "'lora[0].rank' is not a key of a lora entry (name, path, scale)");
    expect(R"({"path": "m.gguf", "lora": [{"name": "x", "path": "sql.gguf", "scale": "1"}]})",
           "'lora[0].scale' must be a number, got string");
    // The template: neither a builtin name nor a file next to models.json (nor elsewhere).
    const std::string e = error_of(R"({"m": {"path": "m.gguf", "chat_template": "nope"}})");
    EXPECT_EQ(e.rfind(at + "'chat_template': --chat-template 'nope' is neither a known template name", 0), 0u) << e;
    EXPECT_EQ(error_of("[]"), file() + ": must be an object mapping each model id to its path or to {\"path\", "
                                       "settings...}, e.g. {\"chat\": \"chat.gguf\"}");
    EXPECT_EQ(error_of("{}"), error_of("[]"));
}

TEST(ModelsJson, ReadNamesAFileThatIsNotJson) {
    const fs::path d = test::temp_path("models-json-bad");
    fs::create_directories(d);
    std::ofstream(d / "models.json") << "{\"a\": ";
    try {
        read_models_json(d);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).rfind((d / "models.json").string() + ": not valid JSON: ", 0), 0u) << e.what();
    }
}

}  // namespace
