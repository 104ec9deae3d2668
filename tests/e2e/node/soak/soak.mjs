// The soak driver behind scripts/soak.sh: runs `pagoda serve` on loopback and sends it a mix of
// requests for --minutes at a concurrency that changes every phase, with faults: client
// disconnects mid-stream, WebSocket cancels and early closes, malformed / oversized bodies, bad
// keys, a key over its limits, and SIGTERM + restart cycles (with a stream in flight while draining).
// Every request ends in exactly one class: completed, cancelled (the client's own doing), refused
// (a 4xx / 503 JSON error), failed (a clean 5xx or a stream's error event) or lost (no answer in
// --request-timeout seconds, a broken connection, a malformed answer); a status outside what the
// scenario allows is a mismatch. Asserts: no crash (every exit is ours, with status 0), lost = 0,
// no mismatches, at every idle checkpoint /metrics shows no running / waiting requests and no KV
// blocks in use, and VmRSS has no growth trend (within-lifetime least-squares slope after warm-up
// below --rss-slope-mib-per-hour; a run too short to measure it fails unless --rss-trend off says
// it does not judge one). Writes a JSON report (--report) and prints the counts.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import OpenAI from 'openai';
import WebSocket from 'ws';

// ---- options ----
const opts = {
  binary: '', model: '', keys: '', minutes: 30, report: '', restartEvery: 450, checkpointEvery: 120,
  requestTimeout: 60, warmup: 60, rssSlope: 10, maxConcurrency: 12, maxBody: 65536, seed: 1, threads: 1,
  rssTrend: 'judge',
};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const [k, v] = [argv[i], argv[i + 1]];
  const map = {
    '--binary': 'binary', '--model': 'model', '--keys': 'keys', '--minutes': 'minutes', '--report': 'report',
    '--restart-every': 'restartEvery', '--checkpoint-every': 'checkpointEvery', '--request-timeout': 'requestTimeout',
    '--warmup': 'warmup', '--rss-slope-mib-per-hour': 'rssSlope', '--max-concurrency': 'maxConcurrency',
    '--seed': 'seed', '--threads': 'threads', '--rss-trend': 'rssTrend',
  };
  if (!map[k] || v === undefined) { console.error(`soak: unknown option or missing value: ${k}`); process.exit(2); }
  opts[map[k]] = ['binary', 'model', 'keys', 'report', 'rssTrend'].includes(map[k]) ? v : Number(v);
  if (typeof opts[map[k]] === 'number' && !Number.isFinite(opts[map[k]])) { console.error(`soak: ${k} needs a number`); process.exit(2); }
}
for (const k of ['binary', 'model', 'keys']) if (!opts[k]) { console.error(`soak: --${k} is required`); process.exit(2); }
if (!['judge', 'off'].includes(opts.rssTrend)) { console.error(`soak: --rss-trend is 'judge' or 'off', not '${opts.rssTrend}'`); process.exit(2); }

const KEY = 'sk-soak-open-0001';       // unlimited
const LIMITED = 'sk-soak-limited-01';  // rpm=20 tpm=3000 concurrency=1
const MODEL = 'soak-model';
const SHUTDOWN_TIMEOUT = 3;

// Deterministic pseudo-random choices (xorshift), so a failing run can be replayed with --seed.
let rng = (opts.seed >>> 0) || 1;
function rand() { rng ^= rng << 13; rng >>>= 0; rng ^= rng >>> 17; rng ^= rng << 5; rng >>>= 0; return rng / 4294967296; }
const randint = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t0 = Date.now();
const elapsed = () => (Date.now() - t0) / 1000;
const log = (msg) => console.log(`[${elapsed().toFixed(0).padStart(5)} s] ${msg}`);

// ---- the server ----
const server = { child: null, url: '', pid: 0, epoch: 0, stopping: false, log: '', crashes: [], exits: [] };

async function startServer() {
  const args = ['serve', '-m', opts.model, '--port', '0', '--chat-template', 'chatml', '-t', String(opts.threads),
    '--api-key-file', opts.keys, '--open-health', '--open-metrics', '--model-name', MODEL, '-c', '512', '--max-seqs', '16',
    '--max-queue', '32', '--max-body-bytes', String(opts.maxBody), '--shutdown-timeout', String(SHUTDOWN_TIMEOUT), '--drain-grace', '0',
    '--heartbeat-seconds', '1'];
  const child = spawn(opts.binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  server.child = child;
  server.stopping = false;
  server.epoch += 1;
  let text = '';
  child.stderr.on('data', (d) => { text += d.toString(); if (text.length > 1 << 20) text = text.slice(-(1 << 19)); server.log = text; });
  child.on('exit', (code, signal) => {
    server.exits.push({ epoch: server.epoch, code, signal, planned: server.stopping });
    if (!server.stopping) {
      server.crashes.push({ at: elapsed(), code, signal, log: text.slice(-4000) });
      log(`CRASH: pagoda serve exited unexpectedly (code ${code}, signal ${signal})`);
    }
  });
  const deadline = Date.now() + 60000;
  let port = 0;
  while (!port) {
    const m = /listening on 127\.0\.0\.1:(\d+)/.exec(text);
    if (m) port = Number(m[1]);
    else if (child.exitCode !== null) throw new Error(`pagoda serve exited at start: ${text}`);
    else if (Date.now() > deadline) throw new Error(`pagoda serve did not start: ${text}`);
    else await sleep(20);
  }
  server.url = `http://127.0.0.1:${port}`;
  server.pid = child.pid;
  while (true) {
    try { if ((await fetch(`${server.url}/health`)).status === 200) break; } catch { /* not yet */ }
    if (Date.now() > deadline) throw new Error(`pagoda serve not ready: ${text}`);
    await sleep(20);
  }
  log(`server up: pid ${server.pid}, ${server.url} (lifetime ${server.epoch})`);
}

// SIGTERM and wait; the exit must be status 0 within the shutdown timeout plus a margin.
async function stopServer() {
  const child = server.child;
  server.stopping = true;
  const exited = new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, signal: child.signalCode });
    else child.on('exit', (code, signal) => resolve({ code, signal }));
  });
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), (SHUTDOWN_TIMEOUT + 20) * 1000);
  const r = await exited;
  clearTimeout(timer);
  if (r.code !== 0) server.crashes.push({ at: elapsed(), code: r.code, signal: r.signal, log: server.log.slice(-4000), during: 'SIGTERM' });
  return r;
}

// ---- accounting ----
const counts = { sent: 0, completed: 0, cancelled: 0, refused: 0, failed: 0, lost: 0 };
const byScenario = {};
const problems = [];  // lost requests and mismatches, with details
let inFlight = 0;

function record(scenario, outcome, detail) {
  counts[outcome] += 1;
  byScenario[scenario] ??= { sent: 0, completed: 0, cancelled: 0, refused: 0, failed: 0, lost: 0 };
  byScenario[scenario][outcome] += 1;
  if (outcome === 'lost' && problems.length < 200) problems.push({ at: elapsed(), scenario, kind: 'lost', detail });
}
function mismatch(scenario, detail) {
  if (problems.length < 200) problems.push({ at: elapsed(), scenario, kind: 'mismatch', detail });
}

// Runs one logical request: `fn` resolves to an outcome ('completed', 'refused', ...). Anything
// thrown, or no outcome within the timeout, is lost.
async function track(scenario, fn) {
  counts.sent += 1;
  byScenario[scenario] ??= { sent: 0, completed: 0, cancelled: 0, refused: 0, failed: 0, lost: 0 };
  byScenario[scenario].sent += 1;
  inFlight += 1;
  let timer;
  const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve({ outcome: 'lost', detail: 'no answer (hung)' }), opts.requestTimeout * 1000); });
  try {
    const r = await Promise.race([fn().then((o) => (typeof o === 'string' ? { outcome: o } : o)), timeout]);
    record(scenario, r.outcome, r.detail);
  } catch (e) {
    record(scenario, 'lost', `${e?.name}: ${e?.message} ${e?.cause?.code ?? ''}`);
  } finally {
    clearTimeout(timer);
    inFlight -= 1;
  }
}

// An error answer: the status must be one the scenario allows and the body OpenAI's error shape.
function classifyError(scenario, status, body, allowed) {
  let err;
  try { err = JSON.parse(body).error; } catch { /* below */ }
  if (!err || typeof err.message !== 'string' || typeof err.type !== 'string')
    return { outcome: 'lost', detail: `status ${status} without an error body: ${String(body).slice(0, 200)}` };
  if (!allowed.includes(status) && status !== 503) mismatch(scenario, `status ${status} (${err.code}): ${err.message}`);
  return { outcome: status >= 500 && status !== 503 ? 'failed' : 'refused' };
}

function headers(key = KEY) {
  return { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` };
}

// Reads an SSE body to its end: completed when it ends with [DONE] after a finish_reason, failed
// when an error event came first.
async function readSse(res, onChunk) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '', finished = false, errored = false, done = false;
  while (true) {
    const { value, done: end } = await reader.read();
    if (end) break;
    buf += decoder.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        const obj = JSON.parse(data);
        if (obj.error) errored = true;
        if (obj.choices?.some((c) => c.finish_reason)) finished = true;
        if (onChunk && onChunk(obj) === 'stop') { await reader.cancel(); return 'aborted'; }
      }
    }
  }
  if (!done) return { outcome: 'lost', detail: 'stream ended without [DONE]' };
  if (errored) return 'failed';
  return finished ? 'completed' : { outcome: 'lost', detail: 'stream without finish_reason' };
}

const prompts = ['Once upon a time', 'The little dog', 'Hello', 'In a land far away there was', 'Tom and Lily went to the park'];
const chatMessages = () => [{ role: 'system', content: 'You tell short stories.' }, { role: 'user', content: pick(prompts) }];

// ---- scenarios ----
const scenarios = {
  async chat_sdk() {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0, timeout: opts.requestTimeout * 1000 });
    try {
      const r = await client.chat.completions.create({ model: MODEL, messages: chatMessages(), max_tokens: randint(1, 24), temperature: rand() });
      return r.choices?.[0]?.finish_reason ? 'completed' : { outcome: 'lost', detail: 'no finish_reason' };
    } catch (e) {
      if (e instanceof OpenAI.APIError && e.status) return classifyError('chat_sdk', e.status, JSON.stringify({ error: e.error }), []);
      throw e;
    }
  },
  async chat_sdk_stream() {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0, timeout: opts.requestTimeout * 1000 });
    try {
      const stream = await client.chat.completions.create({ model: MODEL, messages: chatMessages(), max_tokens: randint(1, 32), stream: true,
        stream_options: { include_usage: true } });
      let finished = false;
      for await (const chunk of stream) if (chunk.choices?.some((c) => c.finish_reason)) finished = true;
      return finished ? 'completed' : { outcome: 'lost', detail: 'stream without finish_reason' };
    } catch (e) {
      if (e instanceof OpenAI.APIError && e.status) return classifyError('chat_sdk_stream', e.status, JSON.stringify({ error: e.error }), []);
      throw e;
    }
  },
  async completion_fetch() {
    const stream = rand() < 0.5;
    const body = { model: MODEL, prompt: pick(prompts), max_tokens: randint(1, 32), stream, n: randint(1, 3), logprobs: rand() < 0.3 ? 2 : undefined };
    const res = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: headers(), body: JSON.stringify(body) });
    if (res.status !== 200) return classifyError('completion_fetch', res.status, await res.text(), []);
    if (stream) return readSse(res);
    const j = await res.json();
    return j.choices?.length === body.n && j.choices.every((c) => c.finish_reason) ? 'completed' : { outcome: 'lost', detail: 'bad body' };
  },
  // A client that goes away mid-stream (or before the first token): the server must cancel it.
  async disconnect() {
    const ac = new AbortController();
    const body = { model: MODEL, prompt: pick(prompts), max_tokens: 200, ignore_eos: true, stream: true };
    const after = randint(0, 6);
    if (after === 0) setTimeout(() => ac.abort(), randint(0, 30));
    try {
      const res = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: headers(), body: JSON.stringify(body), signal: ac.signal });
      if (res.status !== 200) return classifyError('disconnect', res.status, await res.text(), []);
      let n = 0;
      const r = await readSse(res, () => (++n >= after ? 'stop' : undefined));
      return r === 'aborted' ? 'cancelled' : r;
    } catch (e) {
      if (e.name === 'AbortError') return 'cancelled';
      throw e;
    }
  },
  async embeddings() {
    const res = await fetch(`${server.url}/v1/embeddings`, { method: 'POST', headers: headers(),
      body: JSON.stringify({ model: MODEL, input: rand() < 0.5 ? pick(prompts) : [pick(prompts), pick(prompts)] }) });
    if (res.status !== 200) return classifyError('embeddings', res.status, await res.text(), []);
    const j = await res.json();
    return j.data?.length >= 1 && j.data[0].embedding?.length > 0 ? 'completed' : { outcome: 'lost', detail: 'bad embeddings body' };
  },
  async tokenize() {
    const res = await fetch(`${server.url}/tokenize`, { method: 'POST', headers: headers(), body: JSON.stringify({ content: pick(prompts) }) });
    if (res.status !== 200) return classifyError('tokenize', res.status, await res.text(), []);
    const j = await res.json();
    return Array.isArray(j.tokens) ? 'completed' : { outcome: 'lost', detail: 'bad tokenize body' };
  },
  // Malformed requests: each must be refused with its documented status.
  async malformed() {
    const cases = [
      ['POST', '/v1/chat/completions', '{"messages": [', 400],
      ['POST', '/v1/chat/completions', JSON.stringify({ messages: 'hi' }), 400],
      ['POST', '/v1/completions', JSON.stringify({ prompt: 'x', temperature: 'hot' }), 400],
      ['POST', '/v1/completions', JSON.stringify({ prompt: 'x', suffix: 'y' }), 400],
      ['POST', '/v1/completions', JSON.stringify({ prompt: 'x', model: 'other' }), 404],
      ['POST', '/v1/completions', JSON.stringify({ prompt: [1, 2, 999999] }), 400],
      ['POST', '/v1/completions', Buffer.from([0x7b, 0x22, 0x70, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]), 400],
      ['POST', '/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 100000 }), 400],
      ['GET', '/v1/completions', undefined, 405],
      ['POST', '/v1/nothing', '{}', 404],
      ['POST', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'email' } } } }), 400],
    ];
    const [method, path, body, status] = pick(cases);
    const res = await fetch(`${server.url}${path}`, { method, headers: headers(), body });
    const text = await res.text();
    if (res.status === 200) { mismatch('malformed', `${method} ${path} answered 200`); return 'completed'; }
    return classifyError('malformed', res.status, text, [status]);
  },
  async oversized() {
    const body = JSON.stringify({ prompt: 'x'.repeat(opts.maxBody + randint(1, 4096)) });
    const res = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: headers(), body });
    return classifyError('oversized', res.status, await res.text(), [413]);
  },
  async bad_key() {
    const res = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: headers(rand() < 0.5 ? 'sk-wrong-key-000' : ''),
      body: JSON.stringify({ prompt: 'x' }) });
    return classifyError('bad_key', res.status, await res.text(), [401]);
  },
  // The limited key: answered while within its limits, else 429 with Retry-After.
  async over_limit() {
    const res = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: headers(LIMITED),
      body: JSON.stringify({ prompt: pick(prompts), max_tokens: randint(1, 64) }) });
    if (res.status === 200) { await res.json(); return 'completed'; }
    const text = await res.text();
    if (res.status === 429 && !res.headers.get('retry-after')) mismatch('over_limit', '429 without Retry-After');
    return classifyError('over_limit', res.status, text, [429]);
  },
  // One socket, several requests: one is cancelled after its first chunk, and sometimes the socket
  // is closed before they finish. Each request ends with done / error, or counts as cancelled
  // when the client closed the socket under it.
  async websocket(n) {
    const closeEarly = rand() < 0.25;
    const cancelId = rand() < 0.6 ? `r${randint(0, n - 1)}` : null;
    const ws = new WebSocket(`${server.url.replace('http', 'ws')}/v1/ws`, { headers: { Authorization: `Bearer ${KEY}` } });
    const results = new Map();
    const pending = new Set();
    await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); ws.once('unexpected-response', (_, res) => reject(new Error(`upgrade answered ${res.statusCode}`))); });
    const finished = new Promise((resolve) => {
      ws.on('message', (data) => {
        const m = JSON.parse(data.toString());
        if (m.chunk && m.id === cancelId && pending.has(m.id) && !results.has(`${m.id}:cancel`)) {
          results.set(`${m.id}:cancel`, true);
          ws.send(JSON.stringify({ type: 'cancel', id: m.id }));
        }
        if (m.chunk && closeEarly && rand() < 0.3) ws.close();
        if ((m.done || m.error) && !pending.has(m.id)) {
          // A cancel that crossed its request's last message answers not_found: expected.
          if (!(m.error?.code === 'not_found' && results.has(`${m.id}:cancel`))) mismatch('websocket', `a second ending for ${m.id}: ${JSON.stringify(m)}`);
          return;
        }
        if (m.done || m.error) {
          const outcome = m.error ? (m.error.status >= 500 && m.error.status !== 503 ? 'failed' : 'refused')
            : results.has(`${m.id}:cancel`) ? 'cancelled' : 'completed';
          if (m.error && m.error.status !== 503 && m.error.status !== 429) mismatch('websocket', `error ${m.error.status}: ${m.error.message}`);
          results.set(m.id, outcome);
          pending.delete(m.id);
          if (pending.size === 0) { ws.close(); resolve(); }
        }
      });
      ws.on('close', resolve);
      ws.on('error', resolve);
    });
    for (let i = 0; i < n; ++i) {
      const id = `r${i}`;
      pending.add(id);
      const endpoint = rand() < 0.5 ? 'completions' : 'chat.completions';
      const body = endpoint === 'completions' ? { prompt: pick(prompts), max_tokens: randint(4, 48) } : { messages: chatMessages(), max_tokens: randint(4, 48) };
      ws.send(JSON.stringify({ id, endpoint, body }));
    }
    await finished;
    // Requests without their last message: the client closed the socket (cancelled), else lost.
    const outcomes = [];
    for (let i = 0; i < n; ++i) {
      const id = `r${i}`;
      if (results.has(id)) outcomes.push({ outcome: results.get(id) });
      else if (closeEarly) outcomes.push({ outcome: 'cancelled' });
      else outcomes.push({ outcome: 'lost', detail: `websocket request ${id} got no done/error before the socket closed` });
    }
    return outcomes;
  },
};

const weights = { chat_sdk: 14, chat_sdk_stream: 14, completion_fetch: 12, disconnect: 10, websocket: 10, embeddings: 4,
  tokenize: 4, malformed: 10, oversized: 3, bad_key: 3, over_limit: 8 };
const weightTotal = Object.values(weights).reduce((a, b) => a + b, 0);
function pickScenario() {
  let x = rand() * weightTotal;
  for (const [name, w] of Object.entries(weights)) { x -= w; if (x < 0) return name; }
  return 'chat_sdk';
}

// A WebSocket run is n requests on one socket: all n count as sent at once, each ends on its own;
// a hung or broken socket loses every request it has not ended.
async function runScenario(name) {
  if (name !== 'websocket') return track(name, scenarios[name]);
  const n = randint(1, 3);
  counts.sent += n;
  byScenario.websocket ??= { sent: 0, completed: 0, cancelled: 0, refused: 0, failed: 0, lost: 0 };
  byScenario.websocket.sent += n;
  inFlight += 1;
  let timer;
  const hung = new Promise((r) => { timer = setTimeout(() => r(null), opts.requestTimeout * 1000); });
  let outs;
  try {
    outs = await Promise.race([scenarios.websocket(n), hung]);
    if (!outs) outs = Array.from({ length: n }, () => ({ outcome: 'lost', detail: 'websocket hung' }));
  } catch (e) {
    outs = Array.from({ length: n }, () => ({ outcome: 'lost', detail: `websocket: ${e.message}` }));
  } finally {
    clearTimeout(timer);
    inFlight -= 1;
  }
  for (const o of outs) record('websocket', o.outcome, o.detail);
}

// ---- load, phases, checkpoints, restarts ----
let paused = false;
let target = 1;
let stopAll = false;
const phases = [1, 4, 8, 2, 12, 6, 16, 3].map((c) => Math.min(c, opts.maxConcurrency));

async function worker(i) {
  while (!stopAll) {
    if (paused || i >= target) { await sleep(50); continue; }
    await runScenario(pickScenario());
  }
}

async function waitIdle(maxMs) {
  const deadline = Date.now() + maxMs;
  while (inFlight > 0 && Date.now() < deadline) await sleep(50);
  return inFlight === 0;
}

function metricValue(text, name) {
  // Labels (model_name) may follow the name.
  const m = new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

const checkpoints = [];
// Idle: no client request in flight; within 10 s the engine must show nothing running or waiting
// and no KV block in use.
async function checkpoint(label) {
  paused = true;
  const idle = await waitIdle(opts.requestTimeout * 1000);
  const deadline = Date.now() + 10000;
  let last;
  while (true) {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    last = {
      running: metricValue(text, 'pagoda:num_requests_running'),
      waiting: metricValue(text, 'pagoda:num_requests_waiting'),
      kv_usage: metricValue(text, 'pagoda:kv_cache_usage_perc'),
    };
    if (last.running === 0 && last.waiting === 0 && last.kv_usage === 0) break;
    if (Date.now() > deadline) break;
    await sleep(100);
  }
  const ok = idle && last.running === 0 && last.waiting === 0 && last.kv_usage === 0;
  checkpoints.push({ at: Math.round(elapsed()), label, ok, clientIdle: idle, ...last });
  log(`checkpoint (${label}): running ${last.running} waiting ${last.waiting} kv in use ${last.kv_usage} — ${ok ? 'ok' : 'NOT IDLE'}`);
  paused = false;
  return ok;
}

const exitResets = {};
// A request on its own connection (agent false: no keep-alive pool), or through `agent`'s pool.
function rawRequest(method, path, body, agent = false) {
  return new Promise((resolve, reject) => {
    const u = new URL(`${server.url}${path}`);
    const data = body === undefined ? '' : JSON.stringify(body);
    const extra = agent ? {} : { Connection: 'close' };
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method, agent,
      headers: { ...headers(), 'Content-Length': Buffer.byteLength(data), ...extra } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text, connection: res.headers.connection }));
      res.on('error', (e) => { e.gotResponse = true; reject(e); });
    });
    req.on('error', reject);
    req.end(data);
  });
}
const freshPost = (path, body) => rawRequest('POST', path, body);

// SIGTERM with a long stream in flight: requests sent while draining are refused (503), the stream
// completes (or is cut off with an error event), the process exits 0; then a fresh server.
async function restartCycle() {
  paused = true;
  await waitIdle(opts.requestTimeout * 1000);
  const longBody = { model: MODEL, prompt: pick(prompts), max_tokens: 400, ignore_eos: true, stream: true };
  let streamStarted;
  const started = new Promise((r) => { streamStarted = r; });
  const long = track('drain_stream', async () => {
    const res = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: headers(), body: JSON.stringify(longBody) });
    if (res.status !== 200) { streamStarted(); return classifyError('drain_stream', res.status, await res.text(), []); }
    let first = true;
    return readSse(res, () => { if (first) { first = false; streamStarted(); } });
  });
  await Promise.race([started, sleep(10000)]);
  // A keep-alive pool with idle connections, as a busy client has when the pod is told to stop.
  const pool = new http.Agent({ keepAlive: true, maxSockets: 3 });
  await Promise.all([0, 1, 2].map(() => rawRequest('GET', '/health', undefined, pool)));
  const stopping = stopServer();
  await sleep(50);
  // New work while draining, each on a fresh connection: refused with 503 shutting_down, or turned
  // away at the TCP level once the process is exiting — refused at connect, or reset before a
  // single response byte (the listener closed with the connection still in its backlog, or the
  // request's bytes arrived just as the I/O stopped). Those two count as refused and are reported
  // apart (exit_resets); a reset after response bytes, or on any request sent before SIGTERM, is lost.
  const during = [];
  for (let i = 0; i < 3; ++i) {
    during.push(track('during_drain', () => freshPost('/v1/completions', { prompt: 'x', max_tokens: 2 })
      .then(({ status, text }) => (status === 200 ? 'completed' : classifyError('during_drain', status, text, [503])))
      .catch((e) => {
        if (e.code === 'ECONNREFUSED' || (e.code === 'ECONNRESET' && !e.gotResponse)) {
          exitResets[e.code] = (exitResets[e.code] ?? 0) + 1;
          return 'refused';
        }
        throw e;
      })));
    await sleep(20);
  }
  // And through the pool, on connections idle at SIGTERM: the server keeps them open and answers
  // 503 + Connection: close, so each is dropped after its answer. A reset before any response byte
  // would be the one race HTTP/1.1 leaves (a request crossing the server's close at exit on the
  // wire); it is counted apart as keepalive_race, never silently.
  for (let i = 0; i < 3; ++i) {
    during.push(track('drain_keepalive', () => rawRequest('POST', '/v1/completions', { prompt: 'x', max_tokens: 2 }, pool)
      .then(({ status, text, connection }) => {
        if (status === 503 && connection !== 'close') throw new Error(`a 503 while draining said Connection: ${connection}`);
        return status === 200 ? 'completed' : classifyError('drain_keepalive', status, text, [503]);
      })
      .catch((e) => {
        if (e.code === 'ECONNREFUSED' || (e.code === 'ECONNRESET' && !e.gotResponse)) {
          const k = `keepalive_race_${e.code}`;
          exitResets[k] = (exitResets[k] ?? 0) + 1;
          return 'refused';
        }
        throw e;
      })));
    await sleep(20);
  }
  const r = await stopping;
  await Promise.all([long, ...during]);
  pool.destroy();
  log(`SIGTERM: exit code ${r.code}${r.signal ? ` signal ${r.signal}` : ''}`);
  await startServer();
  paused = false;
}

// ---- memory ----
const rss = [];
function sampleRss() {
  try {
    const status = readFileSync(`/proc/${server.pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]);
    if (kb) rss.push({ t: elapsed(), epoch: server.epoch, kb, sinceStart: (Date.now() - serverStartedAt) / 1000 });
  } catch { /* between lifetimes */ }
}
let serverStartedAt = Date.now();

// Least-squares slope of RSS over time within each server lifetime (samples after warm-up),
// pooled: sum over lifetimes of cov(t, rss) / sum of var(t). MiB per hour.
function rssSlope() {
  const byEpoch = new Map();
  for (const s of rss) if (s.sinceStart >= opts.warmup) (byEpoch.get(s.epoch) ?? byEpoch.set(s.epoch, []).get(s.epoch)).push(s);
  let num = 0, den = 0, n = 0;
  for (const samples of byEpoch.values()) {
    if (samples.length < 5) continue;
    const mt = samples.reduce((a, s) => a + s.t, 0) / samples.length;
    const mr = samples.reduce((a, s) => a + s.kb, 0) / samples.length;
    for (const s of samples) { num += (s.t - mt) * (s.kb - mr); den += (s.t - mt) ** 2; n += 1; }
  }
  if (den === 0) return { slope: NaN, samples: n };
  return { slope: (num / den) * 3600 / 1024, samples: n };
}

// ---- main ----
async function main() {
  await startServer();
  serverStartedAt = Date.now();
  const rssTimer = setInterval(sampleRss, 5000);
  const workers = Array.from({ length: opts.maxConcurrency }, (_, i) => worker(i));
  const endAt = Date.now() + opts.minutes * 60000;
  let nextRestart = Date.now() + opts.restartEvery * 1000;
  let nextCheckpoint = Date.now() + opts.checkpointEvery * 1000;
  let phase = 0;
  let nextPhase = Date.now();
  let nextReport = Date.now() + 60000;
  while (Date.now() < endAt) {
    if (Date.now() >= nextPhase) {
      target = phases[phase++ % phases.length];
      nextPhase = Date.now() + 20000;
    }
    if (Date.now() >= nextCheckpoint) { await checkpoint('periodic'); nextCheckpoint = Date.now() + opts.checkpointEvery * 1000; }
    if (Date.now() >= nextRestart && Date.now() + 30000 < endAt) {
      await checkpoint('before SIGTERM');
      await restartCycle();
      serverStartedAt = Date.now();
      nextRestart = Date.now() + opts.restartEvery * 1000;
    }
    if (Date.now() >= nextReport) {
      const last = rss.at(-1);
      log(`sent ${counts.sent} completed ${counts.completed} cancelled ${counts.cancelled} refused ${counts.refused} failed ${counts.failed} lost ${counts.lost}; concurrency ${target}; RSS ${last ? (last.kb / 1024).toFixed(1) : '?'} MiB`);
      nextReport = Date.now() + 60000;
    }
    if (server.crashes.length && server.child.exitCode !== null && !server.stopping) {
      // Keep going on a fresh server so the rest of the run still says something; the run fails.
      await startServer();
      serverStartedAt = Date.now();
    }
    await sleep(200);
  }
  await checkpoint('final');
  stopAll = true;
  await Promise.all(workers);
  clearInterval(rssTimer);
  sampleRss();
  const final = await stopServer();

  const slope = rssSlope();
  const summary = {
    minutes: opts.minutes, seed: opts.seed, host_threads: opts.threads, counts, byScenario,
    lifetimes: server.epoch, sigterm_exits: server.exits.filter((e) => e.planned).map((e) => e.code),
    crashes: server.crashes, checkpoints, rss_slope_mib_per_hour: slope.slope, rss_slope_samples: slope.samples,
    rss_slope_threshold: opts.rssSlope, rss_samples: rss.filter((_, i) => i % 12 === 0).map((s) => ({ t: Math.round(s.t), lifetime: s.epoch, mib: +(s.kb / 1024).toFixed(1) })),
    exit_resets: exitResets, problems, final_exit: final,
  };
  const failures = [];
  if (server.crashes.length) failures.push(`${server.crashes.length} crash(es) / unclean exits`);
  const accounted = counts.completed + counts.cancelled + counts.refused + counts.failed + counts.lost;
  if (accounted !== counts.sent) failures.push(`accounting: ${counts.sent} sent but ${accounted} ended`);
  if (counts.lost) failures.push(`${counts.lost} requests lost`);
  const mismatches = problems.filter((p) => p.kind === 'mismatch').length;
  if (mismatches) failures.push(`${mismatches} answers with an unexpected status`);
  if (checkpoints.some((c) => !c.ok)) failures.push('the engine was not idle at a checkpoint');
  // A trend needs samples past each lifetime's warm-up: a run too short for them fails, unless it
  // said up front that it judges no trend (--rss-trend off: soak_short, 90 s with restarts).
  summary.rss_judged = opts.rssTrend === 'judge' && slope.samples >= 10;
  if (summary.rss_judged && !(slope.slope <= opts.rssSlope)) failures.push(`RSS grows: ${slope.slope.toFixed(2)} MiB/h (threshold ${opts.rssSlope})`);
  if (opts.rssTrend === 'judge' && !summary.rss_judged)
    failures.push(`RSS trend not measurable: ${slope.samples} samples after the ${opts.warmup} s warm-up (need 10: run longer, restart less often, or pass --rss-trend off)`);
  summary.failures = failures;
  if (opts.report) writeFileSync(opts.report, JSON.stringify(summary, null, 2));

  console.log('\nsoak summary');
  console.log(`  sent ${counts.sent}  completed ${counts.completed}  cancelled ${counts.cancelled}  refused ${counts.refused}  failed ${counts.failed}  lost ${counts.lost}`);
  for (const [name, c] of Object.entries(byScenario))
    console.log(`  ${name.padEnd(16)} sent ${String(c.sent).padStart(6)}  completed ${c.completed}  cancelled ${c.cancelled}  refused ${c.refused}  failed ${c.failed}  lost ${c.lost}`);
  console.log(`  server lifetimes ${server.epoch}, SIGTERM exits ${summary.sigterm_exits.join(',')}, crashes ${server.crashes.length}`);
  console.log(`  requests sent while the server exited and turned away at the TCP level: ${JSON.stringify(exitResets)}`);
  console.log(`  idle checkpoints ${checkpoints.length}, all idle: ${checkpoints.every((c) => c.ok)}`);
  if (summary.rss_judged) console.log(`  RSS slope ${slope.slope.toFixed(2)} MiB/h over ${slope.samples} samples after ${opts.warmup} s warm-up per lifetime (threshold ${opts.rssSlope})`);
  else if (opts.rssTrend === 'off') console.log('  RSS trend not judged (--rss-trend off: this run is too short to measure one)');
  for (const p of problems.slice(0, 20)) console.log(`  problem: ${JSON.stringify(p)}`);
  if (failures.length) {
    console.log(`FAILED: ${failures.join('; ')}`);
    process.exit(1);
  }
  console.log('soak: ok');
  process.exit(0);
}

main().catch((e) => { console.error(`soak: ${e.stack ?? e}`); try { server.child?.kill('SIGKILL'); } catch { /* gone */ } process.exit(1); });
