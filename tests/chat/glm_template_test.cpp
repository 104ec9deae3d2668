// The chat template GLM-4.5 / 4.6 GGUFs carry (tokenizer.chat_template, as zai-org publishes it; the
// text below is the model's, kept as test data) rendered by pagoda's Jinja engine: the [gMASK]<sop>
// prefix, <|system|> / <|user|> / <|assistant|> turns, the empty <think></think> of a past assistant
// turn, /nothink and the closed think block when enable_thinking is false, and a tool call in GLM's
// <arg_key> / <arg_value> form.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace pagoda::test {
namespace {

using chat::ChatTemplate;

const char* const kGlm45Template = R"GLM([gMASK]<sop>
{%- if tools -%}
<|system|>
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{% for tool in tools %}
{{ tool | tojson(ensure_ascii=False) }}
{% endfor %}
</tools>

For each function call, output the function name and arguments within the following XML format:
<tool_call>{function-name}
<arg_key>{arg-key-1}</arg_key>
<arg_value>{arg-value-1}</arg_value>
<arg_key>{arg-key-2}</arg_key>
<arg_value>{arg-value-2}</arg_value>
...
</tool_call>{%- endif -%}
{%- macro visible_text(content) -%}
    {%- if content is string -%}
        {{- content }}
    {%- elif content is iterable and content is not mapping -%}
        {%- for item in content -%}
            {%- if item is mapping and item.type == 'text' -%}
                {{- item.text }}
            {%- elif item is string -%}
                {{- item }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{- content }}
    {%- endif -%}
{%- endmacro -%}
{%- set ns = namespace(last_user_index=-1) %}
{%- for m in messages %}
    {%- if m.role == 'user' %}
        {% set ns.last_user_index = loop.index0 -%}
    {%- endif %}
{%- endfor %}
{% for m in messages %}
{%- if m.role == 'user' -%}<|user|>
{{ visible_text(m.content) }}
{{- '/nothink' if (enable_thinking is defined and not enable_thinking and not visible_text(m.content).endswith("/nothink")) else '' -}}
{%- elif m.role == 'assistant' -%}
<|assistant|>
{%- set reasoning_content = '' %}
{%- set content = visible_text(m.content) %}
{%- if m.reasoning_content is string %}
    {%- set reasoning_content = m.reasoning_content %}
{%- else %}
    {%- if '</think>' in content %}
        {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
        {%- set content = content.split('</think>')[-1].lstrip('\n') %}
    {%- endif %}
{%- endif %}
{%- if loop.index0 > ns.last_user_index and reasoning_content -%}
{{ '\n<think>' + reasoning_content.strip() +  '</think>'}}
{%- else -%}
{{ '\n<think></think>' }}
{%- endif -%}
{%- if content.strip() -%}
{{ '\n' + content.strip() }}
{%- endif -%}
{% if m.tool_calls %}
{% for tc in m.tool_calls %}
{%- if tc.function %}
    {%- set tc = tc.function %}
{%- endif %}
{{ '\n<tool_call>' + tc.name }}
{% set _args = tc.arguments or {} %}
{% for k, v in _args.items() %}
<arg_key>{{ k }}</arg_key>
<arg_value>{{ v | tojson(ensure_ascii=False) if v is not string else v }}</arg_value>
{% endfor %}
</tool_call>{% endfor %}
{% endif %}
{%- elif m.role == 'tool' -%}
{%- if m.content is string -%}
{%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
    {{- '<|observation|>' }}
{%- endif %}
{{- '\n<tool_response>\n' }}
{{- m.content }}
{{- '\n</tool_response>' }}
{%- else -%}
<|observation|>{% for tr in m.content %}

<tool_response>
{{ tr.output if tr.output is defined else tr }}
</tool_response>{% endfor -%}
{% endif -%}
{%- elif m.role == 'system' -%}
<|system|>
{{ visible_text(m.content) }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    <|assistant|>{{- '\n<think></think>' if (enable_thinking is defined and not enable_thinking) else '' -}}
{%- endif -%}
)GLM";

TEST(GlmTemplate, TurnsThinkBlocksAndPrefix) {
    const ChatTemplate t = ChatTemplate::from_source(kGlm45Template, "glm-4.5");
    const std::vector<chat::ChatMessage> chat = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};
    EXPECT_EQ(t.render(chat, true, "", "<|endoftext|>"),
              "[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi<|assistant|>\n<think></think>\nHello.<|user|>\nBye<|assistant|>");
    // enable_thinking false: /nothink on each user turn and a closed think block opening the answer.
    const nlohmann::ordered_json messages = {{{"role", "user"}, {"content", "Hi"}}};
    chat::ChatRenderOptions o;
    o.extra = {{"enable_thinking", false}};
    EXPECT_EQ(t.render(messages, o), "[gMASK]<sop><|user|>\nHi/nothink<|assistant|>\n<think></think>");
    // A past turn's reasoning after the last user message is kept; before it, dropped.
    nlohmann::ordered_json reasoning = {
        {{"role", "user"}, {"content", "2+2?"}},
        {{"role", "assistant"}, {"content", "<think>add them</think>4"}}};
    EXPECT_EQ(t.render(reasoning, chat::ChatRenderOptions{.add_generation_prompt = false}),
              "[gMASK]<sop><|user|>\n2+2?<|assistant|>\n<think>add them</think>\n4");
    reasoning.push_back({{"role", "user"}, {"content", "ok"}});
    EXPECT_EQ(t.render(reasoning, chat::ChatRenderOptions{.add_generation_prompt = false}),
              "[gMASK]<sop><|user|>\n2+2?<|assistant|>\n<think></think>\n4<|user|>\nok");
}

TEST(GlmTemplate, ToolCallAndResponse) {
    const ChatTemplate t = ChatTemplate::from_source(kGlm45Template, "glm-4.5");
    const nlohmann::ordered_json messages = {
        {{"role", "user"}, {"content", "Weather in Paris?"}},
        {{"role", "assistant"},
         {"content", ""},
         {"tool_calls", {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}, {"days", 2}}}}}}}}},
        {{"role", "tool"}, {"content", "sunny"}}};
    EXPECT_EQ(t.render(messages, chat::ChatRenderOptions{}),
              "[gMASK]<sop><|user|>\nWeather in Paris?<|assistant|>\n<think></think>\n<tool_call>get_weather\n"
              "<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n"
              "</tool_call><|observation|>\n<tool_response>\nsunny\n</tool_response><|assistant|>");
}

}  // namespace
}  // namespace pagoda::test
