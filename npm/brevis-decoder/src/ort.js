// ONNX Runtime Web adapter: tensors decoded by brevis-decoder as `ort.Tensor`s.
// Pass your own `ort` (import * as ort from 'onnxruntime-web') so this package
// does not pin or bundle a second copy of it.

import { readTensors } from 'brevis-decoder';

// Brevis dtype -> ort.Tensor type. BF16 has no ort.Tensor type: those tensors
// are refused unless `{ bf16: 'float32' }` asks for a widening copy.
const ORT_TYPES = {
  BOOL: 'bool',
  U8: 'uint8',
  I8: 'int8',
  I16: 'int16',
  U16: 'uint16',
  F16: 'float16',
  I32: 'int32',
  U32: 'uint32',
  F32: 'float32',
  F64: 'float64',
  I64: 'int64',
  U64: 'uint64',
};

function bf16ToFloat32(bits) {
  const out = new Float32Array(bits.length);
  const words = new Uint32Array(out.buffer);
  for (let i = 0; i < bits.length; i++) words[i] = bits[i] << 16;
  return out;
}

/**
 * One decoded tensor (`{ dtype, shape, data }` from `readTensors`) as an
 * `ort.Tensor` sharing its buffer (no copy). Options: `bf16: 'float32'` to
 * widen BF16 (a copy), since ort.Tensor has no bfloat16 type.
 */
export function toOrtTensor(ort, tensor, options = {}) {
  const dims = tensor.shape;
  if (tensor.dtype === 'BF16') {
    if (options.bf16 !== 'float32') {
      throw new TypeError(`tensor \`${tensor.name}\` is BF16, which ort.Tensor cannot hold; pass { bf16: 'float32' } to widen it`);
    }
    return new ort.Tensor('float32', bf16ToFloat32(tensor.data), dims);
  }
  const type = ORT_TYPES[tensor.dtype];
  if (!type) throw new TypeError(`tensor \`${tensor.name}\` has dtype ${tensor.dtype}, which ort.Tensor cannot hold`);
  const data = type === 'bool' ? new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength) : tensor.data;
  return new ort.Tensor(type, data, dims);
}

/**
 * Decodes an archive (any source readTensors takes) into `{ [name]: ort.Tensor }`,
 * streaming. Options: those of readTensors and toOrtTensor, and `filter(tensor)`
 * to keep only some.
 */
export async function readOrtTensors(ort, source, options = {}) {
  const out = {};
  for await (const t of readTensors(source, options)) {
    if (options.filter && !options.filter(t)) continue;
    out[t.name] = toOrtTensor(ort, t, options);
  }
  return out;
}
