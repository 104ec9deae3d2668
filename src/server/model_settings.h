// One model's own serve settings on a server of several models (DIR/models.json's object form,
// apps/models_json.h): each set value overrides the server-wide flag of the same name for that
// model only; unset ones keep the flag's value.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pagoda::server {

struct ModelSettings {
    std::optional<int64_t> ctx_size;              // -c/--ctx-size
    std::optional<int32_t> max_seqs;              // --max-seqs/--parallel
    std::optional<int64_t> max_batched_tokens;    // --max-batched-tokens
    std::optional<std::string> kv_memory;         // --kv-memory (a size, or a percentage)
    std::optional<std::string> chat_template;     // --chat-template (a builtin name, or a Jinja file)
    std::optional<std::string> reasoning_format;  // --reasoning-format (none, deepseek, harmony)
    std::optional<std::string> reasoning_budgets; // --reasoning-budgets LOW,MEDIUM,HIGH
    std::vector<std::string> aliases;             // more ids requests may name this model by
    struct Lora {
        std::string name, path;
        float scale = 1;
    };
    std::vector<Lora> loras;  // --lora MODEL:NAME=PATH[:SCALE] with MODEL this model
};

}  // namespace pagoda::server
