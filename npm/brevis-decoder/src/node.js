// Entry for Node (20 and later): the .wasm is read from the package folder
// (Node's fetch does not read file: URLs).
import { readFile } from 'node:fs/promises';
import { setDefaultWasmSource } from './core.js';

setDefaultWasmSource(() => readFile(new URL('../wasm/brevis_decoder_bg.wasm', import.meta.url)));

export * from './core.js';
