// The package's raw wasm decode call, the baseline its stream API is measured
// against (issue 5: the stream within 15% of it): the archive copied into wasm
// memory whole (`ArchiveHandle`, opened through its index), then each file
// decoded by one call (`read_file`: every chunk's checksum and the file's digest
// checked, as native `decode_all` does) and copied out to a new `Uint8Array`.
// No JavaScript runs between the chunks.
//
// `wasm` is a build's wasm-bindgen module (`brevis-decoder/wasm`), initialised.
// Returns the bytes decoded.
export function decodeRaw(wasm, archive) {
  const handle = new wasm.ArchiveHandle(archive, Infinity, -1);
  try {
    const count = handle.files().length;
    let n = 0;
    for (let i = 0; i < count; i++) n += handle.read_file(i).length;
    return n;
  } finally {
    handle.free();
  }
}
