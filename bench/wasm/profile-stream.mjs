// Where the npm package's stream spends its time on one archive: decodes it
// through `BrevisDecompressionStream` (fed 64 KiB pieces, as bench/wasm/run.sh
// does) under V8's sampling profiler, then prints the mean time per decode and
// the functions with the most self time.
//
//   node bench/wasm/profile-stream.mjs ARCHIVE.brv [ROUNDS]   (default 10 rounds)
//
// Run it from bench/wasm after run.sh (or `npm install` of the packed tarball)
// has installed brevis-decoder there. The package's module has no name section
// (wasm-opt drops it), so its functions show as `wasm-function[N]`; for their
// names, build with `BREVIS_NPM_OPT=0 scripts/build-npm.sh` (no wasm-opt: about
// as fast, over the size budget) and copy npm/brevis-decoder into a
// node_modules folder beside a copy of this script.
import { readFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

import { BrevisDecompressionStream, init } from 'brevis-decoder';

import { piecesOf } from './pieces.mjs';

const [path, rounds = '10'] = process.argv.slice(2);
if (!path) {
  console.error('usage: node profile-stream.mjs ARCHIVE.brv [ROUNDS]');
  process.exit(2);
}
await init();
const bytes = readFileSync(path);

// Decodes the archive once; returns the bytes it rebuilt.
async function decodeOnce() {
  let n = 0;
  for await (const piece of piecesOf(bytes).pipeThrough(new BrevisDecompressionStream())) n += piece.length;
  return n;
}

for (let i = 0; i < 3; i++) await decodeOnce(); // warm-up: compile tiers, heap size
const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.start');
const t = performance.now();
let total = 0;
for (let i = 0; i < Number(rounds); i++) total += await decodeOnce();
const ms = (performance.now() - t) / Number(rounds);
const { profile } = await session.post('Profiler.stop');

// Self time per function: each sample's time goes to the node it hit.
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map();
profile.samples.forEach((id, i) => {
  const f = byId.get(id).callFrame;
  const key = `${f.functionName || '(anonymous)'} ${f.url.split('/').pop()}`;
  self.set(key, (self.get(key) ?? 0) + profile.timeDeltas[i]);
});
const sum = [...self.values()].reduce((a, b) => a + b, 0);
console.log(`${path}: ${ms.toFixed(1)} ms a decode, ${(total / Number(rounds) / 1e3 / ms).toFixed(0)} MB/s`);
for (const [key, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 15)) {
  console.log(`${((100 * us) / sum).toFixed(1).padStart(5)}%  ${key}`);
}
