// ONNX Runtime Web (onnxruntime-web, wasm backend, in Node): a real int8
// model rebuilt from a .brv gives the same outputs, bit for bit, as the
// original file; decoded tensors become ort.Tensors without a copy.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import * as ort from 'onnxruntime-web';
import { BrevisDecompressionStream } from 'brevis-decoder';
import { readOrtTensors, toOrtTensor } from 'brevis-decoder/ort';

import { collect, fixture, pieces, safetensors, sha256 } from './helpers.mjs';

ort.env.wasm.numThreads = 1;

// "brevis rebuilds model weights bit for bit" in all-MiniLM-L6-v2's vocabulary.
const TOKENS = [101, 7480, 2015, 9239, 2015, 2944, 15871, 2978, 2005, 2978, 102];

async function embed(modelBytes) {
  const session = await ort.InferenceSession.create(modelBytes);
  const n = TOKENS.length;
  const feeds = {
    input_ids: new ort.Tensor('int64', BigInt64Array.from(TOKENS, BigInt), [1, n]),
    attention_mask: new ort.Tensor('int64', new BigInt64Array(n).fill(1n), [1, n]),
    token_type_ids: new ort.Tensor('int64', new BigInt64Array(n), [1, n]),
  };
  const out = await session.run(feeds);
  await session.release();
  return out.last_hidden_state;
}

test('an int8 ONNX model streamed out of a .brv runs in ONNX Runtime Web with identical outputs', async () => {
  const original = fixture('models/Xenova/all-MiniLM-L6-v2/onnx/model_quantized.onnx');
  const rebuilt = await collect(pieces(fixture('minilm-int8.brv'), 65536).pipeThrough(new BrevisDecompressionStream()));
  assert.equal(sha256(rebuilt), sha256(original));
  const a = await embed(original);
  const b = await embed(rebuilt);
  assert.deepEqual(a.dims, [1, TOKENS.length, 384]);
  assert.deepEqual(b.dims, a.dims);
  assert.equal(sha256(new Uint8Array(b.data.buffer, b.data.byteOffset, b.data.byteLength)),
    sha256(new Uint8Array(a.data.buffer, a.data.byteOffset, a.data.byteLength)));
});

test('decoded tensors become ort.Tensors sharing their buffers', async () => {
  const original = safetensors(fixture('silero_vad_16k.safetensors'));
  const tensors = await readOrtTensors(ort, fixture('silero.brv'));
  assert.deepEqual(Object.keys(tensors).sort(), original.map((t) => t.name).sort());
  for (const o of original) {
    const t = tensors[o.name];
    assert.ok(t instanceof ort.Tensor);
    assert.equal(t.type, 'float32');
    assert.deepEqual(t.dims, o.shape);
    assert.equal(sha256(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)), sha256(o.bytes));
  }
  // No copy: the ort.Tensor holds the very typed array it was given.
  const data = new Float32Array([1, 2, 3, 4]);
  const t = toOrtTensor(ort, { name: 'x', dtype: 'F32', shape: [2, 2], data });
  assert.equal(t.data, data);
  // BF16 has no ort.Tensor type: refused unless widened on request.
  const bf16 = { name: 'b', dtype: 'BF16', shape: [2], data: new Uint16Array([0x3f80, 0xc000]) };
  assert.throws(() => toOrtTensor(ort, bf16), /BF16/);
  assert.deepEqual(Array.from(toOrtTensor(ort, bf16, { bf16: 'float32' }).data), [1, -2]);
});
