// Tool calling, reasoning separation and /tokenize through the official `openai` client against a
// live server on a random-weight model. The model's text is gibberish, so the tests that need a
// certain shape constrain it: tool_choice "required" / a named function (the server's own grammar),
// or a GBNF `grammar` that writes <think>…</think>. Streams must reassemble exactly to the
// non-streaming response, and every refused field is a 400 in OpenAI's error shape.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { startServer, writeTemp } from './helpers.js';

const ajv = new Ajv({ strict: false, allErrors: true });

const weather = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 8 },
    unit: { enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer' },
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: weather } },
  { type: 'function', function: { name: 'add', parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'], additionalProperties: false } } },
];
const schemaOf = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

function checkCall(call, what) {
  assert.equal(call.type, 'function', what);
  assert.match(call.id, /^call_/, what);
  const schema = schemaOf[call.function.name];
  assert.ok(schema, `${what}: unknown function ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  const validate = ajv.compile(schema);
  assert.ok(validate(args), `${what}: ${call.function.arguments} fails: ${ajv.errorsText(validate.errors)}`);
}

// Reassembles a chat stream into {content, reasoning_content, tool_calls, finish_reason}.
async function reassemble(stream) {
  const m = { content: '', reasoning_content: '', tool_calls: [], finish_reason: null };
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.delta.content) m.content += c.delta.content;
      if (c.delta.reasoning_content) m.reasoning_content += c.delta.reasoning_content;
      for (const tc of c.delta.tool_calls ?? []) {
        if (!m.tool_calls[tc.index]) m.tool_calls[tc.index] = { id: tc.id, type: tc.type, function: { name: '', arguments: '' } };
        const t = m.tool_calls[tc.index];
        if (tc.function?.name) t.function.name += tc.function.name;
        if (tc.function?.arguments) t.function.arguments += tc.function.arguments;
      }
      if (c.finish_reason) m.finish_reason = c.finish_reason;
    }
  }
  return m;
}

const withoutIds = (calls) => calls.map((c) => ({ type: c.type, function: c.function }));

describe('tools', () => {
  let server, client;
  before(async () => {
    server = await startServer(['--max-seqs', '8']);
    client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => { await server.stop(); });

  test('tool_choice required: every call is valid and its arguments validate (ajv)', async () => {
    const jobs = [];
    for (let i = 0; i < 12; ++i) {
      jobs.push(client.chat.completions.create({
        messages, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 300, seed: i,
      }).then((r) => {
        const c = r.choices[0];
        assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
        assert.equal(c.message.content, null);
        assert.equal(c.message.tool_calls.length, 1);
        checkCall(c.message.tool_calls[0], `seed ${i}`);
      }));
    }
    await Promise.all(jobs);
  });

  test('a named function is the one called', async () => {
    for (let i = 0; i < 6; ++i) {
      const r = await client.chat.completions.create({
        messages, tools, tool_choice: { type: 'function', function: { name: 'add' } }, parallel_tool_calls: false,
        max_tokens: 200, seed: 50 + i,
      });
      const calls = r.choices[0].message.tool_calls;
      assert.equal(calls.length, 1);
      assert.equal(calls[0].function.name, 'add');
      checkCall(calls[0], `seed ${50 + i}`);
    }
  });

  test('parallel calls: one or more, each valid; n > 1 choices each parse', async () => {
    const r = await client.chat.completions.create({ messages, tools, tool_choice: 'required', max_tokens: 400, seed: 7, n: 3 });
    assert.equal(r.choices.length, 3);
    for (const c of r.choices) {
      assert.ok(['tool_calls', 'length'].includes(c.finish_reason));
      assert.ok(c.message.tool_calls.length >= 1);
      c.message.tool_calls.forEach((call, k) => checkCall(call, `choice ${c.index} call ${k}`));
      assert.equal(new Set(c.message.tool_calls.map((t) => t.id)).size, c.message.tool_calls.length);
    }
  });

  test('streaming tool_calls deltas reassemble exactly to the non-streaming response', async () => {
    for (const seed of [1, 2, 3]) {
      const body = { messages, tools, tool_choice: 'required', parallel_tool_calls: seed !== 2, max_tokens: 300, seed };
      const whole = await client.chat.completions.create(body);
      const streamed = await reassemble(await client.chat.completions.create({ ...body, stream: true }));
      const m = whole.choices[0].message;
      assert.equal(streamed.finish_reason, whole.choices[0].finish_reason);
      assert.equal(streamed.content, m.content ?? '');
      // Ids are per response; everything else is the same.
      assert.deepEqual(withoutIds(streamed.tool_calls), withoutIds(m.tool_calls));
      for (const t of streamed.tool_calls) assert.match(t.id, /^call_/);
    }
  });

  test('auto: free text stays content and streams the same', async () => {
    const body = { messages, tools, max_tokens: 20, seed: 3, temperature: 0 };
    const whole = await client.chat.completions.create(body);
    const streamed = await reassemble(await client.chat.completions.create({ ...body, stream: true }));
    assert.equal(streamed.content, whole.choices[0].message.content ?? '');
    assert.deepEqual(withoutIds(streamed.tool_calls), withoutIds(whole.choices[0].message.tool_calls ?? []));
  });

  test('tool results round-trip through the template', async () => {
    const first = await client.chat.completions.create({ messages, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 300, seed: 9 });
    const call = first.choices[0].message.tool_calls[0];
    const convo = [
      ...messages,
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' },
    ];
    const second = await client.chat.completions.create({ messages: convo, tools, max_tokens: 5, seed: 1 });
    assert.equal(second.choices.length, 1);
    // The call and the tool result are in the prompt: it is longer than the question alone with tools.
    assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens, `${second.usage.prompt_tokens} vs ${first.usage.prompt_tokens}`);
    const none = await client.chat.completions.create({ messages: convo, tools, tool_choice: 'none', max_tokens: 5, seed: 1 });
    assert.equal(none.choices[0].message.tool_calls, undefined);
  });

  test('refused tool fields are 400s in OpenAI\'s error shape', async () => {
    const bad = [
      [{ tools: [{ type: 'retrieval' }] }, 'tools[0].type'],
      [{ tools: [{ type: 'function', function: { name: 'bad name' } }] }, 'tools[0].function.name'],
      [{ tools, tool_choice: 'sometimes' }, 'tool_choice'],
      [{ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
      [{ tool_choice: 'required' }, 'tool_choice'],
      [{ tools, tool_choice: 'required', response_format: { type: 'json_object' } }, 'tool_choice'],
      [{ tools, parallel_tool_calls: 'yes' }, 'parallel_tool_calls'],
      [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { n: { type: 'integer', minimum: 1 } } } } }], tool_choice: 'required' }, 'tools[0].function.parameters'],
      [{ messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].tool_call_id'],
      [{ messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: { a: 1 } } }] }] }, 'messages[0].tool_calls[0].function.arguments'],
      [{ chat_template_kwargs: 'x' }, 'chat_template_kwargs'],
      [{ chat_template_kwargs: { messages: [] } }, 'chat_template_kwargs.messages'],
    ];
    for (const [extra, param] of bad) {
      await assert.rejects(client.chat.completions.create({ messages, max_tokens: 5, ...extra }),
        (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === param && typeof e.message === 'string' &&
          e.type === 'invalid_request_error', `${JSON.stringify(extra)} -> ${param}`);
    }
  });

  test('POST /tokenize and /detokenize; /v1/models carries the context length', async () => {
    const post = (path, body) => fetch(`${server.url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const tok = await (await post('/tokenize', { content: 'hello world' })).json();
    assert.ok(Array.isArray(tok.tokens) && tok.tokens.length > 0 && tok.tokens.every(Number.isInteger));
    const back = await (await post('/detokenize', { tokens: tok.tokens })).json();
    assert.equal(back.content, 'hello world');
    const pieces = await (await post('/tokenize', { content: 'hello', with_pieces: true, add_special: true })).json();
    assert.ok(pieces.tokens.every((t) => Number.isInteger(t.id) && (typeof t.piece === 'string' || Array.isArray(t.piece))));
    for (const [path, body, param] of [['/tokenize', {}, 'content'], ['/tokenize', { content: 1 }, 'content'],
      ['/tokenize', { content: 'x', with_pieces: 'y' }, 'with_pieces'], ['/detokenize', { tokens: [1e9] }, 'tokens[0]'],
      ['/detokenize', { tokens: 'x' }, 'tokens']]) {
      const r = await post(path, body);
      assert.equal(r.status, 400);
      const e = (await r.json()).error;
      assert.equal(e.param, param);
      assert.equal(e.type, 'invalid_request_error');
      assert.ok(typeof e.message === 'string' && 'code' in e);
    }
    const bad = await fetch(`${server.url}/tokenize`, { method: 'POST', body: '{not json' });
    assert.equal(bad.status, 400);
    assert.equal((await fetch(`${server.url}/tokenize`)).status, 405);
    const models = await client.models.list();
    assert.ok(models.data[0].max_model_len > 0);
  });
});

// Thinks when the generation prompt asks for it (enable_thinking), so the template mentions <think>.
const thinkingTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% if enable_thinking is defined and enable_thinking %}{{ '<think>\\n' }}{% endif %}{% endif %}";

describe('reasoning', () => {
  let server, plain, client, plainClient;
  before(async () => {
    const tmpl = writeTemp('thinking.jinja', thinkingTemplate);
    server = await startServer(['--chat-template', tmpl]);
    plain = await startServer(['--chat-template', tmpl, '--reasoning-format', 'none']);
    client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
    plainClient = new OpenAI({ baseURL: plain.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => { await server.stop(); await plain.stop(); });

  const grammar = 'root ::= "<think>" [a-z ]{1,12} "</think>" "\\n"? [a-z]{1,12}';

  test('<think> goes to reasoning_content, the rest to content; the stream reassembles exactly', async () => {
    for (let seed = 0; seed < 4; ++seed) {
      const body = { messages, max_tokens: 100, seed, grammar };
      const whole = await client.chat.completions.create(body);
      const m = whole.choices[0].message;
      assert.match(m.reasoning_content, /^[a-z ]{1,12}$/);
      assert.match(m.content, /^[a-z]{1,12}$/);
      const streamed = await reassemble(await client.chat.completions.create({ ...body, stream: true }));
      assert.equal(streamed.reasoning_content, m.reasoning_content);
      assert.equal(streamed.content, m.content);
      // --reasoning-format none leaves the same output in content.
      const left = await plainClient.chat.completions.create(body);
      assert.equal(left.choices[0].message.reasoning_content, undefined);
      assert.equal(left.choices[0].message.content, `<think>${m.reasoning_content}</think>${left.choices[0].message.content.split('</think>')[1]}`);
    }
  });

  test('chat_template_kwargs reach the template: enable_thinking opens the reasoning in the prompt', async () => {
    const body = { messages, max_tokens: 50, seed: 1, grammar: 'root ::= [a-z]{1,8} "</think>" [a-z]{1,8}' };
    const on = await client.chat.completions.create({ ...body, chat_template_kwargs: { enable_thinking: true } });
    assert.match(on.choices[0].message.reasoning_content, /^[a-z]{1,8}$/);
    assert.match(on.choices[0].message.content, /^[a-z]{1,8}$/);
    const off = await client.chat.completions.create({ ...body, chat_template_kwargs: { enable_thinking: false } });
    assert.equal(off.choices[0].message.reasoning_content, undefined);
    assert.match(off.choices[0].message.content, /^[a-z]{1,8}<\/think>[a-z]{1,8}$/);
    assert.ok(on.usage.prompt_tokens > off.usage.prompt_tokens);
  });
});
