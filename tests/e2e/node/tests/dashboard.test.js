// /dashboard and /v1/state. Without a browser: the routes, their key rules and the state's shape.
// In headless Chromium (Debian's chromium driven by playwright-core; skipped with a message when
// either is missing): the page renders with no console errors and no request leaving the server,
// its numbers change under a bounded load, and a playground stream stopped mid-way frees its KV
// blocks. A screenshot is kept as an artifact (PAGODA_ARTIFACT_DIR — run.sh sets it to
// BUILD/test-artifacts — else a temp folder; the path is printed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, sleep } from './helpers.js';

const CHROMIUM = process.env.PAGODA_CHROMIUM || '/usr/bin/chromium';
let chromium = null;
let browserSkip = false;
try {
  ({ chromium } = await import('playwright-core'));
} catch {
  browserSkip = 'the npm package playwright-core is missing (run npm ci in tests/e2e/node)';
}
if (!browserSkip && !existsSync(CHROMIUM))
  browserSkip = `no Chromium at ${CHROMIUM} (scripts/install-deps.sh installs Debian's chromium)`;
if (browserSkip) console.log(`# SKIP the browser test: ${browserSkip}`);

async function getState(url, headers = {}) {
  const r = await fetch(`${url}/v1/state`, { headers });
  assert.equal(r.status, 200, `GET /v1/state answered ${r.status}`);
  return r.json();
}

// Polls /v1/state until pred(state) holds; fails with the last state after `ms`.
async function waitState(url, pred, what, ms = 15000) {
  const deadline = Date.now() + ms;
  let s;
  while (Date.now() < deadline) {
    s = await getState(url);
    if (pred(s)) return s;
    await sleep(50);
  }
  assert.fail(`${what}: not reached in ${ms} ms; last state: ${JSON.stringify({ engine: s.engine, kv: { used: s.kv.used, sequences: s.kv.sequences } })}`);
}

test('dashboard routes follow the /metrics key rule; the page itself is open', async () => {
  const closed = await startServer(['--api-key', 'sekrit-key-1', '--open-health']);
  try {
    const page = await fetch(`${closed.url}/dashboard`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type'), /^text\/html/);
    const html = await page.text();
    assert.match(html, /<script src="\/dashboard\/dashboard.js"><\/script>/);
    assert.doesNotMatch(html, /https?:\/\//, 'the page names no outside address');
    for (const [path, type] of [['/dashboard/', 'text/html'], ['/dashboard/dashboard.js', 'text/javascript'], ['/dashboard/dashboard.css', 'text/css']]) {
      const r = await fetch(`${closed.url}${path}`);
      assert.equal(r.status, 200, path);
      assert.ok(r.headers.get('content-type').startsWith(type), `${path}: ${r.headers.get('content-type')}`);
      assert.doesNotMatch(await r.text(), /https?:\/\/(?!127\.0\.0\.1)/, `${path} names no outside address`);
    }
    const missing = await fetch(`${closed.url}/dashboard/nope.js`);
    assert.equal(missing.status, 404);
    assert.match((await missing.json()).error.message, /nope\.js/);
    assert.equal((await fetch(`${closed.url}/dashboard`, { method: 'POST' })).status, 405);

    const anon = await fetch(`${closed.url}/v1/state`);
    assert.equal(anon.status, 401);
    assert.equal((await fetch(`${closed.url}/v1/state`, { headers: { Authorization: 'Bearer wrong' } })).status, 401);
    const s = await getState(closed.url, { Authorization: 'Bearer sekrit-key-1' });
    assert.equal(s.object, 'pagoda.state');
    assert.equal(s.status, 'ready');
    assert.equal(s.kv.used, 0);
    assert.equal(s.kv.free + s.kv.cached + s.kv.used, s.kv.blocks);
    assert.deepEqual(s.kv.map, [[s.kv.blocks, 'f']]);
    assert.equal(s.engine.running_requests, 0);
    assert.equal(s.latency.ttft.series.length, s.window.seconds / s.window.slice_seconds);
    // The refused look-ups are counted under the "unknown" key, as /metrics counts them.
    const unknown = s.keys.find((k) => k.key === 'unknown');
    assert.ok(unknown && unknown.rejection_reasons.auth >= 2, JSON.stringify(s.keys));
  } finally {
    await closed.stop();
  }
  const open = await startServer(['--api-key', 'sekrit-key-1', '--open-health', '--open-metrics']);
  try {
    assert.equal((await fetch(`${open.url}/v1/state`)).status, 200);
  } finally {
    await open.stop();
  }
});

test('the dashboard in Chromium: renders cleanly, moves under load, and a stopped stream frees its blocks',
  { skip: browserSkip }, async () => {
    // The deep model with the scalar kernels: the playground's 4000-token stream below lasts ~15 s on
    // the fastest host met, far beyond the checks and the screenshot made while it streams.
    const server = await startServer(['--max-seqs', '8'], 'deep', { PAGODA_ISA: 'scalar' });
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      // As the machine docs say: without the background-networking flags Chromium keeps trying
      // hosts this closed network refuses.
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync'],
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
      const problems = [];
      page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`); });
      page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
      const origin = new URL(server.url).origin;
      await page.route('**/*', (route) => {
        if (new URL(route.request().url()).origin === origin) return route.continue();
        problems.push(`request outside the server: ${route.request().url()}`);
        return route.abort();
      });

      await page.goto(`${server.url}/dashboard?interval=200`);
      await page.waitForFunction(() => document.getElementById('status').textContent === 'ready');
      const blocks = (await getState(server.url)).kv.blocks;
      assert.equal(await page.textContent('#kv-free'), blocks.toLocaleString('en-US'));
      assert.equal(await page.textContent('#v-gen-total'), '0 total');

      // A bounded load: 6 concurrent completions of 24 tokens each (greedy, no early stop).
      const load = await Promise.all(Array.from({ length: 6 }, (_, i) => fetch(`${server.baseURL}/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: `request ${i} says`, max_tokens: 24, temperature: 0, ignore_eos: true }),
      }).then((r) => r.json())));
      const generated = load.reduce((n, r) => n + r.usage.completion_tokens, 0);
      assert.equal(generated, 6 * 24);
      await page.waitForFunction((n) => document.getElementById('v-gen-total').textContent === `${n} total`, generated);
      await page.waitForFunction(() => !['—', '0.0'].includes(document.getElementById('v-gen-tps').textContent));
      await page.waitForFunction(() => document.getElementById('v-ttft').textContent.includes(' / '));
      assert.match(await page.textContent('#v-itl'), /\d.* \/ \d/);
      assert.match(await page.textContent('#v-util'), /%$/);
      // A poll can see the engine's last token before the gateway counted the last answer: wait.
      await page.waitForFunction(() => {
        const row = document.querySelector('#key-rows tr');
        return row && row.cells[0].textContent === 'anonymous' && row.cells[3].textContent === '6';
      });

      // The playground: a long greedy chat stream, stopped once text has arrived.
      const before = await getState(server.url);
      await page.selectOption('#pg-mode', 'chat');
      await page.fill('#pg-max', '4000');
      await page.fill('#pg-temp', '0');
      await page.fill('#pg-prompt', 'Tell me a long story');
      await page.click('#pg-send');
      await page.waitForFunction(() => document.getElementById('pg-output').textContent.length > 20);
      const streaming = await waitState(server.url, (s) => s.kv.used > 0 && s.engine.running_requests === 1, 'the stream holds KV blocks');
      const seq = streaming.kv.sequences[0];
      assert.ok(seq.blocks > 0 && seq.status === 'running', JSON.stringify(seq));
      assert.ok(streaming.kv.map.some(([, code, owner]) => code === 'u' && owner === seq.seq), 'the map shows the sequence\'s blocks');
      await page.waitForFunction(() => /^[1-9]/.test(document.getElementById('kv-used').textContent));
      const shot = join(process.env.PAGODA_ARTIFACT_DIR || mkdtempSync(join(tmpdir(), 'pagoda-dashboard-')), 'dashboard.png');
      mkdirSync(join(shot, '..'), { recursive: true });
      await page.screenshot({ path: shot, fullPage: true });
      console.log(`# dashboard screenshot: ${shot}`);

      await page.click('#pg-stop');
      await page.waitForFunction(() => document.getElementById('pg-status').textContent.startsWith('stopped after'));
      const freed = await waitState(server.url, (s) => s.kv.used === 0 && s.engine.running_requests === 0 && s.engine.waiting_requests === 0,
        'the stopped stream frees its KV blocks');
      assert.equal(freed.kv.sequences.length, 0);
      assert.equal(freed.engine.requests_cancelled, before.engine.requests_cancelled + 1, 'the engine cancelled the stream');
      assert.ok(freed.engine.generation_tokens < before.engine.generation_tokens + 4000, 'it stopped well before max_tokens');
      await page.waitForFunction(() => document.getElementById('kv-used').textContent === '0');

      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
      await server.stop();
    }
  });
