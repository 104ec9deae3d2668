// Images end to end: `pagoda serve --mmproj` on a random Gemma 3 and its random projector
// (gen-model --mmproj, 16 soft tokens per image) with Gemma 3's chat template. The official
// `openai` client sends a data-URL PNG (Chat Completions image_url, Responses input_image), the
// `@anthropic-ai/sdk` client a base64 image block, /v1/completions llama-server's prompt object
// ({prompt_string with <__media__> markers, multimodal_data: base64}); a repeated image is served from the prefix
// cache with the same greedy text, and skips the vision tower (the encoded-image cache's hit in
// /metrics); /v1/models says the model takes images; remote URLs (without --allow-image-urls),
// corrupt images and images to a server without --mmproj are 400s naming the part; with
// --allow-image-urls an http URL (a local server) gives what the data: URL gives.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { createServer } from 'node:http';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { BINARY, startServer, workDir } from './helpers.js';

// A small RGB PNG (no library: IHDR, one zlib IDAT, IEND).
function crc32(buf) {
  let c = ~0;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return ~c >>> 0;
}
function chunk(type, data) {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}
function png(width, height, shade) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const rows = [];
  for (let y = 0; y < height; y++) {
    rows.push(0);
    for (let x = 0; x < width; x++) rows.push((x * 29 + shade) & 255, (y * 41) & 255, shade);
  }
  const sig = Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]);
  return Buffer.concat([sig, chunk('IHDR', ihdr), chunk('IDAT', deflateSync(Buffer.from(rows))), chunk('IEND', Buffer.alloc(0))]);
}
const b64 = (shade) => png(24, 18, shade).toString('base64');
const dataUrl = (shade) => `data:image/png;base64,${b64(shade)}`;

const textModel = join(workDir, 'vision-gemma3.gguf');
const mmproj = join(workDir, 'vision-gemma3-mmproj.gguf');

describe('images through serve --mmproj', () => {
  let server;
  let openai;
  before(async () => {
    execFileSync(BINARY, ['gen-model', '--arch', 'gemma3', '--layers', '2', '--dim', '64', '--heads', '4', '--kv-heads', '2',
      '-o', textModel, '--mmproj', mmproj], { stdio: ['ignore', 'ignore', 'pipe'] });
    server = await startServer(['-m', textModel, '--mmproj', mmproj, '--chat-template', 'gemma3'], null);
    openai = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => { await server?.stop(); });

  const ask = (url, text = 'What is in the picture?') => openai.chat.completions.create({
    model: 'vision-gemma3', max_tokens: 8, temperature: 0,
    messages: [{ role: 'user', content: [{ type: 'text', text }, { type: 'image_url', image_url: { url } }] }],
  });

  test('a data-URL PNG through the openai client; a repeated image hits the prefix cache', async () => {
    const plain = await openai.chat.completions.create({
      model: 'vision-gemma3', max_tokens: 8, temperature: 0,
      messages: [{ role: 'user', content: 'What is in the picture?' }],
    });
    const first = await ask(dataUrl(10));
    // The image adds Gemma 3's layout: "\n\n" <start_of_image> 16 soft tokens <end_of_image> "\n\n".
    assert.ok(first.usage.prompt_tokens >= plain.usage.prompt_tokens + 18,
      `${first.usage.prompt_tokens} prompt tokens with the image, ${plain.usage.prompt_tokens} without`);
    assert.equal(first.choices[0].finish_reason, 'length');
    const again = await ask(dataUrl(10));
    assert.equal(again.choices[0].message.content, first.choices[0].message.content);
    assert.equal(again.usage.prompt_tokens, first.usage.prompt_tokens);
    assert.ok(again.usage.prompt_tokens_details.cached_tokens >= 16,
      `cached ${again.usage.prompt_tokens_details.cached_tokens} of ${again.usage.prompt_tokens}`);
    // Another picture with the same placeholder ids: its image blocks are not served from the cache.
    const other = await ask(dataUrl(200));
    assert.ok(other.usage.prompt_tokens_details.cached_tokens < again.usage.prompt_tokens_details.cached_tokens);
    // The encoded-image cache: the repeated picture skipped the tower, the two others ran it.
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const sample = (name) => Number(metrics.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm'))?.[1]);
    assert.equal(sample('pagoda:image_cache_hits_total'), 1, metrics);
    assert.equal(sample('pagoda:image_cache_misses_total'), 2);
    assert.equal(sample('pagoda:image_cache_entries'), 2);
    assert.equal(sample('pagoda:image_cache_capacity_bytes'), 256 * 1024 * 1024);
    const state = await (await fetch(`${server.url}/v1/state`)).json();
    assert.deepEqual(state.image_cache, { hits: 1, misses: 2, evictions: 0, entries: 2, bytes: sample('pagoda:image_cache_bytes'),
      capacity_bytes: 256 * 1024 * 1024 });
  });

  test('/v1/completions takes llama-server\'s prompt object with multimodal_data', async () => {
    const complete = (prompt) => openai.completions.create({ model: 'vision-gemma3', max_tokens: 8, temperature: 0, prompt });
    const tokens = async (content, add_special) => (await (await fetch(`${server.url}/tokenize`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ content, add_special }),
    })).json()).tokens.length;
    const plain = await complete('Describe ');
    const first = await complete({ prompt_string: 'Describe <__media__>', multimodal_data: [b64(31)] });
    // The marker became Gemma 3's layout: "\n\n" <start_of_image> 16 soft tokens <end_of_image> "\n\n".
    const nl = await tokens('\n\n', false);
    assert.equal(first.usage.prompt_tokens, plain.usage.prompt_tokens + 18 + 2 * nl);
    assert.equal(first.choices[0].finish_reason, 'length');
    const again = await complete({ prompt_string: 'Describe <__media__>', multimodal_data: [b64(31)] });
    assert.equal(again.choices[0].text, first.choices[0].text);
    assert.ok(again.usage.prompt_tokens_details.cached_tokens >= 16, JSON.stringify(again.usage));
    const two = await complete({ prompt_string: '<__media__> then <__media__>', multimodal_data: [b64(31), b64(32)] });
    assert.equal(two.usage.prompt_tokens, (await tokens('', true)) + (await tokens(' then ', false)) + 2 * (18 + 2 * nl));

    const refused = async (prompt, param, words) => {
      await assert.rejects(complete(prompt), (e) => {
        assert.equal(e.status, 400);
        assert.equal(e.param, param);
        assert.match(e.message, words);
        return true;
      });
    };
    await refused({ prompt_string: 'a <__media__>', multimodal_data: [] }, 'prompt.multimodal_data', /1 media markers/);
    await refused({ prompt_string: '<__media__>', multimodal_data: ['@@@@'] }, 'prompt.multimodal_data[0]', /not a readable image/);
    await refused({ prompt_string: '<__media__>', multimodal_data: [b64(3)], extra: 1 }, 'prompt.extra', /not a field/);
    await refused(['a', { prompt_string: 'b' }], 'prompt[1]', /only prompt/);
  });

  test('/v1/models says the model takes images', async () => {
    const models = await openai.models.list();
    assert.deepEqual(models.data[0].input_modalities, ['text', 'image']);
  });

  test('Responses input_image and an Anthropic image block give the chat answer', async () => {
    const chat = await ask(dataUrl(77), 'Describe it.');
    const r = await openai.responses.create({
      model: 'vision-gemma3', max_output_tokens: 8, temperature: 0,
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'Describe it.' }, { type: 'input_image', image_url: dataUrl(77) }] }],
    });
    assert.equal(r.output_text, chat.choices[0].message.content);
    const anthropic = new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
    const m = await anthropic.messages.create({
      model: 'vision-gemma3', max_tokens: 8, temperature: 0,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Describe it.' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: b64(77) } }] }],
    });
    assert.equal(m.content[0].text, chat.choices[0].message.content);
    assert.equal(m.usage.input_tokens, chat.usage.prompt_tokens);
    const counted = await anthropic.messages.countTokens({
      model: 'vision-gemma3',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Describe it.' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: b64(77) } }] }],
    });
    assert.equal(counted.input_tokens, m.usage.input_tokens);
  });

  test('remote URLs and corrupt images are 400s naming the part', async () => {
    await assert.rejects(ask('https://example.com/cat.png'), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'messages[0].content[1].image_url.url');
      assert.match(e.message, /remote image URLs are not fetched; send a data: URL/);
      return true;
    });
    const broken = png(24, 18, 3).subarray(0, 60).toString('base64');
    await assert.rejects(ask(`data:image/png;base64,${broken}`), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'messages[0].content[1]');
      assert.match(e.message, /not a readable image/);
      return true;
    });
    await assert.rejects(ask(`data:image/gif;base64,${b64(3)}`), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.message, /unsupported image type 'image\/gif'/);
      return true;
    });
    // The server still answers afterwards.
    assert.equal((await ask(dataUrl(10))).choices.length, 1);
  });
});

describe('image URLs under --allow-image-urls', () => {
  let server;
  let openai;
  let site;
  let siteUrl;
  before(async () => {
    // A local web server with the picture, a redirect to it, and a page that is not an image.
    site = createServer((req, res) => {
      if (req.url === '/cat.png') { res.writeHead(200, { 'Content-Type': 'image/png' }); res.end(png(24, 18, 44)); }
      else if (req.url === '/moved') { res.writeHead(302, { Location: '/cat.png' }); res.end(); }
      else if (req.url === '/page') { res.writeHead(200, { 'Content-Type': 'text/html' }); res.end('<p>'); }
      else { res.writeHead(404); res.end(); }
    });
    await new Promise((resolve) => site.listen(0, '127.0.0.1', resolve));
    siteUrl = `http://127.0.0.1:${site.address().port}`;
    // The picture's host is loopback, so the test needs --image-url-allow-private.
    server = await startServer(['-m', textModel, '--mmproj', mmproj, '--chat-template', 'gemma3',
      '--allow-image-urls', '--image-url-allow-private', '--image-url-timeout', '5'], null);
    openai = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => { await server?.stop(); site?.close(); });

  const ask = (url) => openai.chat.completions.create({
    model: 'vision-gemma3', max_tokens: 8, temperature: 0,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'What is it?' }, { type: 'image_url', image_url: { url } }] }],
  });

  test('an http URL gives what the same picture as a data: URL gives', async () => {
    const inline = await ask(`data:image/png;base64,${png(24, 18, 44).toString('base64')}`);
    for (const path of ['/cat.png', '/moved']) {
      const fetched = await ask(siteUrl + path);
      assert.equal(fetched.choices[0].message.content, inline.choices[0].message.content, path);
      assert.equal(fetched.usage.prompt_tokens, inline.usage.prompt_tokens);
    }
  });

  test('a failed fetch is a 400 naming the part, the URL and why', async () => {
    for (const [path, why] of [['/page', /the content type is 'text\/html', not an image/], ['/gone', /HTTP 404/]]) {
      await assert.rejects(ask(siteUrl + path), (e) => {
        assert.equal(e.status, 400);
        assert.equal(e.param, 'messages[0].content[1].image_url.url');
        assert.ok(e.message.includes(`the image URL ${siteUrl}${path} could not be fetched`), e.message);
        assert.match(e.message, why);
        return true;
      });
    }
  });
});

describe('images to a server without --mmproj', () => {
  let server;
  before(async () => { server = await startServer([]); });
  after(async () => { await server?.stop(); });

  test('an image part is a 400: this model takes no images', async () => {
    const openai = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
    const models = await openai.models.list();
    assert.deepEqual(models.data[0].input_modalities, ['text']);
    await assert.rejects(openai.chat.completions.create({
      model: models.data[0].id, max_tokens: 4,
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl(1) } }] }],
    }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'messages[0].content[0]');
      assert.match(e.message, /this model takes no images/);
      return true;
    });
  });
});
