// `serve --profile`: a profile written by `pagoda tune --quick` is accepted (the server logs it and
// answers), and one naming another machine stops the server at start with the field that differs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BINARY, startServer, testModel, workDir } from './helpers.js';

const profile = join(workDir, 'tune-profile.json');

function tune() {
  const r = spawnSync(BINARY, ['tune', '-m', testModel(), '-o', profile, '--quick'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
}

test('serve --profile: a tuned profile is used and the server answers', async () => {
  tune();
  const server = await startServer(['--profile', profile]);
  try {
    assert.match(server.log(), /using profile .*tune-profile\.json/);
    assert.match(server.log(), /kernel plan \(from a profile\): f32: f32_fma/);
    const r = await fetch(`${server.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 5, temperature: 0 }),
    });
    assert.equal(r.status, 200);
    const body = await r.json();
    assert.equal(body.usage.completion_tokens, 5);
  } finally {
    await server.stop();
  }
});

test('serve --profile: a profile from another machine is refused at start', () => {
  tune();
  const j = JSON.parse(readFileSync(profile, 'utf8'));
  j.machine.isa_flags.push('amx_zz');
  const foreign = join(workDir, 'tune-foreign.json');
  writeFileSync(foreign, JSON.stringify(j));
  const r = spawnSync(BINARY, ['serve', '-m', testModel(), '--port', '0', '--profile', foreign], { encoding: 'utf8', timeout: 30000 });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /measured on another machine \(isa_flags: the profile's CPU has \[amx_zz\]/);
});
