#!/usr/bin/env python3
"""Writes the committed seed corpora under tests/fuzz/corpus/TARGET/ (small, hand-made inputs that
reach each target's deeper paths; libFuzzer grows its working corpus from them in build-fuzz/).
Run from the repository root: python3 tests/fuzz/make_seeds.py"""
import json, os, struct

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus')

def write(target, name, data):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)

def fdp_string(s):
    """A string as FuzzedDataProvider::ConsumeRandomLengthString reads it (backslash-terminated)."""
    if isinstance(s, str):
        s = s.encode()
    return s.replace(b'\\', b'\\\\') + b'\\x'

# ---- http_request: whole HTTP/1.1 requests (the first byte also sets the feed piece size) ----
def http(method, path, body=None, headers=()):
    lines = [f'{method} {path} HTTP/1.1', 'Host: localhost', 'Authorization: Bearer sk-fuzz-1']
    lines += list(headers)
    if body is not None:
        b = body if isinstance(body, str) else json.dumps(body)
        lines += ['Content-Type: application/json', f'Content-Length: {len(b.encode())}']
        return ('\r\n'.join(lines) + '\r\n\r\n' + b)
    return '\r\n'.join(lines) + '\r\n\r\n'

chat = {'model': 'fuzz-model', 'messages': [{'role': 'system', 'content': 'be brief'}, {'role': 'user', 'content': 'hi'}],
        'max_tokens': 8, 'temperature': 0.5, 'stream': True, 'stream_options': {'include_usage': True}}
tools_chat = {'messages': [{'role': 'user', 'content': 'weather?'},
                           {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c1', 'type': 'function',
                            'function': {'name': 'get', 'arguments': '{"city":"Oslo"}'}}]},
                           {'role': 'tool', 'tool_call_id': 'c1', 'content': '12C'}],
              'tools': [{'type': 'function', 'function': {'name': 'get', 'parameters': {'type': 'object',
                         'properties': {'city': {'type': 'string'}}, 'required': ['city']}}}],
              'tool_choice': 'required'}
schema_chat = {'messages': [{'role': 'user', 'content': 'json'}], 'response_format': {'type': 'json_schema',
               'json_schema': {'name': 'x', 'schema': {'type': 'object', 'properties': {'a': {'type': 'integer'},
               'b': {'type': 'array', 'items': {'enum': ['x', 'y']}, 'maxItems': 3}}, 'required': ['a']}}}}
completion = {'prompt': ['Once upon', [1, 2, 3]], 'n': 2, 'logprobs': 2, 'echo': True, 'stop': ['\n'],
              'logit_bias': {'5': -100}, 'seed': 7, 'grammar': 'root ::= [a-z]+ "."'}
seeds = {
    'chat-stream': http('POST', '/v1/chat/completions', chat),
    'chat-tools': http('POST', '/v1/chat/completions', tools_chat),
    'chat-schema': http('POST', '/v1/chat/completions', schema_chat),
    'completion': http('POST', '/v1/completions?x=1', completion),
    'embeddings': http('POST', '/v1/embeddings', {'input': ['a', 'b'], 'encoding_format': 'base64'}),
    'tokenize': http('POST', '/tokenize', {'content': 'hello <s>', 'add_special': True, 'with_pieces': True}),
    'detokenize': http('POST', '/detokenize', {'tokens': [1, 2, 300]}),
    'health': http('GET', '/health'),
    'ws-upgrade': http('GET', '/v1/ws', None, ['Upgrade: websocket', 'Connection: Upgrade',
                                             'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13']),
    'chunked': 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n'
               '5\r\n{"pro\r\n10\r\nmpt": "hi", "n":\r\n2\r\n1}\r\n0\r\n\r\n',
    'expect-continue': http('POST', '/v1/completions', {'prompt': 'x'}, ['Expect: 100-continue']),
    'bad-json': http('POST', '/v1/chat/completions', '{"messages": [}'),
}
for name, data in seeds.items():
    write('http_request', name, data)

# ---- openai_request / chat_template: generator bytes (any bytes work; a few lengths and patterns) ----
for i, data in enumerate([bytes(range(256)), bytes(64), b'\xff' * 200, os.urandom(0) + bytes((j * 37) % 256 for j in range(1024))]):
    write('openai_request', f'bytes-{i}', data)

templates_dir = os.path.join(os.path.dirname(root), '..', 'data', 'chat_templates')
msgs_tail = bytes((j * 53 + 11) % 256 for j in range(300))
if os.path.isdir(templates_dir):
    for name in [n for n in sorted(os.listdir(templates_dir)) if n.endswith('.jinja')][:6]:
        with open(os.path.join(templates_dir, name), 'rb') as f:
            src = f.read()
        # ConsumeBool() reads the last byte: odd -> custom template source first.
        write('chat_template', 'custom-' + name.replace('.jinja', ''), fdp_string(src) + msgs_tail + b'\x01')
write('chat_template', 'custom-small', fdp_string('{% for m in messages %}{{ m.role }}: {{ m.content | tojson }}\n'
                                                  '{% endfor %}{% if add_generation_prompt %}>{% endif %}') + msgs_tail + b'\x01')
for i in range(4):
    write('chat_template', f'builtin-{i}', bytes((j * (i + 3)) % 256 for j in range(400)) + b'\x00')

# ---- websocket: client frames (masked, as a client must send) ----
def frame(opcode, payload, fin=True, mask=b'\x01\x02\x03\x04'):
    if isinstance(payload, str):
        payload = payload.encode()
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126: head += bytes([0x80 | n])
    elif n < 65536: head += bytes([0x80 | 126]) + struct.pack('>H', n)
    else: head += bytes([0x80 | 127]) + struct.pack('>Q', n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))

req = json.dumps({'id': 1, 'endpoint': 'chat.completions', 'body': {'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': 4}})
comp = json.dumps({'id': 'a', 'type': 'request', 'endpoint': 'completions', 'body': {'prompt': 'x', 'stream': True}})
write('websocket', 'request-cancel', frame(1, req) + frame(1, json.dumps({'id': 1, 'type': 'cancel'})) + frame(8, b'\x03\xe8'))
write('websocket', 'fragmented', frame(1, comp[:10], fin=False) + frame(9, 'ping') + frame(0, comp[10:]) + frame(8, b''))
write('websocket', 'binary-and-bad', frame(2, b'\x00\x01') + frame(1, '{"id": 2.5}') + frame(1, '[1]') + frame(1, comp + comp))
write('websocket', 'unmasked', b'\x81\x05hello')
write('websocket', 'duplicate', frame(1, comp) + frame(1, comp) + frame(10, 'pong'))

# ---- tokenizer: control byte (vocabulary, options) + text ----
texts = ['Hello world', ' Führer ½ months', '\t\n  spaces   ', '<s>Hi</s><|im_end|>', '🦙 llamas 🦙',
         'def f(x):\n    return x**2', '\xff\xfe invalid', '日本語のテキスト', "don't I'll", '3.14159 1234567']
for v in range(6):
    for i, t in enumerate(texts[:5] if v else texts):
        b = t.encode('utf-8', 'surrogateescape') if '\xff' not in t else b'\xff\xfe invalid'
        write('tokenizer', f'v{v}-{i}', bytes([v | (0x10 if i % 3 == 0 else 0) | (0x80 if i % 4 == 1 else 0)]) + b)

# ---- hf_tokenizer: tokenizer.json, NUL, tokenizer_config.json ----
hf_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'data', 'hf_tokenizer')
for family in ('llama3.1', 'qwen3', 'mistral', 'phi3', 'gemma3'):
    with open(os.path.join(hf_dir, family, 'tokenizer.json'), 'rb') as f:
        tok = f.read()
    with open(os.path.join(hf_dir, family, 'tokenizer_config.json'), 'rb') as f:
        cfg = f.read()
    write('hf_tokenizer', family, tok + b'\0' + cfg)
write('hf_tokenizer', 'small_byte_level', json.dumps({
    'added_tokens': [{'id': 3, 'content': '<|end|>', 'special': True}],
    'pre_tokenizer': {'type': 'ByteLevel', 'add_prefix_space': False, 'use_regex': True},
    'model': {'type': 'BPE', 'vocab': {'a': 0, 'b': 1, 'ab': 2}, 'merges': [['a', 'b']]}}))
write('hf_tokenizer', 'small_sentencepiece', json.dumps({
    'normalizer': {'type': 'Replace', 'pattern': {'String': ' '}, 'content': '\u2581'},
    'model': {'type': 'BPE', 'byte_fallback': True, 'unk_token': '<unk>',
              'vocab': {'<unk>': 0, 'a': 1, 'b': 2, 'ab': 3, '<0x20>': 4}, 'merges': ['a b']}}))

# ---- gbnf: grammar, NUL, input ----
grammars = {
    'yesno': ('root ::= "yes" | "no"', 'yes'),
    'list': ('root ::= "[" item ("," item)* "]"\nitem ::= [0-9]+ | "\\"" [^"\\\\]* "\\""', '[1,"a",22]'),
    'repeat': ('root ::= ([a-c]{2,4} " ")+ end\nend ::= "." | "!"  # comment', 'ab abc .'),
    'unicode': ('root ::= [\\u00e9-\\u00ff]+ "\\x41" .', 'éÿA€'),
    'nested': ('root ::= "(" root ")" | "x"', '((x))'),
    'json': ('root ::= obj\nobj ::= "{" ws ( str ws ":" ws val ( "," ws str ws ":" ws val )* )? "}"\n'
             'val ::= obj | str | [0-9]+\nstr ::= "\\"" [a-z]* "\\""\nws ::= [ \\t\\n]?', '{"a": {"b": 1}}'),
}
for name, (g, inp) in grammars.items():
    write('gbnf', name, g.encode() + b'\x00' + inp.encode())

# ---- json_schema: raw schema text (last byte odd) + matcher input ----
schemas = {
    'object': ({'type': 'object', 'properties': {'name': {'type': 'string', 'maxLength': 8}, 'age': {'type': 'integer'}},
                'required': ['name']}, '{"name": "al", "age": 3}'),
    'array': ({'type': 'array', 'items': {'type': 'number'}, 'minItems': 1, 'maxItems': 3}, '[1.5, -2]'),
    'enum': ({'enum': ['a', 1, None, True]}, '"a"'),
    'ref': ({'$defs': {'node': {'type': 'object', 'properties': {'next': {'anyOf': [{'$ref': '#/$defs/node'}, {'type': 'null'}]}}}},
             '$ref': '#/$defs/node'}, '{"next": {"next": null}}'),
    'pattern': ({'type': 'string', 'pattern': '^[a-z]{2,3}-\\d+$'}, '"ab-12"'),
    'oneof': ({'oneOf': [{'type': 'string'}, {'type': 'integer'}], 'title': 't'}, '7'),
    'additional': ({'type': 'object', 'additionalProperties': {'type': 'boolean'}}, '{"x": true}'),
    'refused': ({'type': 'string', 'format': 'email'}, '""'),
}
for name, (s, inp) in schemas.items():
    write('json_schema', name, fdp_string(json.dumps(s)) + inp.encode() + b'\x01')
for i in range(3):
    write('json_schema', f'generated-{i}', bytes((j * (i + 7) + 3) % 256 for j in range(500)) + b'\x00')
