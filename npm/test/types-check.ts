// Compiled by `tsc --noEmit` in npm/test/run.sh: the package's public types
// describe its real API (this file uses every export as a user would).
import {
  BrevisArchive,
  BrevisDecoder,
  BrevisDecompressionStream,
  BrevisError,
  decodeArchive,
  init,
  readTensors,
  typedArrayFor,
  verifyArchive,
  wasmMemoryBytes,
  type BrevisEvent,
  type DecodedFile,
  type DigestAlgorithm,
  type Tensor,
  type VerifiedFile,
} from 'brevis-decoder';
import { readOrtTensors, toOrtTensor } from 'brevis-decoder/ort';
import { BrevisModelCache } from 'brevis-decoder/transformers';
import * as ort from 'onnxruntime-web';

export async function usage(response: Response, bytes: Uint8Array): Promise<number> {
  await init();
  const files: DecodedFile[] = await decodeArchive(bytes, { maxOutputBytes: 1 << 30, onProgress: (p) => p.bytesOut });
  const algorithm: DigestAlgorithm = files[0].digestAlgorithm;
  const hubHash: string | null = algorithm === 'sha256' ? files[0].sha256 : files[0].digest;
  const checked: VerifiedFile[] = await verifyArchive(response.clone(), { maxRatio: 0 });
  if (checked[0].digest !== files[0].digest || checked[0].size !== files[0].size) throw new Error('mismatch');
  const stream: ReadableStream<Uint8Array> = response.body!.pipeThrough(new BrevisDecompressionStream({ path: files[0].path }));
  for await (const t of readTensors(stream)) {
    const tensor: Tensor = t;
    const data = typedArrayFor(tensor.dtype, new Uint8Array(tensor.data.buffer));
    toOrtTensor<ort.Tensor>(ort, { ...tensor, data });
  }
  const weights: Record<string, ort.Tensor> = await readOrtTensors<ort.Tensor>(ort, bytes, { bf16: 'float32' });
  const decoder = await BrevisDecoder.create({ pieces: true });
  const events: BrevisEvent[] = decoder.push(bytes);
  decoder.end();
  decoder.free();
  for (const e of events) if (e.type === 'data') e.bytes.byteLength;
  const archive = await BrevisArchive.open(bytes);
  const text: string = archive.programText(archive.files[0].path, 0);
  const res: Response = archive.response(archive.files[0].path);
  archive.close();
  const cache = new BrevisModelCache({ 'org/model': () => fetch('/m.brv') }, { maxOutputBytes: 1e9 });
  await cache.match('/models/org/model/config.json');
  try {
    await decodeArchive(new Uint8Array(3));
  } catch (e) {
    if (e instanceof BrevisError && e.code === 'truncated') return e.offset ?? -1;
  }
  return wasmMemoryBytes() + text.length + res.status + Object.keys(weights).length + (hubHash?.length ?? 0);
}
