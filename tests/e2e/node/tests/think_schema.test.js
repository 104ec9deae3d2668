// Think, then answer in the schema, through the official `openai` client against a live server on a
// random-weight model whose template thinks. On 50 generated JSON schemas the model may reason first
// (in <think>…</think>, or inside the block the prompt opened), the reasoning comes back apart, and
// the answer always validates (ajv). A thinking budget (thinking_token_budget, reasoning_effort,
// Responses reasoning.effort) closes the block in time; a budget where nothing thinks is a 400.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { startServer, writeTemp } from './helpers.js';

const ajv = new Ajv({ strict: false, allErrors: true });
const messages = [{ role: 'user', content: 'Describe a city as JSON.' }];

const thinkingTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% if enable_thinking is defined and enable_thinking %}{{ '<think>\\n' }}{% endif %}{% endif %}";

// A deterministic generator of small schemas (strings with maxLength, integers, booleans, enums,
// nested objects, arrays with maxItems), every one closed (additionalProperties false).
function rng(seed) {
  let s = seed * 2654435761 % 4294967296 + 1;
  return () => { s = (s * 1103515245 + 12345) % 2147483648; return s / 2147483648; };
}
function genSchema(rand, depth = 0) {
  const kinds = depth < 2 ? ['string', 'integer', 'boolean', 'enum', 'object', 'array'] : ['string', 'integer', 'boolean', 'enum'];
  const kind = kinds[Math.floor(rand() * kinds.length)];
  switch (kind) {
    case 'string': return { type: 'string', maxLength: 1 + Math.floor(rand() * 8) };
    case 'integer': return { type: 'integer' };
    case 'boolean': return { type: 'boolean' };
    case 'enum': return { enum: ['red', 'green', 'blue', 7, null].slice(0, 2 + Math.floor(rand() * 3)) };
    case 'array': return { type: 'array', items: genSchema(rand, depth + 1), maxItems: 1 + Math.floor(rand() * 3) };
    default: return genObject(rand, depth + 1);
  }
}
function genObject(rand, depth = 0) {
  const n = 1 + Math.floor(rand() * 3);
  const properties = {};
  for (let i = 0; i < n; ++i) properties[`k${i}`] = genSchema(rand, depth);
  const required = Object.keys(properties).filter(() => rand() < 0.7);
  return { type: 'object', properties, required, additionalProperties: false };
}
const schemas = Array.from({ length: 50 }, (_, i) => genObject(rng(i + 1)));

describe('think, then answer in the schema', () => {
  let server, plain, client, plainClient;
  before(async () => {
    const tmpl = writeTemp('think_schema.jinja', thinkingTemplate);
    server = await startServer(['--chat-template', tmpl, '--max-seqs', '8', '--reasoning-budgets', '3,6,12']);
    plain = await startServer(['--chat-template', 'chatml']);
    client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
    plainClient = new OpenAI({ baseURL: plain.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => { await server.stop(); await plain.stop(); });

  test('50 schemas: the reasoning is apart and every answer validates', async () => {
    const jobs = schemas.map((schema, i) => {
      const opened = i % 2 === 0;  // half the prompts open the block (enable_thinking)
      const budget = 2 + (i % 5) * 3;
      return client.chat.completions.create({
        messages, max_tokens: 160, seed: i, thinking_token_budget: budget,
        chat_template_kwargs: { enable_thinking: opened },
        response_format: { type: 'json_schema', json_schema: { name: `s${i}`, schema, strict: true } },
      }).then((r) => {
        const c = r.choices[0];
        const what = `schema ${i}: ${JSON.stringify(c.message)}`;
        assert.ok(['stop', 'length'].includes(c.finish_reason), what);
        if (opened) assert.equal(typeof c.message.reasoning_content, 'string', what);
        if (c.message.reasoning_content !== undefined) assert.ok(!c.message.reasoning_content.includes('</think>'), what);
        assert.ok(!c.message.content.includes('think>'), what);
        const value = JSON.parse(c.message.content);
        const validate = ajv.compile(schema);
        assert.ok(validate(value), `${what}: ${ajv.errorsText(validate.errors)}`);
        return opened || c.message.reasoning_content !== undefined;
      });
    });
    const thought = (await Promise.all(jobs)).filter(Boolean).length;
    assert.ok(thought >= 25, `${thought} of 50 answers came after reasoning`);
  });

  test('the budget closes the reasoning at exactly its tokens, for each effort', async () => {
    for (const [effort, budget] of [['low', 3], ['medium', 6], ['high', 12]]) {
      const r = await client.chat.completions.create({
        messages, max_tokens: 40, seed: 3, reasoning_effort: effort, logprobs: true,
        chat_template_kwargs: { enable_thinking: true },
      });
      const c = r.choices[0];
      assert.equal(typeof c.message.reasoning_content, 'string', JSON.stringify(c.message));
      // The tokens before the closing tag: the prompt opened the block, so they are all thinking.
      const pieces = c.logprobs.content.map((t) => t.token);
      const at = pieces.join('').indexOf('</think>');
      assert.ok(at >= 0, JSON.stringify(pieces));
      let before = 0;
      for (let len = 0; before < pieces.length && len + pieces[before].length <= at; ++before) len += pieces[before].length;
      assert.equal(before, budget, `${effort}: ${JSON.stringify(pieces)}`);
    }
  });

  test('Responses reasoning.effort: schema-valid text.format answer after bounded reasoning', async () => {
    const schema = schemas[3];
    const r = await client.responses.create({
      input: 'Describe a city as JSON.', max_output_tokens: 120, reasoning: { effort: 'low' },
      text: { format: { type: 'json_schema', name: 'city', schema, strict: true } },
    });
    const validate = ajv.compile(schema);
    assert.ok(validate(JSON.parse(r.output_text)), r.output_text);
  });

  test('a budget where nothing thinks is a 400 naming the field', async () => {
    for (const [field, value] of [['thinking_token_budget', 5], ['max_thinking_tokens', 5], ['reasoning_effort', 'low']]) {
      await assert.rejects(plainClient.chat.completions.create({ messages, max_tokens: 5, [field]: value }), (e) => {
        assert.equal(e.status, 400);
        assert.equal(e.param, field);
        return true;
      });
    }
    await assert.rejects(client.chat.completions.create({ messages, max_tokens: 5, reasoning_effort: 'extreme' }), (e) => e.status === 400 && e.param === 'reasoning_effort');
  });
});
