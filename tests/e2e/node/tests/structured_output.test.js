// Structured output through the official `openai` client: 50 generated JSON schemas sent to a live
// server on a random-weight model and on the trained stories260K fixture, every output validated
// with ajv; JSON mode always parses, even when max_tokens ends it; GBNF grammars; n > 1 and streaming; refusals are 400s naming
// the keyword.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { startServer, testModel } from './helpers.js';

// Deterministic pseudo-random numbers (xorshift32), so a failing schema can be reproduced.
function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x / 4294967296;
  };
}

// A random schema whose outputs are bounded in size (so a model that never "wants" to stop still
// finishes), exercising every supported keyword.
function randomSchema(seed) {
  const r = rng(seed * 7919 + 13);
  const pick = (a) => a[Math.floor(r() * a.length)];
  const defs = {};
  function leaf() {
    switch (pick(['string', 'enum', 'integer', 'number', 'boolean', 'null', 'const', 'pattern', 'ref', 'types'])) {
      case 'string': { const max = 1 + Math.floor(r() * 6); return { type: 'string', minLength: Math.floor(r() * 2), maxLength: max }; }
      case 'enum': return { enum: ['red', 'green', 'blue', 7, null].slice(0, 2 + Math.floor(r() * 4)) };
      case 'integer': return { type: 'integer', description: 'a count' };
      case 'number': return { type: 'number' };
      case 'boolean': return { type: 'boolean' };
      case 'null': return { type: 'null' };
      case 'const': return { const: pick(['fixed', 42, true, { a: [1, 'b'] }]) };
      case 'pattern': return { type: 'string', pattern: pick(['^[a-z]{1,5}$', '^\\d{3}-\\d{2}$', '^(yes|no)$', '^[A-Z][a-z]{0,3}$']) };
      case 'ref': defs.Id = { type: 'string', maxLength: 4 }; return { $ref: '#/$defs/Id' };
      default: return { type: ['integer', 'null'] };
    }
  }
  function node(depth) {
    const kind = depth > 1 ? 'leaf' : pick(['leaf', 'leaf', 'object', 'array', 'anyOf']);
    if (kind === 'leaf') return leaf();
    if (kind === 'array') return { type: 'array', items: node(depth + 1), minItems: Math.floor(r() * 2), maxItems: 1 + Math.floor(r() * 3) };
    if (kind === 'anyOf') return { anyOf: [{ type: 'string', maxLength: 3 }, { type: 'integer' }, { type: 'null' }].slice(0, 2 + Math.floor(r() * 2)) };
    return object(depth + 1);
  }
  function object(depth) {
    const n = 1 + Math.floor(r() * 4);
    const properties = {};
    for (let i = 0; i < n; ++i) properties[`p${i}_${pick(['id', 'name', 'x'])}`] = node(depth);
    const names = Object.keys(properties);
    const required = names.filter(() => r() < 0.6);
    return { type: 'object', title: 'T', properties, required, additionalProperties: false };
  }
  const schema = object(0);
  if (Object.keys(defs).length) schema.$defs = defs;
  return schema;
}

const ajv = new Ajv({ strict: false, allErrors: true });

function checkOutput(text, schema, what) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    assert.fail(`${what}: not JSON: ${JSON.stringify(text)}`);
  }
  const validate = ajv.compile(schema);
  assert.ok(validate(value), `${what}: ${JSON.stringify(text)} fails ${JSON.stringify(schema)}: ${ajv.errorsText(validate.errors)}`);
}

for (const kind of ['tiny', 'stories']) {
  const model = testModel(kind);
  const opts = model ? {} : { skip: 'stories260K.gguf fixture is absent' };
  describe(kind, opts, () => {
    let server, client;
    before(async () => {
      if (!model) return;
      server = await startServer(['--max-seqs', '16'], kind);
      client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
    });
    after(async () => { if (server) await server.stop(); });

    test(`${kind}: 50 generated JSON schemas, every output validates (ajv)`, opts, async () => {
      const jobs = [];
      for (let i = 0; i < 50; ++i) {
        const schema = randomSchema(i + (kind === 'tiny' ? 0 : 1000));
        const response_format = { type: 'json_schema', json_schema: { name: `s${i}`, schema, strict: true } };
        const body = { max_tokens: 400, temperature: 1, seed: i, response_format };
        const req = i % 2 === 0
          ? client.chat.completions.create({ ...body, messages: [{ role: 'user', content: 'Answer in JSON.' }] })
              .then((r) => [r.choices[0].message.content, r.choices[0].finish_reason])
          : client.completions.create({ ...body, prompt: 'Once upon a time' })
              .then((r) => [r.choices[0].text, r.choices[0].finish_reason]);
        jobs.push(req.then(([text, finish]) => {
          assert.equal(finish, 'stop', `schema ${i} finished by ${finish}: ${JSON.stringify(text)}`);
          checkOutput(text, schema, `schema ${i}`);
        }));
      }
      await Promise.all(jobs);
    });

    test(`${kind}: JSON mode always yields a JSON object`, opts, async () => {
      const jobs = [];
      for (let i = 0; i < 8; ++i) {
        jobs.push(client.chat.completions.create({
          messages: [{ role: 'user', content: 'Give me JSON.' }], max_tokens: 10 + 40 * i, seed: 100 + i,
          response_format: { type: 'json_object' },
        }).then((r) => {
          // Even when max_tokens ends it, the output is a whole object (the mask closes it in time).
          const text = r.choices[0].message.content;
          assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
          const v = JSON.parse(text);
          assert.equal(typeof v, 'object');
          assert.ok(v !== null && !Array.isArray(v));
        }));
      }
      await Promise.all(jobs);
    });

    test(`${kind}: n > 1 and streaming follow the schema; stream reassembles to the response`, opts, async () => {
      const schema = { type: 'object', properties: { a: { enum: ['x', 'y', 'z'] }, b: { type: 'integer' }, c: { type: 'array', items: { type: 'boolean' }, maxItems: 3 } }, required: ['a', 'b', 'c'], additionalProperties: false };
      const body = { prompt: 'Data:', max_tokens: 300, seed: 5, response_format: { type: 'json_schema', json_schema: { name: 'n', schema } } };
      const whole = await client.completions.create({ ...body, n: 4 });
      assert.equal(whole.choices.length, 4);
      for (const c of whole.choices) checkOutput(c.text, schema, `choice ${c.index}`);
      const stream = await client.completions.create({ ...body, n: 4, stream: true });
      const texts = ['', '', '', ''];
      for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.text;
      assert.deepEqual(texts, whole.choices.map((c) => c.text));
    });

    test(`${kind}: a GBNF grammar constrains the output`, opts, async () => {
      const grammar = 'root ::= ("yes" | "no") " " [0-9]{1,3}';
      for (let i = 0; i < 4; ++i) {
        const r = await client.completions.create({ prompt: 'Answer:', max_tokens: 50, seed: i, grammar });
        assert.match(r.choices[0].text, /^(yes|no) [0-9]{1,3}$/);
      }
    });
  });
}

test('refused schemas and grammars are 400s naming the field and keyword', async () => {
  const server = await startServer();
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  try {
    const cases = [
      [{ type: 'object', properties: { n: { type: 'integer', minimum: 1 } } }, 'minimum'],
      [{ type: 'string', format: 'email' }, 'format'],
      [{ type: 'array', uniqueItems: true }, 'uniqueItems'],
      [{ oneOf: [{ type: 'number' }, { type: 'integer' }] }, 'oneOf'],
    ];
    for (const [schema, keyword] of cases) {
      await assert.rejects(
        client.chat.completions.create({ messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } }),
        (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'response_format.json_schema.schema' &&
          e.message.includes(`'${keyword}'`),
      );
    }
    await assert.rejects(client.completions.create({ prompt: 'x', grammar: 'root ::= ("a"' }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'grammar' && /line 1, column 10/.test(e.message));
    await assert.rejects(client.completions.create({ prompt: 'x', response_format: { type: 'yaml' } }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format.type');
  } finally {
    await server.stop();
  }
});
