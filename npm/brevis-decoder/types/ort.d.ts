import type { ArchiveSource, DecodeOptions, Tensor } from './index.js';

/** The parts of onnxruntime-web's namespace this adapter uses. */
export interface OrtLike {
  Tensor: new (type: string, data: unknown, dims?: readonly number[]) => unknown;
}

export interface OrtTensorOptions {
  /** Widen BF16 to float32 (a copy); ort.Tensor has no bfloat16 type. */
  bf16?: 'float32';
}

/** One decoded tensor as an ort.Tensor sharing its buffer. */
export function toOrtTensor<T = unknown>(ort: OrtLike, tensor: Tensor, options?: OrtTensorOptions): T;

/** Decodes an archive into `{ [name]: ort.Tensor }`, streaming. */
export function readOrtTensors<T = unknown>(
  ort: OrtLike,
  source: ArchiveSource,
  options?: DecodeOptions & OrtTensorOptions & { filter?: (tensor: Tensor) => boolean },
): Promise<Record<string, T>>;
