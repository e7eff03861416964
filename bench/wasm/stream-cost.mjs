// Where the npm package's stream spends the time that `verifyArchive` does not:
// the same archive decoded five ways in one process, each adding one cost to the
// one before, so that the differences between them are those costs.
//
//   node bench/wasm/stream-cost.mjs [--repeat N] ARCHIVE.brv...
//
// Runs from the repository's package sources after scripts/build-npm.sh (as
// stream-vs-raw.mjs does). Every way is fed the archive in 64 KiB pieces, as
// bench/wasm/run.sh feeds the stream:
//
//   events       the wasm decoder's events pulled one by one (`StreamHandle`),
//                no decoded byte leaving wasm memory: verifyArchive's work
//   + copy       each decoded chunk also copied out into one array, reused
//   + new arrays each chunk copied into an array of its own (`take_data`), as
//                the stream hands its reader: the copy's destination is
//                memory not yet in any cache, so every byte goes to RAM
//   + JS events  the package's decoder (`BrevisDecoder`, pieces mode) around
//                the same calls: its event objects and bookkeeping
//   stream       `BrevisDecompressionStream` through `pipeThrough`, read with
//                `for await`: the web streams' own work on top
//
// For archives whose file digests are XXH3-128 or BLAKE3 (`--fast-decode`
// archives are XXH3-128): with SHA-256 the package hashes on the host, which
// the first three ways would not. Prints, per archive, the best and median
// times over N rounds (the ways interleaved in each round, after a warm-up) and
// each step's cost: the difference of the bests, and of the medians.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';

import { BrevisDecoder, BrevisDecompressionStream, init } from '../../npm/brevis-decoder/src/node.js';
import { StreamHandle } from '../../npm/brevis-decoder/wasm/brevis_decoder.js';
import { pieces, piecesOf } from './pieces.mjs';

const { values, positionals } = parseArgs({ options: { repeat: { type: 'string', default: '15' } }, allowPositionals: true });
const REPEAT = Number(values.repeat);
// The wasm decoder's event codes (`StreamHandle::next_event`).
const NEED_INPUT = 0;
const FILE_START = 1;
const DATA = 3;
await init();

// Feeds `archive` to a fresh wasm decoder in 64 KiB pieces; calls `onData(h)`
// at each data event. Returns the bytes decoded.
function pullEvents(archive, onData) {
  const h = new StreamHandle(Infinity, -1);
  let out = 0;
  try {
    for (const piece of pieces(archive)) {
      h.push(piece);
      for (let code = h.next_event(); code !== NEED_INPUT; code = h.next_event()) {
        if (code === FILE_START && h.digestAlgorithm() === 'sha256') {
          throw new Error('a SHA-256 archive: this script measures XXH3-128 and BLAKE3 ones (see its header)');
        }
        if (code === DATA) out += onData(h);
      }
    }
    h.finish();
  } finally {
    h.free();
  }
  return out;
}

function ways(archive) {
  const scratch = new Uint8Array(16 << 20);
  return {
    events: () => pullEvents(archive, (h) => h.size()),
    '+ copy': () =>
      pullEvents(archive, (h) => {
        h.copy_data_to(scratch, 0);
        return h.size();
      }),
    '+ new arrays': () => pullEvents(archive, (h) => h.take_data().length),
    '+ JS events': () => {
      const d = new BrevisDecoder({ pieces: true });
      let out = 0;
      try {
        for (const piece of pieces(archive)) {
          d.pushTo(piece, (e) => {
            if (e.type === 'data') out += e.bytes.length;
          });
        }
        d.end();
      } finally {
        d.free();
      }
      return out;
    },
    stream: async () => {
      let out = 0;
      for await (const piece of piecesOf(archive).pipeThrough(new BrevisDecompressionStream())) out += piece.length;
      return out;
    },
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

console.log('| archive | way | MB out | best ms | median ms | best MB/s | its cost, ms: best over best before | median over median before |');
console.log('|---|---|---:|---:|---:|---:|---:|---:|');
for (const path of positionals) {
  const archive = new Uint8Array(readFileSync(path));
  const fns = Object.entries(ways(archive));
  const times = fns.map(() => []);
  let size = null;
  for (let round = 0; round <= REPEAT; round++) {
    for (const [k, [name, fn]] of fns.entries()) {
      const t0 = performance.now();
      const n = await fn();
      const ms = performance.now() - t0;
      size ??= n;
      if (n !== size) throw new Error(`${path}: ${name} gave ${n} bytes, ${fns[0][0]} ${size}`);
      if (round > 0) times[k].push(ms);
    }
  }
  let before = null;
  for (const [k, [name]] of fns.entries()) {
    const now = { best: Math.min(...times[k]), median: median(times[k]) };
    const cost = (key) => (before === null ? '' : (now[key] - before[key]).toFixed(2));
    console.log(
      `| ${basename(path)} | ${name} | ${(size / 1e6).toFixed(1)} | ${now.best.toFixed(2)} | ${now.median.toFixed(2)} | ${(size / 1e3 / now.best).toFixed(0)} | ${cost('best')} | ${cost('median')} |`,
    );
    before = now;
  }
}
