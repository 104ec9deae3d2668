// The lame-duck drain behind a plain balancer, with no preStop delay: two `pagoda serve` (default
// --drain-grace) behind HAProxy (leastconn), which checks GET /readyz every 300 ms and marks a
// server DOWN after one failure, and retries what never reached a model (a refused connection, an
// empty response, a 503; `retry-on ... 503`, `option redispatch`). Under load from 12 clients,
// one instance gets SIGTERM: its /readyz fails at once, it still serves what HAProxy sends before
// its check notices, then refuses (503, retried elsewhere), finishes what it has and exits 0.
// Not one request may fail. LAME_DUCK_ROUNDS rounds (default 3), each with fresh servers;
// scripts/lame_duck_drain.sh runs 20. LAME_DUCK_GRACE=S passes --drain-grace S instead of the
// default (with 0, the drain before the lame duck: expect losses, the test then fails).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, sleep, startServe, waitFor200 } from './lib.js';
import { testModel } from '../tests/helpers.js';

const ROUNDS = Number(process.env.LAME_DUCK_ROUNDS ?? 3);
const CLIENTS = 12;
const NAMES = ['pagoda-a', 'pagoda-b'];
const GRACE = process.env.LAME_DUCK_GRACE;  // undefined: the server's default, 5 s
const GRACE_S = GRACE === undefined ? 5 : Number(GRACE);

const children = [];
const killAll = () => { for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL'); };
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { killAll(); process.exit(1); });

function haproxyConfig(front, stats, servers) {
  return `global
  maxconn 1024
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout check 2s
  retries 3
  option redispatch
  retry-on conn-failure empty-response 503
frontend api
  bind 127.0.0.1:${front}
  default_backend pagoda
backend pagoda
  balance leastconn
  option httpchk GET /readyz
  http-check expect status 200
  http-after-response set-header X-Pagoda-Backend %s
  default-server inter 300ms fall 1 rise 2
${servers.map((s) => `  server ${s.name} 127.0.0.1:${s.port} check`).join('\n')}
frontend stats
  bind 127.0.0.1:${stats}
  stats enable
  stats uri /stats
`;
}

async function haproxyStatus(statsUrl) {
  const lines = (await (await fetch(`${statsUrl}/stats;csv`)).text()).trim().split('\n');
  const header = lines[0].replace(/^# /, '').split(',');
  const out = {};
  for (const l of lines.slice(1)) {
    const f = l.split(',');
    if (f[header.indexOf('pxname')] === 'pagoda' && NAMES.includes(f[header.indexOf('svname')]))
      out[f[header.indexOf('svname')]] = f[header.indexOf('status')];
  }
  return out;
}

// One round: fresh servers and HAProxy, load, SIGTERM to pagoda-a mid-load. Returns its figures.
async function round(work, r) {
  const servers = [];
  for (const name of NAMES) {
    const grace = GRACE === undefined ? [] : ['--drain-grace', GRACE];
    // The slow model and two sequences at a time: requests queue, so a draining instance has
    // work in flight for a while (as a loaded one does) and keeps answering, and refusing, meanwhile.
    const s = await startServe(['serve', '-m', testModel('slow'), '--port', '0', '-t', '1', '--max-seqs', '2',
      '--chat-template', 'chatml', ...grace]);
    children.push(s.child);
    servers.push({ name, ...s });
  }
  for (const s of servers) await waitFor200(s.url, '/readyz');
  let haproxy, api, statsUrl;
  for (let attempt = 1; ; attempt++) {
    const [front, statsPort] = [await freePort(), await freePort()];
    const cfg = join(work, `haproxy-${r}.cfg`);
    writeFileSync(cfg, haproxyConfig(front, statsPort, servers));
    haproxy = spawn('haproxy', ['-f', cfg, '-db'], { stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(haproxy);
    [api, statsUrl] = [`http://127.0.0.1:${front}`, `http://127.0.0.1:${statsPort}`];
    let up = false;
    for (const deadline = Date.now() + 20000; Date.now() < deadline && haproxy.exitCode === null; await sleep(100)) {
      try { const st = await haproxyStatus(statsUrl); if (NAMES.every((n) => st[n] === 'UP')) { up = true; break; } } catch { /* starting */ }
    }
    if (up) break;
    haproxy.kill('SIGKILL');
    if (attempt === 3) assert.fail('HAProxy did not come up');
  }

  const records = [];
  let stop = false;
  let tTerm = Infinity;
  async function one(i) {
    const rec = { i, stream: i % 2 === 0, start: Date.now() };
    records.push(rec);
    try {
      const res = await fetch(`${api}/v1/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(30000),
        body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 16, ignore_eos: true, stream: rec.stream }),
      });
      rec.backend = res.headers.get('x-pagoda-backend');
      rec.status = res.status;
      const text = await res.text();
      const ok = res.status === 200 && (rec.stream
        ? text.trimEnd().endsWith('data: [DONE]') && /"finish_reason":"length"/.test(text) && !text.includes('"error"')
        : JSON.parse(text).choices?.[0]?.finish_reason === 'length');
      rec.outcome = ok ? 'completed' : 'failed';
      if (!ok) rec.error = `${res.status} ${text.slice(-200)}`;
    } catch (e) {
      rec.outcome = 'failed';
      rec.error = `${e.name}: ${e.message}${e.cause ? `: ${e.cause.message ?? e.cause}` : ''}`;
    }
    rec.end = Date.now();
  }
  let next = 0;
  const workers = Array.from({ length: CLIENTS }, async () => { while (!stop) await one(next++); });
  await sleep(1500);

  const a = servers[0];
  tTerm = Date.now();
  a.child.kill('SIGTERM');
  let downMs = null;
  for (const deadline = Date.now() + 10000; downMs === null && Date.now() < deadline; await sleep(50))
    if (/^DOWN/.test((await haproxyStatus(statsUrl))['pagoda-a'] ?? '')) downMs = Date.now() - tTerm;
  const exit = await a.exited;
  await sleep(1000);  // the load goes on against pagoda-b alone
  stop = true;
  await Promise.all(workers);
  haproxy.kill('SIGTERM');
  servers[1].child.kill('SIGTERM');
  await servers[1].exited;

  const failed = records.filter((x) => x.outcome !== 'completed');
  return {
    round: r,
    sent: records.length,
    failed: failed.length,
    failures: failed.slice(0, 5).map((x) => ({ backend: x.backend, error: x.error })),
    a_exit: [exit.code, exit.signal],
    a_exit_after_ms: exit.at - tTerm,
    haproxy_down_after_ms: downMs,
    // Requests that started after SIGTERM and were answered by the lame duck: the grace at work.
    served_by_a_after_sigterm: records.filter((x) => x.start > tTerm && x.backend === 'pagoda-a' && x.outcome === 'completed').length,
  };
}

test(`lame-duck drain behind HAProxy, no preStop: SIGTERM mid-load loses no request (${ROUNDS} rounds)`, async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'pagoda-lame-duck-'));
  t.after(() => { killAll(); rmSync(work, { recursive: true, force: true }); });
  const results = [];
  for (let r = 1; r <= ROUNDS; r++) {
    const res = await round(work, r);
    results.push(res);
    console.log(JSON.stringify(res));
  }
  const lost = results.reduce((n, x) => n + x.failed, 0);
  const sent = results.reduce((n, x) => n + x.sent, 0);
  console.log(JSON.stringify({ rounds: ROUNDS, sent, lost }));
  for (const res of results) {
    assert.deepEqual(res.a_exit, [0, null], `round ${res.round}: pagoda-a exit`);
    assert.ok(res.haproxy_down_after_ms !== null, `round ${res.round}: HAProxy never marked pagoda-a DOWN`);
    assert.ok(res.a_exit_after_ms >= GRACE_S * 900, `round ${res.round}: pagoda-a exited ${res.a_exit_after_ms} ms after SIGTERM, within the ${GRACE_S} s grace`);
  }
  assert.equal(lost, 0, `requests lost: ${JSON.stringify(results.filter((x) => x.failed))}`);
});
