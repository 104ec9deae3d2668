// Shared by the deploy tests (run.sh): the repository's deploy/ files parsed, the pagoda container's
// `serve` arguments, `pagoda serve` started with them on a free loopback port, and the metric
// names a PromQL expression or an endpoint picker spec refers to. PAGODA_BINARY names the binary.
import { spawn, execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
export const DEPLOY = join(REPO, 'deploy');
export const KUBE = join(DEPLOY, 'kubernetes');
export const BINARY = process.env.PAGODA_BINARY;
if (!BINARY) throw new Error('set PAGODA_BINARY to the built pagoda binary');

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const rel = (path) => relative(REPO, path);

// Every YAML document of a file (a parse error or warning fails: a manifest must be clean YAML).
export function readYamlDocs(path) {
  const docs = parseAllDocuments(readFileSync(path, 'utf8'));
  const out = [];
  for (const d of docs) {
    if (d.errors.length || d.warnings.length) throw new Error(`${rel(path)}: ${[...d.errors, ...d.warnings].join('; ')}`);
    const value = d.toJS();
    if (value !== null) out.push(value);
  }
  return out;
}

export function yamlFilesUnder(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...yamlFilesUnder(path));
    else if (/\.ya?ml$/.test(name)) out.push(path);
  }
  return out;
}

export const kubeFile = (...parts) => join(KUBE, ...parts);
export const oneDoc = (path) => {
  const docs = readYamlDocs(path);
  if (docs.length !== 1) throw new Error(`${rel(path)}: expected one document, found ${docs.length}`);
  return docs[0];
};

export function pagodaContainer() {
  const deployment = oneDoc(kubeFile('base', 'deployment.yaml'));
  const c = deployment.spec.template.spec.containers.find((x) => x.name === 'pagoda');
  if (!c) throw new Error('deploy/kubernetes/base/deployment.yaml has no container named pagoda');
  return { deployment, container: c };
}

// The container's arguments: "serve" then --name=value options only (one form, so that nothing
// is ambiguous to read here or to a person). Returns a Map name -> value, in order.
export function serveArgs(args) {
  if (args[0] !== 'serve') throw new Error(`the container's first argument must be "serve", not ${JSON.stringify(args[0])}`);
  const map = new Map();
  for (const a of args.slice(1)) {
    const m = /^(--[a-z][a-z0-9-]*)=(.*)$/.exec(a);
    if (!m) throw new Error(`container argument ${JSON.stringify(a)} is not of the form --name=value`);
    if (map.has(m[1])) throw new Error(`container argument ${m[1]} given twice`);
    map.set(m[1], m[2]);
  }
  return map;
}

// The option names `pagoda serve --help` lists (long and short, aliases included).
export function serveHelpOptions() {
  const help = execFileSync(BINARY, ['serve', '--help'], { encoding: 'utf8' });
  const names = new Set();
  for (const line of help.split('\n')) {
    const m = /^\s{2}((?:-{1,2}[A-Za-z][\w-]*,?)+)/.exec(line);
    if (m) for (const n of m[1].split(',')) if (n) names.add(n);
  }
  if (!names.has('--model') || !names.has('--port')) throw new Error(`could not read the options of serve --help:\n${help}`);
  return { names, help };
}

// The manifest's serve arguments with the ones a loopback test must change replaced: the model
// file, the address (127.0.0.1, port 0: any free one) and the thread count.
export function loopbackServeArgv(args, model, overrides = {}) {
  const map = serveArgs(args);
  const set = { '--model': model, '--host': '127.0.0.1', '--port': '0', '--threads': '1', ...overrides };
  for (const [k, v] of Object.entries(set)) map.set(k, v);
  return ['serve', ...[...map].map(([k, v]) => `${k}=${v}`)];
}

// Starts `pagoda serve ARGV` (`env`: variables added to its environment); resolves once it listens:
// { child, port, url, log(), exited, startedAt }.
export async function startServe(argv, { timeoutMs = 30000, env = {} } = {}) {
  const startedAt = Date.now();
  const child = spawn(BINARY, argv, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  let log = '';
  child.stderr.on('data', (d) => { log += d.toString(); });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, at: Date.now() })));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = /listening on 127\.0\.0\.1:(\d+)/.exec(log);
    if (m) {
      const port = Number(m[1]);
      return { child, port, url: `http://127.0.0.1:${port}`, log: () => log, exited, startedAt };
    }
    if (child.exitCode !== null) throw new Error(`pagoda serve exited: ${log}`);
    if (Date.now() > deadline) { child.kill('SIGKILL'); throw new Error(`pagoda serve did not listen: ${log}`); }
    await sleep(20);
  }
}

// Polls GET url+path until it answers 200; returns the milliseconds waited.
export async function waitFor200(url, path, timeoutMs = 30000) {
  const t0 = Date.now();
  for (;;) {
    try {
      const r = await fetch(url + path);
      await r.arrayBuffer();
      if (r.status === 200) return Date.now() - t0;
    } catch { /* not yet */ }
    if (Date.now() - t0 > timeoutMs) throw new Error(`${url}${path} did not answer 200 within ${timeoutMs} ms`);
    await sleep(25);
  }
}

// A loopback TCP port free at the time of asking (for servers that cannot take port 0 and report).
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

// Metric names (pagoda:... or vllm:...) a PromQL expression or an EPP spec string mentions.
export function metricNames(expr) {
  return new Set(expr.match(/\b(?:pagoda|vllm):[A-Za-z0-9_:]+/g) ?? []);
}

// The metric families a /metrics text declares (# TYPE lines): Map name -> type.
export function families(metricsText) {
  const out = new Map();
  for (const m of metricsText.matchAll(/^# TYPE (\S+) (\S+)$/gm)) out.set(m[1], m[2]);
  return out;
}

// The family a series name belongs to: itself, or a histogram's name for its _bucket/_sum/_count.
export function familyOf(name, fams) {
  if (fams.has(name)) return name;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  if (m && fams.get(m[1]) === 'histogram') return m[1];
  return null;
}
