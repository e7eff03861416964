// The package's JavaScript API on archives the `brevis` CLI made of real
// model files: every API rebuilds the same SHA-256, whatever the piece sizes;
// damaged, truncated and over-cap archives fail cleanly with a BrevisError.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { test } from 'node:test';

import {
  BrevisArchive,
  BrevisDecoder,
  BrevisDecompressionStream,
  BrevisError,
  decodeArchive,
  init,
  readTensors,
  setHostSha256,
  verifyArchive,
  wasmMemoryBytes,
} from 'brevis-decoder';

import { FX, collect, fixture, pieces, safetensors, sha256, treeHashes } from './helpers.mjs';

const SILERO = 'silero_vad_16k.safetensors';
const EXPECTED = {
  'silero.brv': { [SILERO]: sha256(fixture(SILERO)) },
  'minilm-int8.brv': { 'model_quantized.onnx': sha256(fixture('models/Xenova/all-MiniLM-L6-v2/onnx/model_quantized.onnx')) },
  'minilm-folder.brv': treeHashes(join(FX, 'models/Xenova/all-MiniLM-L6-v2')),
  'multi.brv': treeHashes(join(FX, 'multi')),
};

function hashesOf(files) {
  return Object.fromEntries(files.map((f) => [f.path, sha256(f.bytes)]));
}

function assertBrevisError(e, codes) {
  assert.ok(e instanceof BrevisError, `expected a BrevisError, got ${e?.stack ?? e}`);
  assert.ok(codes.includes(e.code), `code ${e.code} not in ${codes}: ${e.message}`);
  assert.ok(e.message.length > 10);
  return true;
}

test('decodeArchive rebuilds every file of every fixture, SHA-256 verified', async () => {
  for (const [name, expected] of Object.entries(EXPECTED)) {
    const files = await decodeArchive(fixture(name));
    assert.deepEqual(hashesOf(files), expected, name);
    for (const f of files) {
      assert.equal(f.sha256, expected[f.path]);
      assert.equal(f.size, f.bytes.length);
    }
  }
});

test('verifyArchive checks every file of every fixture and reports what decodeArchive does, without the bytes', async () => {
  for (const name of [...Object.keys(EXPECTED), 'silero-fast.brv', 'multi-blake3.brv', 'multi-xxh3.brv']) {
    const decoded = await decodeArchive(fixture(name));
    const want = decoded.map(({ bytes, ...rest }) => rest);
    assert.deepEqual(await verifyArchive(fixture(name)), want, name);
    assert.deepEqual(await verifyArchive(pieces(fixture(name), 4093)), want, `${name} in pieces`);
  }
  const [file] = await verifyArchive(new Blob([fixture('silero.brv')]));
  assert.equal(file.sha256, EXPECTED['silero.brv'][SILERO]);
  assert.equal(file.size, fixture(SILERO).length);
});

test('decodeArchive takes a stream, a Response, a Blob and an ArrayBuffer', async () => {
  const brv = fixture('multi.brv');
  const expected = EXPECTED['multi.brv'];
  assert.deepEqual(hashesOf(await decodeArchive(pieces(brv, 4093))), expected);
  assert.deepEqual(hashesOf(await decodeArchive(new Response(brv))), expected);
  assert.deepEqual(hashesOf(await decodeArchive(new Blob([brv]))), expected);
  assert.deepEqual(hashesOf(await decodeArchive(brv.slice().buffer)), expected);
});

test('BrevisDecompressionStream rebuilds the file with pieces of 1 byte, odd sizes and whole', async () => {
  const brv = fixture('silero.brv');
  const want = EXPECTED['silero.brv'][SILERO];
  // 1-byte pieces over the whole archive (~0.9 MB): every record boundary case.
  for (const size of [1, 7, 4093, 65537, brv.length]) {
    const out = await collect(pieces(brv, size).pipeThrough(new BrevisDecompressionStream()));
    assert.equal(sha256(out), want, `pieces of ${size}`);
  }
});

test('BrevisDecompressionStream picks one file of several with { path }, and refuses to guess', async () => {
  const brv = fixture('multi.brv');
  const out = await collect(pieces(brv, 65536).pipeThrough(new BrevisDecompressionStream({ path: 'weights.safetensors' })));
  assert.equal(sha256(out), EXPECTED['multi.brv']['weights.safetensors']);
  await assert.rejects(collect(pieces(brv, 65536).pipeThrough(new BrevisDecompressionStream())), (e) =>
    assertBrevisError(e, ['usage']) && /more than one file/.test(e.message));
  await assert.rejects(collect(pieces(brv, 65536).pipeThrough(new BrevisDecompressionStream({ path: 'nope' }))), (e) =>
    assertBrevisError(e, ['usage']) && /no file `nope`/.test(e.message));
});

test('the push API yields segments that rebuild the files, fed 1 byte at a time', async () => {
  await init();
  const brv = fixture('multi.brv');
  const dec = new BrevisDecoder();
  const events = [];
  for (let i = 0; i < brv.length; i++) events.push(...dec.push(brv.subarray(i, i + 1)));
  dec.end();
  assert.equal(events.at(-1).type, 'end');
  const files = {};
  let open = null;
  for (const e of events) {
    if (e.type === 'fileStart') open = { path: e.path, parts: [] };
    if (e.type === 'segment') open.parts.push(e.bytes);
    if (e.type === 'fileEnd') {
      const bytes = await collect(ReadableStream.from(open.parts));
      files[e.path] = sha256(bytes);
      assert.equal(e.sha256, files[e.path]);
    }
  }
  assert.deepEqual(files, EXPECTED['multi.brv']);
  assert.equal(dec.filesDone, Object.keys(files).length);
  assert.equal(dec.tensorsDone, safetensors(fixture(SILERO)).length);
  assert.equal(dec.bytesIn, brv.length);
});

test('the push API in pieces mode gives offsets that tile each segment', async () => {
  const dec = await BrevisDecoder.create({ pieces: true });
  const events = dec.push(fixture('minilm-int8.brv'));
  dec.end();
  let expectOffset = 0;
  let seen = 0;
  for (const e of events) {
    if (e.type === 'segmentStart') expectOffset = 0;
    if (e.type === 'data') {
      assert.equal(e.offset, expectOffset);
      expectOffset += e.bytes.length;
      seen += e.bytes.length;
    }
  }
  assert.equal(seen, fixture('models/Xenova/all-MiniLM-L6-v2/onnx/model_quantized.onnx').length);
});

test('readTensors yields each tensor with its dtype, shape and typed array, equal to the original', async () => {
  const original = safetensors(fixture(SILERO));
  const seen = [];
  let progress = null;
  for await (const t of readTensors(pieces(fixture('silero.brv'), 8191), { onProgress: (p) => (progress = p) })) {
    seen.push(t);
  }
  assert.equal(seen.length, original.length);
  for (const [t, o] of seen.map((t, i) => [t, original[i]])) {
    assert.equal(t.name, o.name);
    assert.equal(t.dtype, o.dtype);
    assert.deepEqual(t.shape, o.shape);
    assert.equal(t.file, SILERO);
    assert.ok(t.data instanceof Float32Array, `${t.name} is ${t.data.constructor.name}`);
    assert.equal(t.data.length, o.shape.reduce((a, b) => a * b, 1));
    assert.equal(sha256(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)), sha256(o.bytes));
  }
  assert.equal(progress.tensorsDone, original.length);
  assert.equal(progress.filesDone, 1);
  assert.equal(progress.bytesOut, fixture(SILERO).length);
});

test('breaking out of readTensors early cancels the source (stops the download)', async () => {
  const brv = fixture('silero.brv');
  let at = 0;
  let cancelled = false;
  const source = new ReadableStream({
    pull(c) {
      if (at >= brv.length) return c.close();
      c.enqueue(brv.slice(at, at + 4096));
      at += 4096;
    },
    cancel() {
      cancelled = true;
    },
  }, { highWaterMark: 0 });
  for await (const t of readTensors(source)) {
    assert.equal(typeof t.name, 'string');
    break;
  }
  assert.equal(cancelled, true);
  assert.ok(at < brv.length, 'the source was read to the end');
});

test('readTensors maps ONNX initializers to typed arrays (int8 weights, float32 scales)', async () => {
  const kinds = new Map();
  for await (const t of readTensors(fixture('minilm-int8.brv'))) {
    kinds.set(t.dtype, t.data.constructor.name);
    const elements = t.shape.reduce((a, b) => a * b, 1);
    assert.equal(t.data.length, elements, t.name);
  }
  assert.equal(kinds.get('I8'), 'Int8Array');
  assert.equal(kinds.get('F32'), 'Float32Array');
  assert.equal(kinds.get('I64'), 'BigInt64Array');
});

test('a --fast-decode archive (split Huffman literals of FP32 words) decodes through every API', async () => {
  const brv = fixture('silero-fast.brv');
  const expected = EXPECTED['silero.brv'];
  assert.deepEqual(hashesOf(await decodeArchive(brv)), expected);
  for (const size of [1, 4093, brv.length]) {
    const out = await collect(pieces(brv, size).pipeThrough(new BrevisDecompressionStream()));
    assert.equal(sha256(out), expected[SILERO], `pieces of ${size}`);
  }
  const archive = await BrevisArchive.open(brv);
  assert.equal(sha256(await archive.readFile(SILERO)), expected[SILERO]);
  const [file] = archive.files;
  const programs = file.segments.map((_, i) => archive.programText(SILERO, i));
  assert.ok(programs.some((p) => p.startsWith('Lit.hsplit<b32')), programs.join('\n'));
  archive.close();
});

for (const [name, algorithm, hexDigits] of [
  ['multi-blake3.brv', 'blake3', 64],
  ['multi-xxh3.brv', 'xxh3-128', 32],
]) {
  test(`an archive with ${algorithm} digests: every API checks them and says which hash it is`, async () => {
    const brv = fixture(name);
    const expected = EXPECTED['multi.brv'];
    const files = await decodeArchive(brv);
    assert.deepEqual(hashesOf(files), expected);
    const digests = {};
    for (const f of files) {
      assert.equal(f.digestAlgorithm, algorithm);
      assert.equal(f.sha256, null);
      assert.match(f.digest, new RegExp(`^[0-9a-f]{${hexDigits}}$`));
      digests[f.path] = f.digest;
    }
    const sha = await decodeArchive(fixture('multi.brv'));
    for (const f of sha) {
      assert.equal(f.digestAlgorithm, 'sha256');
      assert.equal(f.digest, f.sha256);
      assert.notEqual(f.digest, digests[f.path]);
    }
    const dec = new BrevisDecoder();
    const ends = dec.push(brv).filter((e) => e.type === 'fileEnd');
    dec.end();
    assert.deepEqual(Object.fromEntries(ends.map((e) => [e.path, e.digest])), digests);
    assert.ok(ends.every((e) => e.digestAlgorithm === algorithm && e.sha256 === null));
    const archive = await BrevisArchive.open(brv);
    for (const f of archive.files) {
      assert.equal(f.digest, digests[f.path]);
      assert.equal(f.digestAlgorithm, algorithm);
      const bytes = new Uint8Array(await archive.response(f.path).arrayBuffer());
      assert.equal(sha256(bytes), expected[f.path]);
    }
    archive.close();
    // The header has no checksum: under a SHA-256 header the same records fail their digest.
    const flipped = brv.slice();
    flipped[10] = 0;
    await assert.rejects(decodeArchive(flipped), (e) => assertBrevisError(e, ['corrupt']) && /SHA-256/.test(e.message));
  });
}

// Every way of decoding an archive in Node: decodeArchive, the stream (of the
// file at `path`), and BrevisDecoder with data events and with whole segments.
const DECODE_PATHS = {
  decodeArchive: (brv) => decodeArchive(brv),
  verifyArchive: (brv) => verifyArchive(brv),
  stream: (brv, path) => collect(pieces(brv, 65536).pipeThrough(new BrevisDecompressionStream({ path }))),
  pieces: async (brv) => {
    const dec = new BrevisDecoder({ pieces: true });
    dec.push(brv);
    dec.end();
  },
  segments: async (brv) => {
    const dec = new BrevisDecoder();
    dec.push(brv);
    dec.end();
  },
};

test('in Node, SHA-256 file digests are node:crypto\'s, checked on every path; without it, wasm checks them', async () => {
  const brv = fixture('multi.brv');
  const expected = EXPECTED['multi.brv'];
  const files = await decodeArchive(brv);
  const total = files.reduce((t, f) => t + f.size, 0);
  const biggest = files.reduce((a, f) => (f.size > a.size ? f : a));
  // A SHA-256 header over records that hold BLAKE3 digests: no file matches.
  const bad = fixture('multi-blake3.brv').slice();
  bad[10] = 0;
  const checkEveryPath = async (what) => {
    assert.deepEqual(hashesOf(await decodeArchive(brv)), expected, what);
    for (const [name, run] of Object.entries(DECODE_PATHS)) {
      await assert.doesNotReject(run(brv, biggest.path), `${what}, ${name}`);
      await assert.rejects(run(bad, biggest.path), (e) => assertBrevisError(e, ['corrupt']) && /SHA-256/.test(e.message), `${what}, ${name}`);
    }
  };
  let hashed = 0;
  setHostSha256(() => {
    const h = createHash('sha256');
    return {
      update(bytes) {
        hashed += bytes.length;
        h.update(bytes);
      },
      digest: (encoding) => h.digest(encoding),
    };
  });
  try {
    assert.deepEqual(hashesOf(await decodeArchive(brv)), expected);
    assert.equal(hashed, total, 'every byte of every file hashed once, by the host');
    hashed = 0;
    assert.deepEqual((await verifyArchive(brv)).map((f) => f.sha256), files.map((f) => f.sha256));
    assert.equal(hashed, total, 'verifyArchive: every byte hashed once, by the host');
    await checkEveryPath('host SHA-256');
    // BLAKE3 and XXH3 archives stay with the wasm decoder.
    hashed = 0;
    assert.deepEqual(hashesOf(await decodeArchive(fixture('multi-xxh3.brv'))), expected);
    assert.equal(hashed, 0);
    setHostSha256(undefined);
    await checkEveryPath('wasm SHA-256');
  } finally {
    setHostSha256(() => createHash('sha256'));
  }
});

test('BrevisArchive lists files with sizes and serves Responses with content-length', async () => {
  const archive = await BrevisArchive.open(fixture('minilm-folder.brv'));
  const expected = EXPECTED['minilm-folder.brv'];
  assert.deepEqual(archive.files.map((f) => f.path).sort(), Object.keys(expected).sort());
  for (const f of archive.files) {
    const res = archive.response(f.path);
    assert.equal(res.headers.get('content-length'), String(f.size));
    const bytes = new Uint8Array(await res.arrayBuffer());
    assert.equal(bytes.length, f.size);
    assert.equal(sha256(bytes), expected[f.path]);
    assert.equal(sha256(await archive.readFile(f.path)), expected[f.path]);
  }
  const onnx = archive.files.find((f) => f.path === 'onnx/model_quantized.onnx');
  const weight = onnx.segments.findIndex((s) => s.dtype === 'I8');
  assert.ok(onnx.segments[weight].stored > 0 && onnx.segments[weight].stored <= onnx.segments[weight].size + 1024);
  assert.match(archive.programText(onnx.path, weight), /^[A-Z][a-z]+/);
  assert.throws(() => archive.programText(onnx.path, 1e6), (e) => e instanceof Error);
  assert.equal(archive.has('config.json'), true);
  assert.equal(archive.has('missing.json'), false);
  archive.close();
});

test('BrevisArchive opens from a URL-less stream too and errors on a file it lacks', async () => {
  const archive = await BrevisArchive.open(pieces(fixture('multi.brv'), 1000));
  assert.throws(() => archive.response('nope.bin'), (e) => assertBrevisError(e, ['usage']));
  assert.equal(sha256(await archive.readFile('sub/hello.txt')), EXPECTED['multi.brv']['sub/hello.txt']);
  archive.close();
});

// Damage: flipped bits anywhere and every kind of truncation fail cleanly.
const DAMAGE_POSITIONS = (n) => {
  const out = new Set([0, 8, 12, 13, 20, n - 1, n - 9, n - 30, n - 60]);
  let x = 0x9e3779b9;
  while (out.size < 60) {
    x = (x * 1103515245 + 12345) >>> 0;
    out.add(x % n);
  }
  return [...out].filter((p) => p >= 0 && p < n);
};

test('a flipped bit anywhere makes every API fail with a BrevisError (never a wrong file)', async () => {
  const brv = fixture('silero.brv');
  for (const pos of DAMAGE_POSITIONS(brv.length)) {
    const bad = brv.slice();
    bad[pos] ^= 0x10;
    await assert.rejects(decodeArchive(bad), (e) => assertBrevisError(e, ['corrupt', 'truncated', 'unsupported', 'limit']), `byte ${pos}`);
    await assert.rejects(verifyArchive(bad), (e) => assertBrevisError(e, ['corrupt', 'truncated', 'unsupported', 'limit']), `verify, byte ${pos}`);
    await assert.rejects(collect(pieces(bad, 65536).pipeThrough(new BrevisDecompressionStream())),
      (e) => assertBrevisError(e, ['corrupt', 'truncated', 'unsupported', 'limit']), `stream, byte ${pos}`);
  }
});

test('a damaged archive reports where: offset, file and segment', async () => {
  const brv = fixture('silero.brv');
  const bad = brv.slice();
  bad[Math.floor(brv.length / 2)] ^= 1;
  await assert.rejects(decodeArchive(bad), (e) => {
    assertBrevisError(e, ['corrupt']);
    assert.equal(typeof e.offset, 'number');
    assert.equal(e.file, SILERO);
    assert.equal(typeof e.segment, 'string');
    assert.match(e.message, /archive offset \d+/);
    return true;
  });
});

test('every truncation fails cleanly, by stream and by index', async () => {
  const brv = fixture('multi.brv');
  const cuts = [0, 1, 7, 8, 11, 12, 13, 100, 1000, Math.floor(brv.length / 2), brv.length - 40, brv.length - 1];
  for (const cut of cuts) {
    const part = brv.slice(0, cut);
    await assert.rejects(decodeArchive(part), (e) => assertBrevisError(e, ['truncated', 'corrupt']), `cut ${cut}`);
    await assert.rejects(verifyArchive(part), (e) => assertBrevisError(e, ['truncated', 'corrupt']), `verify cut ${cut}`);
    await assert.rejects(collect(pieces(part, 4096).pipeThrough(new BrevisDecompressionStream({ path: 'weights.safetensors' }))),
      (e) => assertBrevisError(e, ['truncated', 'corrupt']), `stream cut ${cut}`);
    await assert.rejects(BrevisArchive.open(part), (e) => assertBrevisError(e, ['truncated', 'corrupt']), `index cut ${cut}`);
  }
});

test('the output cap trips in every API before the output is produced', async () => {
  const brv = fixture('silero.brv');
  const cap = 100_000;
  const isLimit = (e) => assertBrevisError(e, ['limit']);
  await assert.rejects(decodeArchive(brv, { maxOutputBytes: cap }), isLimit);
  await assert.rejects(verifyArchive(brv, { maxOutputBytes: cap }), isLimit);
  await assert.rejects(collect(pieces(brv, 4096).pipeThrough(new BrevisDecompressionStream({ maxOutputBytes: cap }))), isLimit);
  await assert.rejects((async () => { for await (const _ of readTensors(brv, { maxOutputBytes: cap })); })(), isLimit);
  // Exactly the file's size is allowed.
  const files = await decodeArchive(brv, { maxOutputBytes: fixture(SILERO).length });
  assert.equal(files[0].sha256, EXPECTED['silero.brv'][SILERO]);
  await assert.rejects(decodeArchive(brv, { maxOutputBytes: -5 }), (e) => assertBrevisError(e, ['usage']));
});

test('a bomb (80 MiB of zeros in a few hundred bytes) trips maxRatio by default; maxRatio: 0 lifts it', async () => {
  const brv = fixture('zeros.brv');
  assert.ok(brv.length < 4096);
  const isRatio = (e) => assertBrevisError(e, ['limit']) && /max_ratio/.test(e.message);
  await assert.rejects(decodeArchive(brv), isRatio);
  await assert.rejects(verifyArchive(brv), isRatio);
  await assert.rejects(collect(pieces(brv, 64).pipeThrough(new BrevisDecompressionStream())), isRatio);
  await assert.rejects(BrevisArchive.open(brv), isRatio);
  const [file] = await decodeArchive(brv, { maxRatio: 0 });
  assert.equal(file.size, 80 << 20);
  assert.ok(file.bytes.every((b) => b === 0));
  await assert.rejects(decodeArchive(brv, { maxRatio: -1 }), (e) => assertBrevisError(e, ['usage']));
});

test('decodeArchive keeps the archive and the output out of wasm memory: 3x the data needs no more', async () => {
  const run = (archive) => {
    const script = `
      import { readFileSync } from 'node:fs';
      import { decodeArchive, wasmMemoryBytes } from 'brevis-decoder';
      const files = await decodeArchive(readFileSync(${JSON.stringify(join(FX, archive))}));
      console.log(JSON.stringify({ out: files.reduce((s, f) => s + f.bytes.length, 0), memory: wasmMemoryBytes() }));
    `;
    return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: new URL('.', import.meta.url) }).toString());
  };
  const small = run('big1.brv');
  const big = run('big.brv');
  assert.equal(big.out, 3 * small.out);
  // Neither the archive nor the output is held in wasm memory: the archive is
  // pushed in pieces, each decoded piece copied out to its file's array.
  assert.ok(big.memory <= small.memory + 4 * 1024 * 1024,
    `wasm memory ${small.memory} -> ${big.memory} B for 3x the archive, ${big.out} B decoded`);
  assert.ok(big.memory < fixture('big.brv').length, `wasm memory ${big.memory} B, more than the archive`);
});

test('not an archive at all: a clear error, no hang', async () => {
  await assert.rejects(decodeArchive(new TextEncoder().encode('{"not": "an archive"}')), (e) => assertBrevisError(e, ['corrupt', 'truncated']));
  await assert.rejects(decodeArchive(new Uint8Array(0)), (e) => assertBrevisError(e, ['truncated']));
  await assert.rejects(decodeArchive(fixture(SILERO)), (e) => assertBrevisError(e, ['corrupt']));
});

function streamInFreshProcess(archive) {
  const script = `
    import { readFileSync } from 'node:fs';
    import { BrevisDecompressionStream, wasmMemoryBytes } from 'brevis-decoder';
    const brv = readFileSync(${JSON.stringify(join(FX, archive))});
    let at = 0, out = 0;
    const src = new ReadableStream({ pull(c) { if (at >= brv.length) return c.close(); c.enqueue(brv.subarray(at, at + 65536)); at += 65536; } });
    for await (const piece of src.pipeThrough(new BrevisDecompressionStream({ path: ${JSON.stringify(ONNX_IN_BIG)} }))) out += piece.length;
    console.log(JSON.stringify({ out, memory: wasmMemoryBytes() }));
  `;
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: new URL('.', import.meta.url) }).toString());
}
const ONNX_IN_BIG = 'copy3/model_quantized.onnx';

test('wasm memory does not grow with the model: streaming 3x the data needs no more', async () => {
  // Fresh processes, so other tests' allocations do not count. big.brv holds
  // the int8 model three times (69 MB); the stream decodes all of it (the
  // first two copies are decoded and verified, then skipped).
  const small = streamInFreshProcess('big1.brv');
  const big = streamInFreshProcess('big.brv');
  const onnx = fixture('models/Xenova/all-MiniLM-L6-v2/onnx/model_quantized.onnx').length;
  assert.equal(small.out, onnx);
  assert.equal(big.out, onnx);
  assert.ok(big.memory <= small.memory + 4 * 1024 * 1024,
    `wasm memory ${big.memory} B after 3 models vs ${small.memory} B after one`);
  assert.ok(big.memory < (3 * onnx) / 2, `wasm memory ${big.memory} B for ${3 * onnx} B decoded`);
});

test('verifyArchive holds no more for 3x the data: wasm memory, and in JavaScript one chunk at most', async () => {
  const run = (archive) => {
    const script = `
      import { readFileSync } from 'node:fs';
      import { verifyArchive, wasmMemoryBytes } from 'brevis-decoder';
      const brv = readFileSync(${JSON.stringify(join(FX, archive))});
      let at = 0;
      const src = new ReadableStream({ pull(c) { if (at >= brv.length) return c.close(); c.enqueue(brv.subarray(at, at + 65536)); at += 65536; } });
      const files = await verifyArchive(src);
      console.log(JSON.stringify({ out: files.reduce((s, f) => s + f.size, 0), memory: wasmMemoryBytes() }));
    `;
    return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: new URL('.', import.meta.url) }).toString());
  };
  const small = run('big1.brv');
  const big = run('big.brv');
  assert.equal(big.out, 3 * small.out);
  assert.ok(big.memory <= small.memory + 4 * 1024 * 1024,
    `wasm memory ${big.memory} B after 3 models vs ${small.memory} B after one`);
  assert.ok(big.memory < big.out / 2, `wasm memory ${big.memory} B for ${big.out} B verified`);
});

test('init accepts a precompiled WebAssembly.Module (edge runtimes that cannot compile bytes)', async () => {
  const wasmPath = new URL('./node_modules/brevis-decoder/wasm/brevis_decoder_bg.wasm', import.meta.url).pathname;
  const script = `
    import { readFileSync } from 'node:fs';
    import { init, decodeArchive } from 'brevis-decoder';
    const module = new WebAssembly.Module(readFileSync(${JSON.stringify(wasmPath)}));
    await init(module);
    const files = await decodeArchive(readFileSync(${JSON.stringify(join(FX, 'multi.brv'))}));
    console.log(files.length);
  `;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: new URL('.', import.meta.url) }).toString().trim();
  assert.equal(Number(out), Object.keys(EXPECTED['multi.brv']).length);
});

test('the synchronous push API refuses to run before init in a fresh process', () => {
  const script = `
    import { BrevisDecoder } from 'brevis-decoder';
    try { new BrevisDecoder(); console.log('no error'); } catch (e) { console.log(e.name, e.code); }
  `;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: new URL('.', import.meta.url) }).toString().trim();
  assert.equal(out, 'BrevisError usage');
});

test('wasmMemoryBytes reports the memory in use', async () => {
  await init();
  assert.ok(wasmMemoryBytes() > 0);
});
