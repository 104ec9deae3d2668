# Generator (run with /usr/bin/python3 after editing a .jinja file): embeds the chat templates of tests/data/chat_templates into builtin_templates.cpp.
import os
D=os.path.dirname(os.path.abspath(__file__))
names=[('chatml','chatml','ChatML (teknium/OpenHermes-2.5-Mistral-7B); pagoda adds Hermes-style tools and tool calls'),
       ('llama2','llama2','meta-llama/Llama-2-7b-chat-hf'),
       ('llama3','llama3','meta-llama/Meta-Llama-3-8B-Instruct'),
       ('llama3.1','llama3.1','meta-llama/Llama-3.1-8B-Instruct (also 3.3): tools, date_string'),
       ('mistral','mistral-v1','mistralai/Mistral-7B-Instruct-v0.1 / v0.2'),
       ('mistral-v3','mistral-v3','mistralai v3 (Mistral-7B-Instruct-v0.3, Mistral-Large-2407): tools'),
       ('phi3','phi3','microsoft/Phi-3.5-mini-instruct'),
       ('gemma','gemma','google/gemma-2-2b-it'),
       ('gemma3','gemma3','google/gemma-3-4b-it (text turns; the system message joins the first user turn)'),
       ('deepseek','deepseek','deepseek-ai/deepseek-llm-7b-chat, DeepSeek-V2 chat'),
       ('deepseek-coder','deepseek-coder','deepseek-ai/deepseek-coder-33b-instruct'),
       ('deepseek-r1','deepseek-r1','deepseek-ai/DeepSeek-R1-Distill-Qwen-32B'),
       ('qwen2.5','qwen2.5','Qwen/Qwen2.5-7B-Instruct (also Qwen2): tools'),
       ('qwen3','qwen3','Qwen/Qwen3-0.6B: <think> handling, tools'),
       ('zephyr','zephyr','HuggingFaceH4/zephyr-7b-beta'),
       ('gpt-oss','gpt-oss','openai/gpt-oss-20b / 120b (harmony: channels, tools as a TypeScript namespace, reasoning_effort)')]
out=['// Generated from tests/data/chat_templates/*.jinja (the real chat_template strings of each model',
     '// family). Tests check that each entry still equals its file byte for byte.',
     '#include "chat/builtin_templates.h"','','namespace pagoda::chat {','',
     'const std::vector<BuiltinTemplate>& builtin_chat_templates() {',
     '    static const std::vector<BuiltinTemplate> templates = {']
for name,f,desc in names:
    src=open(os.path.join(D,f+'.jinja'),encoding='utf-8').read()
    assert ')PAGODA_TPL"' not in src
    out.append(f'        {{"{name}", "{f}.jinja", "{desc}",')
    out.append(f'         R"PAGODA_TPL({src})PAGODA_TPL"}},')
out+=['    };','    return templates;','}','','}  // namespace pagoda::chat','']
open(os.path.join(D, '..', '..', '..', 'src', 'chat', 'builtin_templates.cpp'),'w',encoding='utf-8').write('\n'.join(out))
