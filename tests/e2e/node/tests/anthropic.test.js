// Anthropic's Messages API through the official `@anthropic-ai/sdk` client against a live server on
// a random-weight model: non-streamed and streamed messages (the stream's final message equals the
// non-streamed one), a forced tool (tool_choice tool / any) whose input fits its schema and whose
// result goes back as a tool_result, a final assistant message continued (prefill), thinking blocks from a template that thinks, count_tokens equal
// to the message's input_tokens, stop_sequences, the key in x-api-key, and Anthropic's error shape.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import Ajv from 'ajv';
import { startServer, writeTemp } from './helpers.js';

const ajv = new Ajv({ strict: false, allErrors: true });

const weather = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 8 }, unit: { enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const tools = [
  { name: 'get_weather', description: 'Weather for a city', input_schema: weather },
  { name: 'add', input_schema: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'], additionalProperties: false } },
];
const schemaOf = Object.fromEntries(tools.map((t) => [t.name, t.input_schema]));
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

function checkToolUse(block, what) {
  assert.equal(block.type, 'tool_use', what);
  assert.match(block.id, /^toolu_/, what);
  const validate = ajv.compile(schemaOf[block.name]);
  assert.ok(validate(block.input), `${what}: ${JSON.stringify(block.input)} fails: ${ajv.errorsText(validate.errors)}`);
}

// Streams a request; returns the raw events and the SDK's final message.
async function streamed(client, body) {
  const stream = client.messages.stream(body);
  const events = [];
  for await (const event of stream) events.push(event);
  return { events, final: await stream.finalMessage() };
}

// The event order Anthropic's streams follow, checked on the raw events.
function checkEventOrder(events) {
  assert.equal(events[0].type, 'message_start');
  assert.equal(events.at(-1).type, 'message_stop');
  assert.equal(events.at(-2).type, 'message_delta');
  let open = -1;
  let blocks = 0;
  for (const e of events.slice(1, -2)) {
    if (e.type === 'content_block_start') {
      assert.equal(open, -1, 'a block started inside another');
      assert.equal(e.index, blocks++);
      open = e.index;
    } else if (e.type === 'content_block_delta') {
      assert.equal(e.index, open);
    } else if (e.type === 'content_block_stop') {
      assert.equal(e.index, open);
      open = -1;
    } else {
      assert.fail(`unexpected event ${e.type}`);
    }
  }
  assert.equal(open, -1);
}

// The API's fields of a message (the SDK's stream adds its own, e.g. parsed_output), ids aside:
// they differ per request.
const withoutIds = (m) => JSON.parse(JSON.stringify({
  type: m.type, role: m.role, model: m.model, stop_reason: m.stop_reason, stop_sequence: m.stop_sequence, usage: m.usage,
  content: m.content.map(({ type, text, thinking, signature, name, input }) => ({ type, text, thinking, signature, name, input })),
}));

describe('Anthropic Messages through @anthropic-ai/sdk', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer(['--max-seqs', '8']);
    client = new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => { await server?.stop(); });

  test('a message, streamed and not, and count_tokens agree', async () => {
    const body = { model: 'test', max_tokens: 16, temperature: 0, system: 'Be brief.', messages };
    const models = await (await fetch(`${server.url}/v1/models`)).json();
    body.model = models.data[0].id;
    const m = await client.messages.create(body);
    assert.match(m.id, /^msg_/);
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.equal(m.model, body.model);
    assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
    assert.equal(m.stop_sequence, null);
    for (const b of m.content) assert.equal(b.type, 'text');
    assert.ok(m.usage.input_tokens > 0);
    assert.ok(m.usage.output_tokens >= 1 && m.usage.output_tokens <= 16);

    const { events, final } = await streamed(client, body);
    checkEventOrder(events);
    assert.ok(events.some((e) => e.type === 'content_block_delta' && e.delta.type === 'text_delta'));
    assert.equal(events[0].message.usage.input_tokens, m.usage.input_tokens);
    assert.deepEqual(withoutIds(final), withoutIds(m));

    // On the wire: named events, each data line's type its event's name, and no [DONE].
    const raw = await (await fetch(`${server.url}/v1/messages`, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) })).text();
    const frames = raw.split('\n\n').filter((f) => f && !f.startsWith(':'));
    assert.ok(frames.length >= 3);
    for (const f of frames) {
      const m = /^event: ([a-z_]+)\ndata: (.*)$/s.exec(f);
      assert.ok(m, f);
      assert.equal(JSON.parse(m[2]).type, m[1]);
    }
    assert.ok(!raw.includes('[DONE]'));

    const { model, system } = body;
    const count = await client.messages.countTokens({ model, system, messages });
    assert.deepEqual(count, { input_tokens: m.usage.input_tokens });
  });

  test('a final assistant message is a prefill the model continues', async () => {
    const prefilled = [...messages, { role: 'assistant', content: 'The weather' }];
    const m = await client.messages.create({ max_tokens: 12, temperature: 0, messages: prefilled });
    assert.equal(m.content.length, 1);
    assert.equal(m.content[0].type, 'text');
    // The same continuation as the chat route's continue_final_message, and not what a new turn gives.
    const chat = await (await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ max_tokens: 12, temperature: 0, messages: prefilled, continue_final_message: true, add_generation_prompt: false }),
    })).json();
    assert.equal(m.content[0].text, chat.choices[0].message.content);
    assert.equal(m.usage.output_tokens, chat.usage.completion_tokens);
    assert.equal(m.usage.input_tokens, chat.usage.prompt_tokens);
    const fresh = await client.messages.countTokens({ model: m.model, messages: [...messages, { role: 'assistant', content: 'The weather' }, { role: 'user', content: 'x' }] });
    assert.ok(fresh.input_tokens > m.usage.input_tokens);
    // Trailing whitespace is refused, naming the content.
    await assert.rejects(client.messages.create({ max_tokens: 4, messages: [...messages, { role: 'assistant', content: 'The ' }] }),
      (e) => e.status === 400 && /whitespace/.test(e.message));
  });

  test('a forced tool comes back as tool_use; its result goes back as tool_result', async () => {
    const body = { model: 'test', max_tokens: 300, temperature: 0, messages, tools, tool_choice: { type: 'tool', name: 'get_weather' } };
    delete body.model;  // optional here, as on the OpenAI routes
    const m = await client.messages.create(body);
    assert.equal(m.stop_reason, 'tool_use');
    // Parallel calls are allowed: one tool_use block per call, each valid for the schema.
    const uses = m.content.filter((b) => b.type === 'tool_use');
    assert.ok(uses.length >= 1, JSON.stringify(m.content));
    uses.forEach((u, i) => { assert.equal(u.name, 'get_weather'); checkToolUse(u, `non-streamed call ${i}`); });

    const { events, final } = await streamed(client, body);
    checkEventOrder(events);
    assert.ok(events.some((e) => e.type === 'content_block_delta' && e.delta.type === 'input_json_delta'));
    assert.deepEqual(withoutIds(final), withoutIds(m));

    // any: one of the tools, and only one with disable_parallel_tool_use.
    const any = await client.messages.create({ ...body, tool_choice: { type: 'any', disable_parallel_tool_use: true } });
    const anyUses = any.content.filter((b) => b.type === 'tool_use');
    assert.equal(anyUses.length, 1);
    checkToolUse(anyUses[0], 'any');

    const next = await client.messages.create({
      max_tokens: 8, temperature: 0, tools,
      messages: [...messages, { role: 'assistant', content: m.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: uses[0].id, content: '18 degrees' }] }],
    });
    assert.equal(next.type, 'message');
    assert.ok(next.usage.input_tokens > m.usage.input_tokens);
  });

  test('stop_sequences end the output and are named', async () => {
    const body = { max_tokens: 24, temperature: 0, messages };
    const m = await client.messages.create(body);
    const text = m.content.map((b) => b.text).join('');
    if (text.length < 4) return;  // a random model may end at once; nothing to cut
    const stop = text.slice(2, 4);
    const cut = await client.messages.create({ ...body, stop_sequences: [stop] });
    assert.equal(cut.stop_reason, 'stop_sequence');
    assert.equal(cut.stop_sequence, stop);
    assert.equal(cut.content.map((b) => b.text).join(''), text.slice(0, text.indexOf(stop)));
  });

  test('errors take Anthropic\'s shape and name the field', async () => {
    await assert.rejects(client.messages.create({ max_tokens: 8, messages, frequency_penalty: 1 }), (e) => {
      assert.ok(e instanceof Anthropic.BadRequestError, e.constructor.name);
      assert.equal(e.status, 400);
      assert.equal(e.error.type, 'error');
      assert.equal(e.error.error.type, 'invalid_request_error');
      assert.match(e.error.error.message, /'frequency_penalty'/);
      return true;
    });
    await assert.rejects(client.messages.create({ max_tokens: 8, messages, stop_sequences: [''] }), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.error.error.message, /stop_sequences/);
      return true;
    });
    await assert.rejects(client.messages.create({ max_tokens: 8, messages, thinking: { type: 'enabled', budget_tokens: 4 } }), (e) => {
      assert.equal(e.status, 400);  // chatml does not think
      assert.match(e.error.error.message, /thinking/);
      return true;
    });
    await assert.rejects(client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 8, messages }), (e) => {
      assert.ok(e instanceof Anthropic.NotFoundError, e.constructor.name);
      assert.equal(e.error.error.type, 'not_found_error');
      return true;
    });
    const raw = await fetch(`${server.url}/v1/messages`, { method: 'PUT', body: '{}' });
    assert.equal(raw.status, 405);
    assert.deepEqual(Object.keys(await raw.json()), ['error', 'type']);
    // The OpenAI routes keep OpenAI's shape.
    const openai = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', body: '{"thinking": 1}' });
    assert.equal((await openai.json()).error.param, 'thinking');
  });
});

// Thinks when the generation prompt asks for it (enable_thinking), so the template mentions <think>.
const thinkingTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% if enable_thinking is defined and enable_thinking %}{{ '<think>\\n' }}{% endif %}{% endif %}";

describe('Anthropic thinking and keys', () => {
  let thinker;
  let keyed;
  before(async () => {
    thinker = await startServer(['--chat-template', writeTemp('anthropic_thinking.jinja', thinkingTemplate)]);
    keyed = await startServer(['--api-key', 'sk-anthropic-test-key', '--open-health']);
  });
  after(async () => { await thinker?.stop(); await keyed?.stop(); });

  test('thinking enabled gives thinking blocks, streamed as thinking_delta', async () => {
    const client = new Anthropic({ baseURL: thinker.url, apiKey: 'unused', maxRetries: 0 });
    const body = { max_tokens: 12, temperature: 0, messages, thinking: { type: 'enabled', budget_tokens: 8 } };
    const m = await client.messages.create(body);
    // The prompt ends inside <think>: a random model's output is thinking until it writes </think>.
    assert.equal(m.content[0].type, 'thinking', JSON.stringify(m.content));
    assert.ok(m.content[0].thinking.length > 0);
    assert.equal(m.content[0].signature, '');
    const { events, final } = await streamed(client, body);
    checkEventOrder(events);
    assert.ok(events.some((e) => e.type === 'content_block_delta' && e.delta.type === 'thinking_delta'));
    assert.deepEqual(withoutIds(final), withoutIds(m));

    const off = await client.messages.create({ ...body, thinking: { type: 'disabled' } });
    for (const b of off.content) assert.equal(b.type, 'text');
    // Thinking costs the prompt its <think> opener, as count_tokens sees too.
    const on = await client.messages.countTokens({ messages, thinking: body.thinking });
    assert.equal(on.input_tokens, m.usage.input_tokens);
    assert.equal((await client.messages.countTokens({ messages, thinking: { type: 'disabled' } })).input_tokens, off.usage.input_tokens);
    // Past thinking goes back in an assistant turn.
    const again = await client.messages.create({ ...body, messages: [...messages, { role: 'assistant', content: m.content }, { role: 'user', content: 'And?' }] });
    assert.equal(again.type, 'message');
  });

  test('the key goes in x-api-key (the SDK\'s way) or Authorization', async () => {
    const ok = new Anthropic({ baseURL: keyed.url, apiKey: 'sk-anthropic-test-key', maxRetries: 0 });
    assert.equal((await ok.messages.create({ max_tokens: 4, messages })).type, 'message');
    assert.ok((await ok.messages.countTokens({ messages })).input_tokens > 0);
    const bearer = new Anthropic({ baseURL: keyed.url, authToken: 'sk-anthropic-test-key', apiKey: null, maxRetries: 0 });
    assert.equal((await bearer.messages.create({ max_tokens: 4, messages })).type, 'message');
    const wrong = new Anthropic({ baseURL: keyed.url, apiKey: 'sk-wrong-key-0000', maxRetries: 0 });
    await assert.rejects(wrong.messages.create({ max_tokens: 4, messages }), (e) => {
      assert.ok(e instanceof Anthropic.AuthenticationError, e.constructor.name);
      assert.equal(e.status, 401);
      assert.deepEqual(e.error, { type: 'error', error: { type: 'authentication_error', message: 'incorrect API key provided' } });
      return true;
    });
    await assert.rejects(wrong.messages.countTokens({ messages }), (e) => e.status === 401);
  });
});
