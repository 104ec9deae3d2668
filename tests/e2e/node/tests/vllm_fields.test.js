// Issue 45 item 7 through the official `openai` client, on a random-weight
// model, so only the constraints make the outputs what they are: guided_choice gives exactly one of
// the strings, guided_regex text the whole pattern matches, include_stop_str_in_output keeps the
// stop string, continue_final_message / add_generation_prompt end the chat prompt where vLLM does,
// and a JSON schema's properties come in the schema's order.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './helpers.js';

let server, client;
before(async () => {
  server = await startServer(['--max-seqs', '8']);
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'none', maxRetries: 0 });
});
after(async () => { await server?.stop(); });

test('guided_choice: each choice is exactly one of the strings, on both endpoints', async () => {
  const choices = ['red', 'green', 'blue "sky"'];
  const c = await client.completions.create({ prompt: 'Colour:', n: 6, seed: 3, max_tokens: 16, guided_choice: choices });
  const chat = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'Pick a colour' }], n: 6, seed: 5, max_tokens: 16, guided_choice: choices,
  });
  for (const text of [...c.choices.map((x) => x.text), ...chat.choices.map((x) => x.message.content)])
    assert.ok(choices.includes(text), `not a choice: ${JSON.stringify(text)}`);
  for (const x of c.choices) assert.equal(x.finish_reason, 'stop');
});

test('guided_regex: the whole output matches the pattern', async () => {
  const c = await client.completions.create({ prompt: 'Code:', n: 6, seed: 7, max_tokens: 16, guided_regex: '[a-c]{2}-\\d{1,3}' });
  for (const x of c.choices) assert.match(x.text, /^[a-c]{2}-\d{1,3}$/);
  await assert.rejects(
    client.completions.create({ prompt: 'x', guided_regex: '(?=a)b' }),
    (e) => e.status === 400 && e.param === 'guided_regex' && /lookaround/.test(e.message));
});

test('include_stop_str_in_output keeps the stop string that ended the choice', async () => {
  const body = { prompt: 'x', max_tokens: 16, guided_choice: ['abcSTOPdef'], stop: ['STOP'] };
  const without = await client.completions.create(body);
  const withStop = await client.completions.create({ ...body, include_stop_str_in_output: true });
  assert.equal(without.choices[0].text, 'abc');
  assert.equal(withStop.choices[0].text, 'abcSTOP');
  assert.equal(withStop.choices[0].finish_reason, 'stop');
  // Streamed alike.
  let streamed = '';
  for await (const chunk of await client.completions.create({ ...body, include_stop_str_in_output: true, stream: true }))
    streamed += chunk.choices[0]?.text ?? '';
  assert.equal(streamed, 'abcSTOP');
});

test('continue_final_message continues the assistant message; add_generation_prompt false closes it', async () => {
  const messages = [{ role: 'user', content: 'Tell me a story' }, { role: 'assistant', content: 'Once upon a' }];
  const usage = async (extra) =>
    (await client.chat.completions.create({ messages, max_tokens: 1, ...extra })).usage.prompt_tokens;
  const opened = await usage({});
  const closed = await usage({ add_generation_prompt: false });
  const continued = await usage({ continue_final_message: true });
  // chatml: "...Once upon a<|im_end|>\n<|im_start|>assistant\n", "...Once upon a<|im_end|>\n", "...Once upon a".
  assert.ok(continued < closed && closed < opened, `${continued} < ${closed} < ${opened}`);
  await assert.rejects(
    client.chat.completions.create({ messages: [messages[0]], continue_final_message: true }),
    (e) => e.status === 400 && e.param === 'continue_final_message');
  await assert.rejects(
    client.chat.completions.create({ messages, continue_final_message: true, add_generation_prompt: true }),
    (e) => e.status === 400 && e.param === 'add_generation_prompt');
});

test('a JSON schema generates its properties in the schema\'s order, not by name', async () => {
  const schema = {
    type: 'object', properties: { zeta: { type: 'integer' }, alpha: { type: 'boolean' }, mid: { enum: ['a', 'b'] } },
    required: ['zeta', 'alpha', 'mid'], additionalProperties: false,
  };
  const r = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'JSON please' }], n: 3, seed: 2, max_tokens: 80,
    response_format: { type: 'json_schema', json_schema: { name: 'ordered', schema } },
  });
  for (const c of r.choices) assert.deepEqual(Object.keys(JSON.parse(c.message.content)), ['zeta', 'alpha', 'mid']);
  const g = await client.completions.create({ prompt: 'x', max_tokens: 80, guided_json: schema });
  assert.deepEqual(Object.keys(JSON.parse(g.choices[0].text)), ['zeta', 'alpha', 'mid']);
});
