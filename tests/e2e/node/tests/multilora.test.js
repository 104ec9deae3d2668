// LoRA adapters on a server of several base models, through the official openai client:
// `--lora MODEL:NAME=PATH` ties each adapter to its base; models.list shows every adapter with its
// base as parent, and each adapter answers (chat and completions) exactly as the same adapter on a
// server of its one base.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import OpenAI from 'openai';
import { BINARY, startServer, workDir } from './helpers.js';

function genWithAdapter(name, seed) {
  const model = join(workDir, `${name}.gguf`);
  const adapter = join(workDir, `${name}-lora.gguf`);
  execFileSync(BINARY, ['gen-model', '--preset', 'tiny', '-o', model, '--seed', String(seed), '--lora-out', adapter,
    '--lora-rank', '8'], { stdio: ['ignore', 'ignore', 'pipe'] });
  return { model, adapter };
}

async function answers(server, model) {
  const c = new OpenAI({ baseURL: server.baseURL, apiKey: 'none', maxRetries: 0 });
  const chat = await c.chat.completions.create({ model, max_tokens: 8, temperature: 0,
    messages: [{ role: 'user', content: 'Tell me a story' }] });
  const completion = await c.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  assert.equal(completion.model, model);
  return [chat.choices[0].message.content, completion.choices[0].text];
}

test('adapters of two bases answer as on a server of their one base; models.list shows their parents', async () => {
  const a = genWithAdapter('ml-a', 41);
  const b = genWithAdapter('ml-b', 42);
  const alone = {};
  for (const [id, m] of [['la', a], ['lb', b]]) {
    const server = await startServer(['-m', m.model, '--lora', `${id}=${m.adapter}`], null);
    try {
      alone[id] = await answers(server, id);
    } finally {
      await server.stop();
    }
  }
  const server = await startServer(['-m', `a=${a.model}`, '-m', `b=${b.model}`, '--lora', `a:la=${a.adapter}`,
    '--lora', `b:lb=${b.adapter}`], null);
  try {
    const c = new OpenAI({ baseURL: server.baseURL, apiKey: 'none', maxRetries: 0 });
    const ids = [];
    for await (const m of c.models.list()) ids.push([m.id, m.parent ?? null]);
    assert.deepEqual(ids, [['a', null], ['b', null], ['la', 'a'], ['lb', 'b']]);
    assert.deepEqual(await answers(server, 'lb'), alone.lb);
    assert.deepEqual(await answers(server, 'la'), alone.la);
    assert.notDeepEqual(await answers(server, 'a'), alone.la, 'the adapter changes its base\'s answers');
  } finally {
    await server.stop();
  }
});
