// /v1/embeddings through the official openai client (v6, which asks for base64 and decodes it) and
// plain fetch: shapes, determinism, batch invariance, normalisation, usage against /tokenize,
// pooling choice, and the 400s for what the endpoint refuses.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, testModel } from './helpers.js';

let server, client;
before(async () => {
  server = await startServer(['--max-batched-tokens', '64']);
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});
after(async () => { await server.stop(); });

const texts = ['Once upon a time', 'a quick brown fox jumps over the lazy dog', 'x', 'Hello, world! '.repeat(12)];

async function post(body) {
  const r = await fetch(`${server.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

function norm(v) { return Math.sqrt(v.reduce((s, x) => s + x * x, 0)); }

test('embeddings: one vector per input, in order, unit length, usage = tokens', async () => {
  const models = await client.models.list();
  const r = await client.embeddings.create({ model: models.data[0].id, input: texts });
  assert.equal(r.object, 'list');
  assert.equal(r.data.length, texts.length);
  const dim = r.data[0].embedding.length;
  assert.ok(dim > 0);
  let tokens = 0;
  for (const [i, e] of r.data.entries()) {
    assert.equal(e.index, i);
    assert.equal(e.object, 'embedding');
    assert.equal(e.embedding.length, dim);
    assert.ok(Math.abs(norm(e.embedding) - 1) < 1e-5, `input ${i} has norm ${norm(e.embedding)}`);
    const t = await (await fetch(`${server.url}/tokenize`, { method: 'POST', body: JSON.stringify({ content: texts[i], add_special: true }) })).json();
    tokens += t.tokens.length;
  }
  assert.equal(r.usage.prompt_tokens, tokens);
  assert.equal(r.usage.total_tokens, tokens);
  assert.notDeepEqual(r.data[0].embedding, r.data[1].embedding);
});

test('embeddings are deterministic and batch-invariant (bitwise)', async () => {
  const single = [];
  for (const t of texts) single.push((await client.embeddings.create({ input: t, encoding_format: 'float' })).data[0].embedding);
  const batched = await client.embeddings.create({ input: [...texts].reverse(), encoding_format: 'float' });
  const again = await client.embeddings.create({ input: [...texts].reverse() });  // base64, decoded by the client
  for (let i = 0; i < texts.length; ++i) {
    assert.deepEqual(batched.data[texts.length - 1 - i].embedding, single[i], `input ${i} differs inside a batch`);
    assert.deepEqual(Array.from(again.data[texts.length - 1 - i].embedding), single[i], `input ${i} differs as base64`);
  }
  // Concurrent requests share engine steps; the vectors do not change.
  const concurrent = await Promise.all(texts.map((t) => client.embeddings.create({ input: t, encoding_format: 'float' })));
  for (let i = 0; i < texts.length; ++i) assert.deepEqual(concurrent[i].data[0].embedding, single[i]);
});

test('embeddings: token-id inputs equal their text', async () => {
  const t = await (await fetch(`${server.url}/tokenize`, { method: 'POST', body: JSON.stringify({ content: texts[1], add_special: true }) })).json();
  const byText = await post({ input: texts[1] });
  const byIds = await post({ input: t.tokens });
  const byIdLists = await post({ input: [t.tokens, t.tokens.slice(0, 3)] });
  assert.equal(byIds.status, 200);
  assert.deepEqual(byIds.body.data[0].embedding, byText.body.data[0].embedding);
  assert.deepEqual(byIdLists.body.data[0].embedding, byText.body.data[0].embedding);
  assert.equal(byIdLists.body.data.length, 2);
  assert.equal(byIdLists.body.usage.prompt_tokens, t.tokens.length + 3);
});

test('embeddings: refused fields and inputs answer 400 naming them', async () => {
  const cases = [
    [{ input: 'a', dimensions: 3 }, 'dimensions'],
    [{ input: 'a', truncate_prompt_tokens: 4 }, 'truncate_prompt_tokens'],
    [{ input: 'a', encoding_format: 'int8' }, 'encoding_format'],
    [{ input: '' }, 'input'],
    [{ input: [] }, 'input'],
    [{ input: ['a', ''] }, 'input[1]'],
    [{ input: [1, -2] }, 'input[1]'],
    [{ input: [[1, 2], [999999]] }, 'input[1]'],
    [{ input: 5 }, 'input'],
    [{}, 'input'],
    [{ input: 'a'.repeat(20000) }, 'input'],
  ];
  for (const [body, param] of cases) {
    const r = await post(body);
    assert.equal(r.status, 400, JSON.stringify(body).slice(0, 80));
    assert.equal(r.body.error.param, param, JSON.stringify(r.body));
    assert.equal(r.body.error.type, 'invalid_request_error');
  }
  await assert.rejects(client.embeddings.create({ input: 'a', dimensions: 7 }), (e) => e.status === 400 && e.param === 'dimensions');
  const wrong = await post({ input: 'a', model: 'nope' });
  assert.equal(wrong.status, 404);
});

test('embeddings: --pooling mean differs from last and stays deterministic', async () => {
  const mean = await startServer(['--pooling', 'mean']);
  try {
    const c = new OpenAI({ baseURL: mean.baseURL, apiKey: 'unused', maxRetries: 0 });
    const a = await c.embeddings.create({ input: texts.slice(0, 2), encoding_format: 'float' });
    const b = await c.embeddings.create({ input: texts[1], encoding_format: 'float' });
    assert.deepEqual(a.data[1].embedding, b.data[0].embedding);
    const last = await client.embeddings.create({ input: texts[1], encoding_format: 'float' });
    assert.notDeepEqual(last.data[0].embedding, b.data[0].embedding);
    assert.ok(Math.abs(norm(b.data[0].embedding) - 1) < 1e-5);
    assert.match(mean.log(), /embeddings: mean pooling/);
  } finally {
    await mean.stop();
  }
});
