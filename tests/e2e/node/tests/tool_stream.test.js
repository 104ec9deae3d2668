// Tool calls streamed as argument deltas, through the official `openai` client, for each tool-call
// format the server detects from its chat template: Hermes (chatml), Qwen3-Coder's XML, DeepSeek V3
// and gpt-oss harmony. The random-weight model writes a call only when forced, so each request names
// the function (the server's grammar writes the format's syntax). Chat Completions must send the
// call's id, type and name first, then several `arguments` pieces that concatenate to JSON valid
// under the schema and equal to the non-streamed arguments; the SDK's own stream helper must
// assemble the same call; the Responses API must stream function_call_arguments.delta events that
// add up to function_call_arguments.done.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { startServer, writeTemp } from './helpers.js';

const schema = {
  type: 'object',
  properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer' } },
  required: ['city', 'unit', 'days'],
  additionalProperties: false,
};
const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: schema } }];
const validate = new Ajv({ strict: false }).compile(schema);
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

// Chat templates that teach each format (the server picks the parser and grammar from these markers).
const plain = `{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}`;
const templates = {
  hermes: 'chatml',
  qwen3_coder: `{%- if tools %}<|im_start|>system\nCall a tool as <tool_call>\n<function=NAME>\n<parameter=NAME>\nVALUE\n</parameter>\n</function>\n</tool_call><|im_end|>\n{% endif %}${plain}<|im_start|>assistant\n`,
  deepseek_v3: `{%- if tools %}Tools: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n{% endif %}{%- for m in messages %}<｜User｜>{{ m.content }}{% endfor %}<｜Assistant｜>`,
  harmony: `{%- for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}{%- if tools %}{# calls: <|channel|>commentary to=functions.NAME #}{% endif %}<|start|>assistant`,
};

for (const [format, template] of Object.entries(templates)) {
  describe(`streamed tool calls: ${format}`, () => {
    let server, client;
    before(async () => {
      const t = template === 'chatml' ? 'chatml' : writeTemp(`tool_stream_${format}.jinja`, template);
      server = await startServer(['--chat-template', t]);
      client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
    });
    after(async () => { await server.stop(); });

    const body = (seed) => ({
      messages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, parallel_tool_calls: false,
      max_tokens: 200, seed,
    });

    test('Chat Completions: header first, then several argument deltas that add up to the call', async () => {
      for (const seed of [1, 2]) {
        const whole = (await client.chat.completions.create(body(seed))).choices[0];
        assert.equal(whole.finish_reason, 'tool_calls', JSON.stringify(whole));
        const call = whole.message.tool_calls[0];
        assert.equal(call.function.name, 'get_weather');
        const args = JSON.parse(call.function.arguments);
        assert.ok(validate(args), `${call.function.arguments}: ${JSON.stringify(validate.errors)}`);

        const stream = await client.chat.completions.create({ ...body(seed), stream: true });
        const deltas = [];
        let finish = null;
        for await (const chunk of stream) {
          for (const c of chunk.choices) {
            for (const tc of c.delta.tool_calls ?? []) deltas.push(tc);
            if (c.finish_reason) finish = c.finish_reason;
          }
        }
        assert.equal(finish, 'tool_calls');
        assert.ok(deltas.length >= 1);
        const [first, ...rest] = deltas;
        assert.equal(first.index, 0);
        assert.match(first.id, /^call_/);
        assert.equal(first.type, 'function');
        assert.equal(first.function.name, 'get_weather');
        assert.equal(typeof first.function.arguments, 'string');
        for (const d of rest) {
          assert.equal(d.index, 0);
          assert.equal(d.id, undefined, 'only the first delta carries the id');
          assert.equal(d.function.name, undefined, 'only the first delta carries the name');
        }
        const pieces = deltas.map((d) => d.function.arguments).filter((a) => a.length > 0);
        assert.ok(pieces.length >= 3, `arguments came in ${pieces.length} piece(s): ${JSON.stringify(pieces)}`);
        assert.equal(pieces.join(''), call.function.arguments, 'the deltas concatenate to the non-streamed arguments');
      }
    });

    test('the SDK stream helper assembles the same call', async () => {
      const argumentDeltas = [];
      const runner = client.chat.completions.stream({ ...body(3), stream: true });
      runner.on('tool_calls.function.arguments.delta', (e) => argumentDeltas.push(e.arguments_delta));
      const final = await runner.finalChatCompletion();
      const call = final.choices[0].message.tool_calls[0];
      assert.equal(call.function.name, 'get_weather');
      assert.ok(validate(JSON.parse(call.function.arguments)), call.function.arguments);
      assert.ok(argumentDeltas.length >= 3, `${argumentDeltas.length} argument delta events`);
      assert.equal(argumentDeltas.join(''), call.function.arguments);
    });

    test('Responses: function_call_arguments.delta events add up to .done', async () => {
      const stream = await client.responses.create({
        input: 'What is the weather in Paris?',
        tools: [{ type: 'function', name: 'get_weather', parameters: schema, strict: false }],
        tool_choice: { type: 'function', name: 'get_weather' }, parallel_tool_calls: false, max_output_tokens: 200,
        stream: true,
      });
      let streamed = '', done = null, pieces = 0;
      for await (const e of stream) {
        if (e.type === 'response.function_call_arguments.delta') { streamed += e.delta; ++pieces; }
        if (e.type === 'response.function_call_arguments.done') done = e.arguments;
      }
      assert.ok(pieces >= 3, `${pieces} argument delta events`);
      assert.equal(streamed, done);
      assert.ok(validate(JSON.parse(done)), done);
    });
  });
}
