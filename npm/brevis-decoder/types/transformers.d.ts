import type { BrevisArchive } from './index.js';

export type ModelArchiveSource =
  | string
  | URL
  | Response
  | ArrayBuffer
  | ArrayBufferView
  | BrevisArchive
  | (() => Promise<string | URL | Response | ArrayBuffer | ArrayBufferView | BrevisArchive>);

/** A transformers.js `env.customCache` that serves model files from Brevis archives. */
export class BrevisModelCache {
  /** `archives` maps model ids (as given to `pipeline`) to their archives. */
  constructor(archives: Record<string, ModelArchiveSource>, options?: { maxOutputBytes?: number; maxRatio?: number });
  /** Which model and file a cache key names, or null. */
  resolve(key: string | Request | URL): { modelId: string; path: string } | null;
  match(key: string | Request | URL): Promise<Response | undefined>;
  put(key: string | Request | URL, response: Response): Promise<void>;
}
