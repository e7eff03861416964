import { defineConfig } from 'vite';

// The page (index.html) and the Service Worker (src/sw.js -> /sw.js, a module
// worker) are built together; the decode worker is an ES module worker.
// `Service-Worker-Allowed` lets the dev server's /src/sw.js control /edge/.
const headers = { 'Service-Worker-Allowed': '/' };

export default defineConfig({
  server: { host: '127.0.0.1', headers },
  preview: { host: '127.0.0.1', headers },
  // The packages locate their .wasm with import.meta.url; pre-bundling would move them.
  optimizeDeps: { exclude: ['brevis-decoder', 'onnxruntime-web', '@huggingface/transformers'] },
  worker: { format: 'es' },
  build: {
    target: 'es2022',
    chunkSizeWarningLimit: 4096,
    rollupOptions: {
      input: { main: 'index.html', sw: 'src/sw.js' },
      output: {
        entryFileNames: (chunk) => (chunk.name === 'sw' ? 'sw.js' : 'assets/[name]-[hash].js'),
      },
    },
  },
});
