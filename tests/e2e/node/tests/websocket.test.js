// The WebSocket protocol at GET /v1/ws (docs/api.md): several requests in flight on one socket,
// chunks tagged with the client's id, cancel, errors per request, and closing the socket cancels
// everything it started.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { startServer, metricValue, waitMetrics, writeTemp } from './helpers.js';

let server;
before(async () => { server = await startServer([], 'slow'); });
after(async () => { await server.stop(); });

function open(url, headers = {}) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

// Collects messages per id until `done` or `error` arrives for every id in `ids`.
function collect(ws, ids, onChunk = () => {}) {
  const results = new Map(ids.map((id) => [id, { chunks: [], done: null, error: null }]));
  return new Promise((resolve) => {
    const pending = new Set(ids);
    ws.on('message', (data) => {
      const msg = JSON.parse(data.toString());
      const r = results.get(msg.id);
      assert.ok(r, `message for unknown id ${msg.id}`);
      if (msg.chunk) { r.chunks.push(msg.chunk); onChunk(msg); }
      if (msg.done) r.done = msg;
      if (msg.error) r.error = msg.error;
      if (msg.done || msg.error) {
        pending.delete(msg.id);
        if (pending.size === 0) resolve(results);
      }
    });
  });
}

const wsUrl = () => `ws://127.0.0.1:${server.port}/v1/ws`;

test('several requests on one socket, each tagged with its id', async () => {
  const ws = await open(wsUrl());
  const got = collect(ws, ['a', 'b', 7]);
  ws.send(JSON.stringify({ id: 'a', endpoint: 'completions', body: { prompt: 'one', max_tokens: 5, ignore_eos: true } }));
  ws.send(JSON.stringify({ id: 'b', endpoint: 'chat.completions', body: { messages: [{ role: 'user', content: 'two' }], max_tokens: 4, ignore_eos: true } }));
  ws.send(JSON.stringify({ id: 7, endpoint: 'completions', body: { prompt: 'three', max_tokens: 3, n: 2, ignore_eos: true } }));
  const r = await got;
  assert.equal(r.get('a').done.usage.completion_tokens, 5);
  assert.equal(r.get('a').chunks[0].object, 'text_completion');
  assert.equal(r.get('b').chunks[0].object, 'chat.completion.chunk');
  assert.equal(r.get('b').chunks[0].choices[0].delta.role, 'assistant');
  assert.equal(r.get('b').done.usage.completion_tokens, 4);
  assert.equal(r.get(7).done.usage.completion_tokens, 6);
  const indexes = new Set(r.get(7).chunks.flatMap((c) => c.choices.map((ch) => ch.index)));
  assert.deepEqual([...indexes].sort(), [0, 1]);
  ws.close();
});

test('errors are per request and the socket stays usable', async () => {
  const ws = await open(wsUrl());
  const got = collect(ws, ['bad', 'nobody', 'ok']);
  ws.send(JSON.stringify({ id: 'bad', endpoint: 'completions', body: { prompt: 'x', temperature: 'hot' } }));
  ws.send(JSON.stringify({ id: 'nobody', type: 'cancel' }));
  ws.send(JSON.stringify({ id: 'ok', endpoint: 'completions', body: { prompt: 'x', max_tokens: 2, ignore_eos: true } }));
  const r = await got;
  assert.equal(r.get('bad').error.param, 'temperature');
  assert.equal(r.get('bad').error.type, 'invalid_request_error');
  assert.equal(r.get('nobody').error.code, 'not_found');
  assert.equal(r.get('ok').done.usage.completion_tokens, 2);
  ws.close();
});

test('cancel stops one request and leaves the others running', async () => {
  const ws = await open(wsUrl());
  let cancelled = false;
  const got = collect(ws, ['long', 'short'], (msg) => {
    if (msg.id === 'long' && !cancelled) {
      cancelled = true;
      ws.send(JSON.stringify({ type: 'cancel', id: 'long' }));
    }
  });
  ws.send(JSON.stringify({ id: 'long', endpoint: 'completions', body: { prompt: 'go', max_tokens: 4000, ignore_eos: true } }));
  ws.send(JSON.stringify({ id: 'short', endpoint: 'completions', body: { prompt: 'go', max_tokens: 20, ignore_eos: true } }));
  const r = await got;
  const long = r.get('long');
  assert.ok(long.done, 'a cancelled request still ends with done');
  assert.ok(long.done.usage.completion_tokens < 4000);
  const finishes = long.chunks.flatMap((c) => c.choices).map((c) => c.finish_reason).filter(Boolean);
  assert.deepEqual(finishes, ['abort']);
  assert.equal(r.get('short').done.usage.completion_tokens, 20);
  ws.close();
});

test('closing the socket cancels its requests and frees their KV blocks', async () => {
  const before = metricValue(await (await fetch(`${server.url}/metrics`)).text(),
    'pagoda:request_success_total{finished_reason="cancelled"}') || 0;
  const ws = await open(wsUrl());
  let seen = 0;
  const started = new Promise((resolve) => ws.on('message', () => { if (++seen === 4) resolve(); }));
  for (const id of ['x', 'y']) {
    ws.send(JSON.stringify({ id, endpoint: 'completions', body: { prompt: `p ${id}`, max_tokens: 4000, ignore_eos: true } }));
  }
  await started;
  ws.terminate();  // no close handshake: the TCP connection just drops
  const text = await waitMetrics(server.url, (t) =>
    metricValue(t, 'pagoda:request_success_total{finished_reason="cancelled"}') === before + 2 &&
    metricValue(t, 'pagoda:num_requests_running') === 0 && metricValue(t, 'pagoda:kv_cache_usage_perc') === 0);
  assert.equal(metricValue(text, 'pagoda:request_success_total{finished_reason="cancelled"}'), before + 2);
  assert.equal(metricValue(text, 'pagoda:num_requests_running'), 0);
  assert.equal(metricValue(text, 'pagoda:kv_cache_usage_perc'), 0);
});

test('the upgrade needs the same Authorization header as HTTP', async () => {
  const keys = writeTemp('ws-keys.txt', 'sk-ws-test-01 name=wsuser\n');
  const keyed = await startServer(['--api-key-file', keys, '--open-health']);
  try {
    const url = `ws://127.0.0.1:${keyed.port}/v1/ws`;
    await assert.rejects(open(url), /HTTP 401/);
    await assert.rejects(open(url, { Authorization: 'Bearer sk-nope-0000' }), /HTTP 401/);
    const ws = await open(url, { Authorization: 'Bearer sk-ws-test-01' });
    const got = collect(ws, ['k']);
    ws.send(JSON.stringify({ id: 'k', endpoint: 'completions', body: { prompt: 'x', max_tokens: 2 } }));
    assert.ok((await got).get('k').done);
    ws.close();
  } finally {
    await keyed.stop();
  }
});
