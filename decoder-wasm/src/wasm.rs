//! JavaScript bindings (feature `wasm`), the low layer of the npm package
//! `brevis-decoder` (npm/brevis-decoder). The package's own JavaScript shapes
//! these into platform APIs (promises, `TransformStream`, async iterators);
//! nothing here is meant to be called by users directly.
//!
//! Two handles, both over the same decoder as the native code:
//! - [`StreamHandle`]: the push decoder — push compressed bytes, pull one event
//!   at a time and read its fields; decoded bytes move to JavaScript in one copy
//!   (a fresh `Uint8Array`, or straight into a caller's buffer).
//! - [`ArchiveHandle`]: a whole archive held in wasm memory, opened through its
//!   index, read chunk by chunk in any order (the transformers.js adapter serves
//!   files from it with their sizes known up front).
//!
//! Errors become JavaScript `Error`s named `BrevisError` with `code`
//! (`truncated`, `corrupt`, `limit`, `unsupported`, `base`), `offset`, `file`,
//! `segment` and `chunk` properties where known. Deduplicated segments (copies)
//! decode transparently; segments stored against a fine-tune's base are not
//! supported here (no base provider): they fail with code `base`.
//!
//! wasm-bindgen's generated glue is the only `unsafe` in the crate; this module
//! itself writes none (the crate denies it everywhere else).

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use brevis_format::archive::{DigestKind, SegmentKind};
use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;

use crate::archive::FileInfo;
use crate::digest::{mismatch, Digester};
use crate::{Archive, DecodeError, DecodeLimits, ErrorKind, Event, StreamDecoder};

/// Limits from JavaScript: an output cap (any non-finite or negative value —
/// `Infinity`, `NaN`, `-1` — means no cap) and the most output per archive
/// byte (`max_ratio`; non-finite or negative: the default, 0: no limit).
fn limits(max_output_bytes: f64, max_ratio: f64) -> DecodeLimits {
    let cap = if max_output_bytes.is_finite() && max_output_bytes >= 0.0 {
        max_output_bytes as u64
    } else {
        u64::MAX
    };
    let ratio = if max_ratio.is_finite() && max_ratio >= 0.0 {
        max_ratio as u64
    } else {
        crate::DEFAULT_MAX_RATIO
    };
    DecodeLimits {
        max_output_bytes: cap,
        max_ratio: ratio,
        ..DecodeLimits::default()
    }
}

fn set(obj: &Object, key: &str, value: JsValue) {
    // Setting a property on a fresh plain object cannot fail.
    let _ = Reflect::set(obj, &JsValue::from_str(key), &value);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A decoder error as a JavaScript `Error` carrying where it happened.
fn js_error(e: &DecodeError) -> JsValue {
    let err = js_sys::Error::new(&e.to_string());
    err.set_name("BrevisError");
    let code = match e.kind() {
        ErrorKind::InsufficientData => "truncated",
        ErrorKind::Limit => "limit",
        ErrorKind::Compatibility => "unsupported",
        // A fine-tune stored against its base: the bindings take no base.
        ErrorKind::Base => "base",
        _ => "corrupt",
    };
    let obj: &Object = err.as_ref();
    set(obj, "code", JsValue::from_str(code));
    let l = &e.location;
    if let Some(o) = l.offset {
        set(obj, "offset", JsValue::from_f64(o as f64));
    }
    if let Some(f) = &l.file {
        set(obj, "file", JsValue::from_str(f));
    }
    if let Some(s) = &l.segment {
        set(obj, "segment", JsValue::from_str(s));
    }
    if let Some(c) = l.chunk {
        set(obj, "chunk", JsValue::from_f64(c as f64));
    }
    err.into()
}

fn dtype_of(kind: &SegmentKind) -> Option<String> {
    match kind {
        SegmentKind::Tensor { dtype, .. } => Some(dtype.name().to_string()),
        _ => None,
    }
}

fn shape_of(kind: &SegmentKind) -> Option<Vec<f64>> {
    match kind {
        SegmentKind::Tensor { shape, .. } => Some(shape.iter().map(|&d| d as f64).collect()),
        _ => None,
    }
}

/// Event codes returned by [`StreamHandle::next_event`].
const NEED_INPUT: u32 = 0;
const FILE_START: u32 = 1;
const SEGMENT_START: u32 = 2;
const DATA: u32 = 3;
const SEGMENT_END: u32 = 4;
const FILE_END: u32 = 5;
const END: u32 = 6;

/// The push decoder for JavaScript: push bytes, then call [`StreamHandle::next_event`]
/// until it returns 0 (needs more input); the getters describe the event just
/// returned.
#[wasm_bindgen]
pub struct StreamHandle {
    decoder: StreamDecoder,
    event: Option<Event>,
}

#[wasm_bindgen]
impl StreamHandle {
    /// A decoder that refuses to produce more than `max_output_bytes` in all
    /// (non-finite or negative: no cap) or more than `max_ratio` bytes per
    /// archive byte (see `DecodeLimits::max_ratio`; 0: no limit, non-finite or
    /// negative: the default).
    #[wasm_bindgen(constructor)]
    pub fn new(max_output_bytes: f64, max_ratio: f64) -> StreamHandle {
        StreamHandle {
            decoder: StreamDecoder::new(limits(max_output_bytes, max_ratio)),
            event: None,
        }
    }

    /// Leaves SHA-256 file digests to the caller (see the decoder's
    /// `leave_sha256_to_caller`): file end then reports the archive's digest,
    /// unchecked. Call before the first push, and only if the caller hashes
    /// every data event of a `sha256` file and compares.
    #[wasm_bindgen(js_name = leaveSha256ToCaller)]
    pub fn leave_sha256_to_caller(&mut self) {
        self.decoder.leave_sha256_to_caller();
    }

    /// Appends compressed bytes, copied from the JavaScript array straight into
    /// the decoder's input buffer (a `&[u8]` argument would first be copied into
    /// a fresh allocation of its own by the bindings, then again from there).
    pub fn push(&mut self, input: &Uint8Array) {
        let len = input.length() as usize;
        let Ok(_) = self
            .decoder
            .fill(len, |space| -> Result<usize, core::convert::Infallible> {
                input.copy_to(space);
                Ok(len)
            });
    }

    /// Compressed bytes pushed and not yet consumed.
    pub fn buffered(&self) -> f64 {
        self.decoder.buffered() as f64
    }

    /// Decodes up to the next event and returns its code: 0 more input needed,
    /// 1 file start, 2 segment start, 3 data, 4 segment end, 5 file end (its
    /// digest verified, but for a SHA-256 left to the caller), 6 end of archive
    /// (everything verified). Throws a `BrevisError`.
    pub fn next_event(&mut self) -> Result<u32, JsValue> {
        self.event = self.decoder.next_event().map_err(|e| js_error(&e))?;
        Ok(match &self.event {
            None => NEED_INPUT,
            Some(Event::FileStart { .. }) => FILE_START,
            Some(Event::SegmentStart { .. }) => SEGMENT_START,
            Some(Event::Data(_)) => DATA,
            Some(Event::SegmentEnd) => SEGMENT_END,
            Some(Event::FileEnd { .. }) => FILE_END,
            Some(Event::End) => END,
        })
    }

    /// Call when the input has ended: throws unless the archive was complete.
    pub fn finish(&self) -> Result<(), JsValue> {
        self.decoder.finish().map_err(|e| js_error(&e))
    }

    /// The file's path (file start, file end).
    pub fn path(&self) -> Option<String> {
        match &self.event {
            Some(Event::FileStart { path, .. } | Event::FileEnd { path, .. }) => Some(path.clone()),
            _ => None,
        }
    }

    /// Bytes: of the file (file start), of the segment (segment start), of the
    /// decoded piece (data); 0 otherwise.
    pub fn size(&self) -> f64 {
        match &self.event {
            Some(Event::FileStart { size, .. }) => *size as f64,
            Some(Event::SegmentStart { len, .. }) => *len as f64,
            Some(Event::Data(d)) => d.len() as f64,
            _ => 0.0,
        }
    }

    /// The segment's name (segment start).
    pub fn name(&self) -> Option<String> {
        match &self.event {
            Some(Event::SegmentStart { name, .. }) => Some(name.clone()),
            _ => None,
        }
    }

    /// The tensor's dtype, by its safetensors name (segment start of a tensor).
    pub fn dtype(&self) -> Option<String> {
        match &self.event {
            Some(Event::SegmentStart { kind, .. }) => dtype_of(kind),
            _ => None,
        }
    }

    /// The tensor's shape (segment start of a tensor).
    pub fn shape(&self) -> Option<Vec<f64>> {
        match &self.event {
            Some(Event::SegmentStart { kind, .. }) => shape_of(kind),
            _ => None,
        }
    }

    /// The verified digest in hex (file end).
    pub fn digest(&self) -> Option<String> {
        match &self.event {
            Some(Event::FileEnd { digest, kind, .. }) => Some(hex(kind.hash_bytes(digest))),
            _ => None,
        }
    }

    /// The digest's hash, `sha256`, `blake3` or `xxh3-128` (file start, file
    /// end).
    #[wasm_bindgen(js_name = digestAlgorithm)]
    pub fn digest_algorithm(&self) -> Option<String> {
        match &self.event {
            Some(Event::FileEnd { kind, .. }) => Some(kind.name().into()),
            Some(Event::FileStart { .. }) => Some(self.decoder.digest_kind().name().into()),
            _ => None,
        }
    }

    /// Moves the decoded piece out as a new `Uint8Array` (data; once): copied
    /// from the decoder's buffer straight into JavaScript's (a piece of 16- or
    /// 32-bit words was copied into a `Vec<u8>` first).
    pub fn take_data(&mut self) -> Option<Uint8Array> {
        match self.event.take() {
            Some(Event::Data(d)) => Some(Uint8Array::from(&d[..])),
            other => {
                self.event = other;
                None
            }
        }
    }

    /// Copies the decoded piece into `dst` at `offset` without an intermediate
    /// buffer (data). Throws when it does not fit.
    pub fn copy_data_to(&self, dst: &Uint8Array, offset: u32) -> Result<(), JsValue> {
        match &self.event {
            Some(Event::Data(d)) => copy_into(d, dst, offset),
            _ => Err(js_sys::Error::new("no decoded data to copy").into()),
        }
    }
}

fn copy_into(data: &[u8], dst: &Uint8Array, offset: u32) -> Result<(), JsValue> {
    let end = u64::from(offset) + data.len() as u64;
    if end > u64::from(dst.length()) {
        return Err(js_sys::Error::new("destination too small for the decoded data").into());
    }
    dst.subarray(offset, end as u32).copy_from(data);
    Ok(())
}

/// A whole archive in wasm memory, opened through its index, for reading files
/// chunk by chunk in any order.
#[wasm_bindgen]
pub struct ArchiveHandle {
    data: Vec<u8>,
    files: Vec<FileInfo>,
    limits: DecodeLimits,
}

impl ArchiveHandle {
    fn archive(&self) -> Archive<'_> {
        Archive::with_index(&self.data, &self.files, self.limits)
    }

    fn file(&self, file: u32) -> Result<&FileInfo, JsValue> {
        self.files
            .get(file as usize)
            .ok_or_else(|| js_sys::Error::new("no such file in the archive").into())
    }
}

#[wasm_bindgen]
impl ArchiveHandle {
    /// Opens `bytes` (copied into wasm memory) through its index; throws a
    /// `BrevisError` when the index, the end record or any file or segment
    /// record is damaged.
    #[wasm_bindgen(constructor)]
    pub fn new(bytes: Vec<u8>, max_output_bytes: f64, max_ratio: f64) -> Result<ArchiveHandle, JsValue> {
        let limits = limits(max_output_bytes, max_ratio);
        let files = Archive::open(&bytes, limits).map_err(|e| js_error(&e))?.into_files();
        Ok(ArchiveHandle {
            data: bytes,
            files,
            limits,
        })
    }

    /// The files: an array of `{ path, size, digest, digestAlgorithm, sha256,
    /// segments: [{ name, dtype,
    /// shape, size, offset, chunks, stored }] }` (dtype and shape `null` for
    /// opaque segments; `offset` within the file; `chunks` how many; `stored`
    /// the bytes of its chunk records in the archive, framing included).
    pub fn files(&self) -> Array {
        let out = Array::new();
        for f in &self.files {
            let obj = Object::new();
            set(&obj, "path", JsValue::from_str(&f.path));
            set(&obj, "size", JsValue::from_f64(f.size as f64));
            set_digest(&obj, f.digest_kind, &f.digest);
            let segs = Array::new();
            for s in &f.segments {
                let seg = Object::new();
                set(&seg, "name", JsValue::from_str(&s.name));
                set(
                    &seg,
                    "dtype",
                    dtype_of(&s.kind).map_or(JsValue::NULL, |d| JsValue::from_str(&d)),
                );
                let shape = shape_of(&s.kind).map_or(JsValue::NULL, |dims| {
                    dims.iter().map(|&d| JsValue::from_f64(d)).collect::<Array>().into()
                });
                set(&seg, "shape", shape);
                set(&seg, "size", JsValue::from_f64(s.len as f64));
                set(&seg, "offset", JsValue::from_f64(s.file_offset as f64));
                set(&seg, "chunks", JsValue::from_f64(s.chunks.len() as f64));
                // A copy lists its source's chunks; it stores none itself.
                let stored: u64 = if s.copy_of.is_some() {
                    0
                } else {
                    s.chunks.iter().map(|c| c.record_len).sum()
                };
                set(&seg, "stored", JsValue::from_f64(stored as f64));
                segs.push(&seg);
            }
            set(&obj, "segments", segs.into());
            out.push(&obj);
        }
        out
    }

    /// Decodes chunk `chunk` of segment `segment` of file `file` (indices into
    /// [`ArchiveHandle::files`]), checked against its checksum and the index.
    pub fn read_chunk(&self, file: u32, segment: u32, chunk: u32) -> Result<Vec<u8>, JsValue> {
        let f = self.file(file)?;
        let s = f
            .segments
            .get(segment as usize)
            .ok_or_else(|| JsValue::from(js_sys::Error::new("no such segment in the file")))?;
        self.archive()
            .read_chunk(f, s, chunk as usize)
            .map_err(|e| js_error(&e))
    }

    /// [`ArchiveHandle::read_chunk`], also adding the bytes to `hasher` (so a
    /// file streamed chunk by chunk can be checked with
    /// [`ArchiveHandle::verify_file`] without copying it back into wasm).
    pub fn read_chunk_hashed(
        &self,
        file: u32,
        segment: u32,
        chunk: u32,
        hasher: &mut FileDigester,
    ) -> Result<Vec<u8>, JsValue> {
        let out = self.read_chunk(file, segment, chunk)?;
        hasher.inner.update(&out);
        Ok(out)
    }

    /// A hasher for reading file `file` chunk by chunk ([`Self::read_chunk_hashed`]):
    /// of the hash its digest is.
    pub fn file_hasher(&self, file: u32) -> Result<FileDigester, JsValue> {
        Ok(FileDigester {
            inner: Digester::new(self.file(file)?.digest_kind),
        })
    }

    /// Throws a `BrevisError` unless `hasher` (fed every chunk of file `file`,
    /// in order) gives the file's digest. The hasher starts over.
    pub fn verify_file(&self, file: u32, hasher: &mut FileDigester) -> Result<(), JsValue> {
        let f = self.file(file)?;
        if hasher.inner.kind() != f.digest_kind {
            return Err(js_sys::Error::new("hasher of another kind than the file's digest").into());
        }
        let digest = hasher.inner.finish();
        if digest == f.digest {
            return Ok(());
        }
        let e = DecodeError {
            error: mismatch(f.digest_kind, &f.digest, &digest),
            location: crate::Location {
                file: Some(f.path.clone()),
                ..Default::default()
            },
        };
        Err(js_error(&e))
    }

    /// The program of one chunk in the DSL's text form (as `brevis inspect`
    /// prints it), after checking the chunk record's checksum.
    pub fn program_text(&self, file: u32, segment: u32, chunk: u32) -> Result<String, JsValue> {
        let f = self.file(file)?;
        let c = f
            .segments
            .get(segment as usize)
            .and_then(|s| s.chunks.get(chunk as usize))
            .ok_or_else(|| JsValue::from(js_sys::Error::new("no such chunk in the file")))?;
        let body = self.archive().chunk_body(c).map_err(|e| js_error(&e))?;
        let parsed = brevis_format::archive::ChunkRecord::parse(body)
            .and_then(|rec| brevis_format::program::parse_borrowed(rec.program, &self.limits.program));
        parsed
            .map(|node| node.to_string())
            .map_err(|e| js_error(&DecodeError::new(e)))
    }

    /// Decodes a whole file, its size and digest checked.
    pub fn read_file(&self, file: u32) -> Result<Vec<u8>, JsValue> {
        let f = self.file(file)?;
        self.archive().read_file(f).map_err(|e| js_error(&e))
    }
}

/// Incremental digest for files read chunk by chunk from an [`ArchiveHandle`]
/// (made by [`ArchiveHandle::file_hasher`], fed by
/// [`ArchiveHandle::read_chunk_hashed`]).
#[wasm_bindgen]
pub struct FileDigester {
    inner: Digester,
}

/// Sets a file object's `digest` (hex), `digestAlgorithm` and `sha256` (the
/// digest when it is a SHA-256, `null` otherwise: what a model hub publishes).
fn set_digest(obj: &Object, kind: DigestKind, digest: &[u8; 32]) {
    let hexed = JsValue::from_str(&hex(kind.hash_bytes(digest)));
    set(obj, "digest", hexed.clone());
    set(obj, "digestAlgorithm", JsValue::from_str(kind.name()));
    set(
        obj,
        "sha256",
        if kind == DigestKind::Sha256 {
            hexed
        } else {
            JsValue::NULL
        },
    );
}
