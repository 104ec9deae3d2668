// llama-server's `lora` request field (openai_request.h): [{"id": N | "path": P, "scale": S}].
#include <fmt/format.h>

#include "core/json_reader.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace pagoda::server {

std::vector<LoraChoice> parse_lora_field(const nlohmann::json& value) {
    namespace jr = json_reader;
    std::vector<LoraChoice> out;
    try {
        jr::read_array(value, "lora", "an array of {\"id\", \"scale\"} objects");
        if (value.size() > 64) jr::bad_value("lora", "must list at most 64 adapters");
        for (size_t i = 0; i < value.size(); ++i) {
            const std::string at = fmt::format("lora[{}]", i);
            const auto& item = jr::read_object(value[i], at);
            for (auto it = item.begin(); it != item.end(); ++it)
                if (it.key() != "id" && it.key() != "path" && it.key() != "scale")
                    jr::bad_value(at + "." + it.key(), "is not a field of a lora entry (id, path, scale)");
            LoraChoice c;
            const auto* id = jr::field(item, "id");
            const auto* path = jr::field(item, "path");
            if (!id && !path) jr::missing(at + ".id");
            if (id && path) jr::bad_value(at, "must give 'id' or 'path', not both");
            if (id) c.id = jr::read_integer(*id, at + ".id", 0, 1 << 30);
            if (path) c.path = jr::read_string(*path, at + ".path");
            if (const auto* s = jr::field(item, "scale")) c.scale = jr::read_number(*s, at + ".scale", -1e6, 1e6);
            out.push_back(std::move(c));
        }
    } catch (const jr::JsonFieldError& e) {
        throw ApiError::from_field(e);
    }
    return out;
}

}  // namespace pagoda::server
