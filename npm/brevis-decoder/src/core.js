// The platform-shaped API of brevis-decoder, over the wasm-bindgen layer in
// ../wasm (built from the Rust crate decoder-wasm, feature `wasm`).
//
// Everything here is environment-neutral: the entry points (index.js for
// browsers, workers, bundlers and edge runtimes; node.js for Node) only tell
// `init` where the .wasm file lives by default.

import wasmInit, { ArchiveHandle, StreamHandle } from '../wasm/brevis_decoder.js';

// ---------------------------------------------------------------- errors

/** Every failure of a bad, truncated or hostile archive, or of a broken limit. */
export class BrevisError extends Error {
  constructor(message, details = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'BrevisError';
    /** 'truncated' | 'corrupt' | 'limit' | 'unsupported' | 'base' (a fine-tune stored against its base: not supported in JS) | 'usage' */
    this.code = details.code ?? 'corrupt';
    /** Byte offset in the archive of the record being read, when known. */
    this.offset = details.offset;
    /** Path of the file being rebuilt, when known. */
    this.file = details.file;
    /** Tensor or segment name, when known. */
    this.segment = details.segment;
    /** Chunk index within the segment, when known. */
    this.chunk = details.chunk;
  }
}

/** Turns what the wasm layer throws into a BrevisError (others pass through). */
function wrapError(e) {
  if (e instanceof BrevisError) return e;
  if (e && e.name === 'BrevisError') {
    return new BrevisError(e.message, { code: e.code, offset: e.offset, file: e.file, segment: e.segment, chunk: e.chunk });
  }
  return e;
}

function usage(message) {
  return new BrevisError(message, { code: 'usage' });
}

// ---------------------------------------------------------------- init

let defaultSource;
let ready;
let initialized = false;
let wasmExports;

/** Entry points call this to say where the .wasm is when `init()` gets no source. */
export function setDefaultWasmSource(load) {
  defaultSource = load;
}

let hostSha256;

/**
 * The Node entry calls this with `() => createHash('sha256')`: `BrevisDecoder`
 * then hashes SHA-256 files itself, with node:crypto (the CPU's SHA
 * instructions; wasm has none), and the wasm decoder leaves them alone.
 */
export function setHostSha256(make) {
  hostSha256 = make;
}

/**
 * Loads the WebAssembly module once. Called implicitly by every async API;
 * call it yourself to choose the source: a `WebAssembly.Module` (edge runtimes
 * that cannot compile from bytes), bytes, a `Response`, a URL or its string.
 */
export function init(source) {
  if (!ready) {
    ready = (async () => {
      let src = await source;
      if (src === undefined) {
        if (!defaultSource) throw usage('brevis-decoder: no default wasm location; call init(source)');
        src = await defaultSource();
      }
      wasmExports = await wasmInit({ module_or_path: src });
      initialized = true;
    })();
    ready.catch(() => {
      ready = undefined;
    });
  }
  return ready;
}

/**
 * Bytes of WebAssembly memory in use (it only grows): for checking that
 * streaming stays bounded. 0 before `init`.
 */
export function wasmMemoryBytes() {
  return wasmExports ? wasmExports.memory.buffer.byteLength : 0;
}

function requireInit() {
  if (!initialized) throw usage('brevis-decoder is not initialized: `await init()` first (the async APIs do it for you)');
}

// ---------------------------------------------------------------- dtypes

const TYPED_ARRAYS = {
  BOOL: Uint8Array,
  U8: Uint8Array,
  I8: Int8Array,
  F8_E4M3: Uint8Array,
  F8_E5M2: Uint8Array,
  I16: Int16Array,
  U16: Uint16Array,
  F16: Uint16Array,
  BF16: Uint16Array,
  I32: Int32Array,
  U32: Uint32Array,
  F32: Float32Array,
  F64: Float64Array,
  I64: BigInt64Array,
  U64: BigUint64Array,
};

/**
 * A typed array over `bytes` (no copy) for a dtype: Float32Array for F32,
 * Uint16Array for the bits of F16 and BF16, Uint8Array for FP8, BigInt64Array
 * for I64, ... Falls back to the bytes when the length or alignment does not
 * fit the element size. Data are little-endian, as on every platform that
 * runs WebAssembly.
 */
export function typedArrayFor(dtype, bytes) {
  const Ctor = TYPED_ARRAYS[dtype] ?? Uint8Array;
  const size = Ctor.BYTES_PER_ELEMENT;
  if (size === 1) return new Ctor(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.byteLength % size !== 0 || bytes.byteOffset % size !== 0) return bytes;
  return new Ctor(bytes.buffer, bytes.byteOffset, bytes.byteLength / size);
}

// ---------------------------------------------------------------- buffers

// Decoded outputs go into buffers sized from what the archive declares, but a
// hostile archive may declare terabytes and deliver nothing: allocate up front
// only what the input has earned, grow (by doubling) beyond it. (The same rule
// as the decoder crate's `earned_capacity`, by which `Archive::read_file` sizes its output.)
const EARNED_FLOOR = 16 << 20;
const EARNED_RATIO = 64;

class GrowableBytes {
  constructor(declared, bytesIn) {
    this.declared = declared;
    this.bytes = new Uint8Array(Math.min(declared, Math.max(EARNED_FLOOR, bytesIn * EARNED_RATIO)));
    this.length = 0;
  }

  reserve(n) {
    const need = this.length + n;
    if (need > this.declared) throw new BrevisError('decoded data longer than declared', { code: 'corrupt' });
    if (need > this.bytes.length) {
      const grown = new Uint8Array(Math.min(this.declared, Math.max(need, this.bytes.length * 2)));
      grown.set(this.bytes.subarray(0, this.length));
      this.bytes = grown;
    }
  }

  done() {
    return this.length === this.bytes.length ? this.bytes : this.bytes.slice(0, this.length);
  }
}

// ---------------------------------------------------------------- push API

const NEED_INPUT = 0;
const FILE_START = 1;
const SEGMENT_START = 2;
const DATA = 3;
const SEGMENT_END = 4;
const FILE_END = 5;
const END = 6;

/** Pieces pushed into wasm at once: bounds wasm memory whatever callers push. */
const PUSH_SLICE = 1 << 20;

/** `[maxOutputBytes, maxRatio]` for the wasm handles, checked. */
function limitsOf(options) {
  const number = (name, absent) => {
    const v = options?.[name];
    if (v === undefined || v === null) return absent;
    if (typeof v !== 'number' || Number.isNaN(v) || v < 0) throw usage(`${name} must be a number >= 0`);
    return v;
  };
  // maxRatio: -1 asks the wasm side for its default (4096 bytes out per byte in).
  return [number('maxOutputBytes', Infinity), number('maxRatio', -1)];
}

function asBytes(chunk) {
  if (chunk instanceof Uint8Array) return chunk;
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (chunk instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && chunk instanceof SharedArrayBuffer)) {
    return new Uint8Array(chunk);
  }
  throw usage('expected a Uint8Array, another ArrayBuffer view or an ArrayBuffer');
}

/**
 * The push decoder: feed compressed bytes as they arrive with `push`, receive
 * events as they complete. Synchronous; construct it after `await init()` (or
 * with `await BrevisDecoder.create()`).
 *
 * Events (objects with a `type`):
 * - `{ type: 'fileStart', path, size }`
 * - `{ type: 'segment', path, name, dtype, shape, bytes }` a whole segment —
 *   a tensor (dtype like 'F32', shape an array of numbers) or opaque bytes
 *   (dtype and shape null); with `{ pieces: true }` instead:
 * - `{ type: 'segmentStart', path, name, dtype, shape, size }`, then
 *   `{ type: 'data', path, name, offset, bytes }` per decoded chunk, then
 *   `{ type: 'segmentEnd', path, name }`
 * - `{ type: 'fileEnd', path, size, digest, digestAlgorithm, sha256 }` the file is rebuilt and its
 *   digest (hex; `digestAlgorithm` `'sha256'`, `'blake3'` or `'xxh3-128'`, as the archive says) matched; `sha256`
 *   is the digest when it is a SHA-256, else `null`
 * - `{ type: 'end' }` the archive is complete and verified
 *
 * Options: `maxOutputBytes` (a cap on all output, against decompression
 * bombs), `maxRatio` (most output per archive byte beyond the first 64 MiB;
 * default 4096, 0 lifts it), `pieces`,
 * `onProgress({ bytesIn, bytesOut, tensorsDone, filesDone })`.
 */
export class BrevisDecoder {
  static async create(options) {
    await init();
    return new BrevisDecoder(options);
  }

  constructor(options = {}) {
    requireInit();
    this._handle = new StreamHandle(...limitsOf(options));
    // Then every data event of a SHA-256 file is hashed below and checked at
    // its end, with the host hash this decoder was made with.
    this._hostSha = hostSha256;
    this._sha = null;
    if (hostSha256) this._handle.leaveSha256ToCaller();
    this._pieces = !!options.pieces;
    // decodeArchive's mode: each file's bytes copied from wasm memory straight
    // into one buffer per file (returned with its fileEnd event), no data events.
    this._collectFiles = false;
    this._fileBuffer = null;
    // verifyArchive's mode: no data events and no copy out of wasm memory,
    // but for the bytes of SHA-256 files hashed here, which go through one
    // scratch buffer, reused.
    this._discardData = false;
    this._scratch = null;
    // Archive bytes known to be in hand (a whole archive in memory): what each
    // file's buffer may take up front is earned by them, not only by bytesIn.
    this._earnedIn = 0;
    this._onProgress = options.onProgress;
    this._file = null;
    this._segment = null;
    this._ended = false;
    this._failed = null;
    /** Compressed bytes pushed so far. */
    this.bytesIn = 0;
    /** Decoded bytes produced so far. */
    this.bytesOut = 0;
    /** Tensors completed so far. */
    this.tensorsDone = 0;
    /** Files completed (and verified) so far. */
    this.filesDone = 0;
  }

  /** Feeds bytes; returns the events they completed, in order. */
  push(chunk) {
    const events = [];
    this.pushTo(chunk, (e) => events.push(e));
    return events;
  }

  /** Like `push`, handing each event to `emit` as soon as it is decoded. */
  pushTo(chunk, emit) {
    if (this._failed) throw this._failed;
    const bytes = asBytes(chunk);
    try {
      for (let at = 0; at < bytes.length || at === 0; at += PUSH_SLICE) {
        const piece = bytes.subarray(at, at + PUSH_SLICE);
        this._handle.push(piece);
        this.bytesIn += piece.length;
        this._drain(emit);
        if (bytes.length === 0) break;
      }
    } catch (e) {
      this._failed = wrapError(e);
      throw this._failed;
    }
    this._onProgress?.({ bytesIn: this.bytesIn, bytesOut: this.bytesOut, tensorsDone: this.tensorsDone, filesDone: this.filesDone });
  }

  /** Says the input has ended: throws a BrevisError unless the archive was complete. */
  end() {
    if (this._failed) throw this._failed;
    try {
      this._handle.finish();
    } catch (e) {
      this._failed = wrapError(e);
      throw this._failed;
    }
  }

  /** Frees the wasm memory now instead of at garbage collection. */
  free() {
    this._handle?.free();
    this._handle = null;
  }

  _drain(emit) {
    const h = this._handle;
    for (;;) {
      const code = h.next_event();
      switch (code) {
        case NEED_INPUT:
          return;
        case FILE_START: {
          this._file = { path: h.path(), size: h.size() };
          this._sha = this._hostSha && h.digestAlgorithm() === 'sha256' ? this._hostSha() : null;
          if (this._collectFiles) this._fileBuffer = new GrowableBytes(this._file.size, Math.max(this.bytesIn, this._earnedIn));
          emit({ type: 'fileStart', path: this._file.path, size: this._file.size });
          break;
        }
        case SEGMENT_START: {
          const dtype = h.dtype() ?? null;
          const shape = h.shape();
          const seg = {
            path: this._file?.path,
            name: h.name(),
            dtype,
            shape: shape ? Array.from(shape) : null,
            size: h.size(),
            offset: 0,
          };
          this._segment = seg;
          if (this._pieces) {
            emit({ type: 'segmentStart', path: seg.path, name: seg.name, dtype, shape: seg.shape, size: seg.size });
          } else {
            seg.buffer = new GrowableBytes(seg.size, this.bytesIn);
          }
          break;
        }
        case DATA: {
          const seg = this._segment;
          const n = h.size();
          this.bytesOut += n;
          const buf = this._fileBuffer ?? (this._pieces ? null : seg.buffer);
          if (this._discardData) {
            if (this._sha) {
              if (!this._scratch || this._scratch.length < n) this._scratch = new Uint8Array(n);
              h.copy_data_to(this._scratch, 0);
              this._sha.update(this._scratch.subarray(0, n));
            }
          } else if (buf) {
            buf.reserve(n);
            h.copy_data_to(buf.bytes, buf.length);
            this._sha?.update(buf.bytes.subarray(buf.length, buf.length + n));
            buf.length += n;
          } else {
            const bytes = h.take_data();
            this._sha?.update(bytes);
            emit({ type: 'data', path: seg.path, name: seg.name, offset: seg.offset, bytes });
          }
          seg.offset += n;
          break;
        }
        case SEGMENT_END: {
          const seg = this._segment;
          this._segment = null;
          if (seg.dtype) this.tensorsDone += 1;
          if (this._pieces) {
            emit({ type: 'segmentEnd', path: seg.path, name: seg.name });
          } else {
            emit({ type: 'segment', path: seg.path, name: seg.name, dtype: seg.dtype, shape: seg.shape, bytes: seg.buffer.done() });
          }
          break;
        }
        case FILE_END: {
          this.filesDone += 1;
          const digest = h.digest();
          const digestAlgorithm = h.digestAlgorithm();
          // Unchecked by wasm (see the constructor): checked here, or the file fails.
          if (this._hostSha && digestAlgorithm === 'sha256' && this._sha?.digest('hex') !== digest) {
            throw new BrevisError(`checksum mismatch in file SHA-256 (stored ${digest})`, { file: h.path() });
          }
          const sha256 = digestAlgorithm === 'sha256' ? digest : null;
          const end = { type: 'fileEnd', path: h.path(), size: this._file?.size, digest, digestAlgorithm, sha256 };
          if (this._fileBuffer) end.bytes = this._fileBuffer.done();
          emit(end);
          this._file = null;
          this._fileBuffer = null;
          break;
        }
        case END:
          this._ended = true;
          emit({ type: 'end' });
          break;
        default:
          throw new BrevisError(`unknown event code ${code}`);
      }
    }
  }
}

// ---------------------------------------------------------------- sources

/**
 * Iterates the bytes of any source: a ReadableStream, a Response, a Blob, an
 * async or sync iterable of chunks, an ArrayBuffer or a view.
 */
async function* chunksOf(source) {
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    yield asBytes(source);
    return;
  }
  if (typeof Response !== 'undefined' && source instanceof Response) {
    if (!source.ok) throw usage(`HTTP ${source.status} ${source.statusText} for ${source.url || 'the archive'}`);
    if (!source.body) return;
    source = source.body;
  }
  if (typeof Blob !== 'undefined' && source instanceof Blob) source = source.stream();
  if (source && typeof source.getReader === 'function') {
    const reader = source.getReader();
    let finished = false;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          finished = true;
          return;
        }
        yield asBytes(value);
      }
    } finally {
      // Stopped early (an error, or the caller broke out): stop the download too.
      if (!finished) await reader.cancel().catch(() => {});
      reader.releaseLock();
    }
  }
  if (source && (typeof source[Symbol.asyncIterator] === 'function' || typeof source[Symbol.iterator] === 'function')) {
    for await (const chunk of source) yield asBytes(chunk);
    return;
  }
  throw usage('expected a ReadableStream, Response, Blob, (async) iterable of chunks, ArrayBuffer or view');
}

/** Resolves a string or URL to a Response with fetch; passes other sources through. */
async function resolveSource(source) {
  if (typeof source === 'string' || (typeof URL !== 'undefined' && source instanceof URL)) {
    const res = await fetch(source);
    if (!res.ok) throw usage(`HTTP ${res.status} ${res.statusText} fetching ${source}`);
    return res;
  }
  return source;
}

// ---------------------------------------------------------------- whole archives

/**
 * Decodes every file of an archive: resolves to `[{ path, size, digest, digestAlgorithm, sha256, bytes }]`,
 * each file's SHA-256 verified. `source` is anything `chunksOf` takes, or a
 * URL. Options: `maxOutputBytes`, `onProgress`.
 */
export async function decodeArchive(source, options = {}) {
  await init();
  const decoder = new BrevisDecoder({ ...options, pieces: true });
  decoder._collectFiles = true;
  const resolved = await resolveSource(source);
  // A whole archive in hand (in memory, or a Blob or File): its length has
  // earned each file's buffer up front, so a large file is never regrown.
  if (resolved instanceof ArrayBuffer || ArrayBuffer.isView(resolved)) decoder._earnedIn = resolved.byteLength;
  else if (typeof Blob !== 'undefined' && resolved instanceof Blob) decoder._earnedIn = resolved.size;
  const files = [];
  const onEvent = (e) => {
    if (e.type === 'fileEnd') {
      files.push({ path: e.path, size: e.bytes.length, digest: e.digest, digestAlgorithm: e.digestAlgorithm, sha256: e.sha256, bytes: e.bytes });
    }
  };
  await pushAll(decoder, resolved, onEvent);
  return files;
}

/** Feeds every chunk of `source` to `decoder` (events to `onEvent`), then ends and frees it. */
async function pushAll(decoder, source, onEvent) {
  try {
    for await (const chunk of chunksOf(source)) decoder.pushTo(chunk, onEvent);
    decoder.end();
  } finally {
    decoder.free();
  }
}

/**
 * Checks an archive without keeping what it decodes, as `brevis verify` does:
 * every chunk is decoded and checked, and every file against its digest, but
 * no decoded byte is handed to JavaScript (only those of SHA-256 files hashed
 * with node:crypto, through one buffer reused). Resolves to
 * `[{ path, size, digest, digestAlgorithm, sha256 }]`, as `decodeArchive`
 * without `bytes`; rejects with a BrevisError where it would. Memory stays
 * bounded, as for a stream. Options: `maxOutputBytes`, `maxRatio`, `onProgress`.
 */
export async function verifyArchive(source, options = {}) {
  await init();
  const decoder = new BrevisDecoder({ ...options, pieces: true });
  decoder._discardData = true;
  const files = [];
  const onEvent = (e) => {
    if (e.type === 'fileEnd') {
      files.push({ path: e.path, size: e.size, digest: e.digest, digestAlgorithm: e.digestAlgorithm, sha256: e.sha256 });
    }
  };
  await pushAll(decoder, await resolveSource(source), onEvent);
  return files;
}

/**
 * Yields the tensors of an archive as they complete, streaming:
 * `{ file, name, dtype, shape, data }` with `data` the typed array for the
 * dtype (see `typedArrayFor`). Opaque segments (headers, graphs) are skipped.
 * Options: `maxOutputBytes`, `onProgress`.
 */
export async function* readTensors(source, options = {}) {
  await init();
  const decoder = new BrevisDecoder({ ...options, pieces: false });
  const ready = [];
  const onEvent = (e) => {
    if (e.type === 'segment' && e.dtype) {
      ready.push({ file: e.path, name: e.name, dtype: e.dtype, shape: e.shape, data: typedArrayFor(e.dtype, e.bytes) });
    }
  };
  try {
    for await (const chunk of chunksOf(await resolveSource(source))) {
      decoder.pushTo(chunk, onEvent);
      while (ready.length) yield ready.shift();
    }
    decoder.end();
  } finally {
    decoder.free();
  }
}

// ---------------------------------------------------------------- TransformStream

/**
 * Rebuilds one archived file from a stream of archive bytes:
 * `response.body.pipeThrough(new BrevisDecompressionStream())`.
 *
 * Memory stays bounded (one record and one decoded chunk at a time, plus what
 * the reader has not taken). Options: `path` (which file, when the archive
 * holds several; without it an archive of several files is an error),
 * `maxOutputBytes`, `onProgress`. The stream errors with a BrevisError on a
 * bad, truncated or over-cap archive, and only closes once the file's SHA-256
 * and the whole archive were verified.
 */
export class BrevisDecompressionStream extends TransformStream {
  constructor(options = {}) {
    const want = options.path;
    let decoder;
    let files = 0;
    let selected = false;
    let found = false;
    super({
      async start() {
        await init();
        decoder = new BrevisDecoder({ ...options, pieces: true });
      },
      transform(chunk, controller) {
        decoder.pushTo(chunk, (e) => {
          if (e.type === 'fileStart') {
            files += 1;
            selected = want === undefined ? true : e.path === want;
            if (want === undefined && files > 1) {
              throw usage(`the archive holds more than one file (second: \`${e.path}\`); pass { path } to choose one`);
            }
            found ||= selected;
          } else if (e.type === 'data' && selected) {
            controller.enqueue(e.bytes);
          } else if (e.type === 'fileEnd') {
            selected = false;
          }
        });
      },
      flush() {
        decoder.end();
        decoder.free();
        if (want !== undefined && !found) throw usage(`no file \`${want}\` in the archive`);
        if (want === undefined && files === 0) throw usage('the archive holds no file');
      },
    });
  }
}

// ---------------------------------------------------------------- random access

/**
 * An archive held in memory, opened through its index: lists files with their
 * decoded sizes and serves each one as bytes, a stream or a `Response` (with
 * `content-length`), decoding chunk by chunk on demand. The compressed bytes
 * live in wasm memory until `close()`.
 */
export class BrevisArchive {
  /** Opens archive bytes (or a Response, stream, URL, ...). Options: `maxOutputBytes`. */
  static async open(source, options = {}) {
    await init();
    const resolved = await resolveSource(source);
    let bytes;
    if (resolved instanceof ArrayBuffer || ArrayBuffer.isView(resolved)) bytes = asBytes(resolved);
    else {
      const parts = [];
      let total = 0;
      for await (const c of chunksOf(resolved)) {
        parts.push(c);
        total += c.length;
      }
      bytes = new Uint8Array(total);
      let at = 0;
      for (const p of parts) {
        bytes.set(p, at);
        at += p.length;
      }
    }
    try {
      return new BrevisArchive(new ArchiveHandle(bytes, ...limitsOf(options)));
    } catch (e) {
      throw wrapError(e);
    }
  }

  constructor(handle) {
    this._handle = handle;
    /** `[{ path, size, digest, digestAlgorithm, sha256, segments: [{ name, dtype, shape, size, offset, chunks, stored }] }]` */
    this.files = handle.files();
  }

  _index(path) {
    const i = this.files.findIndex((f) => f.path === path);
    if (i < 0) throw usage(`no file \`${path}\` in the archive`);
    return i;
  }

  /** Whether the archive holds `path`. */
  has(path) {
    return this.files.some((f) => f.path === path);
  }

  /** The whole file, size and SHA-256 checked. */
  async readFile(path) {
    try {
      return this._handle.read_file(this._index(path));
    } catch (e) {
      throw wrapError(e);
    }
  }

  /** The file as a stream of decoded chunks; errors if its digest does not match. */
  stream(path) {
    const fi = this._index(path);
    const handle = this._handle;
    const segments = this.files[fi].segments;
    let s = 0;
    let c = 0;
    let hasher;
    // The hasher is made on the first pull: a Response nobody reads (some
    // callers ask twice) holds no wasm memory.
    return new ReadableStream({
      pull(controller) {
        hasher ??= handle.file_hasher(fi);
        try {
          while (s < segments.length && c >= segments[s].chunks) {
            s += 1;
            c = 0;
          }
          if (s >= segments.length) {
            handle.verify_file(fi, hasher);
            hasher.free();
            hasher = undefined;
            controller.close();
            return;
          }
          controller.enqueue(handle.read_chunk_hashed(fi, s, c, hasher));
          c += 1;
        } catch (e) {
          hasher.free();
          hasher = undefined;
          throw wrapError(e);
        }
      },
      cancel() {
        hasher?.free();
      },
    }, { highWaterMark: 0 });
  }

  /**
   * The program that rebuilds one chunk of a segment, in the DSL's text form
   * (as `brevis inspect` prints it). `segment` is an index into the file's
   * `segments`.
   */
  programText(path, segment, chunk = 0) {
    try {
      return this._handle.program_text(this._index(path), segment, chunk);
    } catch (e) {
      throw wrapError(e);
    }
  }

  /** The file as a streaming `Response` carrying `content-length` (and a content type guessed from the name). */
  response(path) {
    const file = this.files[this._index(path)];
    const headers = { 'content-length': String(file.size), 'content-type': contentType(path) };
    return new Response(this.stream(path), { status: 200, headers });
  }

  /** Frees the wasm memory holding the archive. */
  close() {
    this._handle?.free();
    this._handle = null;
  }
}

function contentType(path) {
  if (path.endsWith('.json')) return 'application/json';
  if (path.endsWith('.txt') || path.endsWith('.md')) return 'text/plain';
  return 'application/octet-stream';
}
