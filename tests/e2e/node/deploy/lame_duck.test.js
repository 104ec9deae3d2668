// The lame-duck drain behind a plain balancer, with no preStop delay: two `pagoda serve` (default
// --drain-grace) behind a balancer, under load from 12 clients; one instance gets SIGTERM: its
// /readyz fails at once, it still serves what the balancer sends before it notices, then refuses
// (503 + Connection: close, retried elsewhere), finishes what it has and exits 0. Not one request
// may fail. LAME_DUCK_BALANCER picks the balancer:
//   haproxy (default)  leastconn, checks GET /readyz every 300 ms and marks a server DOWN after one
//                      failure, retries what never reached a model (`retry-on conn-failure
//                      empty-response 503`, `option redispatch`);
//   nginx              open-source nginx has no active health checks: least_conn with passive
//                      failure counting only, `proxy_next_upstream error timeout http_503
//                      non_idempotent` (POSTs are retried on the other instance).
// LAME_DUCK_ROUNDS rounds (default 3), each with fresh servers; scripts/lame_duck_drain.sh runs 20.
// LAME_DUCK_GRACE=S passes --drain-grace S instead of the default (with 0, the drain before the lame
// duck: expect losses, the test then fails).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, sleep, startServe, waitFor200 } from './lib.js';
import { testModel } from '../tests/helpers.js';

const ROUNDS = Number(process.env.LAME_DUCK_ROUNDS ?? 3);
const CLIENTS = 12;
const NAMES = ['pagoda-a', 'pagoda-b'];
const GRACE = process.env.LAME_DUCK_GRACE;  // undefined: the server's default, 5 s
const GRACE_S = GRACE === undefined ? 5 : Number(GRACE);
const BALANCER = process.env.LAME_DUCK_BALANCER ?? 'haproxy';
if (!['haproxy', 'nginx'].includes(BALANCER)) throw new Error(`LAME_DUCK_BALANCER must be haproxy or nginx, not ${BALANCER}`);

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

function nginxConfig(work, front, servers) {
  // As root, the workers would run as nobody and could not use the test's private temp folders.
  const user = process.getuid?.() === 0 ? 'user root;\n' : '';
  return `${user}daemon off;
worker_processes 1;
pid ${work}/nginx.pid;
error_log ${work}/nginx-error.log warn;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path ${work}/client_body;
  proxy_temp_path ${work}/proxy;
  fastcgi_temp_path ${work}/fastcgi;
  uwsgi_temp_path ${work}/uwsgi;
  scgi_temp_path ${work}/scgi;
  upstream pagoda {
    least_conn;
${servers.map((s) => `    server 127.0.0.1:${s.port} max_fails=1 fail_timeout=10s;`).join('\n')}
  }
  server {
    listen 127.0.0.1:${front};
    location / {
      proxy_pass http://pagoda;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_connect_timeout 2s;
      proxy_read_timeout 60s;
      proxy_next_upstream error timeout http_503 non_idempotent;
      proxy_next_upstream_tries 3;
      add_header X-Pagoda-Backend $upstream_addr always;
    }
  }
}
`;
}

// The balancer in front of `servers`: { api, backendOf(response) -> server name, downAfterMs(tTerm)
// (null: never seen down, or the balancer has no health checks), stop() }.
async function startBalancer(work, r, servers) {
  if (BALANCER === 'nginx') {
    const front = await freePort();
    const dir = join(work, `nginx-${r}`);
    mkdirSync(dir);
    const cfg = join(dir, 'nginx.conf');
    writeFileSync(cfg, nginxConfig(dir, front, servers));
    const nginx = spawn('nginx', ['-c', cfg, '-p', dir], { stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(nginx);
    const api = `http://127.0.0.1:${front}`;
    let up = false;
    for (const deadline = Date.now() + 20000; !up && Date.now() < deadline && nginx.exitCode === null; await sleep(100))
      try { up = (await fetch(`${api}/readyz`)).status === 200; } catch { /* starting */ }
    if (!up) assert.fail('nginx did not come up');
    const byPort = Object.fromEntries(servers.map((s) => [String(s.port), s.name]));
    return {
      api,
      // $upstream_addr lists every upstream tried, the one that answered last.
      backendOf: (res) => byPort[(res.headers.get('x-pagoda-backend') ?? '').split(',').at(-1).trim().split(':').at(-1)],
      downAfterMs: async () => null,
      stop: () => nginx.kill('SIGTERM'),
    };
  }
  for (let attempt = 1; ; attempt++) {
    const [front, statsPort] = [await freePort(), await freePort()];
    const cfg = join(work, `haproxy-${r}.cfg`);
    writeFileSync(cfg, haproxyConfig(front, statsPort, servers));
    const haproxy = spawn('haproxy', ['-f', cfg, '-db'], { stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(haproxy);
    const [api, statsUrl] = [`http://127.0.0.1:${front}`, `http://127.0.0.1:${statsPort}`];
    let up = false;
    for (const deadline = Date.now() + 20000; Date.now() < deadline && haproxy.exitCode === null; await sleep(100)) {
      try { const st = await haproxyStatus(statsUrl); if (NAMES.every((n) => st[n] === 'UP')) { up = true; break; } } catch { /* starting */ }
    }
    if (up) {
      return {
        api,
        backendOf: (res) => res.headers.get('x-pagoda-backend'),
        async downAfterMs(tTerm) {
          for (const deadline = Date.now() + 10000; Date.now() < deadline; await sleep(50))
            if (/^DOWN/.test((await haproxyStatus(statsUrl))['pagoda-a'] ?? '')) return Date.now() - tTerm;
          return null;
        },
        stop: () => haproxy.kill('SIGTERM'),
      };
    }
    haproxy.kill('SIGKILL');
    if (attempt === 3) assert.fail('HAProxy did not come up');
  }
}

// One round: fresh servers and balancer, load, SIGTERM to pagoda-a mid-load. Returns its figures.
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
  const balancer = await startBalancer(work, r, servers);
  const { api } = balancer;

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
      rec.backend = balancer.backendOf(res);
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
  const downMs = await balancer.downAfterMs(tTerm);
  const exit = await a.exited;
  await sleep(1000);  // the load goes on against pagoda-b alone
  stop = true;
  await Promise.all(workers);
  balancer.stop();
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
    balancer_down_after_ms: downMs,
    // Requests that started after SIGTERM and were answered by the lame duck: the grace at work.
    served_by_a_after_sigterm: records.filter((x) => x.start > tTerm && x.backend === 'pagoda-a' && x.outcome === 'completed').length,
  };
}

test(`lame-duck drain behind ${BALANCER}, no preStop: SIGTERM mid-load loses no request (${ROUNDS} rounds)`, async (t) => {
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
    if (BALANCER === 'haproxy') assert.ok(res.balancer_down_after_ms !== null, `round ${res.round}: HAProxy never marked pagoda-a DOWN`);
    assert.ok(res.a_exit_after_ms >= GRACE_S * 900, `round ${res.round}: pagoda-a exited ${res.a_exit_after_ms} ms after SIGTERM, within the ${GRACE_S} s grace`);
  }
  assert.equal(lost, 0, `requests lost: ${JSON.stringify(results.filter((x) => x.failed))}`);
});
