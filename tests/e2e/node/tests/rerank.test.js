// /v1/rerank, /rerank and /v1/score over plain fetch against a random model acting as a decoder
// reranker (--rerank-template with {query}/{document}, --rerank-tokens naming two of its tokens).
// Each score is checked against the yes/no logit difference read independently through
// /v1/completions: the logprob of a token forced by logit_bias is its raw logit minus the same
// log-sum-exp, so logprob(yes) - logprob(no) = logit(yes) - logit(no). Also: order (best first,
// stable), top_n, return_documents, usage against /tokenize, /v1/score's pairing, the 400s, and a
// model that cannot rerank. Then classification-head rerankers (gen-model --rank-head: GGUF
// pooling_type rank), whose scores the gtest GatewayRankRerank checks against the head computed by
// hand: here the pair llama-server builds (BOS query document, as /tokenize counts it), order, ties,
// /v1/score's agreement, qwen3's softmaxed yes in (0, 1), and --rerank-tokens refused at start.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, writeTemp } from './helpers.js';

const form = 'Query: {query}\nDocument: {document}\nRelevant:';
let plain, server, rank, rankQwen3, yes, no;

async function post(base, path, body) {
  const r = await fetch(`${base.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

before(async () => {
  plain = await startServer();
  // Two tokens of the synthetic (SentencePiece) vocabulary stand for "yes" and "no", named by their
  // vocabulary text (a piece's spaces are the vocabulary's U+2581).
  const t = await post(plain, '/tokenize', { content: 'the answer is here', with_pieces: true });
  const named = t.body.tokens.filter((x) => typeof x.piece === 'string' && /^[ a-z]+$/.test(x.piece));
  [yes, no] = [named[0], named[named.length - 1]];
  assert.notEqual(yes.id, no.id);
  const text = (x) => x.piece.replace(/ /g, '\u2581');
  server = await startServer(['--rerank-template', writeTemp('rerank-form.txt', form),
                              '--rerank-tokens', `${text(yes)},${text(no)}`, '--max-batched-tokens', '64']);
  [yes, no] = [yes.id, no.id];
  rank = await startServer(['--max-batched-tokens', '64'], 'rank');
  rankQwen3 = await startServer([], 'rank-qwen3');
});
after(async () => { await plain?.stop(); await server?.stop(); await rank?.stop(); await rankQwen3?.stop(); });

// The logprob of `token` when logit_bias forces it as the first token after `prompt` (token ids).
async function forcedLogprob(prompt, token) {
  const r = await post(server, '/v1/completions', { prompt, max_tokens: 1, temperature: 0, logprobs: 0, logit_bias: { [token]: 100 } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.choices[0].logprobs.tokens.length, 1);
  return r.body.choices[0].logprobs.token_logprobs[0];
}

async function promptIds(query, document) {
  const text = form.replace('{query}', query).replace('{document}', document);
  const t = await post(server, '/tokenize', { content: text, add_special: true, parse_special: true });
  return t.body.tokens;
}

async function expectedScore(query, document) {
  const ids = await promptIds(query, document);
  const d = (await forcedLogprob(ids, yes)) - (await forcedLogprob(ids, no));
  return { score: 1 / (1 + Math.exp(-d)), tokens: ids.length };
}

const query = 'where do foxes live';
const docs = ['Foxes live in dens.', 'The stock market fell today.', 'A quick brown fox jumps over the lazy dog', 'x'];

test('rerank: each score is sigmoid(logit(yes) - logit(no)), results best first, usage the prompts', async () => {
  const r = await post(server, '/v1/rerank', { query, documents: docs });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.results.length, docs.length);
  assert.ok(r.body.id.startsWith('rerank-'));
  let tokens = 0;
  const byIndex = new Map(r.body.results.map((x) => [x.index, x]));
  for (const [i, d] of docs.entries()) {
    const want = await expectedScore(query, d);
    tokens += want.tokens;
    const got = byIndex.get(i);
    assert.ok(Math.abs(got.relevance_score - want.score) < 1e-5, `document ${i}: ${got.relevance_score} vs ${want.score}`);
    assert.deepEqual(got.document, { text: d });
  }
  for (let k = 1; k < r.body.results.length; ++k) {
    const [a, b] = [r.body.results[k - 1], r.body.results[k]];
    assert.ok(a.relevance_score > b.relevance_score || (a.relevance_score === b.relevance_score && a.index < b.index));
  }
  assert.deepEqual(r.body.usage, { prompt_tokens: tokens, total_tokens: tokens });
  assert.ok(new Set(r.body.results.map((x) => x.relevance_score)).size > 1, 'every document scored the same');
});

test('rerank: equal documents tie in input order; top_n, return_documents, text objects, /rerank', async () => {
  const same = ['same text', 'other', 'same text', { text: 'same text' }];
  const r = await post(server, '/rerank', { query, documents: same, top_n: 10, return_documents: false });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const tied = r.body.results.filter((x) => x.index !== 1).map((x) => x.index);
  assert.deepEqual(tied, [0, 2, 3]);
  for (const x of r.body.results) assert.equal(x.document, undefined);
  const top = await post(server, '/v1/rerank', { query, documents: docs, top_n: 2 });
  const all = await post(server, '/v1/rerank', { query, documents: docs });
  assert.deepEqual(top.body.results, all.body.results.slice(0, 2));
  // Batched with each other or alone: the same scores, bit for bit.
  const alone = await post(server, '/v1/rerank', { query, documents: [docs[2]] });
  assert.equal(alone.body.results[0].relevance_score, all.body.results.find((x) => x.index === 2).relevance_score);
});

test('score: one text_1 for every text_2, or pairs by index; the same scores as rerank', async () => {
  const rr = await post(server, '/v1/rerank', { query, documents: docs });
  const s = await post(server, '/v1/score', { text_1: query, text_2: docs });
  assert.equal(s.status, 200, JSON.stringify(s.body));
  assert.equal(s.body.object, 'list');
  assert.deepEqual(s.body.data.map((x) => x.index), [0, 1, 2, 3]);
  for (const x of s.body.data) {
    assert.equal(x.object, 'score');
    assert.equal(x.score, rr.body.results.find((y) => y.index === x.index).relevance_score);
  }
  const pairs = await post(server, '/v1/score', { text_1: ['q one', 'q two'], text_2: ['d one', 'd two'] });
  const want = await expectedScore('q two', 'd two');
  assert.ok(Math.abs(pairs.body.data[1].score - want.score) < 1e-5);
});

test('rerank and score: refusals answer 400 naming the field', async () => {
  const cases = [
    ['/v1/rerank', { documents: ['a'] }, 'query'],
    ['/v1/rerank', { query: 'q', documents: [] }, 'documents'],
    ['/v1/rerank', { query: 'q', documents: ['a', ''] }, 'documents[1]'],
    ['/v1/rerank', { query: 'q', documents: ['a'], top_n: 0 }, 'top_n'],
    ['/v1/rerank', { query: 'q', documents: ['a'], max_chunks_per_doc: 2 }, 'max_chunks_per_doc'],
    ['/v1/rerank', { query: 'q', documents: ['a'], frobnicate: true }, 'frobnicate'],
    ['/v1/rerank', { query: 'q', documents: ['a'.repeat(20000)] }, 'documents[0]'],
    ['/v1/score', { text_1: ['a', 'b'], text_2: ['c'] }, 'text_1'],
    ['/v1/score', { text_1: 'a', text_2: 'b', truncate_prompt_tokens: 3 }, 'truncate_prompt_tokens'],
  ];
  for (const [path, body, param] of cases) {
    const r = await post(server, path, body);
    assert.equal(r.status, 400, `${path} ${JSON.stringify(body).slice(0, 80)}`);
    assert.equal(r.body.error.param, param);
  }
  const wrongModel = await post(server, '/v1/rerank', { model: 'nope', query: 'q', documents: ['a'] });
  assert.equal(wrongModel.status, 404);
  const get = await fetch(`${server.url}/v1/rerank`);
  assert.equal(get.status, 405);
  assert.equal(get.headers.get('allow'), 'POST');
});

test('a model with no yes/no tokens and no --rerank-tokens cannot rerank: 400 saying so', async () => {
  for (const [path, body] of [['/v1/rerank', { query: 'q', documents: ['a'] }], ['/v1/score', { text_1: 'q', text_2: 'a' }]]) {
    const r = await post(plain, path, body);
    assert.equal(r.status, 400);
    assert.equal(r.body.error.code, 'model_not_supported');
    assert.match(r.body.error.message, /reranking is not supported by this model/);
  }
});

async function plainTokens(base, text) {
  const t = await post(base, '/tokenize', { content: text, add_special: false });
  assert.equal(t.status, 200);
  return t.body.tokens.length;
}

test('classification-head reranker: scores best first, equal documents tied in input order, usage BOS + query + document', async () => {
  const documents = ['Foxes live in dens.', 'The stock market fell today.', 'Foxes live in dens.', 'x', 'rivers run deep'];
  const r = await post(rank, '/v1/rerank', { query, documents, return_documents: true });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.results.length, documents.length);
  const scores = r.body.results.map((x) => x.relevance_score);
  for (let i = 1; i < scores.length; ++i) assert.ok(scores[i - 1] >= scores[i], JSON.stringify(scores));
  assert.ok(new Set(scores).size >= 4, 'the head gives different documents different scores');
  for (const x of r.body.results) assert.equal(x.document.text, documents[x.index]);
  const order = r.body.results.map((x) => x.index);
  assert.ok(order.indexOf(0) < order.indexOf(2));
  assert.equal(r.body.results[order.indexOf(0)].relevance_score, r.body.results[order.indexOf(2)].relevance_score);
  let tokens = 0;
  for (const d of documents) tokens += 1 + (await plainTokens(rank, query)) + (await plainTokens(rank, d));
  assert.equal(r.body.usage.prompt_tokens, tokens);

  const s = await post(rank, '/v1/score', { text_1: query, text_2: documents });
  assert.equal(s.status, 200, JSON.stringify(s.body));
  for (const x of s.body.data) assert.equal(x.score, r.body.results.find((y) => y.index === x.index).relevance_score);
  const top = await post(rank, '/rerank', { query, documents, top_n: 2, return_documents: false });
  assert.deepEqual(top.body.results, r.body.results.slice(0, 2).map(({ index, relevance_score }) => ({ index, relevance_score })));
});

test('qwen3 classification reranker: the score is the softmaxed "yes" class, in (0, 1)', async () => {
  const r = await post(rankQwen3, '/v1/rerank', { query, documents: docs });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  for (const x of r.body.results) assert.ok(x.relevance_score > 0 && x.relevance_score < 1, JSON.stringify(x));
  assert.ok(new Set(r.body.results.map((x) => x.relevance_score)).size > 1);
});

test('a classification-head reranker refuses --rerank-tokens at start, naming the flag', async () => {
  await assert.rejects(startServer(['--rerank-tokens', 'a,b'], 'rank'), /--rerank-tokens.*classification head/s);
});
