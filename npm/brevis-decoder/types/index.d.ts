/** Where the WebAssembly module comes from. */
export type WasmSource =
  | WebAssembly.Module
  | BufferSource
  | Response
  | Promise<Response>
  | URL
  | string;

/** Anything the decoding functions read an archive from. */
export type ArchiveSource =
  | ReadableStream<Uint8Array>
  | Response
  | Blob
  | AsyncIterable<ArrayBufferView | ArrayBuffer>
  | Iterable<ArrayBufferView | ArrayBuffer>
  | ArrayBuffer
  | ArrayBufferView
  | URL
  | string;

/** Safetensors-style dtype names. */
export type DType =
  | 'BOOL' | 'U8' | 'I8' | 'F8_E4M3' | 'F8_E5M2' | 'I16' | 'U16' | 'F16' | 'BF16'
  | 'I32' | 'U32' | 'F32' | 'F64' | 'I64' | 'U64';

/** The typed array a tensor's data comes in. */
export type TensorData =
  | Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array
  | Float32Array | Float64Array | BigInt64Array | BigUint64Array;

/** Progress, reported after each piece of input. */
export interface Progress {
  bytesIn: number;
  bytesOut: number;
  tensorsDone: number;
  filesDone: number;
}

export interface DecodeOptions {
  /** Refuse to produce more than this many bytes in all (against decompression bombs). */
  maxOutputBytes?: number;
  /** Most bytes of output per byte of archive beyond the first 64 MiB (default 4096; 0 lifts it). */
  maxRatio?: number;
  onProgress?: (progress: Progress) => void;
}

/** A failure of a bad, truncated or hostile archive, of a limit, or of a call. */
export class BrevisError extends Error {
  name: 'BrevisError';
  code: 'truncated' | 'corrupt' | 'limit' | 'unsupported' | 'base' | 'usage';
  /** Byte offset in the archive of the record being read. */
  offset?: number;
  /** Path of the file being rebuilt. */
  file?: string;
  /** Tensor or segment name. */
  segment?: string;
  /** Chunk index within the segment. */
  chunk?: number;
}

/** Loads the WebAssembly module once; the async APIs call it for you. */
export function init(source?: WasmSource | Promise<WasmSource>): Promise<void>;

/** Bytes of WebAssembly memory (it only grows; 0 before init): to check streaming stays bounded. */
export function wasmMemoryBytes(): number;

/** A typed array over the bytes (no copy) for a dtype. */
export function typedArrayFor(dtype: DType | string, bytes: Uint8Array): TensorData;

/** A file of an archive, rebuilt and checked against its digest. */
export interface VerifiedFile {
  path: string;
  size: number;
  /** Hex digest, verified: SHA-256, BLAKE3 or XXH3-128 (32 hex digits), as `digestAlgorithm` says (the archive's choice). */
  digest: string;
  digestAlgorithm: DigestAlgorithm;
  /** `digest` when it is a SHA-256 (what model hubs publish), else `null`. */
  sha256: string | null;
}

export interface DecodedFile extends VerifiedFile {
  bytes: Uint8Array;
}

/** Hash of an archive's file digests (`brevis compress --digest`). */
export type DigestAlgorithm = 'sha256' | 'blake3' | 'xxh3-128';

/** Decodes every file of an archive, each verified by its digest. */
export function decodeArchive(source: ArchiveSource, options?: DecodeOptions): Promise<DecodedFile[]>;

/**
 * Checks an archive as `brevis verify` does, without keeping what it decodes:
 * every chunk and every file digest checked, no decoded byte handed out.
 */
export function verifyArchive(source: ArchiveSource, options?: DecodeOptions): Promise<VerifiedFile[]>;

export interface Tensor {
  /** The archived file the tensor belongs to. */
  file: string;
  name: string;
  dtype: DType;
  shape: number[];
  data: TensorData;
}

/** Yields tensors as they complete, streaming; opaque segments are skipped. */
export function readTensors(source: ArchiveSource, options?: DecodeOptions): AsyncGenerator<Tensor, void, undefined>;

export interface DecompressionStreamOptions extends DecodeOptions {
  /** Which file to output when the archive holds several. */
  path?: string;
}

/** Rebuilds one archived file: `response.body.pipeThrough(new BrevisDecompressionStream())`. */
export class BrevisDecompressionStream extends TransformStream<ArrayBufferView | ArrayBuffer, Uint8Array> {
  constructor(options?: DecompressionStreamOptions);
}

export type BrevisEvent =
  | { type: 'fileStart'; path: string; size: number }
  | { type: 'segment'; path: string; name: string; dtype: DType | null; shape: number[] | null; bytes: Uint8Array }
  | { type: 'segmentStart'; path: string; name: string; dtype: DType | null; shape: number[] | null; size: number }
  | { type: 'data'; path: string; name: string; offset: number; bytes: Uint8Array }
  | { type: 'segmentEnd'; path: string; name: string }
  | { type: 'fileEnd'; path: string; size: number; digest: string; digestAlgorithm: DigestAlgorithm; sha256: string | null }
  | { type: 'end' };

export interface DecoderOptions extends DecodeOptions {
  /** Emit segmentStart/data/segmentEnd per decoded chunk instead of whole segments. */
  pieces?: boolean;
}

/** The push decoder (synchronous): feed bytes, receive events as they complete. */
export class BrevisDecoder {
  static create(options?: DecoderOptions): Promise<BrevisDecoder>;
  /** Needs `await init()` first. */
  constructor(options?: DecoderOptions);
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly tensorsDone: number;
  readonly filesDone: number;
  push(chunk: ArrayBufferView | ArrayBuffer): BrevisEvent[];
  pushTo(chunk: ArrayBufferView | ArrayBuffer, emit: (event: BrevisEvent) => void): void;
  /** The input has ended: throws unless the archive was complete. */
  end(): void;
  free(): void;
}

export interface SegmentInfo {
  name: string;
  dtype: DType | null;
  shape: number[] | null;
  size: number;
  /** Offset of the segment in the rebuilt file. */
  offset: number;
  /** How many chunks. */
  chunks: number;
  /** Bytes of its chunk records in the archive, framing included. */
  stored: number;
}

export interface FileInfo {
  path: string;
  size: number;
  digest: string;
  digestAlgorithm: DigestAlgorithm;
  sha256: string | null;
  segments: SegmentInfo[];
}

/** An archive in memory, opened through its index, files served on demand. */
export class BrevisArchive {
  static open(source: ArchiveSource, options?: { maxOutputBytes?: number; maxRatio?: number }): Promise<BrevisArchive>;
  readonly files: FileInfo[];
  has(path: string): boolean;
  readFile(path: string): Promise<Uint8Array>;
  stream(path: string): ReadableStream<Uint8Array>;
  /** The program of one chunk of a segment (an index into the file's segments), in text form. */
  programText(path: string, segment: number, chunk?: number): string;
  /** A streaming Response with content-length. */
  response(path: string): Response;
  close(): void;
}
