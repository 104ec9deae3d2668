#!/usr/bin/python3
"""Independent oracle for pagoda's chat templates.

Renders every (template, conversation) pair and every interpreter case below with Python's jinja2,
configured exactly as Hugging Face's apply_chat_template does (transformers chat_template_utils):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]),
a `tojson` filter that is json.dumps(ensure_ascii=False, ...) keeping key order, and the globals
raise_exception and strftime_now. Render variables: messages, tools, documents,
add_generation_prompt, bos_token, eos_token, plus per-case extras.

Run with Debian's /usr/bin/python3 (it has python3-jinja2):
    /usr/bin/python3 make_expected.py            # rewrites expected.json next to this file
    /usr/bin/python3 make_expected.py --stdout   # prints the same JSON (the C++ test compares live)
"""
import datetime
import json
import os
import sys
import warnings

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
FIXED_NOW = datetime.datetime(2024, 7, 26, 12, 0, 0)  # strftime_now clock; the C++ test passes the same


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = make_env()
warnings.filterwarnings("ignore", category=SyntaxWarning)  # Python's compile-time hints about 1[0]

# ---- conversations ------------------------------------------------------------------------------

SYS = {"role": "system", "content": "You are a helpful assistant."}


def u(text):
    return {"role": "user", "content": text}


def a(text):
    return {"role": "assistant", "content": text}


CONVERSATIONS = {
    "single_user": [u("Hello!")],
    "system_multi_turn": [SYS, u("Hi there"), a("Hello! How can I help?"), u("What is 2+2?"), a("4"), u("Thanks")],
    "no_system_multi_turn": [u("Who are you?"), a("   I am an assistant   "), u("Another question")],
    "ends_with_assistant": [SYS, u("Say hi"), a("hi")],
    "tricky_content": [
        SYS,
        u("Quotes ' and \" and backslash \\ and {{ braces }} {% tags %}\nsecond line\n\n  indented"),
        a("Unicode: é ü ß 你好 🙂 — and tabs\tok"),
        u("  leading and trailing spaces  "),
        a(""),
        u(""),
    ],
    "bad_alternation": [u("one"), u("two")],
    "system_only": [SYS],
    "thinking": [
        u("What is 1+1?"),
        a("<think>\nSimple arithmetic.\n</think>\n\n2"),
        u("And 2+2?"),
    ],
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name, e.g. Zürich"}},
            "required": ["city"],
        },
    },
}

TOOL_CONVERSATION = [
    SYS,
    u("What's the weather in Paris?"),
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call00001", "content": "{\"temperature\": 18, \"sky\": \"sunny\"}"},
    a("It is 18 °C and sunny in Paris."),
    u("Thanks"),
]

TEMPLATES = [
    "chatml", "llama2", "llama3", "llama3.1", "mistral-v1", "mistral-v3", "phi3", "gemma", "gemma1", "gemma3",
    "deepseek", "deepseek-coder", "deepseek-r1", "qwen2.5", "qwen3", "zephyr", "gemma4",
]

TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}


def chat_cases():
    cases = []
    for template in TEMPLATES:
        for conv_name, messages in CONVERSATIONS.items():
            for agp in (True, False):
                cases.append({"template": template, "case": f"{conv_name}/agp={int(agp)}", "messages": messages,
                              "add_generation_prompt": agp, **TOKENS, "tools": None, "extra": {}})
    # Family-specific features: tools, tool calls, thinking switches, dates.
    for template in ("qwen2.5", "qwen3", "llama3.1"):
        cases.append({"template": template, "case": "tools", "messages": TOOL_CONVERSATION,
                      "add_generation_prompt": True, **TOKENS, "tools": [WEATHER_TOOL], "extra": {}})
    cases.append({"template": "qwen3", "case": "thinking_disabled", "messages": CONVERSATIONS["thinking"],
                  "add_generation_prompt": True, **TOKENS, "tools": None, "extra": {"enable_thinking": False}})
    cases.append({"template": "qwen3", "case": "reasoning_content_field", "add_generation_prompt": False,
                  "messages": [u("q"), {"role": "assistant", "content": "answer", "reasoning_content": "because"}],
                  **TOKENS, "tools": None, "extra": {}})
    cases.append({"template": "llama3.1", "case": "date_and_tools_in_system", "messages": CONVERSATIONS["system_multi_turn"],
                  "add_generation_prompt": True, **TOKENS, "tools": [WEATHER_TOOL],
                  "extra": {"date_string": "01 Jan 2025", "tools_in_user_message": False}})
    cases.append({"template": "llama3.1", "case": "builtin_tools", "add_generation_prompt": True, **TOKENS, "tools": None,
                  "messages": [u("Search for pagoda"), {"role": "assistant", "content": None, "tool_calls": [
                      {"type": "function", "function": {"name": "brave_search", "arguments": {"query": "pagoda"}}}]},
                      {"role": "ipython", "content": "results"}],
                  "extra": {"builtin_tools": ["brave_search", "code_interpreter"]}})
    mistral_tools = [SYS, u("Weather in Paris?"),
                     {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "abcdef123", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                     {"role": "tool", "tool_call_id": "abcdef123", "content": "sunny"},
                     a("Sunny."), u("Thanks")]
    cases.append({"template": "mistral-v3", "case": "tools", "messages": mistral_tools, "add_generation_prompt": True,
                  **TOKENS, "tools": [WEATHER_TOOL], "extra": {}})
    cases.append({"template": "mistral-v3", "case": "bad_tool_call_id", "add_generation_prompt": True, **TOKENS, "tools": None,
                  "messages": [u("x"), {"role": "assistant", "tool_calls": [
                      {"id": "short", "type": "function", "function": {"name": "f", "arguments": {}}}]}], "extra": {}})
    r1_tools = [u("Weather?"),
                {"role": "assistant", "content": None, "tool_calls": [
                    {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                    {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
                {"role": "tool", "content": "sunny"}, {"role": "tool", "content": "rainy"},
                a("Paris is sunny, Rome is rainy.")]
    cases.append({"template": "deepseek-r1", "case": "tools", "messages": r1_tools, "add_generation_prompt": True,
                  **TOKENS, "tools": None, "extra": {}})
    # Hermes 3 (NousResearch) tool-use template: recursive macros, dict literals, loop.previtem/nextitem.
    rich_tool = {"type": "function", "function": {
        "name": "search", "description": "Search the web.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": " what to look for "},
            "limit": {"type": "integer", "description": "max results"},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "filters"},
            "opts": {"type": "object", "additionalProperties": {"type": "number"}, "description": "weights"},
            "mode": {"type": ["string", "integer"], "description": "either"}},
            "required": ["query"]},
        "return": {"type": "boolean", "description": "whether anything was found"}}}
    hermes_messages = [SYS, u("Find pagodas"),
                       {"role": "assistant", "tool_calls": [
                           {"type": "function", "function": {"name": "search", "arguments": {"query": "pagoda", "limit": 3}}},
                           {"type": "function", "function": {"name": "search", "arguments": "{\"query\": \"tower\"}"}}]},
                       {"role": "tool", "content": "r1"}, {"role": "tool", "content": "r2"},
                       a("Found two."), u("thanks")]
    for agp in (True, False):
        cases.append({"template": "hermes3-tool-use", "case": f"tools/agp={int(agp)}", "messages": hermes_messages,
                      "add_generation_prompt": agp, **TOKENS, "tools": [rich_tool, WEATHER_TOOL], "extra": {}})
    # IBM Granite 3.3: strftime_now, documents, controls, `in` on an undefined variable.
    for agp in (True, False):
        cases.append({"template": "granite3.3", "case": f"no_system/agp={int(agp)}", "messages": CONVERSATIONS["no_system_multi_turn"],
                      "add_generation_prompt": agp, **TOKENS, "tools": None, "extra": {}})
    cases.append({"template": "granite3.3", "case": "system", "messages": CONVERSATIONS["system_multi_turn"],
                  "add_generation_prompt": True, **TOKENS, "tools": None, "extra": {}})
    cases.append({"template": "granite3.3", "case": "tools_documents_controls", "messages": CONVERSATIONS["single_user"],
                  "add_generation_prompt": True, **TOKENS, "tools": [WEATHER_TOOL],
                  "extra": {"documents": [{"doc_id": 1, "text": "Pagodas are towers."}, {"doc_id": "b", "text": "Second doc."}],
                            "controls": {"citations": True, "hallucinations": True, "length": "short"}}})
    cases.append({"template": "granite3.3", "case": "thinking", "messages": CONVERSATIONS["single_user"],
                  "add_generation_prompt": True, **TOKENS, "tools": None, "extra": {"thinking": True}})
    # gpt-oss (harmony): every conversation, tools as a TypeScript namespace in the developer message,
    # a call and its result, reasoning effort, an analysis message kept before a pending tool call.
    for conv_name in ("single_user", "system_multi_turn", "no_system_multi_turn", "ends_with_assistant", "system_only"):
        for agp in (True, False):
            cases.append({"template": "gpt-oss", "case": f"{conv_name}/agp={int(agp)}", "messages": CONVERSATIONS[conv_name],
                          "add_generation_prompt": agp, **TOKENS, "tools": None, "extra": {}})
    harmony_tool = {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
            "days": {"type": "integer"}, "hourly": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}},
            "required": ["city"]}}}
    noop_tool = {"type": "function", "function": {"name": "noop", "description": "Does nothing"}}
    cases.append({"template": "gpt-oss", "case": "tools", "messages": TOOL_CONVERSATION, "add_generation_prompt": True,
                  **TOKENS, "tools": [harmony_tool, noop_tool], "extra": {"reasoning_effort": "high"}})
    cases.append({"template": "gpt-oss", "case": "pending_tool_call_keeps_thinking", "add_generation_prompt": True,
                  "messages": [{"role": "developer", "content": "Be brief."}, u("Weather in Paris?"),
                               {"role": "assistant", "thinking": "Need the weather tool.", "tool_calls": [
                                   {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                               {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
                  **TOKENS, "tools": [harmony_tool], "extra": {"reasoning_effort": "low", "model_identity": "You are pagoda."}})
    cases.append({"template": "gpt-oss", "case": "channel_tags_in_content_refused", "add_generation_prompt": True,
                  "messages": [u("q"), a("<|channel|>analysis<|message|>x")], **TOKENS, "tools": None, "extra": {}})
    # gemma4: tool declarations in the system turn, a call in its <|tool_call>call:name{...} form, and
    # the thinking switch (<|think|> in the system turn; without it, an empty thought channel opens the answer).
    cases.append({"template": "gemma4", "case": "tools", "messages": TOOL_CONVERSATION, "add_generation_prompt": True,
                  **TOKENS, "tools": [WEATHER_TOOL], "extra": {}})
    cases.append({"template": "gemma4", "case": "thinking_enabled", "messages": CONVERSATIONS["thinking"],
                  "add_generation_prompt": True, **TOKENS, "tools": None, "extra": {"enable_thinking": True}})
    cases.append({"template": "chatml", "case": "content_parts_passthrough", "add_generation_prompt": True, **TOKENS,
                  "tools": None, "messages": [{"role": "user", "content": "plain"}], "extra": {}})
    return cases


# ---- interpreter unit cases: (name, template, variables) -----------------------------------------

UNIT = [
    # literals, arithmetic, strings
    ("literals", "{{ 1 }} {{ -2 }} {{ 1.5 }} {{ 1e3 }} {{ 'a\\tb' }} {{ \"q'\" }} {{ true }} {{ False }} {{ none }} {{ None }}", {}),
    ("string_escapes", "{{ 'x\\ny' }}|{{ '\\u00e9\\x41\\101' }}|{{ 'a\\qb' }}|{{ 'it''s' }}", {}),
    ("arithmetic", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 8 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}", {}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 'a' ~ 2 * 3 }} {{ not 1 == 2 }} {{ 1 < 2 and 2 < 3 or false }}", {}),
    ("concat", "{{ 'a' ~ 1 ~ none ~ true ~ [1] }}|{{ 'x' + 'y' }}|{{ [1] + [2, 3] }}|{{ 'ab' * 3 }}|{{ 2 * [0] }}", {}),
    ("floats_repr", "{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1e-5 }} {{ 0.0001 }} {{ 3.0 }} {{ -0.0 }} {{ 1/3 }} {{ 2.5e-10 }} {{ 123456789.125 }}", {}),
    ("comparisons", "{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 != 2 }} {{ 3 >= 3 }} {{ 2 <= 1 }} {{ true == 1 }} {{ none == none }} {{ {'a': 1} == {'a': 1} }}", {}),
    ("in_operator", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 'x' in undefined_var }}", {}),
    ("logic_values", "{{ 0 or 'x' }}|{{ 'a' and 'b' }}|{{ '' and 'b' }}|{{ none or [] }}|{{ not [] }}", {}),
    ("ternary", "{{ 'yes' if flag else 'no' }} {{ 'a' if not flag }}|{{ 1 if false else 2 if false else 3 }}", {"flag": True}),
    ("reprs", "{{ [1, 'a', none, true, 1.5, {'k': \"v'\"}] }} {{ {'a': [1, {'b': none}]} }} {{ ['it\\'s', \"q\\\"\"] }} {{ (1, 2)|list }}", {}),
    ("unicode_strings", "{{ s|length }} {{ s[1] }} {{ s[-1] }} {{ s[1:3] }} {{ s[::-1] }} {{ s|upper }} {{ s|reverse }}", {"s": "héllo🙂"}),
    # variables and access
    ("attribute_access", "{{ d.a }} {{ d['a'] }} {{ d.b.c }} {{ d.missing }}|{{ l[0] }} {{ l[-1] }} {{ l[5] }}|{{ d.items()|list }}", {"d": {"a": 1, "b": {"c": 2}}, "l": [1, 2, 3]}),
    ("dict_methods", "{{ d.keys()|list }} {{ d.values()|list }} {% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 9) }}", {"d": {"b": 2, "a": 1}}),
    ("integer_attribute", "{{ l.0 }} {{ l.1.x }}", {"l": ["zero", {"x": "one"}]}),
    ("slicing", "{{ l[1:] }} {{ l[:2] }} {{ l[::2] }} {{ l[::-1] }} {{ l[-2:] }} {{ l[1:-1] }} {{ l[5:] }} {{ l[3:0:-1] }} {{ 'abcdef'[1:5:2] }} {{ l[:-1] }}", {"l": [1, 2, 3, 4, 5]}),
    # statements
    ("if_elif_else", "{% for x in [1, 2, 3, 4] %}{% if x == 1 %}one{% elif x == 2 %}two{% elif x == 3 %}three{% else %}many{% endif %},{% endfor %}", {}),
    ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", {}),
    ("for_prev_next_cycle", "{% for x in [1, 2, 3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }} {{ loop.cycle('odd', 'even') }};{% endfor %}", {}),
    ("for_filter_else", "{% for x in l if x % 2 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}", {"l": [1, 2, 3, 4, 5]}),
    ("for_dict_and_unpack", "{% for k in d %}{{ k }}{% endfor %}|{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}|{% for k, v in d|dictsort %}{{ k }}{{ v }}{% endfor %}", {"d": {"z": 1, "a": 2}}),
    ("nested_loops", "{% for i in range(3) %}{% for j in range(i) %}{{ i }}{{ j }}{{ loop.depth }} {% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("loop_controls", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("scoping", "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }};{% endfor %}{{ x }}|{% if true %}{% set y = 5 %}{% endif %}{{ y }}", {}),
    ("namespace", "{% set ns = namespace(count=0, found=false) %}{% for i in range(4) %}{% set ns.count = ns.count + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }}", {}),
    ("namespace_empty_then_set", "{% set ns = namespace() %}{% set ns.index = 0 %}{% set ns.index = ns.index + 1 %}{{ ns.index }}", {}),
    ("set_tuple_and_block", "{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set block %}x{{ a }}y{% endset %}{{ block }}|{% set t = (3, 4) %}{{ t[1] }}", {}),
    ("macros", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', '?') }} {{ greet(punct='.', name='Cy') }} {{ greet() }}", {}),
    ("macro_sees_globals", "{% macro m() %}{{ g }}-{{ ns.v }}{% endmacro %}{% set ns = namespace(v=1) %}{% set g = 'G' %}{{ m() }}{% set ns.v = 2 %}{{ m() }}", {}),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1)|int) }}{% endif %}{% endmacro %}{{ fact(6) }}", {}),
    ("filter_block", "{% filter upper %}hello {{ name }}{% endfilter %}", {"name": "you"}),
    ("raw_block", "{% raw %}{{ not rendered }} {% if %}{% endraw %}|done", {}),
    ("comments", "a{# comment #}b{#- stripped -#}  c {# x #}\nd", {}),
    # whitespace control, trim_blocks, lstrip_blocks
    ("ws_trim_blocks", "{% if true %}\nline\n{% endif %}\nafter", {}),
    ("ws_lstrip_blocks", "    {% if true %}\n    indented\n    {% endif %}\n  x {% if true %}y{% endif %}", {}),
    ("ws_minus", "a   {{- ' b ' -}}   c\n  {%- if true -%}  \n d  {%- endif %}  e", {}),
    ("ws_plus", "  {%+ if true %}x{% endif +%}\nnext\n  {%+ if true +%}\ny{% endif %}", {}),
    ("ws_var_no_trim", "{{ 'a' }}\nb\n    {{ 'c' }}\n", {}),
    ("ws_comment_lines", "x\n  {# c #}\ny\n{#- d #}  z", {}),
    ("ws_crlf_and_trailing_newline", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", {}),
    ("ws_tag_after_var", "{{ 'v' }}   {% if true %}t{% endif %}\n   {%- if true %}u{% endif %}", {}),
    ("ws_data_then_tag_same_line", "text   {% if true %}x{% endif %}\n\t{% for i in [1] %}{{ i }}{% endfor %}", {}),
    # filters
    ("filter_trim_case", "[{{ '  x y  '|trim }}] [{{ 'xxhixx'|trim('x') }}] {{ 'abc'|upper }} {{ 'ABC'|lower }} {{ 'hELLO wORLD'|capitalize }} {{ 'hello-world (foo) [bar]'|title }}", {}),
    ("filter_tojson", "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ d|tojson(sort_keys=true) }}|{{ 'é\"<'|tojson }}|{{ [1.0, 2.5, none, true]|tojson }}|{{ {}|tojson(indent=4) }}|{{ d|tojson(separators=(',', ':')) }}", {"d": {"z": [1, {"y": "ü\n"}], "a": None, "m": {}}}),
    ("filter_tojson_ensure_ascii", "{{ 'é🙂'|tojson(ensure_ascii=true) }} {{ 'tab\\tctrl\\x01'|tojson }}", {}),
    ("filter_length_count", "{{ 'abc'|length }} {{ [1, 2]|count }} {{ {'a': 1}|length }} {{ undefined_thing|length }}", {}),
    ("filter_replace_join", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ [1, 2, 3]|join }} {{ ['a', 'b']|join(', ') }} {{ users|join('/', attribute='name') }}", {"users": [{"name": "x"}, {"name": "y"}]}),
    ("filter_default", "{{ missing|default('d') }} {{ missing|d('d2') }} {{ none|default('n') }} {{ ''|default('e', true) }} {{ 0|default(5, boolean=true) }} {{ 'v'|default('d') }}", {}),
    ("filter_first_last_list", "{{ [3, 4]|first }} {{ [3, 4]|last }} {{ 'xyz'|first }} {{ 'ab'|list }} {{ {'k': 1}|list }}", {}),
    ("filter_string_int_float", "{{ 1|string ~ 2 }} {{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '2.5'|float * 2 }} {{ 'bad'|float }} {{ true|int }} {{ '0x1A'|int(0, 16) }}", {}),
    ("filter_items", "{% for k, v in d|items %}{{ k }}:{{ v }} {% endfor %}|{{ missing|items|list }}", {"d": {"b": 1, "a": 2}}),
    ("filter_select_reject", "{{ l|select('odd')|list }} {{ l|reject('odd')|list }} {{ l|select('divisibleby', 3)|list }} {{ l|select|list }} {{ l|select('gt', 2)|list }} {{ l|reject('in', [1, 2])|list }}", {"l": [0, 1, 2, 3, 4, 5, 6]}),
    ("filter_selectattr_map", "{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ ms|rejectattr('role', 'eq', 'user')|list|length }} {{ ms|selectattr('flag')|list|length }} {{ ms|selectattr('flag', 'defined')|list|length }} {{ ms|map(attribute='nested.v', default='-')|join(',') }}",
     {"ms": [{"role": "user", "content": "a", "flag": True, "nested": {"v": 1}}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c", "flag": False}]}),
    ("filter_map_filter_name", "{{ ['a', 'B']|map('upper')|list }} {{ [' x ', 'y ']|map('trim')|join('|') }} {{ [1.26, 2.5]|map('round', 1)|list }}", {}),
    ("filter_safe_escape", "{{ '<b>&\"\\''|safe }} {{ '<b>&\"\\''|escape }} {{ '<i>'|e }}", {}),
    ("filter_indent", "[{{ 'a\nb\n\nc'|indent }}] [{{ 'a\nb'|indent(2, true) }}] [{{ 'a\n\nb'|indent(2, blank=true) }}] [{{ 'x\ny'|indent('> ') }}]", {}),
    ("filter_round_abs", "{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 1.55|round(1, 'floor') }} {{ 1.21|round(1, 'ceil') }} {{ 7|round }} {{ -3|abs }} {{ -2.5|abs }} {{ 1234.5|round(-2) }}", {}),
    ("filter_unique_sort", "{{ ['b', 'A', 'a', 'c', 'b']|unique|list }} {{ ['b', 'A', 'a']|unique(case_sensitive=true)|list }} {{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ [3, 1, 2]|sort(reverse=true) }} {{ ms|sort(attribute='n')|map(attribute='n')|list }}",
     {"ms": [{"n": 2}, {"n": 1}, {"n": 3}]}),
    ("filter_dictsort_reverse", "{{ d|dictsort }} {{ d|dictsort(by='value') }} {{ d|dictsort(reverse=true) }} {{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }}", {"d": {"b": 1, "A": 3, "c": 2}}),
    ("filter_min_max_sum", "{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ [1, 2, 3]|sum }} {{ ms|sum(attribute='n') }} {{ ['b', 'A']|min }}", {"ms": [{"n": 2}, {"n": 5}]}),
    # tests
    ("tests_types", "{{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ 's' is string }} {{ none is none }} {{ true is boolean }} {{ {} is mapping }} {{ [] is mapping }} {{ [] is sequence }} {{ 's' is iterable }} {{ 1 is iterable }} {{ undefined_var is iterable }}", {}),
    ("tests_defined", "{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ x is not none }} {{ d.k is defined }} {{ d.z is defined }} {{ x is true }} {{ x is false }}", {"x": False, "d": {"k": None}}),
    ("tests_values", "{{ 3 is odd }} {{ 3 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 'a' is equalto 'a' }} {{ 2 is eq 3 }} {{ 2 is in [1, 2] }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ none is sameas none }} {{ 5 is gt 3 }} {{ 5 is lt 3 }} {{ 'upper' is filter }} {{ 'odd' is test }}", {}),
    # methods
    ("str_methods", "[{{ '  x  '.strip() }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip() }}][{{ 'xxyxx'.strip('x') }}] {{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'Hi'.upper() }} {{ 'Hi'.lower() }} {{ 'hello world-x'.title() }} {{ 'aXb'.replace('X', '-') }} {{ 'hello'.capitalize() }} {{ 'a\nb\r\nc'.splitlines() }} {{ '-'.join(['a', 'b']) }} {{ 'abcb'.find('b') }} {{ 'abcb'.count('b') }} {{ '12'.isdigit() }} {{ ' '.isspace() }}", {}),
    ("str_method_chain", "{{ content.split('</think>')[-1].lstrip('\\n') }}|{{ content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}", {"content": "<think>\nreason\n</think>\n\nanswer"}),
    ("globals", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b='x') }} {{ strftime_now('%Y-%m-%d %B') }}", {}),
    ("list_literals_trailing_commas", "{{ [1, 2,] }} {{ {'a': 1,} }} {{ (1,) }} {{ () }}", {}),
    ("undefined_renders_empty", "[{{ nothing }}][{{ d.nothing }}][{{ nothing|trim }}][{{ nothing ~ 'x' }}]", {"d": {}}),
    ("messages_like", "{% for m in messages %}{{ m.role }}:{{ m['content'] }}{% if not loop.last %}\n{% endif %}{% endfor %}", {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}),
    ("content_parts", "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% endif %}{% endfor %}{% endif %}|{% endfor %}",
     {"messages": [{"role": "user", "content": [{"type": "text", "text": "part1 "}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "part2"}]}, {"role": "assistant", "content": "plain"}]}),
    ("tuples", "{{ (1, 'a') }} {{ (1,) }} {{ d.items()|list }} {{ d|items|list }} {{ (1, 2) == [1, 2] }} {{ (1, 2) + (3,) }} {{ (1, 2)[::-1] }} {{ d|dictsort|first }}", {"d": {"k": "v", "j": 1}}),
    ("unicode_case", "{{ 'ÄÖÜ ÉÈ straße'|lower }} {{ 'àéîõü straße'|upper }} {{ 'ΑΒΓ δεζ'|lower }} {{ 'привет МИР'|upper }} {{ 'élan vital'|title }} {{ 'éCOLE'|capitalize }} {{ 'ŁÓDŹ'.lower() }}", {}),
    ("whitespace_only_lines", "a\n    \n{% if true %}\n  \t{{ 'x' }}\n{% endif %}\n\n   {% for i in [1, 2] %}\n   {{ i }}\n   {% endfor %}\nend", {}),
    ("ws_minus_inside_loop", "{%- for m in ms -%}\n  <{{ m }}>\n{%- endfor -%}\n!", {"ms": ["a", "b"]}),
    ("set_in_macro_and_loop_isolated", "{% macro m() %}{% set v = 'inner' %}{{ v }}{% endmacro %}{% set v = 'outer' %}{{ m() }} {{ v }}", {}),
    ("none_and_bool_rendering", "{{ none }}|{{ true }}|{{ [none, false] }}|{{ {'a': none} }}|{{ 1.0 * 2 }}|{{ 10 ** 20 // 10 ** 19 if false else 'x' }}", {}),
    ("nested_data_access", "{% for m in messages %}{% for tc in m.tool_calls %}{{ tc.function.name }}({{ tc.function.arguments|tojson }}){% endfor %}{% endfor %}",
     {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1, "y": [True, None]}}}]}]}),
    # errors (the oracle's exception message is kept for raise_exception)
    ("error_raise_exception", "{% if true %}{{ raise_exception('Custom failure: ' ~ 42) }}{% endif %}", {}),
    ("error_undefined_attribute_chain", "{{ nothing.attr }}", {}),
    ("error_type_add", "{{ 'a' + 1 }}", {}),
    ("error_concat_binds_tighter_than_plus", "{{ 1 ~ 2 + 3 }}", {}),
    ("error_division_by_zero", "{{ 1 / 0 }}", {}),
    ("error_call_non_callable", "{{ 'x'() }}", {}),
    ("error_list_append_sandbox", "{% set l = [] %}{{ l.append(1) }}", {}),
]


# ---- random expressions: a seeded generator over the expression grammar, for differential testing --

def random_expressions(count=400, seed=20241129):
    import random
    rng = random.Random(seed)
    strings = ["''", "'a'", "'Hello'", "' pad '", "'x,y,z'", "'é🙂'", "'A b-C'", "'\\n'", "'10'", "'3.5'"]
    lists = ["[]", "[1, 2, 3]", "['b', 'a', 'B']", "[3, 1, 2, 1]", "[1.5, -2, 0]", "['x', ['y']]", "[none, true]"]
    dicts = ["{}", "{'a': 1, 'b': [2]}", "{'k': 'v', 'n': none}"]
    unary_filters = ["length", "upper", "lower", "trim", "reverse", "first", "last", "string", "int", "float", "abs",
                     "round", "list", "sort", "unique", "tojson", "capitalize", "title", "count"]

    def atom(depth):
        r = rng.random()
        if r < 0.25:
            return str(rng.choice([0, 1, 2, 3, 7, -4, 10, 100]))
        if r < 0.35:
            return rng.choice(["0.5", "1.25", "-2.0", "3.0", "1e3", "0.1"])
        if r < 0.6:
            return rng.choice(strings)
        if r < 0.78:
            return rng.choice(lists)
        if r < 0.85:
            return rng.choice(dicts)
        if r < 0.92:
            return rng.choice(["true", "false", "none"])
        return rng.choice(["v", "w", "missing"])

    def expr(depth):
        if depth <= 0:
            return atom(depth)
        r = rng.random()
        if r < 0.3:
            op = rng.choice(["+", "-", "*", "//", "%", "~", "==", "!=", "<", ">=", "and", "or", "in", "not in", "/", "**"])
            if op == "**":  # small integral exponents: pagoda's ints are 64-bit and it has no complex numbers
                return f"({expr(depth - 1)} ** {rng.choice(['0', '1', '2', '3', '-1', '2.0'])})"
            if op == "%":  # numbers only: str % x is printf formatting, which pagoda does not support
                return f"(({expr(depth - 1)} | int) % ({expr(depth - 1)} | int))"
            return f"({expr(depth - 1)} {op} {expr(depth - 1)})"
        if r < 0.5:
            name = rng.choice(unary_filters)
            # Jinja's reverse/unique return lazy iterators (printed as "<... object at 0x...>");
            # templates always consume them, so the generator does too.
            suffix = " | list" if name in ("reverse", "unique") else ""
            return f"({expr(depth - 1)} | {name}{suffix})"
        if r < 0.58:
            return f"({expr(depth - 1)} | join({rng.choice(strings)}))"
        if r < 0.64:
            return f"({expr(depth - 1)} | default({expr(depth - 1)}))"
        if r < 0.72:
            a, b, c = (rng.choice(["", "-1", "1", "2", "-2", "0"]) for _ in range(3))
            # Slice a str or list: Jinja constant-folds slices of literals through getitem (giving
            # undefined) but slices variables with a plain subscript (an error), a quirk not worth copying.
            target = f"({expr(depth - 1)} | {rng.choice(['string', 'list'])})"
            return f"{target}[{a}:{b}{':' + c if c and c != '0' else ''}]"
        if r < 0.78:
            index = rng.choice(["0", "-1", "1", "'a'", "'k'"])
            return f"{expr(depth - 1)}[{index}]"
        if r < 0.84:
            return f"({expr(depth - 1)} if {expr(depth - 1)} else {expr(depth - 1)})"
        if r < 0.9:
            return f"(not {expr(depth - 1)})"
        if r < 0.95:
            return f"({expr(depth - 1)} is {rng.choice(['string', 'number', 'none', 'defined', 'iterable', 'mapping', 'odd', 'sequence'])})"
        return f"(-{expr(depth - 1)})"

    cases = []
    for i in range(count):
        source = "{{ " + expr(rng.choice([1, 2, 3])) + " }}"
        cases.append((f"random_{i:03d}", source, {"v": rng.choice([1, "str", [1, 2]]), "w": {"a": [1, 2]}}))
    return cases


def random_whitespace_templates(count=300, seed=7):
    """Random mixes of text, newlines, indentation and tags with -/+ whitespace control."""
    import random
    rng = random.Random(seed)
    texts = ["a", "b c", " ", "  ", "\t", "\n", "\n\n", "  \n", "\n  ", " x \n", "\r\n", "\n\t "]

    def sign(allow_plus):
        return rng.choice(["", "", "-", "+"] if allow_plus else ["", "", "-"])

    def block(depth):
        out = []
        for _ in range(rng.randint(1, 4)):
            r = rng.random()
            if r < 0.35:
                out.append(rng.choice(texts))
            elif r < 0.5:
                out.append("{{" + sign(True) + " 'v' " + sign(False) + "}}")
            elif r < 0.6:
                out.append("{#" + sign(True) + " note " + sign(True) + "#}")
            elif r < 0.8 and depth > 0:
                out.append("{%" + sign(True) + " if true " + sign(True) + "%}" + block(depth - 1) +
                           "{%" + sign(True) + " endif " + sign(True) + "%}")
            elif depth > 0:
                out.append("{%" + sign(True) + " for i in [1, 2] " + sign(True) + "%}" + block(depth - 1) +
                           "{{ i }}{%" + sign(True) + " endfor " + sign(True) + "%}")
            else:
                out.append(rng.choice(texts))
        return "".join(out)

    return [(f"whitespace_{i:03d}", block(3) + rng.choice(["", "\n", "\n\n", " "]), {}) for i in range(count)]


def render_case(source, variables):
    try:
        return {"expected": ENV.from_string(source).render(**variables)}
    except jinja2.exceptions.TemplateSyntaxError as e:
        return {"error": str(e), "error_kind": "syntax"}
    except jinja2.exceptions.TemplateError as e:
        kind = "raise_exception" if type(e) is jinja2.exceptions.TemplateError else "runtime"
        return {"error": str(e), "error_kind": kind}
    except Exception as e:  # TypeError, ZeroDivisionError, SecurityError...
        return {"error": f"{type(e).__name__}: {e}", "error_kind": "runtime"}


def build():
    out = {"chat": [], "unit": []}
    for case in chat_cases():
        with open(os.path.join(HERE, case["template"] + ".jinja"), encoding="utf-8") as f:
            source = f.read()
        variables = {"messages": case["messages"], "tools": case["tools"], "documents": None,
                     "add_generation_prompt": case["add_generation_prompt"],
                     "bos_token": case["bos_token"], "eos_token": case["eos_token"], **case["extra"]}
        out["chat"].append({**case, **render_case(source, variables)})
    for name, source, variables in UNIT + random_expressions() + random_whitespace_templates():
        out["unit"].append({"name": name, "template": source, "variables": variables, **render_case(source, variables)})
    return out


def main():
    text = json.dumps(build(), ensure_ascii=False, indent=1) + "\n"
    if "--stdout" in sys.argv:
        sys.stdout.write(text)
    else:
        with open(os.path.join(HERE, "expected.json"), "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
