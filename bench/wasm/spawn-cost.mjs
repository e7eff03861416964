// Why decode.mjs times native processes with timer.py rather than Node's
// spawnSync: the wall time of one command (default /bin/true), best of 15,
// started by spawnSync from this process holding little memory, by spawnSync
// holding 300 MiB of arrays (as decode.mjs holds archives, outputs and wasm
// memory), and by timer.py.
//
//   node bench/wasm/spawn-cost.mjs [CMD ARG...]
import { spawnSync } from 'node:child_process';

import { startTimer } from './timer.mjs';

const argv = process.argv.length > 2 ? process.argv.slice(2) : ['/bin/true'];
const ROUNDS = 15;

const timer = startTimer();

function bySpawnSync() {
  let best = Infinity;
  for (let i = 0; i < ROUNDS; i++) {
    const t0 = performance.now();
    const r = spawnSync(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
    if (r.status !== 0) throw new Error(`${argv.join(' ')} failed: ${r.stderr}`);
    best = Math.min(best, performance.now() - t0);
  }
  return best;
}

async function byTimer() {
  let best = Infinity;
  for (let i = 0; i < ROUNDS; i++) {
    best = Math.min(best, (await timer.time(argv)) * 1000);
  }
  return best;
}

const small = bySpawnSync();
const held = [];
for (let i = 0; i < 300; i++) held.push(new Uint8Array(1 << 20).fill(1));
const large = bySpawnSync();
const python = await byTimer();
timer.close();
console.log(`${argv.join(' ')}, best of ${ROUNDS} (ms):`);
console.log(`  spawnSync, little memory held: ${small.toFixed(2)}`);
console.log(`  spawnSync, 300 MiB held:       ${large.toFixed(2)} (${held.length} arrays)`);
console.log(`  timer.py:                      ${python.toFixed(2)}`);
