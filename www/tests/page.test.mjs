// Browser tests of the demo page (www/dist, built by `vite build`) in Debian's
// Chromium driven by playwright-core, served on 127.0.0.1 by scripts/serve.mjs.
// Every request the browser makes is checked to stay on 127.0.0.1.
// Screenshots go to www/test-artifacts/.
//
//   node --test tests/page.test.mjs        (www/run-tests.sh does everything)
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

import { serve } from '../scripts/serve.mjs';

const WWW = fileURLToPath(new URL('..', import.meta.url));
const ARTIFACTS = join(WWW, 'test-artifacts');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const MODEL = join(WWW, 'public/models/Xenova/all-MiniLM-L6-v2/onnx/model_quantized.onnx');
const sha256 = (b) => createHash('sha256').update(b).digest('hex');

let server;
let base;
let context;
let userDataDir;
const offsite = [];
const consoleErrors = [];

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  ({ server, url: base } = await serve(join(WWW, 'dist'), 0));
  userDataDir = mkdtempSync(join(tmpdir(), 'brevis-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      // Belt and braces: no host name resolves but 127.0.0.1.
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
    ],
    viewport: { width: 1280, height: 900 },
  });
  context.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(`${base}/`) && !u.startsWith('data:') && !u.startsWith('blob:')) offsite.push(u);
  });
});

after(async () => {
  await context?.close();
  server?.close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
  assert.deepEqual(offsite, [], 'requests that left 127.0.0.1');
});

async function newPage() {
  const page = await context.newPage();
  page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  return page;
}
const shot = (page, name) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
const waitState = (page, what, timeout = 120_000) =>
  page.waitForFunction((w) => ['done', 'error'].includes(window.brevisDemo?.[w]?.state), what, { timeout });

test('the model archive decodes in a worker, every hash matches, throughput is shown', async () => {
  const page = await newPage();
  await page.goto(`${base}/`);
  await shot(page, '01-start');
  await page.click('button.demo[data-url="/demo/all-MiniLM-L6-v2.brv"]');
  await waitState(page, 'decode');
  const d = await page.evaluate(() => window.brevisDemo.decode);
  assert.equal(d.state, 'done', JSON.stringify(d.error));
  assert.equal(d.allOk, true);
  assert.ok(d.files.length >= 5, `files: ${d.files.map((f) => f.path)}`);
  const onnx = d.files.find((f) => f.path === 'onnx/model_quantized.onnx');
  assert.equal(onnx.page, sha256(readFileSync(MODEL)));
  for (const f of d.files) assert.ok(f.index === f.decoder && f.decoder === f.page, f.path);
  assert.equal(await page.getAttribute('#exact-verdict', 'data-state'), 'ok');
  assert.equal(await page.getAttribute('#status', 'data-state'), 'done');
  assert.ok(d.zstd && d.zstd.zstd19Size > 0, 'zstd -19 figure shown');
  // The table lists tensors with dtype and program text.
  const rows = await page.locator('#tensors tr[data-filter]').count();
  assert.ok(rows > 50, `${rows} rows`);
  assert.ok((await page.locator('#tensors details pre').first().textContent()).length > 0);
  assert.ok((await page.locator('#chart-dtype svg rect').count()) >= 4);
  assert.ok((await page.locator('#chart-layer svg text', { hasText: 'layer.5' }).count()) >= 1);
  await shot(page, '02-decoded');
  // Throughput, as the page shows it: this decode and four more of the same
  // archive (the machine may be shared: the median is the figure).
  const runs = [{ ms: d.stats.ms, mbps: d.mbps, shown: await page.textContent('#p-speed') }];
  for (let i = 0; i < 4; i++) {
    await page.click('button.demo[data-url="/demo/all-MiniLM-L6-v2.brv"]');
    await page.waitForFunction(() => window.brevisDemo.decode?.state === 'running', null, { timeout: 10_000 }).catch(() => {});
    await waitState(page, 'decode');
    const x = await page.evaluate(() => window.brevisDemo.decode);
    assert.equal(x.state, 'done');
    runs.push({ ms: x.stats.ms, mbps: x.mbps, shown: await page.textContent('#p-speed') });
  }
  const sorted = runs.map((r) => r.mbps).sort((a, b) => a - b);
  const figure = {
    archive: d.name, archiveBytes: d.archiveSize, outputBytes: d.stats.bytesOut, medianMBps: sorted[2], runs,
    browser: await page.evaluate(() => navigator.userAgent), note: 'MB/s = decoded output bytes / 1e6 / decode seconds, measured in the decode worker (archive already in memory)',
  };
  writeFileSync(join(ARTIFACTS, 'throughput.json'), `${JSON.stringify(figure, null, 1)}\n`);
  console.log(`# in-browser decode of ${d.name}: ${figure.outputBytes} B of output; MB/s per run ${runs.map((r) => r.mbps.toFixed(1)).join(', ')}; median ${figure.medianMBps.toFixed(1)} MB/s`);
  await page.locator('#tensors details').nth(3).evaluate((e) => (e.open = true));
  await page.locator('#tensors').scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(ARTIFACTS, '03-table.png') });
  await page.close();
});

test('a dropped file decodes too (drag and drop)', async () => {
  const page = await newPage();
  await page.goto(`${base}/`);
  const dt = await page.evaluateHandle(async () => {
    const bytes = await (await fetch('/demo/silero_vad_16k.brv')).arrayBuffer();
    const data = new DataTransfer();
    data.items.add(new File([bytes], 'silero_vad_16k.brv'));
    return data;
  });
  await page.dispatchEvent('#drop', 'drop', { dataTransfer: dt });
  await waitState(page, 'decode');
  const d = await page.evaluate(() => window.brevisDemo.decode);
  assert.equal(d.state, 'done', JSON.stringify(d.error));
  assert.equal(d.allOk, true);
  assert.equal(d.name, 'silero_vad_16k.brv');
  assert.ok(d.zstd && d.zstd.zstd19Size > d.archiveSize, 'the demo archive\'s zstd -19 figure, found by name and size');
  await shot(page, '04-dropped-silero');
  await page.close();
});

for (const [name, code] of [['corrupt', 'corrupt'], ['truncated', 'truncated']]) {
  test(`a ${name} archive shows a clear error and nothing hangs`, async () => {
    const page = await newPage();
    await page.goto(`${base}/?archive=/demo/${name}.brv`);
    await waitState(page, 'decode', 30_000);
    const d = await page.evaluate(() => window.brevisDemo.decode);
    assert.equal(d.state, 'error');
    assert.equal(d.error.code, code, JSON.stringify(d.error));
    assert.ok(await page.isVisible('#error'));
    const text = await page.textContent('#error');
    assert.match(text, name === 'corrupt' ? /damaged/ : /incomplete/);
    assert.equal(await page.getAttribute('#status', 'data-state'), 'error');
    assert.ok(await page.isHidden('#results'));
    await shot(page, `05-${name}`);
    // The page is still usable: a good archive opens afterwards.
    await page.click('button.demo[data-url="/demo/silero_vad_16k.brv"]');
    await page.waitForFunction(() => window.brevisDemo.decode?.state === 'done', null, { timeout: 60_000 });
    await page.close();
  });
}

test('inference: the decoded model gives the same output as the uncompressed one, bit for bit', async () => {
  const page = await newPage();
  await page.goto(`${base}/`);
  await page.fill('#sentence', 'Compressed weights, identical answers.');
  await page.click('#run-infer');
  await waitState(page, 'infer', 180_000);
  const r = await page.evaluate(() => window.brevisDemo.infer);
  assert.equal(r.state, 'done', r.message);
  assert.equal(r.modelSame, true);
  assert.equal(r.identical, true);
  assert.ok(r.tokens > 3);
  assert.equal(r.compressed.length, 384);
  assert.deepEqual(r.compressed, r.plain);
  assert.ok(r.normPlain > 0);
  assert.equal(await page.getAttribute('#infer-verdict', 'data-state'), 'ok');
  await page.locator('#infer-card').scrollIntoViewIfNeeded();
  await page.locator('#infer-card').screenshot({ path: join(ARTIFACTS, '06-inference.png') });

  // transformers.js, its pipeline fed out of the archive by BrevisModelCache.
  await page.click('#run-tjs');
  await waitState(page, 'tjs', 180_000);
  const t = await page.evaluate(() => window.brevisDemo.tjs);
  assert.equal(t.state, 'done', t.message);
  assert.equal(t.identical, true);
  assert.ok(t.served.includes('onnx/model_quantized.onnx'), `served: ${t.served}`);
  assert.ok(t.served.includes('tokenizer.json'), `served: ${t.served}`);
  assert.deepEqual(t.compressed, t.plain);
  await page.locator('#infer-card').screenshot({ path: join(ARTIFACTS, '07-transformers.png') });
  await page.close();
});

test('the Service Worker serves /edge/model.onnx from model.onnx.brv, byte-identical, with content-length', async () => {
  const page = await newPage();
  await page.goto(`${base}/`);
  await page.click('#run-edge');
  await waitState(page, 'edge', 180_000);
  const e = await page.evaluate(() => window.brevisDemo.edge);
  assert.equal(e.state, 'done', e.message);
  assert.equal(e.servedBy, 'brevis-sw');
  const model = readFileSync(MODEL);
  assert.equal(e.contentLength, model.length);
  assert.equal(e.size, model.length);
  assert.equal(e.sha256, sha256(model));
  assert.equal(e.ortIdentical, true);
  assert.ok(e.archiveBytes > 0 && e.archiveBytes < model.length);
  // And a plain fetch from the page, bytes compared here.
  const bytes = await page.evaluate(async () => {
    const res = await fetch('/edge/model.onnx');
    return { servedBy: res.headers.get('x-served-by'), b64: btoa(Array.from(new Uint8Array(await res.arrayBuffer()), (c) => String.fromCharCode(c)).join('')) };
  });
  assert.equal(bytes.servedBy, 'brevis-sw');
  assert.ok(Buffer.from(bytes.b64, 'base64').equals(model), 'byte-identical');
  await page.locator('#edge-card').scrollIntoViewIfNeeded();
  await page.locator('#edge-card').screenshot({ path: join(ARTIFACTS, '08-service-worker.png') });
  await page.close();
});
