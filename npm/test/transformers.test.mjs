// transformers.js (@huggingface/transformers) with the hub unreachable: a
// feature-extraction pipeline whose model files are served from a .brv
// through BrevisModelCache gives the same embeddings as the plain files.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

import { env, pipeline } from '@huggingface/transformers';
import { BrevisModelCache } from 'brevis-decoder/transformers';

import { FX, fixture } from './helpers.mjs';

const MODEL = 'Xenova/all-MiniLM-L6-v2';
const TEXTS = ['Brevis rebuilds model weights bit for bit.', 'A second, longer sentence about compressing neural networks.'];

env.allowRemoteModels = false;
env.useBrowserCache = false;
env.useFSCache = false;

async function embeddings() {
  const extractor = await pipeline('feature-extraction', MODEL, { dtype: 'q8', device: 'cpu' });
  const out = await extractor(TEXTS, { pooling: 'mean', normalize: true });
  const result = { dims: out.dims, data: Array.from(out.data) };
  await extractor.dispose();
  return result;
}

test('a pipeline loads its model out of a .brv through env.customCache, same output as the plain files', async () => {
  // Compressed: nothing under localModelPath, every file comes from the archive.
  const cache = new BrevisModelCache({ [MODEL]: fixture('minilm-folder.brv') });
  const served = [];
  const match = cache.match.bind(cache);
  cache.match = async (key) => {
    const res = await match(key);
    if (res) {
      served.push(cache.resolve(key).path);
      assert.ok(Number(res.headers.get('content-length')) > 0, `content-length for ${key}`);
    }
    return res;
  };
  env.localModelPath = mkdtempSync(join(tmpdir(), 'brevis-empty-'));
  env.useCustomCache = true;
  env.customCache = cache;
  const fromArchive = await embeddings();
  assert.ok(served.includes('onnx/model_quantized.onnx'), `served: ${served}`);
  assert.ok(served.includes('tokenizer.json'), `served: ${served}`);

  // Plain files, no custom cache.
  env.useCustomCache = false;
  env.customCache = null;
  env.localModelPath = join(FX, 'models');
  const plain = await embeddings();

  assert.deepEqual(plain.dims, [TEXTS.length, 384]);
  assert.deepEqual(fromArchive.dims, plain.dims);
  assert.deepEqual(fromArchive.data, plain.data);
});

test('the cache maps local paths and remote keys to archive paths, and misses cleanly', async () => {
  const cache = new BrevisModelCache({ [MODEL]: fixture('minilm-folder.brv') });
  assert.deepEqual(cache.resolve(`/models/${MODEL}/onnx/model_quantized.onnx`), { modelId: MODEL, path: 'onnx/model_quantized.onnx' });
  assert.deepEqual(cache.resolve(`https://example.invalid/${MODEL}/resolve/main/config.json`), { modelId: MODEL, path: 'config.json' });
  assert.equal(cache.resolve('/models/Other/model/config.json'), null);
  assert.equal(cache.resolve(`/models/not-${MODEL}/config.json`), null);
  assert.equal(await cache.match(`/models/${MODEL}/onnx/model_fp16.onnx`), undefined);
  const res = await cache.match(`/models/${MODEL}/config.json`);
  assert.equal(JSON.parse(await res.text()).model_type, 'bert');
});
