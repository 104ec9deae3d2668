// LoRA adapters through the official openai client: gen-model writes a random adapter in both forms
// (GGUF and PEFT), the server serves them as models of their own (models.list shows them with the
// base as parent), chat and completions pick one by `model`, the two forms of one adapter answer
// alike, and llama-server's `lora` field (an extra body field) picks the same adapter by id.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import OpenAI from 'openai';
import { BINARY, startServer, workDir } from './helpers.js';

test('adapters are models; GGUF and PEFT forms agree; model and lora pick them', async () => {
  // The same weights as the server's 'tiny' model (same preset and seed), written with its adapters.
  const base = join(workDir, 'lora-base.gguf');
  const gguf = join(workDir, 'lora-adapter.gguf');
  const peft = join(workDir, 'lora-adapter-peft');
  execFileSync(BINARY, ['gen-model', '--preset', 'tiny', '-o', base, '--seed', '11', '--lora-out', gguf,
    '--peft-out', peft, '--lora-rank', '8'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const server = await startServer(['--alias', 'base', '--lora', `g=${gguf}`, '--lora', `p=${peft}`]);
  try {
    const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'none', maxRetries: 0 });
    const ids = [];
    for await (const m of client.models.list()) ids.push([m.id, m.parent ?? null]);
    assert.deepEqual(ids, [['base', null], ['g', 'base'], ['p', 'base']]);

    const ask = (model, extra = {}) => client.chat.completions.create({ model, max_tokens: 10, temperature: 0,
      messages: [{ role: 'user', content: 'Tell me a story' }], ...extra });
    const b = await ask('base');
    const g = await ask('g');
    const p = await ask('p');
    assert.equal(g.model, 'g');
    assert.equal(g.choices[0].message.content, p.choices[0].message.content, 'one adapter in two forms');
    assert.notEqual(g.choices[0].message.content, b.choices[0].message.content, 'the adapter changes the output');
    const byId = await ask('base', { lora: [{ id: 0, scale: 1 }] });
    assert.equal(byId.choices[0].message.content, g.choices[0].message.content);

    let streamed = '';
    for await (const c of await client.completions.create({ model: 'p', prompt: 'Once', max_tokens: 8, temperature: 0,
      stream: true })) streamed += c.choices[0]?.text ?? '';
    const whole = await client.completions.create({ model: 'p', prompt: 'Once', max_tokens: 8, temperature: 0 });
    assert.equal(streamed, whole.choices[0].text);

    await assert.rejects(ask('nope'), (e) => e.status === 404 && e.code === 'model_not_found');
  } finally {
    await server.stop();
  }
});
