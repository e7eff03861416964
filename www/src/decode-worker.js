// Decodes a .brv archive off the main thread: fetches it (or takes a dropped
// file's bytes), pushes it through the streaming decoder in pieces, posting
// progress (bytes in and out, tensors, throughput) as it goes, then opens the
// archive's index for the inspector (sizes per segment, program text).
import { BrevisArchive, BrevisDecoder, init } from 'brevis-decoder';
import wasmUrl from 'brevis-decoder/brevis_decoder_bg.wasm?url';

const PIECE = 256 * 1024;
const PROGRAM_CHARS = 4000;

self.onmessage = async ({ data }) => {
  try {
    await run(data);
  } catch (e) {
    self.postMessage({
      type: 'error',
      error: { name: e?.name ?? 'Error', message: String(e?.message ?? e), code: e?.code, offset: e?.offset, file: e?.file, segment: e?.segment, chunk: e?.chunk },
    });
  }
};

async function fetchBytes(url) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`could not fetch ${url}: HTTP ${res.status}`);
  const total = Number(res.headers.get('content-length')) || 0;
  const parts = [];
  let loaded = 0;
  let last = 0;
  for await (const chunk of res.body) {
    parts.push(chunk);
    loaded += chunk.length;
    if (performance.now() - last > 50) {
      last = performance.now();
      self.postMessage({ type: 'fetch', loaded, total });
    }
  }
  self.postMessage({ type: 'fetch', loaded, total: loaded });
  const bytes = new Uint8Array(loaded);
  let at = 0;
  for (const p of parts) {
    bytes.set(p, at);
    at += p.length;
  }
  return bytes;
}

async function run({ url, buffer, name }) {
  await init(wasmUrl);
  const bytes = buffer ? new Uint8Array(buffer) : await fetchBytes(url);
  const total = bytes.length;

  // Decode: the archive is in memory, so what is timed is the decoder alone.
  const files = [];
  let file = null;
  let offset = 0;
  const decoder = new BrevisDecoder({ maxOutputBytes: 2 ** 32 });
  const t0 = performance.now();
  let lastPost = 0;
  const post = (final) => {
    const ms = performance.now() - t0;
    self.postMessage({
      type: 'progress', final, total, ms,
      bytesIn: decoder.bytesIn, bytesOut: decoder.bytesOut, tensorsDone: decoder.tensorsDone, filesDone: decoder.filesDone,
    });
  };
  try {
    for (let at = 0; at < total || at === 0; at += PIECE) {
      decoder.pushTo(bytes.subarray(at, at + PIECE), (e) => {
        if (e.type === 'fileStart') {
          file = { path: e.path, size: e.size, bytes: new Uint8Array(e.size) };
          offset = 0;
        } else if (e.type === 'segment') {
          file.bytes.set(e.bytes, offset);
          offset += e.bytes.length;
        } else if (e.type === 'fileEnd') {
          file.sha256 = e.sha256;
          files.push(file);
          file = null;
        }
      });
      if (performance.now() - lastPost > 40) {
        lastPost = performance.now();
        post(false);
      }
      if (total === 0) break;
    }
    decoder.end();
  } finally {
    post(true);
  }
  const ms = performance.now() - t0;
  const stats = { ms, bytesIn: decoder.bytesIn, bytesOut: decoder.bytesOut, tensorsDone: decoder.tensorsDone, filesDone: decoder.filesDone };
  decoder.free();

  // The index: per-segment sizes, stored bytes and programs.
  const archive = await BrevisArchive.open(bytes);
  const index = archive.files.map((f) => ({
    path: f.path,
    size: f.size,
    sha256: f.sha256,
    segments: f.segments.map((s, i) => {
      let program = '';
      try {
        program = archive.programText(f.path, i, 0);
      } catch (e) {
        program = `(no program text: ${e.message})`;
      }
      if (program.length > PROGRAM_CHARS) program = `${program.slice(0, PROGRAM_CHARS)}\n… (${program.length - PROGRAM_CHARS} more characters)`;
      return { name: s.name, dtype: s.dtype, shape: s.shape, size: s.size, stored: s.stored, chunks: s.chunks, program };
    }),
  }));
  archive.close();

  self.postMessage(
    { type: 'done', name: name ?? url, archiveSize: total, stats, index, files: files.map(({ path, size, sha256, bytes: b }) => ({ path, size, sha256, bytes: b })) },
    files.map((f) => f.bytes.buffer),
  );
}
