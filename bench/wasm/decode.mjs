// Decode throughput, one run, same files, single thread unless stated:
// brevis-decoder (wasm, in Node) through its raw call (raw.mjs) and through its
// stream API, against native brevis, native zstd -3 / -19 and the npm zstd wasm
// decoder (zstddec) on the zstd -19 file. Run by bench/wasm/run.sh.
//
//   node decode.mjs --brevis BIN --work DIR [--repeat N] FILE...
//
// Throughput is original bytes / best wall time of N rounds after one warm-up
// round, every measure of a file running once in each round, each after a full
// garbage collection (MB = 10^6 bytes).
// Native figures are whole processes (start, read, decode, checks; output to
// /dev/null or verified in memory), timed by timer.py (not by Node, whose fork
// costs more the more memory it holds); wasm figures are the decode calls
// alone, on bytes already in memory.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';

import { BrevisDecompressionStream, decodeArchive, init, verifyArchive } from 'brevis-decoder';
import * as wasm from 'brevis-decoder/wasm';
import { ZSTDDecoder } from 'zstddec';

import { piecesOf } from './pieces.mjs';
import { decodeRaw } from './raw.mjs';
import { startTimer } from './timer.mjs';

const { values: opts, positionals: files } = parseArgs({
  options: {
    brevis: { type: 'string' },
    work: { type: 'string' },
    repeat: { type: 'string', default: '3' },
  },
  allowPositionals: true,
});
const REPEAT = Number(opts.repeat);

// Best time of each measure over REPEAT rounds, after one untimed round; in
// each round every measure runs once, in turn.
async function bestOfRounds(measures) {
  const secs = Object.fromEntries(Object.keys(measures).map((k) => [k, Infinity]));
  for (let round = 0; round <= REPEAT; round++) {
    for (const [k, fn] of Object.entries(measures)) {
      // Every measure starts from a collected heap: the garbage of the one
      // before it (a model's worth of output arrays) is not collected on its
      // clock. Needs node --expose-gc (run.sh passes it).
      globalThis.gc?.();
      const t0 = performance.now();
      const timedElsewhere = await fn();
      const t = timedElsewhere?.secs ?? (performance.now() - t0) / 1000;
      if (round > 0) secs[k] = Math.min(secs[k], t);
    }
  }
  return secs;
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr}`);
}

// The clock of native processes (see timer.py), started while this process
// holds little memory.
const timer = startTimer();

// Runs `cmd args` once (output to /dev/null, or with `drain` to a pipe that
// timer.py empties) and returns `{ secs }`, its wall time as timer.py measured
// it; throws if it failed.
async function timed(cmd, args, drain = false) {
  return { secs: await timer.time([cmd, ...args], { drain }) };
}

// Decodes `archive` through `BrevisDecompressionStream`, fed 64 KiB pieces,
// counting the output; throws unless it is `size` bytes.
async function streamedBytes(archive, what, size) {
  let n = 0;
  for await (const piece of piecesOf(archive).pipeThrough(new BrevisDecompressionStream())) n += piece.length;
  if (n !== size) throw new Error(`${what} gave ${n} bytes, expected ${size}`);
}

// Checks `archive` with `verifyArchive`, fed 64 KiB pieces; throws unless its
// one file is `size` bytes.
async function verifiedBytes(archive, what, size) {
  const files = await verifyArchive(piecesOf(archive));
  if (files.length !== 1 || files[0].size !== size) throw new Error(`${what} gave ${JSON.stringify(files)}, expected ${size} bytes`);
}

function ensure(path, make) {
  if (!existsSync(path)) make();
  return path;
}

await init();
const zstd = new ZSTDDecoder();
await zstd.init();

const rows = [];
for (const file of files) {
  const name = basename(file);
  const size = statSync(file).size;
  // Archives are made by this binary on every run (a cached one could be an older build's).
  const brv = join(opts.work, `${name}.brv`);
  run(opts.brevis, ['compress', '-q', '-f', '-o', brv, file]);
  const fast = join(opts.work, `${name}.fast.brv`);
  run(opts.brevis, ['compress', '-q', '-f', '--fast-decode', '-o', fast, file]);
  const z19 = ensure(join(opts.work, `${name}.19.zst`), () => run('zstd', ['-19', '-T1', '-q', '-o', join(opts.work, `${name}.19.zst`), file]));
  const z3 = ensure(join(opts.work, `${name}.3.zst`), () => run('zstd', ['-3', '-T1', '-q', '-o', join(opts.work, `${name}.3.zst`), file]));
  const brvBytes = new Uint8Array(readFileSync(brv));
  const z19Bytes = new Uint8Array(readFileSync(z19));

  const fastBytes = new Uint8Array(readFileSync(fast));
  const row = { file: name, size, brv: brvBytes.length, fast: fastBytes.length, zstd19: z19Bytes.length, secs: {} };
  // Every measure of the file takes its turn in each round (best of REPEAT
  // rounds after one warm-up round: wasm tiers up, memory grows), so a slow
  // spell of the shared machine hits them all rather than one tool's column.
  const measures = {
    native1: () => timed(opts.brevis, ['--threads', '1', 'verify', '-q', brv]),
    native2: () => timed(opts.brevis, ['--threads', '2', 'verify', '-q', brv]),
    zstd3: () => timed('zstd', ['-d', '-T1', '-q', '-c', z3]),
    zstd19: () => timed('zstd', ['-d', '-T1', '-q', '-c', z19]),
    wasmRaw: () => {
      const n = decodeRaw(wasm, brvBytes);
      if (n !== size) throw new Error(`${name}: raw wasm decode gave ${n} bytes, expected ${size}`);
    },
    // The `compress --fast-decode` archive: native and the raw wasm call.
    fastNative1: () => timed(opts.brevis, ['--threads', '1', 'verify', '-q', fast]),
    // The native twin of the stream: every file's bytes handed on, to a pipe
    // that another process empties.
    fastNative1Pipe: () => timed(opts.brevis, ['--threads', '1', 'decompress', '-c', '-q', fast], true),
    fastWasmRaw: () => {
      const n = decodeRaw(wasm, fastBytes);
      if (n !== size) throw new Error(`${name}: raw wasm decode of the fast archive gave ${n} bytes`);
    },
    wasmStream: () => streamedBytes(brvBytes, `${name}: stream`, size),
    // The job native `verify` does, and no more: every chunk decoded and every
    // digest checked, no decoded byte handed out (but SHA-256 files' bytes, to
    // node:crypto through one reused buffer, as native `verify` hashes them
    // with the CPU's SHA instructions).
    wasmVerify: () => verifiedBytes(brvBytes, `${name}: verifyArchive`, size),
    fastWasmVerify: () => verifiedBytes(fastBytes, `${name}: verifyArchive of the fast archive`, size),
    // The same, and every decoded chunk copied out of wasm memory into a new
    // array for the stream's reader. The raw call instead fills one new array
    // the size of each file (in wasm memory, then copied out), and the first
    // touch of that memory (4 KiB page faults) is a good part of its time on
    // the fast archives.
    fastWasmStream: () => streamedBytes(fastBytes, `${name}: stream of the fast archive`, size),
    fastWasmDecodeArchive: async () => {
      const out = await decodeArchive(fastBytes);
      if (out[0].size !== size) throw new Error(`${name}: decodeArchive size of the fast archive`);
    },
    wasmDecodeArchive: async () => {
      const out = await decodeArchive(brvBytes);
      if (out[0].size !== size) throw new Error(`${name}: decodeArchive size`);
    },
    zstddec: () => {
      const out = zstd.decode(z19Bytes, size);
      if (out.length !== size) throw new Error(`${name}: zstddec size`);
    },
  };
  row.secs = await bestOfRounds(measures);
  rows.push(row);
  console.error(`[bench-wasm] ${name}: ${JSON.stringify(row.secs)}`);
}
timer.close();

const mbps = (row, k) => row.size / row.secs[k] / 1e6;
const cols = [
  ['native1', 'brevis native 1T'],
  ['native2', 'brevis native 2T'],
  ['zstd3', 'zstd -3 -d'],
  ['zstd19', 'zstd -19 -d'],
  ['wasmRaw', 'brevis wasm raw'],
  ['wasmVerify', 'brevis wasm verify'],
  ['wasmStream', 'brevis wasm stream'],
  ['wasmDecodeArchive', 'brevis wasm decodeArchive'],
  ['zstddec', 'zstddec (wasm) on zstd -19'],
];
const lines = [];
lines.push(`| file | MB | ${cols.map((c) => c[1]).join(' | ')} | stream / raw | wasm raw / native 1T | wasm verify / native 1T | wasm stream / native 1T | wasm stream / zstddec |`);
lines.push(`|${'---|'.repeat(cols.length + 7)}`);
for (const r of rows) {
  lines.push(`| ${r.file} | ${(r.size / 1e6).toFixed(1)} | ${cols.map(([k]) => mbps(r, k).toFixed(0)).join(' | ')} | ${(mbps(r, 'wasmStream') / mbps(r, 'wasmRaw')).toFixed(2)} | ${(mbps(r, 'wasmRaw') / mbps(r, 'native1')).toFixed(2)} | ${(mbps(r, 'wasmVerify') / mbps(r, 'native1')).toFixed(2)} | ${(mbps(r, 'wasmStream') / mbps(r, 'native1')).toFixed(2)} | ${(mbps(r, 'wasmStream') / mbps(r, 'zstddec')).toFixed(2)} |`);
}
const node = process.version;
const head = execFileSync(process.execPath, ['-e', 'console.log(require("os").cpus()[0].model)']).toString().trim();
console.log(`Decode throughput, MB/s of original bytes (best of ${REPEAT}), Node ${node}, ${head}.\n`);
console.log(lines.join('\n'));
const fastLines = [
  '',
  'The same files compressed with `brevis compress --fast-decode` (no context-coded literals, XXH3-128 file digests):',
  '',
  '| file | default archive B | fast archive B | size | fast native 1T | fast native 1T to a pipe | fast wasm raw | fast wasm verify | fast wasm stream | fast wasm decodeArchive | fast wasm raw / native 1T | fast wasm verify / native 1T | fast wasm stream / native 1T | fast wasm stream / native 1T to a pipe | fast wasm raw / default wasm raw | fast wasm raw / zstddec | fast wasm stream / zstddec |',
  '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
];
for (const r of rows) {
  const delta = ((r.fast / r.brv - 1) * 100).toFixed(2);
  fastLines.push(`| ${r.file} | ${r.brv} | ${r.fast} | ${delta.startsWith('-') ? '' : '+'}${delta}% | ${mbps(r, 'fastNative1').toFixed(0)} | ${mbps(r, 'fastNative1Pipe').toFixed(0)} | ${mbps(r, 'fastWasmRaw').toFixed(0)} | ${mbps(r, 'fastWasmVerify').toFixed(0)} | ${mbps(r, 'fastWasmStream').toFixed(0)} | ${mbps(r, 'fastWasmDecodeArchive').toFixed(0)} | ${(mbps(r, 'fastWasmRaw') / mbps(r, 'fastNative1')).toFixed(2)} | ${(mbps(r, 'fastWasmVerify') / mbps(r, 'fastNative1')).toFixed(2)} | ${(mbps(r, 'fastWasmStream') / mbps(r, 'fastNative1')).toFixed(2)} | ${(mbps(r, 'fastWasmStream') / mbps(r, 'fastNative1Pipe')).toFixed(2)} | ${(mbps(r, 'fastWasmRaw') / mbps(r, 'wasmRaw')).toFixed(2)} | ${(mbps(r, 'fastWasmRaw') / mbps(r, 'zstddec')).toFixed(2)} | ${(mbps(r, 'fastWasmStream') / mbps(r, 'zstddec')).toFixed(2)} |`);
}
console.log(fastLines.join('\n'));
console.log(`\n\`\`\`json\n${JSON.stringify(rows)}\n\`\`\``);
