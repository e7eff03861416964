// The archive as the wasm benches feed it to the package's streaming APIs, the
// way a `fetch` body arrives: 64 KiB pieces, each made only when the reader asks
// for it (`highWaterMark: 0`, so no piece waits in a queue).

/** Bytes per piece. */
export const PIECE = 64 << 10;

/** `archive` (a Uint8Array) as `PIECE`-byte views of it, in order. */
export function* pieces(archive) {
  for (let at = 0; at < archive.length; at += PIECE) yield archive.subarray(at, at + PIECE);
}

/** `archive` as a ReadableStream of the views `pieces` gives. */
export function piecesOf(archive) {
  const each = pieces(archive);
  return new ReadableStream(
    {
      pull(c) {
        const { done, value } = each.next();
        if (done) c.close();
        else c.enqueue(value);
      },
    },
    { highWaterMark: 0 },
  );
}
