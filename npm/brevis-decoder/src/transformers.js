// transformers.js adapter: serves model files out of .brv archives through
// `env.customCache`, so `pipeline(...)` loads a compressed model unchanged:
//
//   env.useCustomCache = true;
//   env.customCache = new BrevisModelCache({ 'Xenova/all-MiniLM-L6-v2': '/models/minilm.brv' });
//
// Each archive is fetched once (on the first file asked of it), held in wasm
// memory compressed, and each file is decoded chunk by chunk into a streaming
// Response that carries `content-length` (transformers.js copies
// quadratically without it).

import { BrevisArchive } from 'brevis-decoder';

/**
 * A transformers.js custom cache backed by Brevis archives. `archives` maps a
 * model id (as passed to `pipeline`) to the archive: a URL or its string, a
 * Response, bytes, an open BrevisArchive, or a function returning one of
 * those. Paths in the archive are those under the model folder
 * (`config.json`, `onnx/model_quantized.onnx`, ...). Options: `maxOutputBytes`.
 */
export class BrevisModelCache {
  constructor(archives, options = {}) {
    this._sources = new Map(Object.entries(archives));
    this._open = new Map();
    this._options = options;
  }

  _archive(modelId) {
    let p = this._open.get(modelId);
    if (!p) {
      p = (async () => {
        let src = this._sources.get(modelId);
        if (typeof src === 'function') src = await src();
        if (src instanceof BrevisArchive) return src;
        return BrevisArchive.open(src, this._options);
      })();
      p.catch(() => this._open.delete(modelId));
      this._open.set(modelId, p);
    }
    return p;
  }

  /** Which model and file a cache key (a local path or a remote URL) names, or null. */
  resolve(key) {
    const url = typeof key === 'string' ? key : key?.url ?? String(key);
    const path = url.replace(/[?#].*$/, '');
    for (const modelId of this._sources.keys()) {
      const at = path.indexOf(`${modelId}/`);
      if (at < 0 || (at > 0 && path[at - 1] !== '/')) continue;
      let rest = path.slice(at + modelId.length + 1);
      // Remote keys put `resolve/<revision>/` between the model id and the file.
      rest = rest.replace(/^resolve\/[^/]+\//, '');
      return { modelId, path: decodeURIComponent(rest) };
    }
    return null;
  }

  /** The file for `key` as a streaming Response, or undefined when no archive holds it. */
  async match(key) {
    const hit = this.resolve(key);
    if (!hit) return undefined;
    const archive = await this._archive(hit.modelId);
    if (!archive.has(hit.path)) return undefined;
    return archive.response(hit.path);
  }

  /** Nothing to store: the archives are the cache. */
  async put() {}
}
