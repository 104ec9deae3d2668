// POST /v1/responses through the official `openai` client against a live server on a random-weight
// model: responses.create (streaming and not), responses.stream, function tools with a
// function_call_output round trip (by previous_response_id and by resending the items),
// text.format json_schema, reasoning items from a thinking template, the store (retrieve, delete,
// and the 404 once the cap pushed a response out), and refusals by name. The model's text is
// gibberish, so shapes that matter are forced by grammar (tool_choice required, a JSON schema) and
// streams are compared with the greedy (temperature 0) non-streaming response.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { startServer, writeTemp } from './helpers.js';

const ajv = new Ajv({ strict: false, allErrors: true });

const addSchema = {
  type: 'object',
  properties: { a: { type: 'integer' }, b: { type: 'integer' } },
  required: ['a', 'b'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', name: 'add', description: 'Adds two integers', parameters: addSchema, strict: true },
  { type: 'function', name: 'get_time', parameters: { type: 'object', properties: {}, additionalProperties: false } },
];

// Every event of a stream, checking sequence numbers count up from 0.
async function collect(stream) {
  const events = [];
  for await (const e of stream) {
    assert.equal(e.sequence_number, events.length, JSON.stringify(e));
    events.push(e);
  }
  return events;
}

const textOf = (events) => events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
const withoutIds = (output) => output.map(({ id, call_id, ...rest }) => rest);

describe('responses', () => {
  let server, client;
  before(async () => {
    server = await startServer(['--max-seqs', '4', '--responses-max', '3']);
    client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => { await server.stop(); });

  test('create: a string input gives a response object with a message and usage', async () => {
    const r = await client.responses.create({ input: 'Once upon a time', instructions: 'Tell a story.', max_output_tokens: 12, temperature: 0, metadata: { run: 'a' } });
    assert.match(r.id, /^resp_/);
    assert.equal(r.object, 'response');
    assert.ok(['completed', 'incomplete'].includes(r.status), r.status);
    if (r.status === 'incomplete') assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(r.instructions, 'Tell a story.');
    assert.deepEqual(r.metadata, { run: 'a' });
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
    assert.ok(r.usage.output_tokens >= 1 && r.usage.output_tokens <= 12);
    const text = r.output.filter((o) => o.type === 'message').map((o) => o.content[0].text).join('');
    assert.equal(r.output_text, text);  // the SDK's own convenience field
  });

  test('streaming (create stream:true and responses.stream) gives the events and the same response', async () => {
    const body = { input: 'Once upon a time', max_output_tokens: 16, temperature: 0, store: false };
    const whole = await client.responses.create(body);
    const events = await collect(await client.responses.create({ ...body, stream: true }));
    const types = events.map((e) => e.type);
    assert.deepEqual(types.slice(0, 2), ['response.created', 'response.in_progress']);
    assert.ok(['response.completed', 'response.incomplete'].includes(types.at(-1)), types.at(-1));
    const last = events.at(-1).response;
    assert.equal(last.status, whole.status);
    assert.deepEqual(withoutIds(last.output), withoutIds(whole.output));
    assert.equal(textOf(events), whole.output_text);
    if (whole.output_text) {
      for (const t of ['response.output_item.added', 'response.content_part.added', 'response.output_text.done',
        'response.content_part.done', 'response.output_item.done']) assert.ok(types.includes(t), t);
      assert.equal(events.find((e) => e.type === 'response.output_text.done').text, whole.output_text);
    }
    // The SDK's stream helper accumulates the same response.
    const stream = client.responses.stream(body);
    let deltas = '';
    stream.on('response.output_text.delta', (e) => { deltas += e.delta; });
    const final = await stream.finalResponse();
    assert.equal(final.output_text, whole.output_text);
    assert.equal(deltas, whole.output_text);
    // (cached_tokens may differ: the prefix cache holds the prompt by now)
    assert.equal(final.usage.input_tokens, whole.usage.input_tokens);
    assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  });

  test('function tools: required gives valid calls; the outputs go back by previous_response_id or as items', async () => {
    const r = await client.responses.create({
      input: 'What is 2 + 3?', tools, tool_choice: 'required', parallel_tool_calls: false, max_output_tokens: 200,
    });
    const calls = r.output.filter((o) => o.type === 'function_call');
    assert.equal(calls.length, 1, JSON.stringify(r.output));
    const [call] = calls;
    assert.match(call.call_id, /^call_/);
    assert.match(call.id, /^fc_/);
    assert.ok(['add', 'get_time'].includes(call.name));
    const args = JSON.parse(call.arguments);
    const validate = ajv.compile(tools.find((t) => t.name === call.name).parameters);
    assert.ok(validate(args), `${call.arguments}: ${ajv.errorsText(validate.errors)}`);

    const result = { type: 'function_call_output', call_id: call.call_id, output: '5' };
    const next = await client.responses.create({ previous_response_id: r.id, input: [result], tools, max_output_tokens: 8, temperature: 0 });
    assert.equal(next.previous_response_id, r.id);
    // Sending the whole conversation back as items (the SDK's output items as they came) renders
    // the same prompt.
    const resent = await client.responses.create({
      input: [{ role: 'user', content: 'What is 2 + 3?' }, ...r.output, result], tools, max_output_tokens: 8, temperature: 0, store: false,
    });
    assert.equal(resent.usage.input_tokens, next.usage.input_tokens);
    assert.equal(resent.output_text, next.output_text);
    assert.ok(next.usage.input_tokens > r.usage.input_tokens);
  });

  test('a named function streams its arguments as deltas that add up to the item', async () => {
    const body = { input: 'add', tools, tool_choice: { type: 'function', name: 'add' }, max_output_tokens: 200, temperature: 0, store: false };
    const whole = await client.responses.create(body);
    const events = await collect(await client.responses.create({ ...body, stream: true }));
    const added = events.find((e) => e.type === 'response.output_item.added' && e.item.type === 'function_call');
    assert.ok(added, JSON.stringify(events.map((e) => e.type)));
    assert.equal(added.item.name, 'add');
    const deltas = events.filter((e) => e.type === 'response.function_call_arguments.delta' && e.item_id === added.item.id);
    const done = events.find((e) => e.type === 'response.function_call_arguments.done');
    assert.equal(deltas.map((e) => e.delta).join(''), done.arguments);
    const item = events.at(-1).response.output.find((o) => o.type === 'function_call');
    assert.equal(item.arguments, done.arguments);
    assert.equal(item.arguments, whole.output.find((o) => o.type === 'function_call').arguments);
    assert.ok(validateAdd(JSON.parse(item.arguments)));
  });
  const validateAdd = ajv.compile(addSchema);

  test('text.format json_schema constrains the output text', async () => {
    // Bounded: every value has a bounded length, so the output ends within max_output_tokens.
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, ok: { type: 'boolean' }, tag: { enum: ['a', 'b'] } }, required: ['name', 'ok', 'tag'], additionalProperties: false };
    const validate = ajv.compile(schema);
    for (const seed of [0, 1, 2]) {
      const r = await client.responses.create({
        input: `person ${seed}`, max_output_tokens: 300, store: false,
        text: { format: { type: 'json_schema', name: 'person', schema, strict: true } },
      });
      assert.equal(r.status, 'completed');
      assert.deepEqual(r.text.format.schema, schema);
      const value = JSON.parse(r.output_text);
      assert.ok(validate(value), `${r.output_text}: ${ajv.errorsText(validate.errors)}`);
    }
    const obj = await client.responses.create({ input: 'x', max_output_tokens: 60, store: false, text: { format: { type: 'json_object' } } });
    if (obj.status === 'completed') assert.equal(typeof JSON.parse(obj.output_text), 'object');
  });

  test('the store: retrieve, continue, delete; a response the cap pushed out is a 404', async () => {
    const first = await client.responses.create({ input: 'Once', max_output_tokens: 4, temperature: 0 });
    const got = await client.responses.retrieve(first.id);
    assert.equal(got.id, first.id);
    assert.deepEqual(got.output, first.output);
    const cont = await client.responses.create({ previous_response_id: first.id, input: 'upon', max_output_tokens: 4 });
    assert.ok(cont.usage.input_tokens > first.usage.input_tokens);
    // --responses-max 3: three more stored responses push `first` out.
    for (let i = 0; i < 3; ++i) await client.responses.create({ input: `more ${i}`, max_output_tokens: 2 });
    await assert.rejects(client.responses.retrieve(first.id), (e) => e instanceof OpenAI.NotFoundError);
    await assert.rejects(client.responses.create({ previous_response_id: first.id, input: 'x' }),
      (e) => e instanceof OpenAI.NotFoundError && e.param === 'previous_response_id' && e.code === 'previous_response_not_found');
    await assert.rejects(client.responses.create({ previous_response_id: 'resp_never', input: 'x' }), OpenAI.NotFoundError);
    const last = await client.responses.create({ input: 'bye', max_output_tokens: 2 });
    await client.responses.delete(last.id);
    await assert.rejects(client.responses.retrieve(last.id), OpenAI.NotFoundError);
  });

  test('hosted tools and fields not acted on are 400s naming them', async () => {
    const cases = [
      [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ tools: [{ type: 'file_search', vector_store_ids: ['v'] }] }, 'tools[0].type'],
      [{ tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] }, 'tools[0].type'],
      [{ reasoning: { effort: 'high' } }, 'reasoning.effort'],
      [{ conversation: 'conv_1' }, 'conversation'],
      [{ background: true }, 'background'],
      [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x/y.png' }] }] }, 'input[0].content[0].image_url.url'],
      [{ max_output_tokens: 100000 }, 'max_output_tokens'],
      [{ text: { format: { type: 'json_schema', name: 'x', schema: { type: 'object', patternProperties: { a: {} } } } } }, 'text.format.schema'],
    ];
    for (const [extra, param] of cases) {
      await assert.rejects(client.responses.create({ input: 'a', ...extra }),
        (e) => e instanceof OpenAI.BadRequestError && e.param === param && e.message.includes(param.split('[')[0]),
        JSON.stringify(extra));
    }
  });
});

// Thinks from the start: the generation prompt opens <think>, so a free output is all reasoning.
const thinkingTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}{% endif %}";

describe('responses reasoning', () => {
  let server, client;
  before(async () => {
    server = await startServer(['--chat-template', writeTemp('thinking_responses.jinja', thinkingTemplate)]);
    client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => { await server.stop(); });

  test('the thinking is a reasoning item (content, or summary when asked), streamed the same', async () => {
    const body = { input: 'Think', max_output_tokens: 10, temperature: 0, store: false };
    const r = await client.responses.create(body);
    assert.ok(['completed', 'incomplete'].includes(r.status));  // </think> never comes: all of it is thinking
    assert.equal(r.output[0].type, 'reasoning');
    assert.match(r.output[0].id, /^rs_/);
    const thinking = r.output[0].content[0].text;
    assert.equal(r.output[0].content[0].type, 'reasoning_text');
    assert.ok(thinking.length > 0);
    const events = await collect(await client.responses.create({ ...body, stream: true }));
    assert.equal(events.filter((e) => e.type === 'response.reasoning_text.delta').map((e) => e.delta).join(''), thinking);
    assert.equal(events.at(-1).type, 'response.incomplete');

    const summarized = client.responses.stream({ ...body, reasoning: { summary: 'auto' } });
    let summary = '';
    summarized.on('response.reasoning_summary_text.delta', (e) => { summary += e.delta; });
    const final = await summarized.finalResponse();
    assert.equal(summary, thinking);
    assert.deepEqual(final.output[0].summary, [{ type: 'summary_text', text: thinking }]);
    assert.equal(final.reasoning.summary, 'auto');
  });
});
