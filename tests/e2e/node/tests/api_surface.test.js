// The API surface habits bring from OpenAI, vLLM and llama.cpp, through the official `openai`
// client: models.retrieve(), refused and unknown fields (400 naming them), min_tokens, the tool
// loop and content parts under the builtin templates, chat roles, n against --max-seqs, and the
// WebSocket side (a number beyond a double is a 400 there too; a Close frame at shutdown).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import WebSocket from 'ws';
import { startServer } from './helpers.js';

let server;
let client;
before(async () => {
  server = await startServer(['--max-seqs', '4']);
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});
after(async () => { await server.stop(); });

async function badRequest(promise) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof OpenAI.BadRequestError, `expected BadRequestError, got ${e}`);
    return e;
  }
  assert.fail('expected a 400');
}

test('models.retrieve() and a real created time', async () => {
  const m = await client.models.retrieve('tiny');
  assert.equal(m.id, 'tiny');
  assert.equal(m.object, 'model');
  const now = Date.now() / 1000;
  assert.ok(m.created > now - 3600 && m.created <= now + 1, `created ${m.created} is the server's start`);
  const list = await client.models.list();
  assert.equal(list.data[0].created, m.created);
  try {
    await client.models.retrieve('other');
    assert.fail('expected a 404');
  } catch (e) {
    assert.ok(e instanceof OpenAI.NotFoundError, String(e));
    assert.equal(e.code, 'model_not_found');
  }
});

test('fields the server does not act on are refused naming them, never ignored', async () => {
  const chat = { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };
  for (const [field, value] of [['use_beam_search', true], ['structured_outputs', { choice: ['a'] }],
    ['functions', [{ name: 'f', parameters: {} }]], ['function_call', 'auto'], ['some_future_field', 1],
    ['store', true]]) {
    const e = await badRequest(client.chat.completions.create({ ...chat, [field]: value }));
    assert.equal(e.param, field);
    assert.equal(e.code, 'unsupported_parameter');
  }
  // On /v1/completions, the chat-only fields are unknown.
  for (const field of ['tools', 'tool_choice', 'parallel_tool_calls']) {
    const e = await badRequest(client.completions.create({ prompt: 'a', max_tokens: 1, [field]: 'auto' }));
    assert.equal(e.param, field);
  }
  // No-ops by definition are accepted.
  const ok = await client.chat.completions.create({ ...chat, user: 'u', metadata: { k: 'v' }, store: false });
  assert.equal(ok.choices.length, 1);
  // response_format on /v1/completions is honoured: the output is JSON.
  const j = await client.completions.create({ prompt: 'a', max_tokens: 40, response_format: { type: 'json_object' } });
  if (j.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(j.choices[0].text), 'object');
});

test('min_tokens holds off end of sequence', async () => {
  // logit_bias makes </s> (id 2) the model's every choice.
  const base = { prompt: 'a', max_tokens: 20, temperature: 0, logit_bias: { 2: 100 } };
  const plain = await client.completions.create(base);
  assert.equal(plain.usage.completion_tokens, 1);
  assert.equal(plain.choices[0].finish_reason, 'stop');
  const held = await client.completions.create({ ...base, min_tokens: 5 });
  assert.equal(held.usage.completion_tokens, 6, 'five tokens, then the end of sequence');
  assert.equal(held.choices[0].finish_reason, 'stop');
  const chat = await client.chat.completions.create({ messages: [{ role: 'user', content: 'a' }], max_tokens: 20,
    temperature: 0, logit_bias: { 2: 100 }, min_tokens: 3 });
  assert.equal(chat.usage.completion_tokens, 4);
  const e = await badRequest(client.completions.create({ prompt: 'a', max_tokens: 4, min_tokens: 5 }));
  assert.equal(e.param, 'min_tokens');
});

test('chatml renders tools and the standard tool loop', async () => {
  const messages = [{ role: 'user', content: 'weather in Paris?' }];
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const without = await client.chat.completions.create({ messages, max_tokens: 1 });
  const withTools = await client.chat.completions.create({ messages, tools, max_tokens: 1 });
  assert.ok(withTools.usage.prompt_tokens > without.usage.prompt_tokens + 20, 'the tools are in the prompt');
  const loop = await client.chat.completions.create({
    messages: [...messages,
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '18 C, sunny' }],
    tools, max_tokens: 2 });
  assert.equal(loop.choices.length, 1);
  assert.ok(loop.usage.prompt_tokens > withTools.usage.prompt_tokens);
});

async function contentPartsRenderAsStrings(c) {
  const parts = await c.chat.completions.create({ max_tokens: 1, messages: [
    { role: 'user', content: [{ type: 'text', text: 'hello' }, { type: 'text', text: 'there' }] }] });
  const joined = await c.chat.completions.create({ max_tokens: 1, messages: [{ role: 'user', content: 'hello\nthere' }] });
  assert.equal(parts.usage.prompt_tokens, joined.usage.prompt_tokens);
}

test('content as an array of text parts works under chatml and llama2', async () => {
  await contentPartsRenderAsStrings(client);
  const llama2 = await startServer(['--chat-template', 'llama2']);
  try {
    await contentPartsRenderAsStrings(new OpenAI({ baseURL: llama2.baseURL, apiKey: 'unused', maxRetries: 0 }));
  } finally {
    await llama2.stop();
  }
});

test('chat roles are OpenAI\'s; developer is accepted', async () => {
  const dev = await client.chat.completions.create({ max_tokens: 1, messages: [
    { role: 'developer', content: 'be brief' }, { role: 'user', content: 'hi' }] });
  assert.equal(dev.choices.length, 1);
  for (const role of ['hacker', '']) {
    const e = await badRequest(client.chat.completions.create({ max_tokens: 1, messages: [{ role, content: 'hi' }] }));
    assert.equal(e.param, 'messages[0].role');
  }
});

test('n above --max-seqs names n', async () => {
  const ok = await client.completions.create({ prompt: 'a', max_tokens: 1, n: 4 });
  assert.equal(ok.choices.length, 4);
  const e = await badRequest(client.completions.create({ prompt: 'a', max_tokens: 1, n: 5 }));
  assert.equal(e.param, 'n');
  assert.equal(e.code, 'invalid_value');
  assert.match(e.message, /between 1 and 4/);
});

function openWs(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

test('WebSocket: a number beyond a double is a 400 for that message', async () => {
  const ws = await openWs(`ws://127.0.0.1:${server.port}/v1/ws`);
  const reply = new Promise((resolve) => ws.once('message', (d) => resolve(JSON.parse(d.toString()))));
  ws.send('{"id":"r1","endpoint":"completions","body":{"prompt":"a","foo":1e400}}');
  const msg = await reply;
  assert.equal(msg.error.status, 400);
  assert.equal(msg.error.code, 'invalid_json');
  assert.doesNotMatch(msg.error.message, /json\.exception/);
  ws.close();
});

test('WebSocket: shutdown sends a Close frame (1001 going away)', async () => {
  const own = await startServer();
  const ws = await openWs(`ws://127.0.0.1:${own.port}/v1/ws`);
  const closed = new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  const exited = own.stop();
  const c = await closed;
  assert.equal(c.code, 1001, 'a Close frame, not a dropped connection (1006)');
  assert.equal((await exited).code, 0);
});
