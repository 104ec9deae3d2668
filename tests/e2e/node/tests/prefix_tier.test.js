// The prefix cache's file tier through the live server: a long prompt served by one `serve`
// process is served by the next one over the same --prefix-cache-dir from the files (the same
// greedy text, tier hits in /metrics, cached tokens in the usage); a damaged file in the directory
// is removed at start with a log line, never loaded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { metricValue, startServer, workDir } from './helpers.js';

const prompt = Array.from({ length: 40 }, (_, i) => `word${i % 13} thing${i % 7}`).join(' ');

async function complete(server) {
  const r = await fetch(`${server.baseURL}/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: 12, temperature: 0 }),
  });
  assert.equal(r.status, 200);
  return r.json();
}

test('a restarted server loads the prefix from --prefix-cache-dir', async () => {
  const dir = join(workDir, 'prefix-tier');
  mkdirSync(dir, { recursive: true });
  const first = await startServer(['--prefix-cache-dir', dir, '--prefix-cache-dir-size', '64MiB']);
  let want;
  try {
    want = await complete(first);
    assert.ok(want.usage.prompt_tokens > 64, `prompt of ${want.usage.prompt_tokens} tokens`);
  } finally {
    await first.stop();  // a clean exit writes the pool's cached blocks
  }
  const files = readdirSync(dir).filter((f) => f.endsWith('.kvb'));
  assert.ok(files.length >= 4, `files: ${files}`);
  const junk = join(dir, '0123456789abcdef-0123456789abcdef.kvb');
  writeFileSync(junk, 'not a block file');

  const second = await startServer(['--prefix-cache-dir', dir, '--prefix-cache-dir-size', '64MiB']);
  try {
    assert.ok(!existsSync(junk), 'the damaged file is removed');
    assert.match(second.log(), /ignoring and removing .*0123456789abcdef-0123456789abcdef\.kvb/);
    const got = await complete(second);
    assert.equal(got.choices[0].text, want.choices[0].text);
    const cached = got.usage.prompt_tokens_details?.cached_tokens ?? 0;
    assert.ok(cached >= 64, `cached tokens ${cached}`);
    const metrics = await (await fetch(`${second.url}/metrics`)).text();
    const hits = metricValue(metrics, 'pagoda:prefix_cache_tier_hits_total{tier="file"}');
    assert.equal(hits * 16, cached, `file hits ${hits} blocks for ${cached} cached tokens`);
    assert.equal(metricValue(metrics, 'pagoda:prefix_cache_tier_file_rejected_total'), 1);
  } finally {
    await second.stop();
  }
});

test('bad tier flags stop serve at start-up with a plain message', async () => {
  await assert.rejects(startServer(['--prefix-cache-dir-size', '1GiB']), /--prefix-cache-dir-size needs --prefix-cache-dir/);
  await assert.rejects(startServer(['--prefix-cache-host-memory', '12']), /--prefix-cache-host-memory '12' has no unit/);
  await assert.rejects(startServer(['--prefix-cache-host-memory', '1GiB', '--no-prefix-cache']), /--no-prefix-cache/);
});
