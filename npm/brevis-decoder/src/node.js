// Entry for Node (20 and later): the .wasm is read from the package folder
// (Node's fetch does not read file: URLs), and SHA-256 file digests are
// computed with node:crypto.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { setDefaultWasmSource, setHostSha256 } from './core.js';

setDefaultWasmSource(() => readFile(new URL('../wasm/brevis_decoder_bg.wasm', import.meta.url)));
setHostSha256(() => createHash('sha256'));

export * from './core.js';
