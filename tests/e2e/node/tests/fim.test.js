// Fill in the middle through the official openai client (completions.create with `suffix`) and
// llama-server's /infill shape over plain fetch, streaming and not, on the model with FIM tokens; a
// model without them answers 400 fim_not_supported to both.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './helpers.js';

test('suffix and /infill on a model with FIM tokens; 400 on one without', async () => {
  const server = await startServer([], 'fim');
  const plain = await startServer([]);
  try {
    const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'none', maxRetries: 0 });
    const a = await client.completions.create({ model: 'fim', prompt: 'def add(a, b):', suffix: '\nprint(add(1, 2))',
      max_tokens: 5, temperature: 0 });
    assert.equal(a.object, 'text_completion');
    assert.ok(a.usage.prompt_tokens > 8, 'the FIM tokens and both texts are in the prompt');
    let streamed = '';
    for await (const c of await client.completions.create({ model: 'fim', prompt: 'def add(a, b):',
      suffix: '\nprint(add(1, 2))', max_tokens: 5, temperature: 0, stream: true })) streamed += c.choices[0]?.text ?? '';
    assert.equal(streamed, a.choices[0].text);

    const infill = { input_prefix: 'def add(a, b):', input_suffix: '\nprint(add(1, 2))', prompt: '', max_tokens: 5,
      temperature: 0 };
    const r = await fetch(`${server.url}/infill`, { method: 'POST', body: JSON.stringify(infill) });
    assert.equal(r.status, 200);
    const j = await r.json();
    assert.equal(j.choices[0].text, a.choices[0].text, '/infill with nothing typed and no files is the suffix request');
    assert.equal(j.usage.prompt_tokens, a.usage.prompt_tokens);

    const none = new OpenAI({ baseURL: plain.baseURL, apiKey: 'none', maxRetries: 0 });
    await assert.rejects(none.completions.create({ model: 'tiny', prompt: 'a', suffix: 'b' }),
      (e) => e.status === 400 && e.code === 'fim_not_supported' && e.param === 'suffix');
    const bad = await fetch(`${plain.url}/infill`, { method: 'POST', body: JSON.stringify(infill) });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.code, 'fim_not_supported');
  } finally {
    await server.stop();
    await plain.stop();
  }
});
