// deploy/ against its schemas and against the binary: every manifest validates (validate.js);
// names, ports and selectors agree across the files; the container's flags are options of the
// built `pagoda serve`; the drain timing rule holds; the Dockerfile's runtime libraries are the
// binary's; and a live pagoda started with the manifest's arguments answers the probe paths,
// serves every metric the autoscalers, the endpoint picker and the dashboard read, and drains on
// SIGTERM as the probes promise.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  BINARY, DEPLOY, KUBE, REPO, families, familyOf, kubeFile, loopbackServeArgv, metricNames, oneDoc, pagodaContainer,
  readYamlDocs, rel, serveArgs, serveHelpOptions, sleep, startServe, waitFor200, yamlFilesUnder,
} from './lib.js';
import { validateObject } from './validate.js';
import { testModel } from '../tests/helpers.js';

// Files in deploy/kubernetes that are not Kubernetes objects, each with its own check below.
const NOT_OBJECTS = {
  'kustomize.config.k8s.io/v1beta1/Kustomization': 'kustomization (rendered by kustomize.test.js)',
  'inference.networking.x-k8s.io/v1alpha1/EndpointPickerConfig': 'endpoint picker configuration',
};
const ADAPTER_VALUES = kubeFile('hpa', 'prometheus-adapter-values.yaml');

function allDocs() {
  const out = [];
  for (const path of yamlFilesUnder(KUBE)) for (const doc of readYamlDocs(path)) out.push({ path, doc });
  return out;
}
const objects = () => allDocs().filter(({ path, doc }) => path !== ADAPTER_VALUES && !NOT_OBJECTS[`${doc.apiVersion}/${doc.kind}`]);
const find = (kind, dir) => {
  const hits = objects().filter(({ path, doc }) => doc.kind === kind && (!dir || path.startsWith(join(KUBE, dir) + '/')));
  assert.equal(hits.length, 1, `expected one ${kind}${dir ? ` in ${dir}` : ''}, found ${hits.length}`);
  return hits[0].doc;
};
const scaledObject = () => find('ScaledObject');
const eppConfig = () => oneDoc(kubeFile('inference-pool', 'epp-config.yaml'));
const adapterValues = () => oneDoc(ADAPTER_VALUES);
const dashboard = () => JSON.parse(readFileSync(join(DEPLOY, 'grafana', 'pagoda-dashboard.json'), 'utf8'));
const dashboardExprs = () => dashboard().panels.flatMap((p) => p.targets.map((t) => t.expr));

test('every Kubernetes object in deploy/kubernetes validates against its schema', () => {
  const seen = new Map();
  for (const { path, doc } of allDocs()) {
    if (path === ADAPTER_VALUES || NOT_OBJECTS[`${doc.apiVersion}/${doc.kind}`]) continue;
    let key;
    try { key = validateObject(doc); } catch (e) { assert.fail(`${rel(path)}: ${e.message}`); }
    seen.set(key, (seen.get(key) ?? 0) + 1);
  }
  for (const key of ['apps/v1/Deployment', 'v1/Service', 'policy/v1/PodDisruptionBudget', 'monitoring.coreos.com/v1/PodMonitor',
    'keda.sh/v1alpha1/ScaledObject', 'autoscaling/v2/HorizontalPodAutoscaler', 'inference.networking.k8s.io/v1/InferencePool',
    'gateway.networking.k8s.io/v1/HTTPRoute', 'v1/PersistentVolumeClaim'])
    assert.ok(seen.has(key), `no ${key} validated`);
});

test('the validators reject broken objects (so that passing means something)', () => {
  const broken = [
    ['Deployment, containerPort as a string', find('Deployment'), (o) => { o.spec.template.spec.containers[0].ports[0].containerPort = 'http'; }],
    ['Deployment, probe without a handler port', find('Deployment'), (o) => { o.spec.template.spec.containers[0].readinessProbe.httpGet = { path: '/readyz' }; }],
    ['ScaledObject, numeric threshold', scaledObject(), (o) => { o.spec.triggers[0].metadata.threshold = 4; }],
    ['ScaledObject, no scaleTargetRef', scaledObject(), (o) => { delete o.spec.scaleTargetRef; }],
    ['PodMonitor, endpoints not a list', find('PodMonitor'), (o) => { o.spec.podMetricsEndpoints = { port: 'http' }; }],
    ['HTTPRoute, unknown path match type', find('HTTPRoute'), (o) => { o.spec.rules[0].matches[0].path.type = 'Glob'; }],
    ['HPA, maxReplicas as a string', find('HorizontalPodAutoscaler'), (o) => { o.spec.maxReplicas = '8'; }],
    ['HPA, pods metric without a target', find('HorizontalPodAutoscaler'), (o) => { delete o.spec.metrics[0].pods.target; }],
    ['InferencePool, Service ref without a port', find('InferencePool'), (o) => { delete o.spec.endpointPickerRef.port; }],
    ['InferencePool, nine target ports', find('InferencePool'), (o) => { o.spec.targetPorts = [1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => ({ number: 8000 + n })); }],
    ['InferencePool, duplicate target ports', find('InferencePool'), (o) => { o.spec.targetPorts = [{ number: 8000 }, { number: 8000 }]; }],
    ['InferencePool, misspelt field', find('InferencePool'), (o) => { o.spec.targetPort = o.spec.targetPorts; delete o.spec.targetPorts; }],
    ['InferencePool, bad failure mode', find('InferencePool'), (o) => { o.spec.endpointPickerRef.failureMode = 'Open'; }],
  ];
  for (const [what, original, mutate] of broken) {
    const o = structuredClone(original);
    mutate(o);
    assert.throws(() => validateObject(o), undefined, `${what}: accepted`);
  }
});

test('kustomizations name files that exist', () => {
  for (const path of yamlFilesUnder(KUBE).filter((p) => p.endsWith('kustomization.yaml'))) {
    const k = oneDoc(path);
    assert.equal(k.namespace, 'pagoda', `${rel(path)}: the queries select namespace="pagoda"`);
    for (const r of k.resources ?? []) assert.ok(existsSync(join(dirname(path), r)), `${rel(path)}: ${r} does not exist`);
    for (const g of k.configMapGenerator ?? []) for (const f of g.files) assert.ok(existsSync(join(dirname(path), f)), `${rel(path)}: ${f}`);
  }
});

test('names, ports, labels and selectors agree across the manifests', () => {
  const { deployment, container } = pagodaContainer();
  const args = serveArgs(container.args);
  const podLabels = deployment.spec.template.metadata.labels;
  const matches = (selector, what) => {
    for (const [k, v] of Object.entries(selector)) assert.equal(podLabels[k], v, `${what} selects ${k}=${v}, which the pods do not carry`);
  };
  matches(deployment.spec.selector.matchLabels, 'the Deployment');
  // One compute thread per CPU of the limit, and requests = limits (no CPU borrowed, none throttled).
  assert.equal(args.get('--threads'), String(container.resources.limits.cpu));
  assert.deepEqual(container.resources.requests, container.resources.limits);
  const http = container.ports.find((p) => p.name === 'http');
  assert.equal(String(http.containerPort), args.get('--port'), 'containerPort http = --port');
  for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) assert.equal(container[probe].httpGet.port, 'http', `${probe} port`);
  const svc = find('Service');
  matches(svc.spec.selector, 'the Service');
  assert.equal(svc.spec.ports[0].targetPort, 'http');
  matches(find('PodDisruptionBudget').spec.selector.matchLabels, 'the PodDisruptionBudget');
  const pm = find('PodMonitor');
  matches(pm.spec.selector.matchLabels, 'the PodMonitor');
  assert.equal(pm.spec.podMetricsEndpoints[0].port, 'http');
  assert.equal(pm.spec.podMetricsEndpoints[0].path, '/metrics');
  const pool = find('InferencePool');
  matches(pool.spec.selector.matchLabels, 'the InferencePool');
  assert.deepEqual(pool.spec.targetPorts, [{ number: http.containerPort }]);
  assert.equal(find('HTTPRoute').spec.rules[0].backendRefs[0].name, pool.metadata.name);
  assert.equal(scaledObject().spec.scaleTargetRef.name, deployment.metadata.name);
  assert.equal(find('HorizontalPodAutoscaler').spec.scaleTargetRef.name, deployment.metadata.name);
  // The scaling queries select the pods' series by the labels the PodMonitor's targets get.
  for (const t of scaledObject().spec.triggers) {
    assert.match(t.metadata.query, /namespace="pagoda"/);
    assert.match(t.metadata.query, new RegExp(`container="${container.name}"`));
  }
  // The endpoint picker's engine is the one the pods are labelled with.
  const extractor = eppConfig().plugins.find((p) => p.type === 'core-metrics-extractor').parameters;
  assert.equal(podLabels[extractor.engineLabelKey], extractor.defaultEngine);
  // Securing the pod: the image's user (Dockerfile) is the one runAsUser names.
  assert.equal(deployment.spec.template.spec.securityContext.runAsNonRoot, true);
});

test('the container arguments are options of the built `pagoda serve`', () => {
  const { container } = pagodaContainer();
  const { names } = serveHelpOptions();
  for (const name of serveArgs(container.args).keys()) assert.ok(names.has(name), `${name} is not an option of pagoda serve`);
  // The Dockerfile's default command too.
  const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(readFileSync(join(DEPLOY, 'Dockerfile'), 'utf8'))[1]);
  for (const name of serveArgs(cmd).keys()) assert.ok(names.has(name), `Dockerfile CMD: ${name} is not an option of pagoda serve`);
});

test('terminationGracePeriodSeconds >= preStop sleep + --drain-grace + --shutdown-timeout + 10', () => {
  const { deployment, container } = pagodaContainer();
  const cmd = container.lifecycle.preStop.exec.command;
  assert.equal(cmd.length, 2);
  assert.match(cmd[0], /(^|\/)sleep$/);
  const preStop = Number(cmd[1]);
  const shutdown = Number(serveArgs(container.args).get('--shutdown-timeout'));
  const drainGrace = Number(serveArgs(container.args).get('--drain-grace'));
  const grace = deployment.spec.template.spec.terminationGracePeriodSeconds;
  assert.ok(preStop > 0 && shutdown > 0, 'a preStop delay and a shutdown timeout are set');
  assert.ok(drainGrace >= 0, 'the drain grace is stated');
  assert.ok(grace >= preStop + drainGrace + shutdown + 10,
    `grace ${grace} < preStop ${preStop} + drain grace ${drainGrace} + shutdown ${shutdown} + 10`);
  // Readiness notices a drain (or a full queue) well within the shutdown timeout.
  const rp = container.readinessProbe;
  assert.ok(rp.periodSeconds * rp.failureThreshold < shutdown);
});

test('the Dockerfile builds with the repository scripts and ships the libraries the binary links', () => {
  const text = readFileSync(join(DEPLOY, 'Dockerfile'), 'utf8');
  const stages = [...text.matchAll(/^FROM (\S+) AS (\S+)$/gm)].map((m) => ({ image: m[1], name: m[2] }));
  assert.deepEqual(stages.map((s) => s.image), ['debian:12', 'debian:12-slim']);
  const [build, runtime] = text.split(/^FROM .*$/m).slice(1);
  assert.match(build, /scripts\/install-deps\.sh/);
  assert.match(build, /scripts\/build\.sh/);
  assert.match(runtime, /^COPY --from=build \/src\/build\/pagoda \/usr\/local\/bin\/pagoda$/m);
  assert.match(runtime, /^ENTRYPOINT \["\/usr\/local\/bin\/pagoda"\]$/m);
  const user = /^USER (\d+):(\d+)$/m.exec(runtime);
  assert.ok(user && Number(user[1]) > 0, 'the runtime stage runs as a numeric non-root user');
  const { deployment, container } = pagodaContainer();
  assert.equal(deployment.spec.template.spec.securityContext.runAsUser, Number(user[1]));
  assert.equal(Number(/^EXPOSE (\d+)$/m.exec(runtime)[1]), container.ports[0].containerPort);
  assert.match(runtime, /^VOLUME \["\/models"\]$/m);
  // The runtime packages: each shared library of the binary belongs to one of them (or to libc6,
  // which debian:12-slim has). dpkg -S answers for this Debian 12 machine.
  const installed = new Set(/apt-get install -y -qq --no-install-recommends ([^\\\n&]+)/.exec(runtime)[1].trim().split(/\s+/));
  const libs = execFileSync('ldd', [BINARY], { encoding: 'utf8' }).split('\n').map((l) => /=> (\/\S+)/.exec(l)?.[1]).filter(Boolean);
  assert.ok(libs.length > 0);
  // dpkg knows a file by the path its package ships (/lib or /usr/lib: Debian 12 merges them).
  const ownerOf = (lib) => {
    const real = execFileSync('readlink', ['-f', lib], { encoding: 'utf8' }).trim();
    for (const p of new Set([lib, real, real.replace(/^\/usr\/lib\//, '/lib/'), lib.replace(/^\/lib\//, '/usr/lib/')])) {
      try { return execFileSync('dpkg', ['-S', p], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split(':')[0]; } catch { /* next */ }
    }
    assert.fail(`no Debian package owns ${lib}`);
  };
  for (const lib of libs) {
    const owner = ownerOf(lib);
    if (owner === 'libc6') continue;
    // A sanitizer build (scripts/test.sh with PAGODA_SANITIZE=1) links its runtime; images never do.
    if (/^lib(asan|ubsan|lsan|tsan)\d*$/.test(owner)) continue;
    assert.ok(installed.has(owner), `${lib} comes from ${owner}, which the runtime stage does not install`);
  }
  const ignore = readFileSync(join(REPO, '.dockerignore'), 'utf8');
  for (const p of ['build*/', '**/node_modules', '*.gguf', '.git']) assert.ok(ignore.split('\n').includes(p), `.dockerignore lacks ${p}`);
});

test('the endpoint picker configuration is complete and consistent', () => {
  const cfg = eppConfig();
  assert.equal(cfg.kind, 'EndpointPickerConfig');
  const names = new Set(cfg.plugins.map((p) => p.name ?? p.type));
  assert.equal(names.size, cfg.plugins.length, 'plugin names are unique');
  const refs = [...cfg.schedulingProfiles.flatMap((s) => s.plugins.map((p) => p.pluginRef)),
    ...cfg.dataLayer.sources.flatMap((s) => [s.pluginRef, ...s.extractors.map((e) => e.pluginRef)])];
  for (const r of refs) assert.ok(names.has(r), `pluginRef ${r} names no plugin`);
  const extractor = cfg.plugins.find((p) => p.type === 'core-metrics-extractor').parameters;
  const engine = extractor.engineConfigs.find((e) => e.name === extractor.defaultEngine);
  assert.ok(engine, 'defaultEngine is one of engineConfigs');
  assert.deepEqual(Object.keys(engine).sort(), ['cacheInfoSpec', 'kvUsageSpec', 'loraSpec', 'name', 'queuedRequestsSpec', 'runningRequestsSpec']);
  assert.equal(engine.loraSpec, 'vllm:lora_requests_info', 'the EPP reads adapter affinity from vLLM\'s series');
  const scorers = cfg.schedulingProfiles.flatMap((s) => s.plugins.map((p) => p.pluginRef));
  assert.ok(scorers.includes('lora-affinity-scorer'), 'the profile scores adapter affinity');
});

test('the Grafana dashboard is well-formed', () => {
  const d = dashboard();
  const ids = d.panels.map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
  const vars = new Set(d.templating.list.map((v) => v.name));
  for (const p of d.panels) {
    assert.ok(p.targets.length > 0, `${p.title}: no query`);
    assert.equal(p.datasource.uid, '${datasource}');
    for (const t of p.targets) for (const v of t.expr.matchAll(/\$(\w+)/g)) assert.ok(vars.has(v[1]) || v[1].startsWith('__'), `${p.title}: $${v[1]}`);
  }
});

// Every metric some file of deploy/ reads, with where it is read.
function metricsReadByDeploy() {
  const read = [];
  for (const t of scaledObject().spec.triggers) for (const n of metricNames(t.metadata.query)) read.push([n, `ScaledObject trigger ${t.name}`]);
  for (const r of adapterValues().rules.custom) for (const n of metricNames(r.seriesQuery)) read.push([n, 'prometheus-adapter rule']);
  const engine = eppConfig().plugins.find((p) => p.type === 'core-metrics-extractor').parameters.engineConfigs[0];
  for (const key of ['queuedRequestsSpec', 'runningRequestsSpec', 'kvUsageSpec', 'cacheInfoSpec', 'loraSpec'])
    for (const n of metricNames(engine[key])) read.push([n, `EPP ${key}`]);
  for (const e of dashboardExprs()) for (const n of metricNames(e)) read.push([n, 'Grafana dashboard']);
  return read;
}

test('a pagoda started with the manifest arguments answers the probes and serves every metric deploy/ reads', async (t) => {
  const { container } = pagodaContainer();
  const server = await startServe(loopbackServeArgv(container.args, testModel('stories') ?? testModel('tiny')));
  t.after(() => server.child.kill('SIGKILL'));
  await waitFor200(server.url, container.startupProbe.httpGet.path);
  for (const probe of ['readinessProbe', 'livenessProbe']) {
    const r = await fetch(server.url + container[probe].httpGet.path);
    assert.equal(r.status, 200, `${probe} ${container[probe].httpGet.path}: ${await r.text()}`);
  }
  const text = await (await fetch(server.url + find('PodMonitor').spec.podMetricsEndpoints[0].path)).text();
  const fams = families(text);
  const read = metricsReadByDeploy();
  assert.ok(read.length >= 10);
  for (const [name, where] of read) assert.ok(familyOf(name, fams), `${where} reads ${name}, which pagoda serve does not serve`);
  // The EPP reads the KV cache's shape from these labels of its cacheInfoSpec series.
  const engine = eppConfig().plugins.find((p) => p.type === 'core-metrics-extractor').parameters.engineConfigs[0];
  const line = text.split('\n').find((l) => l.startsWith(engine.cacheInfoSpec + '{'));
  assert.ok(line, `no ${engine.cacheInfoSpec} series`);
  assert.match(line, /block_size="\d+"/);
  assert.match(line, /num_gpu_blocks="\d+"/);
  // The EPP's loraSpec series: max_lora and the adapter lists in its labels, a timestamp its value.
  const lora = text.split('\n').find((l) => l.startsWith(engine.loraSpec + '{'));
  assert.ok(lora, `no ${engine.loraSpec} series`);
  assert.match(lora, /max_lora="0",waiting_lora_adapters="",running_lora_adapters=""\} \d+(\.\d+)?$/);
});

test('on SIGTERM readiness fails, liveness holds, a late request is still served, the stream in flight finishes and the exit is 0', async (t) => {
  const { container } = pagodaContainer();
  const args = serveArgs(container.args);
  // The stream must still run while the probes and the late request below are answered, and end
  // well within the drain's timeout, on every host and under any load. So its length comes from the
  // speed measured here: about STREAM_MS of decoding (the deep model with the scalar kernels), at
  // most a quarter of --shutdown-timeout (a fixed 1000 tokens outran the 65 s once at load 20).
  const server = await startServe(loopbackServeArgv(container.args, testModel('deep')), { env: { PAGODA_ISA: 'scalar' } });
  t.after(() => server.child.kill('SIGKILL'));
  await waitFor200(server.url, container.readinessProbe.httpGet.path);
  const STREAM_MS = 4000, PROBE_TOKENS = 32;
  const probeStart = Date.now();
  const probe = await fetch(`${server.url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: PROBE_TOKENS, ignore_eos: true }),
  });
  assert.equal(probe.status, 200);
  await probe.arrayBuffer();
  const msPerToken = Math.max(0.5, (Date.now() - probeStart) / PROBE_TOKENS);
  const budgetMs = Math.min(STREAM_MS, Number(args.get('--shutdown-timeout')) * 1000 / 4);
  const streamTokens = Math.max(64, Math.min(1000, Math.round(budgetMs / msPerToken)));
  const res = await fetch(`${server.url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: streamTokens, stream: true, ignore_eos: true }),
  });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!text.includes('"text"')) {  // the first token is out: the request runs
    const { value, done } = await reader.read();
    assert.ok(!done, `the stream ended before its first token: ${text}`);
    text += decoder.decode(value, { stream: true });
  }
  const rest = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += decoder.decode(value, { stream: true });
    }
  })();
  const t0 = Date.now();
  server.child.kill('SIGTERM');
  let ready, live;
  for (;;) {  // the drain starts within a few ms; poll until readiness reports it
    ready = await fetch(server.url + container.readinessProbe.httpGet.path);
    if (ready.status !== 200 || Date.now() - t0 > 5000) break;
    await ready.arrayBuffer();
    await sleep(10);
  }
  assert.equal(ready.status, 503);
  assert.deepEqual(await ready.json(), { status: 'draining' });
  live = await fetch(server.url + container.livenessProbe.httpGet.path);
  assert.equal(live.status, 200, 'liveness holds while draining (a restart would cut the drain)');
  await live.arrayBuffer();
  // Within --drain-grace a request is still served (a balancer may send it before its check notices).
  const late = await fetch(`${server.url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'x', max_tokens: 1 }),
  });
  assert.ok(Date.now() - t0 < Number(args.get('--drain-grace')) * 1000, 'the late request came within the grace');
  assert.equal(late.status, 200, 'served within the drain grace');
  assert.equal((await late.json()).choices.length, 1);
  await rest;
  assert.match(text, /"finish_reason":"length"/);
  assert.ok(text.trimEnd().endsWith('data: [DONE]'));
  assert.ok(!text.includes('shutting_down'), 'the stream in flight was not cut');
  const exit = await server.exited;
  assert.deepEqual([exit.code, exit.signal], [0, null]);
  assert.ok(exit.at - t0 < (Number(args.get('--drain-grace')) + Number(args.get('--shutdown-timeout'))) * 1000,
    'drained within --drain-grace + --shutdown-timeout');
  assert.ok(exit.at - t0 >= Number(args.get('--drain-grace')) * 1000, 'the grace was kept before the exit');
});
