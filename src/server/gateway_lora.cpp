// The gateway's LoRA endpoints, apart from gateway.cpp: vLLM's POST /v1/load_lora_adapter
// {"lora_name", "lora_path"} and /v1/unload_lora_adapter {"lora_name"} (refused unless the server
// runs with --allow-runtime-lora), answered as vLLM answers them (200, a line of text), and
// llama-server's GET /lora-adapters ([{"id", "name", "path", "scale"}]). The work is LoraRegistry's.
#include <fmt/format.h>

#include "core/json_reader.h"
#include "server/gateway.h"
#include "server/lora_choice.h"

namespace pagoda::server {
namespace {

namespace jr = json_reader;

void require_ready(Gateway::State state, const std::string& load_error) {
    if (state == Gateway::State::loading) {
        ApiError e = ApiError::unavailable("the model is still loading; retry shortly", "model_loading");
        e.retry_after = 1;
        throw e;
    }
    if (state == Gateway::State::failed) throw ApiError::unavailable("the model failed to load: " + load_error, "model_failed");
}

// The body's string field `name` (required); no other fields than `allowed`.
std::string string_field(const nlohmann::json& body, const char* name, std::initializer_list<const char*> allowed) {
    try {
        jr::read_object(body, "body");
        for (auto it = body.begin(); it != body.end(); ++it) {
            bool known = false;
            for (const char* a : allowed) known = known || it.key() == a;
            if (!known)
                throw ApiError::invalid(fmt::format("'{}' is not a field of this endpoint; it is refused rather than ignored",
                                                    it.key()),
                                        it.key(), "unsupported_parameter");
        }
        return jr::read_string(jr::required(body, name, name), name);
    } catch (const jr::JsonFieldError& e) {
        throw ApiError::from_field(e);
    }
}

}  // namespace

lora::AdapterRef adapter_for(LoraRegistry* loras, const std::string& base_id, const std::string& model,
                             const std::vector<LoraChoice>& lora) {
    const bool names_base = model.empty() || model == base_id;
    if (!names_base && !(loras && loras->has(model)))
        throw ApiError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", model, base_id),
                       "invalid_request_error", "model", "model_not_found");
    if (!lora.empty() && !loras)
        throw ApiError::invalid("'lora' names an adapter, but this server serves none (--lora)", "lora", "invalid_value");
    if (loras && (!names_base || !lora.empty())) return loras->resolve(names_base ? std::string() : model, lora);
    return {};
}

std::string served_model_id(const std::string& base_id, const std::string& model) {
    return model.empty() ? base_id : model;
}

SimpleResponse Gateway::load_lora_adapter(const nlohmann::json& body) {
    require_ready(state(), load_error_);
    const std::string name = string_field(body, "lora_name", {"lora_name", "lora_path"});
    const std::string path = string_field(body, "lora_path", {"lora_name", "lora_path"});
    if (!loras_ || !loras_->allows_runtime())
        throw ApiError(400, "run-time LoRA loading is off; start the server with --allow-runtime-lora",
                       "invalid_request_error", {}, "unsupported");
    if (name == options_.model_name)
        throw ApiError::invalid(fmt::format("'{}' is the base model's id", name), "lora_name", "invalid_value");
    loras_->load(name, path);
    return {200, "text/plain; charset=utf-8", fmt::format("Success: LoRA adapter '{}' added successfully.", name)};
}

SimpleResponse Gateway::unload_lora_adapter(const nlohmann::json& body) {
    require_ready(state(), load_error_);
    const std::string name = string_field(body, "lora_name", {"lora_name", "lora_int_id"});
    if (!loras_ || !loras_->allows_runtime())
        throw ApiError(400, "run-time LoRA unloading is off; start the server with --allow-runtime-lora",
                       "invalid_request_error", {}, "unsupported");
    loras_->unload(name);
    return {200, "text/plain; charset=utf-8", fmt::format("Success: LoRA adapter '{}' removed successfully.", name)};
}

SimpleResponse Gateway::lora_adapters() const {
    require_ready(state(), load_error_);
    return {200, "application/json", dump_json(loras_ ? loras_->adapter_list() : nlohmann::json::array())};
}

}  // namespace pagoda::server
