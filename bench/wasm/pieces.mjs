// The archive as the wasm benches feed it to the package's streaming APIs, the
// way a `fetch` body arrives: 64 KiB pieces, each made only when the reader asks
// for it (`highWaterMark: 0`, so no piece waits in a queue).

/** Bytes per piece. */
export const PIECE = 64 << 10;

/** `archive` (a Uint8Array) as a ReadableStream of `PIECE`-byte views of it. */
export function piecesOf(archive) {
  let at = 0;
  return new ReadableStream(
    {
      pull(c) {
        if (at >= archive.length) return c.close();
        c.enqueue(archive.subarray(at, at + PIECE));
        at += PIECE;
      },
    },
    { highWaterMark: 0 },
  );
}
