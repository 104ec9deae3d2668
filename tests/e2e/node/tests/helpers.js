// Shared helpers for the Node end-to-end suite: generate a random test model with `pagoda
// gen-model`, start `pagoda serve` on a free loopback port (--port 0, port read from its log),
// wait for /health, and stop it. PAGODA_BINARY names the built binary (run.sh sets it).
import { spawn, execFileSync } from 'node:child_process';
import https from 'node:https';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const BINARY = process.env.PAGODA_BINARY;
if (!BINARY) throw new Error('set PAGODA_BINARY to the built pagoda binary');

export const workDir = mkdtempSync(join(tmpdir(), 'pagoda-node-e2e-'));
process.on('exit', () => rmSync(workDir, { recursive: true, force: true }));

const models = new Map();
// tiny: fast; slow: ~11 M parameters, a few ms per token, for cancellation tests; deep: 24 thin
// layers (16 M parameters), which with PAGODA_ISA=scalar in the server's environment decodes ~280
// tokens/s with one thread on the fastest host met (an AMX Xeon; `slow` with its vector kernels
// ~590): for tests whose work must outlast a window on every host.
// fim: tiny with fill-in-the-middle tokens (gen-model --fim-tokens).
// rank: tiny as a classification-head reranker (pooling_type rank; cls.weight + tanh + cls.output);
// rank-qwen3: a qwen3 one whose head gives two classes (yes, no), softmaxed.
// stories: the trained fixture ../shared/models/stories260K.gguf (null when absent).
export const FIXTURES = process.env.PAGODA_FIXTURES_DIR || join(dirname(fileURLToPath(import.meta.url)), '../../../../../shared');
export function testModel(kind = 'tiny') {
  if (models.has(kind)) return models.get(kind);
  if (kind === 'stories') {
    const path = join(FIXTURES, 'models', 'stories260K.gguf');
    models.set(kind, existsSync(path) ? path : null);
    return models.get(kind);
  }
  const path = join(workDir, `${kind}.gguf`);
  const args = ['gen-model', '--preset', 'tiny', '-o', path, '--seed', '11'];
  if (kind === 'slow') args.push('--layers', '4', '--dim', '512', '--heads', '8', '--kv-heads', '8', '--ffn', '1024', '--ctx', '8192');
  if (kind === 'fim') args.push('--fim-tokens');  // ids 506..511: the FIM tokens
  if (kind === 'rank') args.push('--rank-head', 'dense');
  if (kind === 'rank-qwen3') args.push('--arch', 'qwen3', '--rank-head', 'output');
  if (kind === 'deep') args.push('--layers', '24', '--dim', '256', '--heads', '4', '--kv-heads', '4', '--ffn', '512', '--ctx', '8192');
  execFileSync(BINARY, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  models.set(kind, path);
  return path;
}

export function writeTemp(name, text) {
  const path = join(workDir, name);
  writeFileSync(path, text);
  return path;
}

// Starts a server (`env`: variables added to its environment; `tls.ca`: the PEM CA of a server
// started with --ssl-cert, which is then reached over https); resolves to { port, baseURL, url,
// log(), stop() }. `startMs`: how long it may take to become ready (a 200k vocabulary takes longer).
export async function startServer(extraArgs = [], kind = 'tiny', env = {}, tls = null, startMs = 30000) {
  const template = extraArgs.includes('--chat-template') ? [] : ['--chat-template', 'chatml'];
  // No lame-duck grace unless a test asks for one: stop() is then as quick as before it existed.
  const grace = extraArgs.includes('--drain-grace') ? [] : ['--drain-grace', '0'];
  // kind null: the models come from extraArgs (-m ID=PATH, --models-dir).
  const model = kind === null ? [] : ['-m', testModel(kind)];
  const args = ['serve', ...model, '--port', '0', ...template, '-t', '1', ...grace, ...extraArgs];
  const child = spawn(BINARY, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  let log = '';
  child.stderr.on('data', (d) => { log += d.toString(); });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const deadline = Date.now() + startMs;
  let port = 0;
  while (!port) {
    const m = /listening on 127\.0\.0\.1:(\d+)/.exec(log);
    if (m) port = Number(m[1]);
    else if (child.exitCode !== null) throw new Error(`pagoda serve exited: ${log}`);
    else if (Date.now() > deadline) throw new Error(`pagoda serve did not start: ${log}`);
    else await sleep(20);
  }
  const url = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  while (true) {
    try {
      const status = tls ? await httpsStatus(`${url}/health`, tls.ca) : (await fetch(`${url}/health`)).status;
      if (status === 200) break;
    } catch { /* not yet */ }
    if (Date.now() > deadline) throw new Error(`pagoda serve not ready: ${log}`);
    await sleep(20);
  }
  return {
    port,
    pid: child.pid,
    url,
    baseURL: `${url}/v1`,
    log: () => log,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15000);
      const r = await exited;
      clearTimeout(timer);
      return r;
    },
  };
}

// The status of a GET over https trusting `ca` (fetch cannot be given a CA).
function httpsStatus(url, ca) {
  return new Promise((resolve, reject) => {
    https.get(url, { ca }, (res) => { res.resume(); resolve(res.statusCode); }).on('error', reject);
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Reads one sample of Prometheus text ("name" or "name{labels}"); NaN when absent. The model_name
// label every series carries is ignored unless `series` names it.
export function metricValue(text, series) {
  const keep = series.includes('model_name=');
  for (let line of text.split('\n')) {
    if (!keep) line = line.replace(/\{model_name="[^"]*"\}/, '').replace(/\{model_name="[^"]*",/, '{').replace(/,model_name="[^"]*"/, '');
    if (line.startsWith(series + ' ')) return Number(line.slice(series.length + 1));
  }
  return NaN;
}

// Polls /metrics until pred(text) holds or 10 s pass; returns the last text.
export async function waitMetrics(url, pred, headers = {}) {
  let text = '';
  const deadline = Date.now() + 10000;
  while (Date.now() < deadline) {
    text = await (await fetch(`${url}/metrics`, { headers })).text();
    if (pred(text)) break;
    await sleep(25);
  }
  return text;
}
