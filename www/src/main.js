// The Brevis demo page: open an archive (demo list, URL, drag and drop),
// decode it in a worker with live progress, then show sizes, a bit-exactness
// check, where the bytes went and every tensor's program; run the compressed
// model with ONNX Runtime Web beside the uncompressed one; fetch a model
// through the Service Worker example. `window.brevisDemo` holds the results
// (the browser tests read it).

const $ = (id) => document.getElementById(id);
const state = (window.brevisDemo = { decode: null, infer: null, tjs: null, edge: null });

const MODEL_ID = 'Xenova/all-MiniLM-L6-v2';
const MODEL_ARCHIVE = '/demo/all-MiniLM-L6-v2.brv';
const MODEL_PLAIN = `/models/${MODEL_ID}/onnx/model_quantized.onnx`;
const MODEL_IN_ARCHIVE = 'onnx/model_quantized.onnx';
// ONNX Runtime Web's own .wasm/.mjs, served from here (never a CDN): copied
// into public/ by scripts/prepare.sh for the build; in `vite dev` straight
// from node_modules (the dev server refuses module imports out of public/).
const ORT_WASM = import.meta.env.DEV ? '/node_modules/onnxruntime-web/dist/' : '/ort/';
const TJS_ORT_WASM = import.meta.env.DEV ? '/node_modules/@huggingface/transformers/node_modules/onnxruntime-web/dist/' : '/ort-tjs/';

// ------------------------------------------------------------------ formatting
function fmtBytes(n) {
  if (n == null || Number.isNaN(n)) return '—';
  if (n < 1000) return `${n} B`;
  if (n < 1e6) return `${(n / 1e3).toFixed(1)} kB`;
  if (n < 1e9) return `${(n / 1e6).toFixed(2)} MB`;
  return `${(n / 1e9).toFixed(2)} GB`;
}
const fmtInt = (n) => n.toLocaleString('en-US');
const pct = (a, b) => (b ? `${((100 * a) / b).toFixed(1)} %` : '—');
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}
async function sha256Hex(bytes) {
  const d = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(d, (b) => b.toString(16).padStart(2, '0')).join('');
}
const short = (h) => (h ? `${h.slice(0, 12)}…${h.slice(-6)}` : '—');

// ------------------------------------------------------------------ decoding in a worker
function decodeInWorker(job, onMessage) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL('./decode-worker.js', import.meta.url), { type: 'module' });
    const done = (fn, v) => {
      worker.terminate();
      fn(v);
    };
    worker.onmessage = ({ data }) => {
      if (data.type === 'done') done(resolve, data);
      else if (data.type === 'error') done(reject, Object.assign(new Error(data.error.message), data.error));
      else onMessage?.(data);
    };
    worker.onerror = (e) => done(reject, new Error(`the decode worker failed: ${e.message ?? 'unknown error'}`));
    worker.postMessage(job, job.buffer ? [job.buffer] : []);
  });
}

// ------------------------------------------------------------------ opening an archive
let busy = false;
async function openArchive(job) {
  if (busy) return;
  busy = true;
  const name = job.name ?? job.url;
  state.decode = { state: 'running', name };
  $('progress-card').hidden = false;
  $('results').hidden = true;
  $('error').hidden = true;
  $('archive-name').textContent = name.split('/').pop();
  setStatus('running', job.url ? 'downloading' : 'decoding');
  setBar(0);
  for (const id of ['p-in', 'p-out', 'p-tensors', 'p-speed']) $(id).textContent = '—';
  try {
    const result = await decodeInWorker(job, onProgress);
    state.decode = { state: 'verifying', name };
    onProgress({ type: 'progress', final: true, total: result.archiveSize, ...result.stats });
    setStatus('running', 'verifying');
    await showResult(job, result);
  } catch (e) {
    showError(e);
  } finally {
    busy = false;
  }
}

function setStatus(s, text) {
  $('status').dataset.state = s;
  $('status').textContent = text;
}
function setBar(f) {
  $('bar-fill').style.width = `${Math.max(0, Math.min(1, f)) * 100}%`;
}

function onProgress(p) {
  if (p.type === 'fetch') {
    setBar(p.total ? p.loaded / p.total : 0);
    $('p-in').textContent = `${fmtBytes(p.loaded)} downloaded`;
    return;
  }
  if (p.type !== 'progress') return;
  setStatus('running', p.final ? 'decoded' : 'decoding');
  setBar(p.total ? p.bytesIn / p.total : 1);
  $('p-in').textContent = `${fmtBytes(p.bytesIn)} of ${fmtBytes(p.total)}`;
  $('p-out').textContent = fmtBytes(p.bytesOut);
  $('p-tensors').textContent = `${fmtInt(p.tensorsDone)} · ${p.filesDone} file${p.filesDone === 1 ? '' : 's'}`;
  const mbps = p.ms > 0 ? p.bytesOut / 1e6 / (p.ms / 1000) : 0;
  $('p-speed').textContent = p.ms > 0 ? `${mbps.toFixed(1)} MB/s` : '—';
  $('p-speed').dataset.mbps = String(mbps);
}

function showError(e) {
  state.decode = { state: 'error', error: { message: e.message, code: e.code, name: e.name, offset: e.offset, file: e.file, segment: e.segment } };
  setStatus('error', 'failed');
  const where = [e.file && `file ${e.file}`, e.segment && `tensor ${e.segment}`, e.chunk != null && `chunk ${e.chunk}`, e.offset != null && `archive offset ${fmtInt(e.offset)}`]
    .filter(Boolean).join(', ');
  const kind = { corrupt: 'The archive is damaged', truncated: 'The archive is incomplete (truncated)', limit: 'The archive exceeds a limit', unsupported: 'The archive uses something this decoder does not support', usage: 'This is not a usable archive' }[e.code]
    ?? 'Could not decode this archive';
  $('error').replaceChildren(
    el('strong', { text: `${kind}.` }),
    el('span', { text: ' Nothing from it was used.' }),
    el('div', { class: 'mono small', text: `${e.name ?? 'Error'}${e.code ? ` (${e.code})` : ''}: ${e.message}` }),
    where ? el('div', { class: 'small', text: `Where: ${where}` }) : null,
  );
  $('error').hidden = false;
}

// ------------------------------------------------------------------ results
async function showResult(job, r) {
  // Bit-exactness: archive index vs decoder vs crypto.subtle here.
  const rows = [];
  for (const f of r.files) {
    const indexHash = r.index.find((x) => x.path === f.path)?.sha256;
    const page = await sha256Hex(f.bytes);
    rows.push({ path: f.path, size: f.size, index: indexHash, decoder: f.sha256, page, ok: indexHash === f.sha256 && f.sha256 === page });
  }
  const allOk = rows.length > 0 && rows.every((x) => x.ok);
  const original = r.index.reduce((s, f) => s + f.size, 0);
  const mbps = r.stats.bytesOut / 1e6 / (r.stats.ms / 1000);

  let zstd = null;
  // The zstd figure recorded beside the archive; for a dropped file, the demo
  // archive of the same name and size, if there is one.
  for (const url of job.url ? [`${job.url}.json`] : [`/demo/${encodeURIComponent(job.name)}.json`]) {
    try {
      const res = await fetch(url);
      const j = res.ok ? await res.json() : null;
      if (j && j.archiveSize === r.archiveSize) zstd = j;
    } catch {
      /* no comparison recorded for this archive */
    }
  }

  state.decode = {
    state: 'done', name: job.name ?? job.url, archiveSize: r.archiveSize, original, stats: r.stats, mbps,
    files: rows.map(({ path, size, index, decoder, page, ok }) => ({ path, size, index, decoder, page, ok })), allOk, zstd,
  };
  state.lastFiles = r.files; // bytes, for the inference card

  // Summary.
  const tiles = [
    ['Original', fmtBytes(original), `${r.index.length} file${r.index.length === 1 ? '' : 's'}`],
    ['Brevis archive', fmtBytes(r.archiveSize), `${pct(r.archiveSize, original)} of the original`],
    ['Ratio', `${(original / r.archiveSize).toFixed(3)}×`, 'original ÷ archive'],
  ];
  if (zstd && zstd.originalSize === original) {
    const gain = 1 - r.archiveSize / zstd.zstd19Size;
    tiles.push(['zstd -19', fmtBytes(zstd.zstd19Size), `ratio ${(original / zstd.zstd19Size).toFixed(3)}×`]);
    tiles.push(['Brevis vs zstd -19', `${gain >= 0 ? '−' : '+'}${Math.abs(100 * gain).toFixed(2)} %`, gain >= 0 ? 'smaller than zstd -19' : 'larger than zstd -19']);
    $('summary-note').textContent = `zstd -19 of each file on its own, measured when the demo was built (${zstd.zstd}).`;
  } else {
    $('summary-note').textContent = 'No zstd figure recorded for this archive (the demo archives have one, measured when the page was built).';
  }
  tiles.push(['Decoded in', `${(r.stats.ms / 1000).toFixed(2)} s`, `${mbps.toFixed(1)} MB/s of output`]);
  $('summary').replaceChildren(...tiles.map(([k, v, s]) => el('div', { class: 'tile' }, el('div', { class: 'k', text: k }), el('div', { class: 'v', text: v }), el('div', { class: 'muted small', text: s }))));

  // Bit-exactness panel.
  $('exact-verdict').dataset.state = allOk ? 'ok' : 'bad';
  $('exact-verdict').textContent = allOk
    ? (rows.length === 1 ? '✓ The file was rebuilt bit for bit: its three SHA-256 hashes agree.' : `✓ All ${rows.length} files rebuilt bit for bit: three SHA-256 hashes agree for each.`)
    : '✗ A hash does not match.';
  $('exact-table').replaceChildren(
    el('thead', {}, el('tr', {}, ...['File', 'Size', 'Archive', 'Decoder', 'Page (crypto.subtle)', ''].map((h) => el('th', { text: h })))),
    el('tbody', {}, ...rows.map((x) => el('tr', {},
      el('td', { class: 'mono', text: x.path }), el('td', { class: 'num', text: fmtBytes(x.size) }),
      el('td', { class: 'mono hash', text: short(x.index), title: x.index }), el('td', { class: 'mono hash', text: short(x.decoder), title: x.decoder }),
      el('td', { class: 'mono hash', text: short(x.page), title: x.page }), el('td', { class: x.ok ? 'ok' : 'bad', text: x.ok ? '✓ match' : '✗ differs' })))),
  );

  drawCharts(r.index);
  drawTable(r.index);
  $('results').hidden = false;
  setStatus(allOk ? 'done' : 'error', allOk ? 'verified' : 'hash mismatch');
}

// ------------------------------------------------------------------ charts
// A layer: the name up to its first numeric component (`encoder.layer.3`,
// `_model.encoder.0`); names without one group by their first two components
// with digits as `#` (exporters' anonymous `val_57_q` become `val_#_q`).
function layerOf(seg) {
  if (seg.dtype == null) return 'opaque bytes';
  const parts = seg.name.split(/[./]/);
  const i = parts.findIndex((p) => /^\d+$/.test(p));
  const key = i >= 0 ? parts.slice(0, i + 1).join('.') : parts.slice(0, 2).join('.').replace(/\d+/g, '#');
  return key.length > 26 ? `…${key.slice(-25)}` : key;
}
function group(index, key) {
  const g = new Map();
  for (const f of index) for (const s of f.segments) {
    const k = key(s);
    const v = g.get(k) ?? { size: 0, stored: 0, n: 0 };
    v.size += s.size;
    v.stored += s.stored;
    v.n += 1;
    g.set(k, v);
  }
  return [...g.entries()];
}
function barChart(container, entries) {
  entries = entries.map(([k, v]) => [v.n > 1 ? `${k} (${v.n})` : k, v]);
  const max = Math.max(1, ...entries.map(([, v]) => Math.max(v.size, v.stored)));
  const W = 560, labelW = 170, rowH = 26, barW = W - labelW - 150;
  const H = entries.length * rowH + 6;
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('width', '100%');
  svg.setAttribute('role', 'img');
  const add = (tag, attrs, text) => {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    if (text != null) n.textContent = text;
    svg.append(n);
    return n;
  };
  entries.forEach(([name, v], i) => {
    const y = i * rowH + 3;
    add('text', { x: labelW - 8, y: y + 15, 'text-anchor': 'end', class: 'c-label' }, name);
    add('rect', { x: labelW, y: y + 2, width: Math.max(1, (barW * v.size) / max), height: rowH - 8, rx: 3, class: 'c-orig' });
    add('rect', { x: labelW, y: y + 6, width: Math.max(1, (barW * v.stored) / max), height: rowH - 16, rx: 2, class: 'c-stored' });
    const t = add('text', { x: labelW + barW + 8, y: y + 15, class: 'c-val' }, `${fmtBytes(v.stored)} · ${pct(v.stored, v.size)}`);
    add('title', {}, `${name}: ${v.n} segment(s), ${fmtBytes(v.size)} → ${fmtBytes(v.stored)}`);
    t.append();
  });
  container.replaceChildren(svg);
}
function drawCharts(index) {
  const byDtype = group(index, (s) => s.dtype ?? 'opaque').sort((a, b) => b[1].size - a[1].size);
  barChart($('chart-dtype'), byDtype);
  // Layers in the order they appear in the file; past 20 groups, the rest as one.
  let byLayer = group(index, layerOf);
  if (byLayer.length > 20) {
    const rest = byLayer.slice(19).reduce((v, [, x]) => ({ size: v.size + x.size, stored: v.stored + x.stored, n: v.n + x.n }), { size: 0, stored: 0, n: 0 });
    byLayer = [...byLayer.slice(0, 19), [`${byLayer.length - 19} more groups`, rest]];
  }
  barChart($('chart-layer'), byLayer);
}

// ------------------------------------------------------------------ table
function drawTable(index) {
  const head = el('thead', {}, el('tr', {}, ...['Tensor / segment', 'dtype', 'Shape', 'Original', 'Stored', 'Stored %', 'Program (first chunk)'].map((h) => el('th', { text: h }))));
  const body = el('tbody');
  for (const f of index) {
    const stored = f.segments.reduce((s, x) => s + x.stored, 0);
    body.append(el('tr', { class: 'file-row' },
      el('td', { class: 'mono', text: f.path }), el('td', { text: `${f.segments.length} segment${f.segments.length === 1 ? '' : 's'}` }), el('td'),
      el('td', { class: 'num', text: fmtBytes(f.size) }), el('td', { class: 'num', text: fmtBytes(stored) }), el('td', { class: 'num', text: pct(stored, f.size) }), el('td')));
    for (const s of f.segments) {
      const details = el('details', {}, el('summary', { text: s.program.split('\n')[0].slice(0, 60) || '(empty)' }), el('pre', { text: s.program }));
      const tr = el('tr', { 'data-filter': `${f.path} ${s.name} ${s.dtype ?? 'opaque'}`.toLowerCase() },
        el('td', { class: 'mono name', text: s.name, title: s.name }),
        el('td', {}, el('span', { class: `dt ${s.dtype ? '' : 'opaque'}`, text: s.dtype ?? 'opaque' })),
        el('td', { class: 'mono shape', text: s.shape ? `[${s.shape.join(', ')}]` : '—' }),
        el('td', { class: 'num', text: fmtBytes(s.size) }), el('td', { class: 'num', text: fmtBytes(s.stored) }),
        el('td', { class: 'num', text: pct(s.stored, s.size) }),
        el('td', { class: 'prog' }, details));
      body.append(tr);
    }
  }
  $('tensors').replaceChildren(head, body);
}
$('filter').addEventListener('input', () => {
  const q = $('filter').value.trim().toLowerCase();
  for (const tr of $('tensors').querySelectorAll('tr[data-filter]')) tr.hidden = q !== '' && !tr.dataset.filter.includes(q);
});

// ------------------------------------------------------------------ opening: demos, URL, drop
async function listDemos() {
  try {
    const demos = await (await fetch('/demo/index.json')).json();
    $('demos').replaceChildren(...demos.map((d) => {
      const b = el('button', { type: 'button', class: 'demo' }, el('strong', { text: d.title }), el('span', { class: 'muted small', text: d.note }));
      b.dataset.url = d.url;
      b.addEventListener('click', () => {
        $('url').value = d.url;
        openArchive({ url: d.url });
      });
      return b;
    }));
  } catch {
    $('demos').textContent = 'No demo archives here (run www/scripts/prepare.sh).';
  }
}
$('url-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const url = $('url').value.trim();
  if (url) openArchive({ url });
});
async function openFile(file) {
  if (!file) return;
  const buffer = await file.arrayBuffer();
  openArchive({ buffer, name: file.name });
}
$('file').addEventListener('change', () => openFile($('file').files[0]));
const drop = $('drop');
for (const ev of ['dragenter', 'dragover']) drop.addEventListener(ev, (e) => { e.preventDefault(); drop.classList.add('over'); });
for (const ev of ['dragleave', 'drop']) drop.addEventListener(ev, () => drop.classList.remove('over'));
drop.addEventListener('drop', (e) => {
  e.preventDefault();
  openFile(e.dataTransfer?.files?.[0]);
});
window.addEventListener('dragover', (e) => e.preventDefault());
window.addEventListener('drop', (e) => e.preventDefault());

// ------------------------------------------------------------------ inference
let ortPromise;
function loadOrt() {
  ortPromise ??= import('onnxruntime-web/wasm').then((ort) => {
    ort.env.wasm.wasmPaths = ORT_WASM;
    ort.env.wasm.numThreads = 1;
    ort.env.wasm.proxy = false;
    return ort;
  });
  return ortPromise;
}
let tokenizerPromise;
function loadTokenizer() {
  tokenizerPromise ??= import('@huggingface/transformers').then(async ({ AutoTokenizer, env }) => {
    env.allowRemoteModels = false;
    env.allowLocalModels = true;
    env.localModelPath = '/models/';
    env.useBrowserCache = false;
    return AutoTokenizer.from_pretrained(MODEL_ID);
  });
  return tokenizerPromise;
}
async function fetchBytes(url) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return new Uint8Array(await res.arrayBuffer());
}

async function embed(ort, session, enc) {
  const feeds = {};
  for (const name of session.inputNames) {
    const t = enc[name];
    if (!t) throw new Error(`the model wants an input \`${name}\` the tokenizer did not give`);
    feeds[name] = new ort.Tensor('int64', t.data, t.dims);
  }
  const out = await session.run(feeds);
  const hidden = out[session.outputNames[0]];
  const [, n, d] = hidden.dims;
  const mask = enc.attention_mask.data;
  const pooled = new Float32Array(d);
  let count = 0;
  for (let i = 0; i < n; i++) {
    if (!mask[i]) continue;
    count++;
    for (let j = 0; j < d; j++) pooled[j] += hidden.data[i * d + j];
  }
  for (let j = 0; j < d; j++) pooled[j] /= count;
  const norm = Math.hypot(...pooled);
  return { raw: new Uint8Array(hidden.data.buffer, hidden.data.byteOffset, hidden.data.byteLength).slice(), dims: hidden.dims, pooled, norm };
}
function bytesEqual(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
function embeddingCard(title, sub, e) {
  return el('div', { class: 'emb' },
    el('div', { class: 'emb-title', text: title }), el('div', { class: 'muted small', text: sub }),
    el('div', { class: 'mono dims', text: `[${Array.from(e.pooled.slice(0, 6), (x) => x.toFixed(5)).join(', ')}, …]` }),
    el('div', { class: 'small', text: `${e.pooled.length} dims · L2 norm ${e.norm.toFixed(6)} · output ${e.dims.join('×')}` }));
}

let compressedModel; // { bytes, ms, archiveSize }
async function compressedModelBytes(status) {
  if (compressedModel) return compressedModel;
  status(`decoding ${MODEL_ARCHIVE} in a worker…`);
  const t0 = performance.now();
  const r = await decodeInWorker({ url: MODEL_ARCHIVE }, (p) => {
    if (p.type === 'progress') status(`decoding ${MODEL_ARCHIVE}: ${fmtBytes(p.bytesOut)} rebuilt, ${p.tensorsDone} tensors`);
  });
  const f = r.files.find((x) => x.path === MODEL_IN_ARCHIVE);
  if (!f) throw new Error(`${MODEL_ARCHIVE} holds no ${MODEL_IN_ARCHIVE}`);
  compressedModel = { bytes: f.bytes, sha256: f.sha256, ms: performance.now() - t0, archiveSize: r.archiveSize };
  return compressedModel;
}

async function runInference(e) {
  e?.preventDefault();
  const sentence = $('sentence').value;
  const status = (t) => ($('infer-status').textContent = t);
  $('run-infer').disabled = true;
  $('infer-verdict').dataset.state = 'running';
  $('infer-verdict').textContent = '';
  state.infer = { state: 'running' };
  try {
    status('loading ONNX Runtime Web and the tokenizer…');
    const [ort, tokenizer] = await Promise.all([loadOrt(), loadTokenizer()]);
    const comp = await compressedModelBytes(status);
    status(`fetching the uncompressed model ${MODEL_PLAIN}…`);
    const plain = await fetchBytes(MODEL_PLAIN);
    const modelSame = bytesEqual(comp.bytes, plain);
    status('creating two inference sessions…');
    const opts = { executionProviders: ['wasm'], graphOptimizationLevel: 'all' };
    const [sComp, sPlain] = [await ort.InferenceSession.create(comp.bytes, opts), await ort.InferenceSession.create(plain, opts)];
    status('running both…');
    const enc = await tokenizer(sentence);
    const a = await embed(ort, sComp, enc);
    const b = await embed(ort, sPlain, enc);
    await sComp.release();
    await sPlain.release();
    const same = bytesEqual(a.raw, b.raw);
    state.infer = {
      state: 'done', sentence, tokens: enc.input_ids.dims[1], modelSame, identical: same, bytesCompared: a.raw.length,
      compressed: Array.from(a.pooled), plain: Array.from(b.pooled), normCompressed: a.norm, normPlain: b.norm,
      archiveSize: comp.archiveSize, modelSize: plain.length,
    };
    $('infer-results').replaceChildren(
      embeddingCard('From the .brv archive', `${fmtBytes(comp.archiveSize)} downloaded, decoded in ${(comp.ms / 1000).toFixed(2)} s`, a),
      embeddingCard('Uncompressed model', `${fmtBytes(plain.length)} downloaded`, b));
    $('infer-verdict').dataset.state = same && modelSame ? 'ok' : 'bad';
    $('infer-verdict').textContent = same && modelSame
      ? `✓ Identical: the rebuilt model equals the original byte for byte, and its output (${fmtInt(a.raw.length)} bytes of float32, ${enc.input_ids.dims[1]} tokens × 384) is the same bit for bit.`
      : `✗ Different: model bytes ${modelSame ? 'equal' : 'differ'}, outputs ${same ? 'equal' : 'differ'}.`;
    status(`mean-pooled embedding of “${sentence}” (${enc.input_ids.dims[1]} tokens), ONNX Runtime Web ${ort.env.versions?.common ?? ''} (wasm, 1 thread)`);
  } catch (err) {
    console.error(err);
    state.infer = { state: 'error', message: String(err?.message ?? err) };
    $('infer-verdict').dataset.state = 'bad';
    $('infer-verdict').textContent = `✗ ${err?.message ?? err}`;
  } finally {
    $('run-infer').disabled = false;
  }
}
$('infer-form').addEventListener('submit', runInference);

// transformers.js: the same model through its pipeline, files served out of the
// archive by BrevisModelCache, against the pipeline on the plain files.
async function runPipeline() {
  const out = $('tjs-results');
  const sentence = $('sentence').value;
  state.tjs = { state: 'running' };
  out.replaceChildren(el('p', { class: 'muted small', text: 'transformers.js: loading the pipeline twice (out of the archive, then the plain files)…' }));
  try {
    // No explicit init: the package finds its .wasm by itself, bundled or not
    // (this path is the test that it does).
    const [{ env, pipeline }, { BrevisModelCache }] = await Promise.all([
      import('@huggingface/transformers'), import('brevis-decoder/transformers'),
    ]);
    env.allowRemoteModels = false;
    env.useBrowserCache = false;
    env.backends.onnx.wasm.wasmPaths = TJS_ORT_WASM;
    env.backends.onnx.wasm.numThreads = 1;
    const run = async () => {
      const p = await pipeline('feature-extraction', MODEL_ID, { dtype: 'q8', device: 'wasm' });
      const t = await p(sentence, { pooling: 'mean', normalize: true });
      const data = Float32Array.from(t.data);
      await p.dispose();
      return data;
    };
    // Out of the archive first: nothing under localModelPath, every file from
    // BrevisModelCache. (transformers.js memoizes file lookups per model and
    // file, so the order matters: the plain run after it reads local files.)
    const cache = new BrevisModelCache({ [MODEL_ID]: MODEL_ARCHIVE });
    const served = [];
    const match = cache.match.bind(cache);
    cache.match = async (key) => {
      const res = await match(key);
      if (res && !served.includes(cache.resolve(key).path)) served.push(cache.resolve(key).path);
      return res;
    };
    env.allowLocalModels = true;
    env.useCustomCache = true;
    env.customCache = cache;
    env.localModelPath = '/no-local-models/';
    const fromArchive = await run();
    // The plain files, no custom cache.
    env.useCustomCache = false;
    env.customCache = null;
    env.localModelPath = '/models/';
    const plain = await run();
    const same = bytesEqual(new Uint8Array(plain.buffer), new Uint8Array(fromArchive.buffer));
    state.tjs = { state: 'done', identical: same, served, plain: Array.from(plain), compressed: Array.from(fromArchive) };
    out.replaceChildren(el('p', { class: 'verdict', 'data-state': same ? 'ok' : 'bad',
      text: `${same ? '✓' : '✗'} transformers.js pipeline('feature-extraction'): ${same ? 'identical' : 'different'} normalized embeddings with the model folder served out of the archive by BrevisModelCache (${served.join(', ')}) and from the plain files.` }));
  } catch (err) {
    console.error(err);
    state.tjs = { state: 'error', message: String(err?.message ?? err) };
    out.replaceChildren(el('p', { class: 'verdict', 'data-state': 'bad', text: `✗ transformers.js: ${err?.message ?? err}` }));
  }
}
$('run-tjs').addEventListener('click', runPipeline);

// ------------------------------------------------------------------ the Service Worker
async function runEdge() {
  const status = (t) => ($('edge-status').textContent = t);
  $('run-edge').disabled = true;
  $('edge-verdict').dataset.state = 'running';
  $('edge-verdict').textContent = '';
  state.edge = { state: 'running' };
  try {
    if (!('serviceWorker' in navigator)) throw new Error('this browser has no Service Workers');
    status('registering the Service Worker…');
    const script = import.meta.env.DEV ? '/src/sw.js' : '/sw.js';
    await navigator.serviceWorker.register(script, { type: 'module', scope: '/' });
    await navigator.serviceWorker.ready;
    if (!navigator.serviceWorker.controller) {
      await new Promise((ok, fail) => {
        navigator.serviceWorker.addEventListener('controllerchange', ok, { once: true });
        setTimeout(() => fail(new Error('the Service Worker did not take control within 10 s')), 10000);
      });
    }
    const meta = await (await fetch('/edge/model.onnx.brv.json')).json();
    status('fetch("/edge/model.onnx")…');
    const t0 = performance.now();
    const res = await fetch('/edge/model.onnx');
    if (!res.ok) throw new Error(`/edge/model.onnx: HTTP ${res.status}`);
    const bytes = new Uint8Array(await res.arrayBuffer());
    const ms = performance.now() - t0;
    const sha = await sha256Hex(bytes);
    const plainSha = await sha256Hex(await fetchBytes(MODEL_PLAIN));
    const contentLength = Number(res.headers.get('content-length'));
    status('ONNX Runtime Web: InferenceSession.create("/edge/model.onnx"), an unmodified fetch…');
    const [ort, tokenizer] = await Promise.all([loadOrt(), loadTokenizer()]);
    const enc = await tokenizer($('sentence').value);
    const sEdge = await ort.InferenceSession.create('/edge/model.onnx', { executionProviders: ['wasm'] });
    const sPlain = await ort.InferenceSession.create(MODEL_PLAIN, { executionProviders: ['wasm'] });
    const a = await embed(ort, sEdge, enc);
    const b = await embed(ort, sPlain, enc);
    await sEdge.release();
    await sPlain.release();
    const outSame = bytesEqual(a.raw, b.raw);
    const ok = sha === plainSha && sha === meta.sha256 && contentLength === bytes.length && outSame;
    state.edge = {
      state: 'done', servedBy: res.headers.get('x-served-by'), contentLength, size: bytes.length, sha256: sha, expected: meta.sha256,
      plainSha256: plainSha, archiveBytes: Number(res.headers.get('x-brevis-archive-bytes')), ms, ortIdentical: outSame, ok,
    };
    $('edge-results').replaceChildren(el('table', { class: 'grid kv' }, el('tbody', {},
      ...[
        ['Served by', res.headers.get('x-served-by') ?? '(the network — no Service Worker?)'],
        ['Archive fetched', fmtBytes(state.edge.archiveBytes)],
        ['content-length', `${fmtInt(contentLength)} B`],
        ['Bytes received', `${fmtInt(bytes.length)} B in ${(ms / 1000).toFixed(2)} s`],
        ['SHA-256 received', sha],
        ['SHA-256 of the original', plainSha],
        ['ORT output, /edge/model.onnx vs the original', outSame ? 'identical' : 'different'],
      ].map(([k, v]) => el('tr', {}, el('th', { text: k }), el('td', { class: 'mono', text: v }))))));
    $('edge-verdict').dataset.state = ok ? 'ok' : 'bad';
    $('edge-verdict').textContent = ok
      ? '✓ Byte-identical: the Service Worker served the original model from the archive, and ONNX Runtime Web ran it unmodified.'
      : '✗ The served file differs from the original.';
    status('');
  } catch (err) {
    console.error(err);
    state.edge = { state: 'error', message: String(err?.message ?? err) };
    $('edge-verdict').dataset.state = 'bad';
    $('edge-verdict').textContent = `✗ ${err?.message ?? err}`;
  } finally {
    $('run-edge').disabled = false;
  }
}
$('run-edge').addEventListener('click', runEdge);

// ------------------------------------------------------------------ start
listDemos();
const q = new URLSearchParams(location.search).get('archive');
if (q) {
  $('url').value = q;
  openArchive({ url: q });
}
