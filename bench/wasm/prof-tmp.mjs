import { readFileSync } from 'node:fs';
import { BrevisDecompressionStream, init } from 'brevis-decoder';
await init();
const bytes = readFileSync(process.argv[2]);
async function once() {
  let off = 0;
  const source = new ReadableStream({ pull(c) { if (off >= bytes.length) { c.close(); return; } c.enqueue(bytes.subarray(off, off + 65536)); off += 65536; } });
  let n = 0;
  for await (const piece of source.pipeThrough(new BrevisDecompressionStream())) n += piece.length;
  return n;
}
for (let i = 0; i < 3; i++) await once();
const t = performance.now(); let n = 0;
for (let i = 0; i < 10; i++) n += await once();
console.log(((performance.now() - t) / 10).toFixed(1), 'ms', n / 10);
