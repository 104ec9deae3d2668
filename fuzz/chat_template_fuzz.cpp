// libFuzzer entry for chat-template rendering. Half the inputs render every-day and hostile message
// arrays (roles, null / part-list / non-string content, tool calls, tools, extra variables) through
// a builtin template the bytes pick; the other half parse arbitrary Jinja source with the
// interpreter and render it with generated messages.
// Both render overloads run (nlohmann::json and document-order ordered_json messages).
// Oracle: failures are pagoda::Error (syntax, runtime, raise_exception, the sandbox's limits) only.
#include <cstddef>
#include <cstdint>

#include "chat/chat_template.h"
#include "core/error.h"
#include "fuzz/fuzz_support.h"

using namespace pagoda;
using json = nlohmann::json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzedDataProvider p(data, size);
    fuzz::JsonGen gen(p);
    const bool custom = p.ConsumeBool();
    std::optional<chat::ChatTemplate> own;
    const chat::ChatTemplate* tmpl = nullptr;
    if (custom) {
        try {
            own = chat::ChatTemplate::from_source(p.ConsumeRandomLengthString(16 * 1024), "fuzz");
        } catch (const Error&) {
            return 0;
        } catch (const std::exception& e) {
            fuzz::unexpected("template parse", e);
        }
        tmpl = &*own;
    } else {
        const auto& all = fuzz::builtin_templates();
        tmpl = &all[p.ConsumeIntegralInRange<size_t>(0, all.size() - 1)];
    }
    chat::ChatRenderOptions options;
    options.add_generation_prompt = p.ConsumeBool();
    // What reaches a template came through parse_json_body: valid UTF-8 (invalid bytes the
    // generator made become U+FFFD here, as a client's JSON encoder would have to).
    auto as_received = [](const json& j) { return nlohmann::ordered_json::parse(j.dump(-1, ' ', false, json::error_handler_t::replace)); };
    options.bos_token = p.ConsumeBool() ? "<s>" : as_received(json(gen.string())).get<std::string>();
    options.eos_token = p.ConsumeBool() ? "</s>" : as_received(json(gen.string())).get<std::string>();
    options.now = std::time_t(p.ConsumeIntegralInRange<int64_t>(0, 4102444800));
    if (p.ConsumeBool()) options.tools = as_received(gen.tools());
    if (p.ConsumeBool()) options.extra = as_received(json::object({{"enable_thinking", p.ConsumeBool()}, {gen.string(), gen.value(2)}}));
    const nlohmann::ordered_json ordered = as_received(gen.messages());
    const json messages = json::parse(ordered.dump());
    try {
        (void)tmpl->render(messages, options);
        (void)tmpl->render(ordered, options);
    } catch (const Error&) {
    } catch (const std::exception& e) {
        fuzz::unexpected("template render", e);
    }
    return 0;
}
