// Run-time LoRA adapters on a server of several base models, through the official openai client:
// POST /v1/load_lora_adapter names the adapter's base. Loaded while requests stream for the other
// base and for a start-up adapter of it, nothing is lost and every answer (theirs and the new
// adapter's) equals the same model or adapter on a server of its one base, given at start.
// Unloaded while requests run under it, those finish with their whole answer and new ones get 404.
// Refusals name the field at fault.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import OpenAI from 'openai';
import { BINARY, startServer, workDir } from './helpers.js';

const ADMIN = 'sk-admin-runtime-lora-01';
const PROMPTS = ['Once upon a time', 'The cat sat', 'In a galaxy far away', 'Hello there'];

function genWithAdapter(name, seed) {
  const model = join(workDir, `${name}.gguf`);
  const adapter = join(workDir, `${name}-lora.gguf`);
  execFileSync(BINARY, ['gen-model', '--preset', 'tiny', '-o', model, '--seed', String(seed), '--lora-out', adapter,
    '--lora-rank', '8'], { stdio: ['ignore', 'ignore', 'pipe'] });
  return { model, adapter };
}

const client = (server, apiKey = ADMIN) => new OpenAI({ baseURL: server.baseURL, apiKey, maxRetries: 0 });

async function complete(c, model, prompt, maxTokens = 8, stream = false) {
  const body = { model, prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true };
  if (!stream) return (await c.completions.create(body)).choices[0].text;
  let text = '';
  for await (const chunk of await c.completions.create({ ...body, stream: true })) text += chunk.choices[0]?.text ?? '';
  return text;
}

// Each model's answers on a server of its one base, the adapter given at start.
async function alone(model, args, maxTokens, id = 'x') {
  const server = await startServer(['-m', model, ...args], null);
  try {
    const out = {};
    for (const p of PROMPTS) out[p] = await complete(client(server), id, p, maxTokens);
    return out;
  } finally {
    await server.stop();
  }
}

async function admin(server, path, body) {
  const r = await fetch(`${server.url}${path}`, { method: 'POST', body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${ADMIN}` } });
  return { status: r.status, text: await r.text() };
}

test('a run-time adapter loads and unloads under load on a server of two bases; nothing lost', async () => {
  const a = genWithAdapter('rt-a', 61);
  const b = genWithAdapter('rt-b', 62);
  const ref = {
    la: await alone(a.model, ['--lora', `x=${a.adapter}`], 8),
    laLong: await alone(a.model, ['--lora', `x=${a.adapter}`], 120),
    b: await alone(b.model, ['--alias', 'base'], 8, 'base'),
    lb: await alone(b.model, ['--lora', `x=${b.adapter}`], 8),
  };
  const server = await startServer(['-m', `a=${a.model}`, '-m', `b=${b.model}`, '--lora', `b:lb=${b.adapter}`,
    '--allow-runtime-lora', '--admin-key', ADMIN, '--open-health'], null);
  try {
    const c = client(server);
    // Requests for b and its start-up adapter stream while la is loaded onto a.
    let flowing = true;
    const lost = [];
    const flood = [0, 1, 2].map(async (w) => {
      let n = 0;
      while (flowing || n < 2) {
        const model = (n + w) % 2 ? 'b' : 'lb';
        const p = PROMPTS[(n + w) % PROMPTS.length];
        const got = await complete(c, model, p, 8, true);
        if (got !== ref[model][p]) lost.push(`${model} '${p}': ${JSON.stringify(got)}`);
        n++;
      }
      return n;
    });
    const loaded = await admin(server, '/v1/load_lora_adapter', { lora_name: 'la', lora_path: a.adapter, base: 'a' });
    assert.equal(loaded.status, 200, loaded.text);
    for (const p of PROMPTS) assert.equal(await complete(c, 'la', p, 8, true), ref.la[p], `la '${p}'`);
    for (const p of PROMPTS) assert.equal(await complete(c, 'la', p), ref.la[p], `la '${p}' (whole)`);
    flowing = false;
    const counts = await Promise.all(flood);
    assert.deepEqual(lost, [], 'every request for b and lb answered as on its own server');
    assert.ok(counts.every((n) => n >= 2));

    const ids = [];
    for await (const m of c.models.list()) ids.push([m.id, m.parent ?? null]);
    assert.deepEqual(ids, [['a', null], ['b', null], ['la', 'a'], ['lb', 'b']]);
    const list = await (await fetch(`${server.url}/lora-adapters`, { headers: { Authorization: `Bearer ${ADMIN}` } })).json();
    assert.deepEqual(list.map((x) => [x.name, x.base, x.runtime]), [['la', 'a', true], ['lb', 'b', false]]);

    // Unload while long requests run under it: they finish whole; new ones are 404.
    const running = PROMPTS.map((p) => complete(c, 'la', p, 120, true));
    await new Promise((r) => setTimeout(r, 50));
    const unloaded = await admin(server, '/v1/unload_lora_adapter', { lora_name: 'la' });
    assert.equal(unloaded.status, 200, unloaded.text);
    const finished = await Promise.all(running);
    PROMPTS.forEach((p, i) => assert.equal(finished[i], ref.laLong[p], `la '${p}' finished under the unloaded adapter`));
    await assert.rejects(complete(c, 'la', 'Hi'), (e) => e.status === 404 && e.code === 'model_not_found');
    assert.equal(await complete(c, 'lb', PROMPTS[0]), ref.lb[PROMPTS[0]]);

    // Refusals name the field.
    const refusal = async (body, status, param) => {
      const r = await admin(server, '/v1/load_lora_adapter', body);
      assert.equal(r.status, status, r.text);
      assert.equal(JSON.parse(r.text).error.param, param, r.text);
    };
    await refusal({ lora_name: 'z', lora_path: a.adapter }, 400, 'base');
    await refusal({ lora_name: 'z', lora_path: a.adapter, base: 'nope' }, 404, 'base');
    await refusal({ lora_name: 'lb', lora_path: a.adapter, base: 'a' }, 400, 'lora_name');
    await refusal({ lora_name: 'z', lora_path: join(workDir, 'none.gguf'), base: 'a' }, 400, 'lora_path');
    await refusal({ lora_name: 'z', lora_path: a.adapter, base: 'a', load_inplace: true }, 400, 'load_inplace');
    const user = await fetch(`${server.url}/v1/load_lora_adapter`, { method: 'POST',
      body: JSON.stringify({ lora_name: 'z', lora_path: a.adapter, base: 'a' }),
      headers: { 'Content-Type': 'application/json' } });
    assert.equal(user.status, 401);
  } finally {
    await server.stop();
  }
});
