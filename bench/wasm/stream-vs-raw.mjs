// The npm package's stream API against its raw wasm call, on the same
// archives, in one process (no other dependency: runs from the repository's
// package sources after scripts/build-npm.sh, e.g. on a machine without npm).
//
//   node bench/wasm/stream-vs-raw.mjs [--repeat N] ARCHIVE.brv...
//
// Prints, per archive, MB/s of decoded output (best of N after a warm-up,
// the measures interleaved) for
// the raw wasm call (raw.mjs), `BrevisDecompressionStream` fed 64 KiB pieces,
// and `decodeArchive`, and the ratio stream / raw (issue 5's target: >= 0.85).
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';

import { BrevisDecompressionStream, decodeArchive, init } from '../../npm/brevis-decoder/src/node.js';
import * as wasm from '../../npm/brevis-decoder/wasm/brevis_decoder.js';
import { piecesOf } from './pieces.mjs';
import { decodeRaw } from './raw.mjs';

const { values, positionals } = parseArgs({ options: { repeat: { type: 'string', default: '5' } }, allowPositionals: true });
const REPEAT = Number(values.repeat);
await init();

// The three measures alternate within each repetition, so that a machine
// whose load drifts (this one is shared) biases none of them.
async function interleaved(fns) {
  for (const fn of fns) await fn();
  const bestTimes = fns.map(() => Infinity);
  for (let i = 0; i < REPEAT; i++) {
    for (const [k, fn] of fns.entries()) {
      const t0 = performance.now();
      await fn();
      bestTimes[k] = Math.min(bestTimes[k], performance.now() - t0);
    }
  }
  return bestTimes.map((t) => t / 1000);
}

console.log('| archive | MB out | raw MB/s | stream MB/s | decodeArchive MB/s | stream / raw |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const path of positionals) {
  const brv = new Uint8Array(readFileSync(path));
  let size = 0;
  const raw = () => {
    size = decodeRaw(wasm, brv);
  };
  const stream = async () => {
    let n = 0;
    for await (const piece of piecesOf(brv).pipeThrough(new BrevisDecompressionStream())) n += piece.length;
    if (n !== size) throw new Error(`${path}: stream gave ${n} bytes, raw ${size}`);
  };
  const whole = async () => {
    const files = await decodeArchive(brv);
    if (files.reduce((n, f) => n + f.size, 0) !== size) throw new Error(`${path}: decodeArchive size`);
  };
  const [tRaw, tStream, tWhole] = await interleaved([raw, stream, whole]);
  const mb = (s) => (size / s / 1e6).toFixed(0);
  console.log(`| ${basename(path)} | ${(size / 1e6).toFixed(1)} | ${mb(tRaw)} | ${mb(tStream)} | ${mb(tWhole)} | ${(tRaw / tStream).toFixed(2)} |`);
}
