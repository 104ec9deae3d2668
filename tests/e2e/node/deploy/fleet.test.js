// The fleet test: three `pagoda serve` (the Deployment's arguments, on loopback) behind HAProxy,
// which health-checks each on the readiness probe's path, and a real Prometheus scraping them
// with the labels the PodMonitor's targets get. Under a bounded load (streams and plain requests
// from 30 clients):
//   - the ScaledObject's two queries and the prometheus-adapter rules, read from deploy/, rise
//     above their thresholds per replica, and after the load they fall below them;
//   - pagoda-a gets SIGTERM: it drains, exits 0, and no request fails;
//   - pagoda-b gets kill -9: HAProxy marks it DOWN within fall x inter of its check; only the
//     requests in flight on it fail, each with an error the client sees (its stream is cut: the
//     body read throws), and every other request completes.
// It prints sent / completed / failed / lost (lost: no answer at all) and asserts lost = 0.
// HAProxy retries what never reached a model (connection refused, 503 from a draining server,
// an empty response) on another server; docs/deploy.md asks the same of a gateway.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DEPLOY, freePort, kubeFile, loopbackServeArgv, oneDoc, pagodaContainer, serveArgs, sleep, startServe, waitFor200,
} from './lib.js';
import { testModel } from '../tests/helpers.js';

const CLIENTS = 30;
const MAX_SEQS = 2;
const REQUEST_TOKENS = 32;
const LOAD_SLOWDOWN = 4 * 2 * 1.5;  // margin x (cores shared by three instances) x (a batch of two)
// The instances' --shutdown-timeout: a ceiling, not the manifest's 60 s (manifests.test.js holds the
// manifest's own drain to it); the drained instance must exit within the measured patience.
const DRAIN_CEILING_S = 600;
const CHECK_INTER_MS = 500;
const CHECK_FALL = 2;
const NAMES = ['pagoda-a', 'pagoda-b', 'pagoda-c'];

const children = [];
function track(child) {
  children.push(child);
  return child;
}
const killAll = () => { for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL'); };
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { killAll(); process.exit(1); });

function spawnLogged(cmd, args) {
  const child = track(spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  let log = '';
  child.stdout.on('data', (d) => { log += d; });
  child.stderr.on('data', (d) => { log += d; });
  return { child, log: () => log };
}

function haproxyConfig(front, stats, readyPath, servers, patienceS) {
  return `global
  maxconn 1024
defaults
  mode http
  timeout connect 2s
  timeout client ${patienceS}s
  timeout server ${patienceS}s
  timeout check 2s
  timeout queue 10s
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response 503
  http-reuse never
frontend api
  bind 127.0.0.1:${front}
  default_backend pagoda
backend pagoda
  balance leastconn
  option httpchk GET ${readyPath}
  http-check expect status 200
  http-after-response set-header X-Pagoda-Backend %s
  default-server inter ${CHECK_INTER_MS}ms fall ${CHECK_FALL} rise 2
${servers.map((s) => `  server ${s.name} 127.0.0.1:${s.port} check`).join('\n')}
frontend stats
  bind 127.0.0.1:${stats}
  stats enable
  stats uri /stats
  stats refresh 1s
`;
}

// HAProxy's view of each server: name -> status (UP, DOWN, "UP 1/2", ...).
async function haproxyStatus(statsUrl) {
  const csv = await (await fetch(`${statsUrl}/stats;csv`)).text();
  const lines = csv.trim().split('\n');
  const header = lines[0].replace(/^# /, '').split(',');
  const col = (n) => header.indexOf(n);
  const out = {};
  for (const l of lines.slice(1)) {
    const f = l.split(',');
    if (f[col('pxname')] === 'pagoda' && NAMES.includes(f[col('svname')])) out[f[col('svname')]] = f[col('status')];
  }
  return out;
}
const isDown = (s) => s === 'DOWN' || s?.startsWith('DOWN ');

// HAProxy's count of failed health checks of one server (the stats' chkfail: checks failed while
// the server was up, so the ones that brought it down).
async function haproxyFailedChecks(statsUrl, name) {
  const csv = await (await fetch(`${statsUrl}/stats;csv`)).text();
  const lines = csv.trim().split('\n');
  const header = lines[0].replace(/^# /, '').split(',');
  const col = (n) => header.indexOf(n);
  for (const l of lines.slice(1)) {
    const f = l.split(',');
    if (f[col('pxname')] === 'pagoda' && f[col('svname')] === name) return Number(f[col('chkfail')]);
  }
  return NaN;
}

function prometheusConfig(metricsPath, container, servers) {
  // The labels a PodMonitor target gets from the Prometheus Operator (namespace, pod, container),
  // which the autoscaler queries select on.
  return `global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: pagoda
    metrics_path: ${metricsPath}
    static_configs:
${servers.map((s) => `      - targets: ["127.0.0.1:${s.port}"]
        labels: {namespace: pagoda, container: ${container}, pod: ${s.name}}`).join('\n')}
`;
}

async function promQuery(promUrl, query) {
  const r = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(query)}`);
  const j = await r.json();
  if (j.status !== 'success') throw new Error(`Prometheus refused ${query}: ${j.error}`);
  return j.data.result;
}
const scalar = (result) => (result.length ? result.reduce((a, s) => a + Number(s.value[1]), 0) : 0);

// A Kubernetes quantity as the HPA reads an averageValue ("4", "920m").
const quantity = (q) => (String(q).endsWith('m') ? Number(String(q).slice(0, -1)) / 1000 : Number(q));

// The prometheus-adapter rule's metricsQuery as the adapter sends it for a per-pod Pods metric.
function adapterQuery(rule, pods) {
  const series = /^([^{]+)\{/.exec(rule.seriesQuery)[1];
  return rule.metricsQuery.replaceAll('<<.Series>>', series)
    .replaceAll('<<.LabelMatchers>>', `namespace="pagoda",pod=~"${pods.join('|')}"`)
    .replaceAll('<<.GroupBy>>', 'pod');
}

test('a fleet of three: scaling signals rise and fall, SIGTERM loses nothing, kill -9 fails only its in-flight requests', async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'pagoda-fleet-'));
  t.after(() => { killAll(); rmSync(work, { recursive: true, force: true }); });
  const { container } = pagodaContainer();
  const readyPath = container.readinessProbe.httpGet.path;
  const drainGrace = Number(serveArgs(container.args).get('--drain-grace'));
  const metricsPath = oneDoc(kubeFile('base', 'podmonitor.yaml')).spec.podMetricsEndpoints[0].path;
  const triggers = oneDoc(kubeFile('keda', 'scaledobject.yaml')).spec.triggers
    .map((tr) => ({ name: tr.name, query: tr.metadata.query, threshold: Number(tr.metadata.threshold) }));
  const hpa = oneDoc(kubeFile('hpa', 'hpa.yaml'));
  const adapterRules = oneDoc(kubeFile('hpa', 'prometheus-adapter-values.yaml')).rules.custom;
  const adapterMetrics = hpa.spec.metrics.map((m) => {
    const rule = adapterRules.find((r) => r.name.as === m.pods.metric.name);
    assert.ok(rule, `no prometheus-adapter rule serves ${m.pods.metric.name}`);
    return { name: m.pods.metric.name, rule, target: quantity(m.pods.target.averageValue) };
  });

  // 1. Three instances. --max-seqs 2 so that 30 clients make a queue on a 2-core machine. The
  // 24-layer random model with the scalar kernels (~4 ms a step) rather than a tiny one: with short
  // steps the HTTP work around them shows up as idle engine time, which a real model does not have
  // (the 4-layer one with AVX-512, ~1.7 ms a step, measured a busy fraction of 0.95 against the
  // 0.92 the signals must pass, too near on a faster host).
  const model = testModel('deep');
  const servers = [];
  for (const name of NAMES) {
    const s = await startServe(loopbackServeArgv(container.args, model, { '--max-seqs': String(MAX_SEQS), '--shutdown-timeout': String(DRAIN_CEILING_S) }), { env: { PAGODA_ISA: 'scalar' } });
    track(s.child);
    servers.push({ name, ...s });
  }
  for (const s of servers) { await waitFor200(s.url, readyPath); s.readyMs = Date.now() - s.startedAt; }

  // The patience of every party (client, HAProxy, the drain), from this machine's measured speed
  // rather than a wall-clock constant, so that "lost" means no answer at all and not "slower than
  // a fast host" (beside CPU hogs a fixed 60 s was outrun by the queue alone). One request alone
  // takes `aloneMs`; under the load each instance serves CLIENTS / 3 clients MAX_SEQS at a time, so
  // a request waits about that many rounds, each slower than alone by the sharing of the cores
  // (three instances, a batch of MAX_SEQS): LOAD_SLOWDOWN covers it with a 4x margin.
  const aloneStart = Date.now();
  const alone = await fetch(`${servers[2].url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: REQUEST_TOKENS, ignore_eos: true }),
  });
  assert.equal(alone.status, 200, await alone.text());
  await alone.arrayBuffer().catch(() => {});
  const aloneMs = Date.now() - aloneStart;
  const rounds = Math.ceil(CLIENTS / NAMES.length / MAX_SEQS);
  const patienceS = Math.max(60, Math.ceil(aloneMs * rounds * LOAD_SLOWDOWN / 1000));
  console.log(`fleet: one request alone ${aloneMs} ms; patience ${patienceS} s (client, HAProxy, drain)`);
  const timeToReady = [];
  for (const s of servers) {
    const text = await (await fetch(s.url + metricsPath)).text();
    timeToReady.push(Number(/^pagoda:time_to_ready_seconds(?:\{[^}]*\})? (\S+)$/m.exec(text)[1]));
  }
  assert.ok(timeToReady.every((v) => v > 0 && v < 30), `time to ready ${timeToReady}`);
  const byName = Object.fromEntries(servers.map((s) => [s.name, s]));

  // 2. HAProxy, health-checking the readiness path. The ports are free when asked for; another
  // process may take one before the server binds it, hence a few tries.
  let api, statsUrl, haproxy;
  for (let attempt = 1; ; attempt++) {
    const [front, statsPort] = [await freePort(), await freePort()];
    const cfg = join(work, 'haproxy.cfg');
    writeFileSync(cfg, haproxyConfig(front, statsPort, readyPath, servers, patienceS));
    haproxy = spawnLogged('haproxy', ['-f', cfg, '-db']);
    [api, statsUrl] = [`http://127.0.0.1:${front}`, `http://127.0.0.1:${statsPort}`];
    let up = false;
    for (const deadline = Date.now() + 20000; Date.now() < deadline && haproxy.child.exitCode === null; await sleep(100)) {
      try { const st = await haproxyStatus(statsUrl); if (NAMES.every((n) => st[n] === 'UP')) { up = true; break; } } catch { /* starting */ }
    }
    if (up) break;
    haproxy.child.kill('SIGKILL');
    if (attempt === 3) assert.fail(`HAProxy did not come up: ${haproxy.log()}`);
  }

  // 3. Prometheus, scraping every second.
  let promUrl, prom;
  const pcfg = join(work, 'prometheus.yml');
  writeFileSync(pcfg, prometheusConfig(metricsPath, container.name, servers));
  for (let attempt = 1; ; attempt++) {
    const promPort = await freePort();
    prom = spawnLogged('prometheus', [`--config.file=${pcfg}`, `--storage.tsdb.path=${join(work, `tsdb${attempt}`)}`,
      `--web.listen-address=127.0.0.1:${promPort}`, '--log.level=warn']);
    promUrl = `http://127.0.0.1:${promPort}`;
    let up = false;
    for (const deadline = Date.now() + 40000; Date.now() < deadline && prom.child.exitCode === null; await sleep(250)) {
      try { if (scalar(await promQuery(promUrl, 'count(up{job="pagoda"} == 1)')) === 3) { up = true; break; } } catch { /* starting */ }
    }
    if (up) break;
    prom.child.kill('SIGKILL');
    if (attempt === 3) assert.fail(`Prometheus did not scrape the three: ${prom.log()}`);
  }
  const evaluate = async () => {
    const out = {};
    for (const tr of triggers) out[tr.name] = scalar(await promQuery(promUrl, tr.query));
    for (const m of adapterMetrics) {
      const perPod = (await promQuery(promUrl, adapterQuery(m.rule, NAMES))).map((s) => Number(s.value[1]));
      out[m.name] = perPod.length ? perPod.reduce((a, b) => a + b, 0) / perPod.length : 0;  // the HPA's average
    }
    return out;
  };
  const idle = await evaluate();
  for (const tr of triggers) assert.ok(idle[tr.name] < tr.threshold, `idle: ${tr.name} = ${idle[tr.name]}`);

  // 4. The load: CLIENTS loops until told to stop; every request is recorded.
  const records = [];
  let stop = false;
  async function one(i) {
    const rec = { i, stream: i % 4 !== 3, start: Date.now() };
    records.push(rec);
    try {
      const res = await fetch(`${api}/v1/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(patienceS * 1000),
        body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: REQUEST_TOKENS, ignore_eos: true, stream: rec.stream }),
      });
      rec.backend = res.headers.get('x-pagoda-backend');
      rec.status = res.status;
      if (res.status !== 200) {
        rec.outcome = 'failed';
        rec.kind = `http-${res.status}`;
        rec.error = (await res.text()).slice(0, 200);
      } else if (rec.stream) {
        const text = await res.text();  // throws when the stream is cut
        const done = text.trimEnd().endsWith('data: [DONE]') && /"finish_reason":"length"/.test(text);
        rec.outcome = done && !text.includes('"error"') ? 'completed' : 'failed';
        if (rec.outcome === 'failed') { rec.kind = done ? 'error-event' : 'truncated'; rec.error = text.slice(-200); }
      } else {
        const j = await res.json();
        rec.outcome = j.choices?.[0]?.finish_reason === 'length' ? 'completed' : 'failed';
        if (rec.outcome === 'failed') rec.kind = 'bad-body';
      }
    } catch (e) {
      if (e.name === 'TimeoutError') rec.outcome = 'lost';
      else {
        rec.outcome = 'failed';
        rec.kind = rec.status ? 'stream-cut' : 'no-response';
        rec.error = `${e.message}${e.cause ? `: ${e.cause.message ?? e.cause}` : ''}`;
      }
    }
    rec.end = Date.now();
  }
  let next = 0;
  const workers = Array.from({ length: CLIENTS }, async () => { while (!stop) await one(next++); });

  // 5. The signals rise: per replica (value / 3 replicas) above each threshold.
  let risen = null;
  for (const deadline = Date.now() + 75000; ;) {
    await sleep(1000);
    const v = await evaluate();
    const queueOk = triggers.every((tr) => v[tr.name] / 3 > tr.threshold);
    const adapterOk = adapterMetrics.every((m) => v[m.name] > m.target);
    if (queueOk && adapterOk) { risen = v; break; }
    if (Date.now() > deadline) { stop = true; await Promise.all(workers); assert.fail(`the scaling signals did not rise: ${JSON.stringify(v)}`); }
  }
  // Saturated, the busy trigger's ratio to its threshold stays within the HPA's 10 % tolerance:
  // it holds the replica count and never asks for more (docs/deploy.md, "Scaling signals").
  const busy = triggers.find((tr) => tr.name === 'busy');
  assert.ok(risen.busy / 3 / busy.threshold <= 1.1, `busy ${risen.busy / 3} per replica: the threshold ${busy.threshold} would scale up on utilisation alone`);
  // The dashboard's queries evaluate (valid PromQL over the live series).
  const dashboard = JSON.parse(readFileSync(join(DEPLOY, 'grafana', 'pagoda-dashboard.json'), 'utf8'));
  let withData = 0, exprs = 0;
  for (const p of dashboard.panels) for (const tg of p.targets) {
    const q = tg.expr.replaceAll('$namespace', 'pagoda').replaceAll('$__rate_interval', '4s');
    exprs++;
    if ((await promQuery(promUrl, q)).length) withData++;
  }
  assert.ok(withData >= exprs - 3, `only ${withData} of ${exprs} dashboard queries have data under load`);

  // 6. SIGTERM pagoda-a: it drains and exits 0; HAProxy sees its readiness fail.
  const a = byName['pagoda-a'];
  const tTerm = Date.now();
  a.child.kill('SIGTERM');
  let aDownMs = null;
  for (const deadline = Date.now() + 10000; aDownMs === null && Date.now() < deadline; await sleep(50))
    if (isDown((await haproxyStatus(statsUrl))['pagoda-a'])) aDownMs = Date.now() - tTerm;
  let drainTimer;
  const aExit = await Promise.race([a.exited,
    new Promise((resolve) => { drainTimer = setTimeout(() => resolve({ code: 'timeout' }), (drainGrace + patienceS + 15) * 1000); })]);
  clearTimeout(drainTimer);
  assert.deepEqual([aExit.code, aExit.signal], [0, null], `pagoda-a after SIGTERM: ${a.log().slice(-500)}`);
  assert.ok(aDownMs !== null, 'HAProxy never marked the draining pagoda-a DOWN');
  await sleep(1000);

  // 7. kill -9 pagoda-b: HAProxy's checks mark it DOWN after fall failed checks; its requests in
  // flight fail. No wall-clock constant: the mechanism is read from HAProxy's failed-check count,
  // and the time is bounded by what the same mechanism took for pagoda-a a moment ago on this
  // machine (both are fall failed checks: a 503 or a refused connection), plus one check interval
  // (where in its interval each signal fell) and our slowest look at the stats.
  const b = byName['pagoda-b'];
  const bFailedBefore = await haproxyFailedChecks(statsUrl, 'pagoda-b');
  const tKill = Date.now();
  b.child.kill('SIGKILL');
  let bDownMs = null, slowestPollMs = 0;
  for (const deadline = Date.now() + 10000; bDownMs === null && Date.now() < deadline; await sleep(25)) {
    const polled = Date.now();
    const down = isDown((await haproxyStatus(statsUrl))['pagoda-b']);
    slowestPollMs = Math.max(slowestPollMs, Date.now() - polled);
    if (down) bDownMs = Date.now() - tKill;
  }
  assert.ok(bDownMs !== null, 'HAProxy never marked the killed pagoda-b DOWN');
  assert.equal(await haproxyFailedChecks(statsUrl, 'pagoda-b') - bFailedBefore, CHECK_FALL,
    'pagoda-b went DOWN after exactly fall failed checks');
  const bDownBound = Math.max(aDownMs, CHECK_FALL * CHECK_INTER_MS) + CHECK_INTER_MS + slowestPollMs;
  assert.ok(bDownMs <= bDownBound, `HAProxy marked pagoda-b DOWN after ${bDownMs} ms; pagoda-a took ${aDownMs} ms, bound ${bDownBound} ms`);
  await sleep(4000);
  // The load runs on until it means something (below: every client round three times) however slow
  // the build (a sanitizer build serves a request in seconds), bounded by the patience.
  for (const deadline = Date.now() + patienceS * 1000; next < 3 * CLIENTS && Date.now() < deadline;) await sleep(250);
  stop = true;
  await Promise.all(workers);

  // 8. The signals fall once the load is over (raw value under the threshold: below it per replica
  // whatever the replica count).
  let fallen = null, last;
  for (const deadline = Date.now() + 60000; Date.now() < deadline; await sleep(1000)) {
    last = await evaluate();
    if (triggers.every((tr) => last[tr.name] < tr.threshold) && adapterMetrics.every((m) => last[m.name] < m.target)) { fallen = last; break; }
  }
  assert.ok(fallen, `the scaling signals did not fall: ${JSON.stringify(last)}`);

  // 9. The counts.
  const count = (o) => records.filter((r) => r.outcome === o).length;
  const sent = records.length, completed = count('completed'), failed = count('failed');
  const lost = sent - completed - failed;
  const failures = records.filter((r) => r.outcome === 'failed');
  const inFlightOnB = records.filter((r) => r.backend === 'pagoda-b' && r.start < tKill && r.end >= tKill);
  const summary = {
    sent, completed, failed, lost,
    failed_kinds: Object.fromEntries([...new Set(failures.map((r) => r.kind))].map((k) => [k, failures.filter((r) => r.kind === k).length])),
    in_flight_on_b_at_kill: inFlightOnB.length,
    served_by: Object.fromEntries(NAMES.map((n) => [n, records.filter((r) => r.backend === n && r.outcome === 'completed').length])),
    haproxy_down_ms: { 'pagoda-a (SIGTERM)': aDownMs, 'pagoda-b (kill -9)': bDownMs },
    pagoda_a_drain_exit_ms: aExit.at - tTerm,
    time_to_ready_s: timeToReady,
    spawn_to_ready_ms: servers.map((s) => s.readyMs),
    risen, fallen,
  };
  console.log(`fleet: sent ${sent}, completed ${completed}, failed ${failed}, lost ${lost}`);
  console.log(`fleet: ${JSON.stringify(summary)}`);
  if (process.env.PAGODA_FLEET_SUMMARY) writeFileSync(process.env.PAGODA_FLEET_SUMMARY, JSON.stringify(summary, null, 2));

  assert.equal(lost, 0, 'every request got an answer');
  // Enough load to mean something: every client went round a few times, every instance served.
  assert.ok(sent >= 3 * CLIENTS, `too little load: ${sent} requests`);
  for (const n of NAMES) assert.ok(summary.served_by[n] > 0, `${n} served nothing`);
  for (const r of failures) {
    assert.equal(r.backend, 'pagoda-b', `a request failed elsewhere than on the killed instance: ${JSON.stringify(r)}`);
    assert.ok(r.start < tKill && r.end >= tKill, `a failed request was not in flight at the kill: ${JSON.stringify(r)}`);
    assert.ok(r.stream && r.kind === 'stream-cut', `a failure the client would not see as an error: ${JSON.stringify(r)}`);
  }
  assert.ok(failed >= 1, 'the kill -9 hit no request in flight: the test proved nothing');
  assert.equal(records.filter((r) => r.backend === 'pagoda-a' && r.outcome !== 'completed').length, 0, 'SIGTERM: no failure on pagoda-a');
  assert.equal(records.filter((r) => r.start > tKill + bDownMs && r.backend === 'pagoda-b').length, 0, 'routed to pagoda-b after it was DOWN');
  assert.equal(records.filter((r) => r.start > tTerm + aDownMs + 100 && r.backend === 'pagoda-a').length, 0, 'routed to pagoda-a after it was DOWN');
  assert.ok(byName['pagoda-c'].child.exitCode === null, 'pagoda-c still serves');
});
