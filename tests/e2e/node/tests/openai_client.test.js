// The official `openai` npm client (v6) against `pagoda serve`: completions and chat, streaming and
// not, n > 1, stop strings, logprobs, usage, and errors surfacing as the client's error classes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, writeTemp } from './helpers.js';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const r = await server.stop();
  assert.equal(r.code, 0, 'serve exits 0 on SIGTERM');
});

test('models list names the served model', async () => {
  const page = await client.models.list();
  assert.equal(page.data.length, 1);
  assert.equal(page.data[0].id, 'tiny');
  assert.equal(page.data[0].object, 'model');
});

test('completion: greedy text, usage, finish_reason length', async () => {
  const r = await client.completions.create({ model: 'tiny', prompt: 'Once upon a time', max_tokens: 10, temperature: 0, ignore_eos: true });
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 10);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 10);
  assert.ok(r.usage.prompt_tokens_details.cached_tokens >= 0);
  // Greedy decoding is deterministic: the same request gives the same text.
  const again = await client.completions.create({ prompt: 'Once upon a time', max_tokens: 10, temperature: 0, ignore_eos: true });
  assert.equal(again.choices[0].text, r.choices[0].text);
});

test('completion stream concatenates to the non-streamed text', async () => {
  const body = { prompt: 'The cat sat', max_tokens: 12, temperature: 0, ignore_eos: true };
  const whole = await client.completions.create(body);
  const stream = await client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'text_completion');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 12);
});

test('n > 1 gives n indexed choices; a seed reproduces them', async () => {
  const body = { prompt: 'Hello', max_tokens: 6, n: 3, temperature: 1, seed: 1234, ignore_eos: true };
  const a = await client.completions.create(body);
  const b = await client.completions.create(body);
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1, 2]);
  assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
  assert.equal(a.usage.completion_tokens, 18);
  assert.ok(new Set(a.choices.map((c) => c.text)).size > 1, 'sampled choices differ');
});

test('stop strings cut the text before the stop and finish with stop', async () => {
  const base = { prompt: 'A story:', max_tokens: 40, temperature: 0, ignore_eos: true };
  const full = (await client.completions.create(base)).choices[0].text;
  // Pick a plain-ASCII two-character piece from the middle of the greedy continuation.
  let stop = null;
  for (let i = 3; i + 2 <= full.length; ++i) {
    const s = full.slice(i, i + 2);
    if (/^[A-Za-z]{2}$/.test(s)) { stop = s; break; }
  }
  assert.ok(stop, `no ASCII pair in ${JSON.stringify(full)}`);
  const cut = await client.completions.create({ ...base, stop: [stop] });
  assert.equal(cut.choices[0].finish_reason, 'stop');
  assert.equal(cut.choices[0].text, full.slice(0, full.indexOf(stop)));
  // Streamed, the stop string never leaks either.
  const stream = await client.completions.create({ ...base, stop, stream: true });
  let text = '';
  for await (const chunk of stream) for (const c of chunk.choices) text += c.text;
  assert.equal(text, full.slice(0, full.indexOf(stop)));
});

test('completion logprobs', async () => {
  const r = await client.completions.create({ prompt: 'x', max_tokens: 4, logprobs: 2, temperature: 0, ignore_eos: true });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 4);
  assert.equal(lp.token_logprobs.length, 4);
  assert.equal(lp.top_logprobs.length, 4);
  for (const [i, v] of lp.token_logprobs.entries()) {
    assert.ok(v <= 0);
    // Greedy: the chosen token is the most likely, so its logprob is the best alternative's.
    assert.ok(Math.abs(Math.max(...Object.values(lp.top_logprobs[i])) - v) < 1e-4);
  }
});

test('chat completion and chat stream', async () => {
  const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hi' }];
  const r = await client.chat.completions.create({ model: 'tiny', messages, max_completion_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));

  const stream = await client.chat.completions.create({ messages, max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.equal(chunks[0].object, 'chat.completion.chunk');
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const text = chunks.flatMap((c) => c.choices).map((c) => c.delta.content ?? '').join('');
  assert.equal(text, r.choices[0].message.content);
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.prompt_tokens, r.usage.prompt_tokens);
});

test('chat logprobs with top_logprobs', async () => {
  const r = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, logprobs: true, top_logprobs: 2, ignore_eos: true,
  });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 3);
  for (const t of content) {
    assert.equal(typeof t.token, 'string');
    assert.ok(Array.isArray(t.bytes));
    assert.equal(t.top_logprobs.length, 2);
  }
});

test('invalid requests raise BadRequestError with the field', async () => {
  await assert.rejects(client.completions.create({ prompt: 'x', temperature: 5 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, e.constructor.name);
    assert.equal(e.status, 400);
    assert.equal(e.param, 'temperature');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ messages: [] }), OpenAI.BadRequestError);
  await assert.rejects(client.completions.create({ prompt: 'x', max_tokens: 100000 }), OpenAI.BadRequestError);
  await assert.rejects(client.completions.create({ model: 'gpt-4o', prompt: 'x' }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.code, 'model_not_found');
    return true;
  });
});

test('keys: AuthenticationError without a valid key, RateLimitError past rpm', async () => {
  const keys = writeTemp('keys.txt', 'sk-node-test-1 name=node rpm=2\n');
  const keyed = await startServer(['--api-key-file', keys, '--open-health']);
  try {
    const anonymous = new OpenAI({ baseURL: keyed.baseURL, apiKey: 'sk-wrong-key', maxRetries: 0 });
    await assert.rejects(anonymous.completions.create({ prompt: 'x', max_tokens: 1 }), OpenAI.AuthenticationError);
    const good = new OpenAI({ baseURL: keyed.baseURL, apiKey: 'sk-node-test-1', maxRetries: 0 });
    await good.completions.create({ prompt: 'x', max_tokens: 1 });
    await good.completions.create({ prompt: 'x', max_tokens: 1 });
    await assert.rejects(good.completions.create({ prompt: 'x', max_tokens: 1 }), (e) => {
      assert.ok(e instanceof OpenAI.RateLimitError, e.constructor.name);
      assert.ok(Number(e.headers.get('retry-after')) >= 1);
      return true;
    });
  } finally {
    await keyed.stop();
  }
});
