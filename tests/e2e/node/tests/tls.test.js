// HTTPS and WSS (serve --ssl-cert/--ssl-key) with a self-signed certificate made here by the openssl
// CLI for 127.0.0.1: the official openai client (in a child process whose NODE_EXTRA_CA_CERTS
// trusts the certificate) streams and not; curl --cacert sees keys, rate limits and /metrics as over
// HTTP; the WebSocket endpoint works as wss://; SIGTERM drains a stream in flight to its end; and
// a missing, non-PEM or mismatched certificate/key stops the server at start with a clear message.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import https from 'node:https';
import { join } from 'node:path';
import WebSocket from 'ws';
import { BINARY, startServer, testModel, workDir, writeTemp } from './helpers.js';

const cert = join(workDir, 'tls-cert.pem');
const key = join(workDir, 'tls-key.pem');
const otherKey = join(workDir, 'tls-other-key.pem');
let ca;
let server;

function openssl(args) {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

function curl(args) {
  const r = spawnSync('curl', ['-sS', '--cacert', cert, '-o', '-', '-w', '\n%{http_code}', ...args], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const cut = r.stdout.lastIndexOf('\n');
  return { body: r.stdout.slice(0, cut), status: Number(r.stdout.slice(cut + 1)) };
}

before(async () => {
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key,
    '-out', cert, '-days', '2', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost']);
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', otherKey]);
  ca = execFileSync('cat', [cert]);
  const keys = writeTemp('tls-keys.txt', 'tls-key-1 name=alice\ntls-key-2 name=bob rpm=2\n');
  server = await startServer(['--ssl-cert', cert, '--ssl-key', key, '--api-key-file', keys, '--open-health'], 'tiny', {}, { ca });
});

after(async () => {
  if (server) await server.stop();
});

test('the official openai client over HTTPS, trusting the certificate through NODE_EXTRA_CA_CERTS', () => {
  assert.match(server.log(), /listening on 127\.0\.0\.1:\d+ \(HTTPS\)/);
  const script = `
    import OpenAI from 'openai';
    const client = new OpenAI({ baseURL: process.argv[1], apiKey: 'tls-key-1', maxRetries: 0 });
    const whole = await client.completions.create({ model: 'tiny', prompt: 'hello', max_tokens: 4, temperature: 0 });
    let text = '';
    const stream = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4, temperature: 0, stream: true });
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    const again = await client.completions.create({ model: 'tiny', prompt: 'hello', max_tokens: 4, temperature: 0,
      stream: true });
    let streamed = '';
    for await (const chunk of again) streamed += chunk.choices[0]?.text ?? '';
    let refused = 0;
    try { await new OpenAI({ baseURL: process.argv[1], apiKey: 'wrong', maxRetries: 0 }).models.list(); }
    catch (e) { refused = e.status; }
    console.log(JSON.stringify({ whole: whole.choices[0].text, usage: whole.usage, chat: text, streamed, refused }));
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script, server.baseURL], {
    cwd: join(import.meta.dirname, '..'),
    encoding: 'utf8',
    env: { ...process.env, NODE_EXTRA_CA_CERTS: cert },
  });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim().split('\n').pop());
  assert.equal(out.usage.completion_tokens, 4);
  assert.equal(out.streamed, out.whole, 'greedy: streamed text equals the whole response');
  assert.equal(typeof out.chat, 'string');
  assert.equal(out.refused, 401);
});

test('curl --cacert: keys, rate limits and metrics behave as over HTTP; plain HTTP is not spoken', () => {
  const url = server.url;
  assert.equal(curl([`${url}/v1/models`]).status, 401);
  const ok = curl(['-H', 'Authorization: Bearer tls-key-1', `${url}/v1/models`]);
  assert.equal(ok.status, 200);
  assert.equal(JSON.parse(ok.body).object, 'list');
  const body = JSON.stringify({ prompt: 'a', max_tokens: 1 });
  const statuses = [];
  for (let i = 0; i < 3; ++i)
    statuses.push(curl(['-H', 'Authorization: Bearer tls-key-2', '-H', 'Content-Type: application/json', '-d', body,
      `${url}/v1/completions`]).status);
  assert.deepEqual(statuses, [200, 200, 429], 'rpm=2: the third request in the minute is limited');
  const metrics = curl(['-H', 'Authorization: Bearer tls-key-1', `${url}/metrics`]);
  assert.equal(metrics.status, 200);
  assert.match(metrics.body, /pagoda:api_rejections_total\{[^}]*key="bob"[^}]*\} 1\n/);
  assert.match(metrics.body, /pagoda:api_requests_total\{[^}]*key="bob"[^}]*status="200"[^}]*\} 2\n/);
  // An http:// client gets no answer it could mistake for one.
  const plain = spawnSync('curl', ['-sS', '-m', '5', `http://127.0.0.1:${server.port}/health`], { encoding: 'utf8' });
  assert.notEqual(plain.status, 0);
  // Without the CA the certificate is not trusted.
  assert.notEqual(spawnSync('curl', ['-sS', '-m', '5', `${url}/health`]).status, 0);
});

test('WSS: the WebSocket endpoint over TLS', async () => {
  const ws = new WebSocket(`wss://127.0.0.1:${server.port}/v1/ws`, { ca, headers: { Authorization: 'Bearer tls-key-1' } });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const done = new Promise((resolve, reject) => {
    let text = '';
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString());
      if (m.error) reject(new Error(JSON.stringify(m.error)));
      if (m.chunk) text += m.chunk.choices[0]?.text ?? '';
      if (m.done) resolve({ text, usage: m.usage });
    });
  });
  ws.send(JSON.stringify({ id: 1, endpoint: 'completions', body: { prompt: 'hello', max_tokens: 3, stream: true } }));
  const r = await done;
  assert.equal(r.usage.completion_tokens, 3);
  ws.close();
});

test('SIGTERM over TLS: a stream in flight runs to its end, then the server exits 0', async () => {
  const ca2 = ca;
  const s = await startServer(['--ssl-cert', cert, '--ssl-key', key, '--shutdown-timeout', '20'], 'slow', {}, { ca: ca2 });
  const body = JSON.stringify({ prompt: 'once', max_tokens: 300, ignore_eos: true, stream: true });
  const text = await new Promise((resolve, reject) => {
    const req = https.request(`${s.url}/v1/completions`, { method: 'POST', ca: ca2, headers: { 'Content-Type': 'application/json' } },
      (res) => {
        let raw = '';
        let signalled = false;
        res.on('data', (d) => {
          raw += d;
          if (!signalled && raw.includes('"text"')) {
            signalled = true;
            s.stop().catch(reject);  // SIGTERM while the stream runs
          }
        });
        res.on('end', () => resolve(raw));
        res.on('error', reject);
      });
    req.on('error', reject);
    req.end(body);
  });
  assert.match(text, /data: \[DONE\]\n\n$/);
  assert.doesNotMatch(text, /shutting_down/);
  const events = text.split('\n\n').filter((e) => e.startsWith('data: {'));
  const finish = events.map((e) => JSON.parse(e.slice(6))).find((c) => c.choices?.[0]?.finish_reason);
  assert.equal(finish.choices[0].finish_reason, 'length');
  const exit = await s.stop();
  assert.equal(exit.code, 0);
  assert.match(s.log(), /SIGTERM: draining/);
});

test('bad certificate or key files stop the server at start with a message naming them', () => {
  const notPem = writeTemp('not-a-cert.pem', 'hello\n');
  const cases = [
    [['--ssl-cert', join(workDir, 'missing.pem'), '--ssl-key', key], /--ssl-cert '.*missing\.pem': no such file/],
    [['--ssl-cert', notPem, '--ssl-key', key], /--ssl-cert '.*not-a-cert\.pem' is not a PEM certificate/],
    [['--ssl-cert', cert, '--ssl-key', notPem], /--ssl-key '.*not-a-cert\.pem' is not a PEM private key/],
    [['--ssl-cert', cert, '--ssl-key', otherKey], /--ssl-key .*(does not belong|not a PEM private key for --ssl-cert)/],
    [['--ssl-cert', cert], /needs both --ssl-cert and --ssl-key/],
  ];
  for (const [flags, message] of cases) {
    const r = spawnSync(BINARY, ['serve', '-m', testModel('tiny'), '--port', '0', ...flags], { encoding: 'utf8', timeout: 30000 });
    assert.notEqual(r.status, 0, `${flags.join(' ')} started`);
    assert.match(r.stderr, message);
    assert.doesNotMatch(r.stderr, /listening on/, 'it fails before taking the port');
  }
});
