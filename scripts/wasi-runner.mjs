// Runs a WebAssembly (wasm32-wasip1) program under Node's WASI, with the host's
// file system at `/`: cargo's runner for `scripts/test-wasi.sh`, so that the
// decoder's tests run as WebAssembly, under the engine the npm package runs on.
//
//   node scripts/wasi-runner.mjs PROGRAM.wasm [ARG...]
import { readFileSync } from 'node:fs';
import { WASI } from 'node:wasi';

const [program, ...args] = process.argv.slice(2);
const wasi = new WASI({
  version: 'preview1',
  args: [program, ...args],
  env: {},
  preopens: { '/': '/' },
  returnOnExit: true,
});
const module = await WebAssembly.compile(readFileSync(program));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
process.exit(wasi.start(instance));
