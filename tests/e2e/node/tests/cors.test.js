// CORS from a real browser: headless Chromium (Debian's chromium through playwright-core; skipped
// with a message when either is missing) loads a page from one origin (a small Node server on its
// own port) whose script calls pagoda on another port. Started with --cors-origin naming that page's
// origin, the preflighted POST (Authorization + JSON) succeeds, the exposed X-Request-Id is
// readable, and a streamed completion arrives; a page from an origin not named is refused by the
// browser (fetch fails), while the server itself answered its preflight 403.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { startServer } from './helpers.js';

const CHROMIUM = process.env.PAGODA_CHROMIUM || '/usr/bin/chromium';
let chromium = null;
let skip = false;
try {
  ({ chromium } = await import('playwright-core'));
} catch {
  skip = 'the npm package playwright-core is missing (run npm ci in tests/e2e/node)';
}
if (!skip && !existsSync(CHROMIUM)) skip = `no Chromium at ${CHROMIUM} (scripts/install-deps.sh installs Debian's chromium)`;
if (skip) console.log(`# SKIP the CORS browser test: ${skip}`);

// A page server on a free port: "/" is an empty HTML page (the script runs through page.evaluate).
async function pageServer() {
  const server = createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>cors</title><p>page</p>');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { origin: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

// What the page's script does: a preflighted POST with a key, then a stream read to its end.
async function callFromPage(page, api) {
  return page.evaluate(async (api) => {
    const out = {};
    try {
      const r = await fetch(`${api}/v1/completions`, {
        method: 'POST',
        headers: { Authorization: 'Bearer cors-key-1', 'Content-Type': 'application/json', 'X-Stainless-Test': '1' },
        body: JSON.stringify({ prompt: 'hello', max_tokens: 3 }),
      });
      out.status = r.status;
      out.requestId = r.headers.get('x-request-id');
      out.object = (await r.json()).object;
      const s = await fetch(`${api}/v1/completions`, {
        method: 'POST',
        headers: { Authorization: 'Bearer cors-key-1', 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: 'hello', max_tokens: 3, stream: true }),
      });
      out.streamStatus = s.status;
      out.stream = await s.text();
    } catch (e) {
      out.error = String(e);
    }
    return out;
  }, api);
}

test('a page on another origin calls the API when --cors-origin names it, and is refused otherwise', { skip }, async () => {
  const allowed = await pageServer();
  const other = await pageServer();
  const server = await startServer(['--api-key', 'cors-key-1', '--open-health', '--cors-origin',
    `http://example.invalid,${allowed.origin}`]);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await browser.newPage();
    await page.goto(`${allowed.origin}/`);
    const ok = await callFromPage(page, server.url);
    assert.equal(ok.error, undefined, JSON.stringify(ok));
    assert.equal(ok.status, 200);
    assert.equal(ok.object, 'text_completion');
    assert.match(ok.requestId ?? '', /^[A-Za-z0-9._-]+$/, 'X-Request-Id is exposed to the script');
    assert.equal(ok.streamStatus, 200);
    assert.match(ok.stream, /data: \[DONE\]\n\n$/);

    const refusedPage = await browser.newPage();
    await refusedPage.goto(`${other.origin}/`);
    const refused = await callFromPage(refusedPage, server.url);
    assert.match(refused.error ?? '', /TypeError|Failed to fetch/, JSON.stringify(refused));
    // The server's side of it: the preflight from that origin was answered 403.
    const pre = await fetch(`${server.url}/v1/completions`, {
      method: 'OPTIONS',
      headers: { Origin: other.origin, 'Access-Control-Request-Method': 'POST' },
    });
    assert.equal(pre.status, 403);
    assert.equal(pre.headers.get('access-control-allow-origin'), null);
  } finally {
    await browser.close();
    await server.stop();
    await allowed.close();
    await other.close();
  }
});
