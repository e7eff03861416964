// Decode throughput of two builds of the npm package on the same archives, in
// one Node process, alternating A and B each round (best of --rounds): the
// raw wasm call (raw.mjs), `decodeArchive`, `verifyArchive` (when both builds
// have it: since c4879ac), and each build's wasm memory
// after the archive's rounds (wasm memory never shrinks: the peak so far, over
// this archive and the ones before it). See bench/wasm/ab.sh.
//
//   node ab.mjs --a DIR --b DIR [--rounds N] ARCHIVE...
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';

import { decodeRaw } from './raw.mjs';

const { values: opts, positionals: archives } = parseArgs({
  options: { a: { type: 'string' }, b: { type: 'string' }, rounds: { type: 'string', default: '7' } },
  allowPositionals: true,
});
const builds = [];
for (const [label, dir] of [['A', opts.a], ['B', opts.b]]) {
  const core = await import(`${dir}/src/node.js`);
  const wasm = await import(`${dir}/wasm/brevis_decoder.js`);
  await core.init();
  builds.push({ label, wasm, decodeArchive: core.decodeArchive, verifyArchive: core.verifyArchive, memory: core.wasmMemoryBytes });
}
const verify = builds.every((b) => b.verifyArchive);
const mbps = (bytes, ms) => (bytes / ms / 1000).toFixed(0);
const verifyHead = verify ? ' A verifyArchive | B verifyArchive | B / A |' : '';
console.log(`| archive | A raw | B raw | B / A | A decodeArchive | B decodeArchive | B / A |${verifyHead} A wasm MB | B wasm MB |`);
console.log(`|---|---:|---:|---:|---:|---:|---:|${verify ? '---:|---:|---:|' : ''}---:|---:|`);
for (const archive of archives) {
  const bytes = new Uint8Array(readFileSync(archive));
  const best = builds.map(() => ({ raw: Infinity, whole: Infinity, verify: Infinity }));
  let out = 0;
  for (let round = 0; round <= Number(opts.rounds); round++) {
    for (const [i, b] of builds.entries()) {
      // Each call starts from a collected heap (node --expose-gc; ab.sh passes
      // it), so neither pays for the other's garbage.
      globalThis.gc?.();
      let t = performance.now();
      out = decodeRaw(b.wasm, bytes);
      const raw = performance.now() - t;
      globalThis.gc?.();
      t = performance.now();
      await b.decodeArchive(bytes);
      const whole = performance.now() - t;
      let checked = Infinity;
      if (verify) {
        globalThis.gc?.();
        t = performance.now();
        await b.verifyArchive(bytes);
        checked = performance.now() - t;
      }
      // Round 0 warms up (wasm tiers up, memory grows).
      if (round > 0) {
        best[i].raw = Math.min(best[i].raw, raw);
        best[i].whole = Math.min(best[i].whole, whole);
        best[i].verify = Math.min(best[i].verify, checked);
      }
    }
  }
  const [a, b] = best;
  const [memA, memB] = builds.map((b) => (b.memory() / 1e6).toFixed(0));
  const verifyCols = verify ? ` ${mbps(out, a.verify)} | ${mbps(out, b.verify)} | ${(a.verify / b.verify).toFixed(2)} |` : '';
  console.log(`| ${basename(archive)} | ${mbps(out, a.raw)} | ${mbps(out, b.raw)} | ${(a.raw / b.raw).toFixed(2)} | ${mbps(out, a.whole)} | ${mbps(out, b.whole)} | ${(a.whole / b.whole).toFixed(2)} |${verifyCols} ${memA} | ${memB} |`);
}
