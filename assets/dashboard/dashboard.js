// pagoda dashboard: polls GET /v1/state (docs/api.md) and draws it — tiles, the KV block map,
// charts of the last minutes on <canvas> — and runs a streaming playground against the server's own
// /v1/chat/completions or /v1/completions. No libraries: the page must work with no network beyond
// the server. With API keys, the key typed into the header is kept in sessionStorage (this tab
// only) and sent as `Authorization: Bearer KEY` with every request the page makes.
'use strict';

(() => {
  const KEY_STORE = 'pagoda.apiKey';
  const params = new URLSearchParams(location.search);
  const POLL_MS = Math.min(10000, Math.max(100, Number(params.get('interval')) || 1000));
  const $ = (id) => document.getElementById(id);

  // ---- API key ----
  function apiKey() { return sessionStorage.getItem(KEY_STORE) || ''; }
  function authHeaders() {
    const k = apiKey();
    return k ? { Authorization: `Bearer ${k}` } : {};
  }
  $('key-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const k = $('key-input').value.trim();
    if (k) sessionStorage.setItem(KEY_STORE, k);
    $('key-input').value = '';
    pollNow();
  });
  $('key-forget').addEventListener('click', () => { sessionStorage.removeItem(KEY_STORE); pollNow(); });

  function notice(text) {
    const n = $('notice');
    n.hidden = !text;
    n.textContent = text || '';
  }

  // ---- formatting ----
  const fmtInt = (v) => (v == null ? '—' : Math.round(v).toLocaleString('en-US'));
  const fmtRate = (v) => (v == null ? '—' : v >= 100 ? v.toFixed(0) : v.toFixed(1));
  const fmtPct = (v) => (v == null ? '—' : `${(v * 100).toFixed(v >= 0.1 ? 0 : 1)}%`);
  function fmtSeconds(s) {
    if (s == null) return '—';
    if (s < 0.001) return `${(s * 1e6).toFixed(0)} µs`;
    if (s < 1) return `${(s * 1000).toFixed(s < 0.01 ? 2 : s < 0.1 ? 1 : 0)} ms`;
    return `${s.toFixed(2)} s`;
  }
  function fmtDuration(s) {
    s = Math.floor(s);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    return h ? `${h}h ${m}m` : m ? (sec ? `${m}m ${sec}s` : `${m} min`) : `${sec}s`;
  }
  const seqColour = (seq, light = 52) => `hsl(${(seq * 137.508) % 360}, 62%, ${light}%)`;
  function setText(id, text) { const el = $(id); if (el.textContent !== text) el.textContent = text; }

  // ---- canvas helpers ----
  function fitCanvas(canvas, cssHeight) {
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(50, canvas.clientWidth);
    const h = cssHeight || canvas.clientHeight || 160;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
      canvas.style.height = `${h}px`;
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return { ctx, w, h };
  }

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  // A line chart of series [{label, colour, points: [[t, v | null]]}] over t in [-window, 0].
  function lineChart(canvas, series, { window: span, format, fixedMax }) {
    const { ctx, w, h } = fitCanvas(canvas, 180);
    ctx.clearRect(0, 0, w, h);
    const left = 58, right = 10, top = 22, bottom = 22;
    const pw = w - left - right, ph = h - top - bottom;
    let max = 0;
    for (const s of series) for (const [, v] of s.points) if (v != null && v > max) max = v;
    const yMax = fixedMax || niceMax(max * 1.05);
    const x = (t) => left + ((t + span) / span) * pw;
    const y = (v) => top + ph - (Math.min(v, yMax) / yMax) * ph;
    ctx.font = '11px system-ui, sans-serif';
    ctx.strokeStyle = '#e3e6eb';
    ctx.fillStyle = '#6b7383';
    ctx.lineWidth = 1;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (let i = 0; i <= 4; ++i) {
      const v = (yMax * i) / 4, yy = Math.round(y(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(left, yy); ctx.lineTo(left + pw, yy); ctx.stroke();
      ctx.fillText(format(v), left - 6, yy);
    }
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    const step = span >= 240 ? 60 : span >= 60 ? 15 : 5;
    for (let t = -span; t <= 0; t += step) {
      ctx.fillText(t === 0 ? 'now' : t % 60 === 0 ? `-${-t / 60}m` : `${t}s`, x(t), top + ph + 5);
    }
    for (const s of series) {
      ctx.strokeStyle = s.colour;
      ctx.fillStyle = s.colour;
      ctx.lineWidth = 1.8;
      ctx.beginPath();
      let pen = false, lone = null, n = 0;
      for (const [t, v] of s.points) {
        if (v == null) { if (n === 1 && lone) ctx.fillRect(lone[0] - 1.5, lone[1] - 1.5, 3, 3); pen = false; n = 0; continue; }
        const px = x(t), py = y(v);
        if (pen) ctx.lineTo(px, py); else ctx.moveTo(px, py);
        pen = true; ++n; lone = [px, py];
      }
      ctx.stroke();
      if (n === 1 && lone) ctx.fillRect(lone[0] - 1.5, lone[1] - 1.5, 3, 3);
    }
    ctx.textAlign = 'left';
    ctx.textBaseline = 'middle';
    let lx = left;
    for (const s of series) {
      ctx.fillStyle = s.colour;
      ctx.fillRect(lx, 8, 10, 3);
      ctx.fillStyle = '#1d2330';
      ctx.fillText(s.label, lx + 14, 10);
      lx += 24 + ctx.measureText(s.label).width;
    }
  }

  // ---- KV block map ----
  let kvLayout = null;  // what the hover needs: cell size, columns, decoded blocks
  function drawKvMap(kv) {
    const canvas = $('kv-map');
    const n = kv.blocks;
    const cssW = Math.max(50, canvas.clientWidth);
    const cell = Math.max(2, Math.min(18, Math.floor(Math.sqrt((cssW * 160) / Math.max(1, n)))));
    const cols = Math.max(1, Math.floor(cssW / cell));
    const rows = Math.ceil(n / cols);
    const { ctx, w, h } = fitCanvas(canvas, Math.max(cell, rows * cell));
    ctx.clearRect(0, 0, w, h);
    const gap = cell >= 6 ? 1 : 0;
    const codes = new Array(n), owners = new Array(n);
    let b = 0;
    for (const run of kv.map) {
      const [count, code, seq] = run;
      for (let i = 0; i < count; ++i, ++b) { codes[b] = code; owners[b] = seq || 0; }
    }
    for (let i = 0; i < n; ++i) {
      const cx = (i % cols) * cell, cy = Math.floor(i / cols) * cell;
      const code = codes[i];
      ctx.fillStyle = code === 'f' ? '#e6e9ee' : code === 'c' ? '#8fa3bf' : seqColour(owners[i], code === 's' ? 38 : 52);
      ctx.fillRect(cx, cy, cell - gap, cell - gap);
      if (code === 's' && cell >= 6) {
        ctx.fillStyle = '#fff';
        const d = Math.max(1, Math.floor(cell / 4));
        ctx.fillRect(cx + (cell - gap - d) / 2, cy + (cell - gap - d) / 2, d, d);
      }
    }
    kvLayout = { cell, cols, n, codes, owners, kv };
  }
  $('kv-map').addEventListener('mousemove', (e) => {
    if (!kvLayout) return;
    const r = e.target.getBoundingClientRect();
    const i = Math.floor((e.clientY - r.top) / kvLayout.cell) * kvLayout.cols + Math.floor((e.clientX - r.left) / kvLayout.cell);
    if (i < 0 || i >= kvLayout.n) return setText('kv-hover', '\u00a0');
    const code = kvLayout.codes[i], seq = kvLayout.owners[i];
    const s = kvLayout.kv.sequences.find((q) => q.seq === seq);
    const who = s ? ` (request ${s.request}, choice ${s.choice})` : '';
    const what = code === 'f' ? 'free' : code === 'c' ? 'cached: reusable prefix data, evictable'
      : code === 's' ? `in use, shared; lowest holder sequence ${seq}${who}` : `in use by sequence ${seq}${who}`;
    setText('kv-hover', `block ${i}: ${what}`);
  });
  $('kv-map').addEventListener('mouseleave', () => setText('kv-hover', '\u00a0'));

  function renderSequences(kv) {
    const rows = kv.sequences.slice(0, 64).map((s) =>
      `<tr><td><i class="sw" style="background:${seqColour(s.seq)}"></i></td><td>${s.seq}</td><td>${s.request}</td>` +
      `<td>${s.choice}</td><td>${s.status}</td><td>${s.tokens}</td><td>${s.computed}</td><td>${s.blocks}</td></tr>`);
    if (kv.sequences.length > 64) rows.push(`<tr><td></td><td colspan="7" class="muted">and ${kv.sequences.length - 64} more</td></tr>`);
    if (!rows.length) rows.push('<tr><td></td><td colspan="7" class="muted">no sequences</td></tr>');
    const html = rows.join('');
    if ($('seq-rows').innerHTML !== html) $('seq-rows').innerHTML = html;
  }

  const escapeHtml = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  function renderKeys(keys, windowSeconds) {
    setText('keys-window', `last ${fmtDuration(windowSeconds)}`);
    if (!keys.length) return;
    const html = keys.map((k) => {
      const why = Object.entries(k.rejection_reasons).map(([r, n]) => `${escapeHtml(r)} ${n}`).join(', ');
      return `<tr><td>${escapeHtml(k.key)}</td><td>${fmtRate(k.requests_per_s)}</td><td>${fmtRate(k.rejections_per_s)}</td>` +
        `<td>${k.requests}</td><td>${k.errors}</td><td>${k.rejections}</td><td>${why || '—'}</td></tr>`;
    }).join('');
    if ($('key-rows').innerHTML !== html) $('key-rows').innerHTML = html;
  }

  // ---- one state document ----
  function render(s) {
    const badge = $('status');
    badge.textContent = s.status;
    badge.className = `badge ${s.status}`;
    setText('model', s.model);
    setText('uptime', `up ${fmtDuration(s.uptime_seconds)}`);
    setText('updated', `updated ${new Date().toLocaleTimeString('en-GB')}`);
    if (s.status === 'failed') notice(`The model failed to load: ${s.error}`);
    const e = s.engine, t = s.throughput, lat = s.latency;
    if (e) {
      setText('v-running', fmtInt(e.running_requests));
      setText('v-running-seqs', `${e.running_sequences} sequences, max ${s.limits.max_seqs}`);
      setText('v-waiting', fmtInt(e.waiting_requests));
      setText('v-queue-limit', `queue limit ${s.limits.max_queue}`);
      setText('v-prompt-total', `${fmtInt(e.prompt_tokens)} total`);
      setText('v-gen-total', `${fmtInt(e.generation_tokens)} total`);
      setText('v-prefix', fmtPct(s.prefix_cache.queried_tokens ? s.prefix_cache.hit_rate : null));
      setText('v-prefix-tokens', `${fmtInt(s.prefix_cache.hit_tokens)} of ${fmtInt(s.prefix_cache.queried_tokens)} tokens`);
    }
    setText('v-prompt-tps', fmtRate(t.prompt_tokens_per_s));
    setText('v-gen-tps', fmtRate(t.generation_tokens_per_s));
    setText('v-util', fmtPct(t.step_utilisation));
    setText('v-busy', `busy ${fmtPct(t.busy_fraction)}, ${fmtRate(t.steps_per_s)} steps/s`);
    setText('v-ttft', lat.ttft.count ? `${fmtSeconds(lat.ttft.p50)} / ${fmtSeconds(lat.ttft.p99)}` : '—');
    setText('v-ttft-count', `${lat.ttft.count} requests, last ${fmtDuration(s.window.seconds)}`);
    setText('v-itl', lat.itl.count ? `${fmtSeconds(lat.itl.p50)} / ${fmtSeconds(lat.itl.p99)}` : '—');
    setText('v-itl-count', `${lat.itl.count} gaps, last ${fmtDuration(s.window.seconds)}`);
    if (s.kv) {
      setText('kv-free', fmtInt(s.kv.free));
      setText('kv-cached', fmtInt(s.kv.cached));
      setText('kv-used', fmtInt(s.kv.used));
      setText('kv-summary', `${s.kv.blocks} blocks of ${s.kv.block_size} tokens, ${fmtPct(s.kv.used / s.kv.blocks)} in use`);
      drawKvMap(s.kv);
      renderSequences(s.kv);
    }
    renderKeys(s.keys, s.window.seconds);

    const span = s.window.seconds, half = s.window.slice_seconds / 2;
    const at = (p) => Math.min(0, p.t + half);
    lineChart($('c-tps'), [
      { label: 'prompt', colour: '#2f6fde', points: t.series.map((p) => [at(p), p.prompt_tokens_per_s]) },
      { label: 'generation', colour: '#e4572e', points: t.series.map((p) => [at(p), p.generation_tokens_per_s]) },
    ], { window: span, format: (v) => fmtRate(v) });
    lineChart($('c-util'), [
      { label: 'tokens per step / budget', colour: '#29a36a', points: t.series.map((p) => [at(p), p.step_utilisation]) },
      { label: 'busy', colour: '#8a5cd6', points: t.series.map((p) => [at(p), p.busy_fraction]) },
    ], { window: span, format: fmtPct, fixedMax: 1 });
    for (const [id, l] of [['c-ttft', lat.ttft], ['c-itl', lat.itl]]) {
      lineChart($(id), [
        { label: 'p50', colour: '#2f6fde', points: l.series.map((p) => [at(p), p.p50]) },
        { label: 'p90', colour: '#e0a100', points: l.series.map((p) => [at(p), p.p90]) },
        { label: 'p99', colour: '#c23b3b', points: l.series.map((p) => [at(p), p.p99]) },
      ], { window: span, format: fmtSeconds });
    }
  }

  // ---- polling ----
  let timer = null, inFlight = false;
  async function poll() {
    if (inFlight) return;
    inFlight = true;
    try {
      const r = await fetch('/v1/state', { headers: authHeaders(), cache: 'no-store' });
      if (r.status === 401) {
        $('status').textContent = 'key needed';
        $('status').className = 'badge failed';
        notice(apiKey() ? 'The server refused this API key for /v1/state. Enter another above.'
          : 'This server needs an API key to show its state (the same rule as /metrics): enter one above. ' +
            'It is kept in this tab only (sessionStorage) and sent as Authorization: Bearer.');
      } else if (!r.ok) {
        notice(`GET /v1/state answered ${r.status}`);
      } else {
        const s = await r.json();
        if (s.status !== 'failed') notice('');
        render(s);
      }
    } catch (err) {
      $('status').textContent = 'offline';
      $('status').className = 'badge offline';
      notice(`Cannot reach the server: ${err.message}`);
    } finally {
      inFlight = false;
    }
  }
  function pollNow() { clearTimeout(timer); loop(); }
  async function loop() { await poll(); timer = setTimeout(loop, POLL_MS); }
  window.addEventListener('resize', () => pollNow());
  loop();

  // ---- playground ----
  let controller = null;
  function pgStatus(text) { setText('pg-status', text); }
  function setRunning(running) {
    $('pg-send').disabled = running;
    $('pg-stop').disabled = !running;
  }
  $('pg-stop').addEventListener('click', () => { if (controller) controller.abort(); });
  $('pg-form').addEventListener('submit', (e) => { e.preventDefault(); stream(); });

  async function stream() {
    const chat = $('pg-mode').value === 'chat';
    const prompt = $('pg-prompt').value;
    const body = { stream: true, max_tokens: Number($('pg-max').value) || 16, temperature: Number($('pg-temp').value) };
    if (chat) body.messages = [{ role: 'user', content: prompt }];
    else body.prompt = prompt;
    const out = $('pg-output');
    out.textContent = '';
    controller = new AbortController();
    setRunning(true);
    pgStatus('waiting for the first token…');
    const started = performance.now();
    let chunks = 0, finish = null, first = null;
    try {
      const r = await fetch(chat ? '/v1/chat/completions' : '/v1/completions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...authHeaders() },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!r.ok) {
        const err = await r.json().catch(() => null);
        pgStatus(`error ${r.status}: ${err && err.error ? err.error.message : r.statusText}`);
        return;
      }
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          // An SSE event: its data lines joined; comment lines (": ping") are heartbeats.
          const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
          if (!data || data === '[DONE]') continue;
          const chunk = JSON.parse(data);
          if (chunk.error) { pgStatus(`error: ${chunk.error.message}`); continue; }
          const choice = chunk.choices && chunk.choices[0];
          if (!choice) continue;
          const text = chat ? (choice.delta && (choice.delta.content || choice.delta.reasoning_content)) || '' : choice.text || '';
          if (text) {
            if (first == null) first = performance.now();
            out.textContent += text;
            ++chunks;
            pgStatus(`${chunks} chunks, first after ${fmtSeconds((first - started) / 1000)}`);
          }
          if (choice.finish_reason) finish = choice.finish_reason;
        }
      }
      pgStatus(`done: ${chunks} chunks in ${fmtSeconds((performance.now() - started) / 1000)}` +
        (finish ? `, finish_reason ${finish}` : ''));
    } catch (err) {
      if (err.name === 'AbortError') pgStatus(`stopped after ${chunks} chunks`);
      else pgStatus(`failed: ${err.message}`);
    } finally {
      controller = null;
      setRunning(false);
    }
  }
})();
