// Entry for browsers, Web/Service Workers, bundlers and edge runtimes: the
// .wasm is fetched from next to this package unless `init(source)` says
// otherwise (edge runtimes that cannot compile wasm from bytes pass a
// precompiled `WebAssembly.Module`).
import { setDefaultWasmSource } from './core.js';

setDefaultWasmSource(() => new URL('../wasm/brevis_decoder_bg.wasm', import.meta.url));

export * from './core.js';
