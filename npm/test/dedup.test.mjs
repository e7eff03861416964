// Archives with copies (the same model three times, stored once) decode
// through every API as if each file were stored in full; a fine-tune stored
// against its base is refused with code 'base' (the package takes no base).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { BrevisArchive, BrevisDecompressionStream, BrevisError, decodeArchive } from 'brevis-decoder';

import { fixture, pieces, sha256 } from './helpers.mjs';

const ONNX = 'models/Xenova/all-MiniLM-L6-v2/onnx/model_quantized.onnx';

test('copies decode transparently: decodeArchive, the stream and random access', async () => {
  const want = sha256(fixture(ONNX));
  const dedup = fixture('big-dedup.brv');
  assert.ok(dedup.length * 2 < fixture('big.brv').length, `${dedup.length} vs ${fixture('big.brv').length}`);
  const files = await decodeArchive(pieces(dedup, 65521));
  assert.equal(files.length, 3);
  for (const f of files) assert.equal(sha256(f.bytes), want, f.path);
  let out = 0;
  for await (const piece of pieces(dedup, 1 << 20).pipeThrough(new BrevisDecompressionStream({ path: 'copy3/model_quantized.onnx' }))) out += piece.length;
  assert.equal(out, fixture(ONNX).length);
  const archive = await BrevisArchive.open(dedup);
  for (const f of archive.files) {
    assert.equal(sha256(new Uint8Array(await archive.response(f.path).arrayBuffer())), want, f.path);
    assert.equal(sha256(await archive.readFile(f.path)), want, f.path);
  }
  const copy = archive.files.find((f) => f.path === 'copy3/model_quantized.onnx');
  assert.ok(copy.segments.some((s) => s.stored === 0 && s.size > 0 && s.chunks > 0));
  archive.close();
});

test('a fine-tune stored against its base is refused with code base', async () => {
  const tuned = fixture('tuned.brv');
  await assert.rejects(decodeArchive(tuned), (e) => {
    assert.ok(e instanceof BrevisError, String(e));
    assert.equal(e.code, 'base');
    assert.match(e.message, /base tensor missing/);
    assert.ok(e.segment, 'names the tensor');
    return true;
  });
  const archive = await BrevisArchive.open(tuned);
  await assert.rejects(archive.readFile(archive.files[0].path), (e) => e.code === 'base');
  archive.close();
});
