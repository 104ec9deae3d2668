#include "server/models_json.h"

#include <fstream>

#include <fmt/format.h>

#include "chat/chat_template.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "lora/lora_spec.h"
#include "model/kv_options.h"
#include "server/reasoning_request.h"

namespace pagoda::server {

namespace fs = std::filesystem;
namespace jr = json_reader;
using json = nlohmann::ordered_json;

namespace {

constexpr const char* kKeys =
    "path, ctx_size, max_seqs, max_batched_tokens, kv_memory, chat_template, reasoning_format, reasoning_budgets, "
    "aliases, lora";

std::string under(const fs::path& dir, const std::string& path) {
    const fs::path p = path;
    return (p.is_absolute() ? p : dir / p).string();
}

// Throws a JsonFieldError-shaped problem for `key` (bad_value), for the caller to name the model.
[[noreturn]] void bad(const std::string& key, const std::string& why) { jr::bad_value(key, why); }
// `key`'s value refused by the parser a serve flag uses (its message names the value).
[[noreturn]] void refused(const std::string& key, const Error& err) {
    throw jr::JsonFieldError(fmt::format("'{}': {}", key, err.what()), key, jr::Problem::bad_value);
}

void check_alias(const std::string& alias, const std::string& at) {
    if (alias.empty() || alias.size() > 128) bad(at, "must be 1-128 characters");
    for (char c : alias)
        if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) > 0x7e || c == '/')
            bad(at, fmt::format("'{}' must be printable ASCII without spaces or '/'", alias));
}

// "NAME=PATH[:SCALE]" or {"name", "path", "scale"}; PATH from `dir` when relative, and it must exist.
ModelSettings::Lora read_lora(const json& v, const std::string& at, const fs::path& dir) {
    ModelSettings::Lora l;
    if (v.is_string()) {
        try {
            const lora::LoraSpec spec = lora::parse_lora_spec(v.get_ref<const std::string&>(), "", dir);
            l.name = spec.name;
            l.path = spec.path;
            l.scale = spec.scale;
        } catch (const Error& e) {
            bad(at, e.what());
        }
    } else {
        jr::read_object(v, at, "a \"NAME=PATH[:SCALE]\" string or a {\"name\", \"path\", \"scale\"} object");
        for (auto it = v.begin(); it != v.end(); ++it)
            if (it.key() != "name" && it.key() != "path" && it.key() != "scale")
                bad(at + "." + it.key(), "is not a key of a lora entry (name, path, scale)");
        l.name = jr::read_string(jr::required(v, "name", at + ".name"), at + ".name");
        l.path = jr::read_string(jr::required(v, "path", at + ".path"), at + ".path");
        if (const json* s = jr::field(v, "scale")) l.scale = float(jr::read_number(*s, at + ".scale", -1e6, 1e6));
        check_alias(l.name, at + ".name");
    }
    check_alias(l.name, at);
    if (l.path.empty()) bad(at, "has no adapter path");
    l.path = under(dir, l.path);
    if (!fs::exists(l.path)) bad(at, fmt::format("no adapter file or folder at '{}'", l.path));
    return l;
}

ModelsJsonEntry read_entry(const std::string& id, const json& value, const fs::path& dir) {
    ModelsJsonEntry e{id, {}, {}};
    if (value.is_string()) {
        e.path = under(dir, value.get<std::string>());
        return e;
    }
    ModelSettings& s = e.settings;
    for (auto it = value.begin(); it != value.end(); ++it) {
        const std::string& key = it.key();
        const json& v = it.value();
        if (key == "path") {
            e.path = under(dir, jr::read_string(v, key));
        } else if (key == "ctx_size") {
            s.ctx_size = jr::read_integer(v, key, 0, int64_t(1) << 24);
        } else if (key == "max_seqs") {
            s.max_seqs = int32_t(jr::read_integer(v, key, 1, 4096));
        } else if (key == "max_batched_tokens") {
            s.max_batched_tokens = jr::read_integer(v, key, 1, int64_t(1) << 24);
        } else if (key == "kv_memory") {
            s.kv_memory = jr::read_string(v, key);
            try {
                (void)model::parse_memory_budget(*s.kv_memory, "kv_memory");
            } catch (const Error& err) {  // its message names kv_memory and the value
                throw jr::JsonFieldError(err.what(), key, jr::Problem::bad_value);
            }
        } else if (key == "chat_template") {
            std::string t = jr::read_string(v, key);
            if (t.empty()) bad(key, "must not be empty");
            if (fs::is_regular_file(under(dir, t))) t = under(dir, t);  // a file next to models.json
            try {
                (void)chat::ChatTemplate::from_name_or_file(t);
            } catch (const Error& err) {
                refused(key, err);
            }
            s.chat_template = t;
        } else if (key == "reasoning_format") {
            const std::string& f = jr::read_string(v, key);
            if (f != "none" && f != "deepseek" && f != "harmony") bad(key, "must be none, deepseek or harmony");
            s.reasoning_format = f;
        } else if (key == "reasoning_budgets") {
            const std::string& b = jr::read_string(v, key);
            try {
                (void)parse_reasoning_budgets(b);
            } catch (const Error& err) {
                refused(key, err);
            }
            s.reasoning_budgets = b;
        } else if (key == "aliases") {
            jr::read_array(v, key, "an array of model ids");
            for (size_t i = 0; i < v.size(); ++i) {
                const std::string at = fmt::format("aliases[{}]", i);
                s.aliases.push_back(jr::read_string(v[i], at));
                check_alias(s.aliases.back(), at);
            }
        } else if (key == "lora") {
            jr::read_array(v, key, "an array of \"NAME=PATH[:SCALE]\" strings or {\"name\", \"path\", \"scale\"} objects");
            for (size_t i = 0; i < v.size(); ++i) s.loras.push_back(read_lora(v[i], fmt::format("lora[{}]", i), dir));
        } else {
            bad(key, fmt::format("is not a model setting (the keys are {})", kKeys));
        }
    }
    if (e.path.empty()) jr::missing("path");
    return e;
}

}  // namespace

std::vector<ModelsJsonEntry> parse_models_json(const json& map, const fs::path& dir, const std::string& file) {
    if (!map.is_object() || map.empty())
        fail("{}: must be an object mapping each model id to its path or to {{\"path\", settings...}}, e.g. "
             "{{\"chat\": \"chat.gguf\"}}",
             file);
    std::vector<ModelsJsonEntry> out;
    for (auto it = map.begin(); it != map.end(); ++it) {
        if (!it.value().is_string() && !it.value().is_object())
            fail("{}: model '{}': must be a path string or an object with \"path\" and settings, got {}", file, it.key(),
                 jr::type_name(it.value()));
        try {
            out.push_back(read_entry(it.key(), it.value(), dir));
        } catch (const jr::JsonFieldError& e) {
            fail("{}: model '{}': {}", file, it.key(), e.what());
        }
    }
    return out;
}

std::vector<ModelsJsonEntry> read_models_json(const fs::path& dir) {
    const fs::path file = dir / "models.json";
    json map;
    try {
        std::ifstream in(file);
        map = json::parse(in);
    } catch (const std::exception& e) {
        fail("{}: not valid JSON: {}", file.string(), e.what());
    }
    return parse_models_json(map, dir, file.string());
}

}  // namespace pagoda::server
