// The edge example: a Service Worker that serves /edge/NAME from
// /edge/NAME.brv, decoded as it streams through BrevisDecompressionStream,
// with the original file's content-length (from NAME.brv.json, written when
// the archive was made). The page — or an unmodified ONNX Runtime Web
// `InferenceSession.create('/edge/model.onnx')` — gets the original bytes.
import { BrevisDecompressionStream, init } from 'brevis-decoder';
import wasmUrl from 'brevis-decoder/brevis_decoder_bg.wasm?url';

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (url.origin !== self.location.origin || !url.pathname.startsWith('/edge/')) return;
  if (url.pathname.endsWith('.brv') || url.pathname.endsWith('.json') || event.request.method !== 'GET') return;
  event.respondWith(serve(url.pathname, event.request));
});

async function serve(path, request) {
  const meta = await fetch(`${path}.brv.json`, { cache: 'no-store' });
  if (!meta.ok) return fetch(request); // no archive beside it: the network's answer
  const { size } = await meta.json();
  const archive = await fetch(`${path}.brv`, { cache: 'no-store' });
  if (!archive.ok) return new Response(`no ${path}.brv (HTTP ${archive.status})`, { status: 502 });
  await init(wasmUrl);
  const body = archive.body.pipeThrough(new BrevisDecompressionStream({ maxOutputBytes: size }));
  return new Response(body, {
    status: 200,
    headers: {
      'content-type': 'application/octet-stream',
      'content-length': String(size),
      'x-served-by': 'brevis-sw',
      'x-brevis-archive-bytes': archive.headers.get('content-length') ?? '',
    },
  });
}
