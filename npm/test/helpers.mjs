// Shared helpers of the package tests: fixtures (made by fixtures.sh), hashing,
// and sources that deliver an archive in pieces of a chosen size.
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

export const FX = new URL('./fixtures/', import.meta.url).pathname;

export function fixture(name) {
  return new Uint8Array(readFileSync(join(FX, name)));
}

export function sha256(bytes) {
  return createHash('sha256').update(bytes).digest('hex');
}

/** `{ relativePath: sha256 }` of every file under `dir`, paths with '/'. */
export function treeHashes(dir) {
  const out = {};
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out[relative(dir, p).split(sep).join('/')] = sha256(readFileSync(p));
    }
  };
  walk(dir);
  return out;
}

/** A ReadableStream delivering `bytes` in pieces of `size` (the last may be shorter). */
export function pieces(bytes, size) {
  let at = 0;
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) return controller.close();
      controller.enqueue(bytes.slice(at, at + size));
      at += size;
    },
  }, { highWaterMark: 0 });
}

/** Concatenates the chunks of a ReadableStream. */
export async function collect(stream) {
  const parts = [];
  let n = 0;
  for await (const c of stream) {
    parts.push(c);
    n += c.length;
  }
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Parses a safetensors file: `[{ name, dtype, shape, bytes }]` in file order. */
export function safetensors(file) {
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  const n = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(file.subarray(8, 8 + n)));
  const base = 8 + n;
  return Object.entries(header)
    .filter(([k]) => k !== '__metadata__')
    .map(([name, t]) => ({ name, dtype: t.dtype, shape: t.shape, bytes: file.subarray(base + t.data_offsets[0], base + t.data_offsets[1]) }))
    .sort((a, b) => a.bytes.byteOffset - b.bytes.byteOffset);
}
