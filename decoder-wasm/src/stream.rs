//! The push-style streaming decoder: feed bytes as they arrive, pull events.
//!
//! The decoder buffers at most one incomplete record plus what the caller
//! pushed and has not yet drained; each [`StreamDecoder::next_event`] call
//! decodes at most one record. It checks the archive's structure as it goes
//! (segment lengths, chunk counts, file sizes and SHA-256, the index against the
//! records actually seen), so a stream that ends cleanly was verified end to end.
//!
//! Segments marked as retained (`SegmentRecord::retain`) are kept, once decoded,
//! until their last copy: a copy segment (no chunks) is emitted from them as
//! [`Event::Data`] pieces like any other segment. What is kept at once is
//! bounded by [`DecodeLimits::max_retained_bytes`]. A decoder reading input
//! shared with its caller (feature `shared-input`: a mapped archive, say) keeps
//! instead where a retained segment's chunk records lie in that input, and
//! decodes them again for each copy: what it holds then does not grow with the
//! copies' size. Segments stored as a
//! difference from a base tensor are XORed with the tensor a
//! [`BaseProvider`] gives, after its SHA-256 is checked.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ops::Deref;

use brevis_format::archive::{
    self, check_header, open_record, parse_end, parse_index, ChunkRecord, DigestKind, FileRecord, IndexEntry,
    RecordHead, RecordKind, SegmentKind, SegmentRecord, SegmentSource, HEADER_LEN,
};
use brevis_format::program::Limits;
use brevis_format::stream::LeBytes;
use brevis_format::FormatError;

use crate::digest::{mismatch, ChunkPlace, Digester, Subtrees};
use crate::error::{DecodeError, Location};
use crate::exec::decode_chunk_bytes;
use crate::{fetch_base, xor_into, BaseProvider, DecodeLimits};

/// Bytes per [`Event::Data`] piece of a copied segment.
const COPY_PIECE: usize = 4 << 20;

/// What the streaming decoder reports, in archive order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A file starts; its bytes follow as [`Event::Data`].
    FileStart {
        /// Relative path.
        path: String,
        /// Size of the rebuilt file.
        size: u64,
    },
    /// A segment of the current file starts.
    SegmentStart {
        /// Tensor name or opaque label.
        name: String,
        /// Opaque or tensor (dtype and shape).
        kind: SegmentKind,
        /// Bytes of the segment.
        len: u64,
    },
    /// The next bytes of the current segment (one decoded chunk).
    Data(Piece),
    /// The current segment is complete.
    SegmentEnd,
    /// The current file is complete and its digest matched (unless
    /// [`StreamDecoder::leave_sha256_to_caller`] said otherwise).
    FileEnd {
        /// Relative path.
        path: String,
        /// The verified digest.
        digest: [u8; 32],
        /// Its hash, as the archive header says.
        kind: DigestKind,
    },
    /// The archive is complete: every record, the index and the end were verified.
    End,
}

#[derive(Debug)]
enum State {
    Header,
    FileOrIndex,
    Segment,
    Chunk,
    /// Emitting a copy of a retained segment.
    Copy,
    End,
    Done,
}

struct OpenFile {
    record: FileRecord,
    segments_left: u64,
    bytes_seen: u64,
}

/// Decoded bytes, shared by an [`Event::Data`] and the [`FileHasher`]: it reads
/// as a `[u8]`, and cloning it copies a pointer, not the bytes, so a hasher on
/// another thread needs no copy of its own (a copy was a pass over the whole
/// output on the thread that reads the archive and hands out the chunks). A
/// decoded chunk's piece is its root stream's own buffer ([`LeBytes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece(Arc<LeBytes>);

impl Piece {
    /// A piece holding `bytes`.
    pub fn new(bytes: Vec<u8>) -> Self {
        Piece(Arc::new(bytes.into()))
    }

    /// The bytes as a vector: without a copy once nothing else holds the piece
    /// (a hasher done with it) and it holds bytes (a chunk whose words are bytes,
    /// or a copied segment's piece), else copied.
    pub fn into_vec(self) -> Vec<u8> {
        Arc::try_unwrap(self.0).map_or_else(|shared| shared.to_vec(), LeBytes::into_vec)
    }
}

impl From<LeBytes> for Piece {
    fn from(bytes: LeBytes) -> Self {
        Piece(Arc::new(bytes))
    }
}

impl Deref for Piece {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Piece {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Computes the digest of each file's bytes for a [`StreamDecoder`], which checks
/// it against the archive before reporting [`Event::FileEnd`]. The default hashes
/// in the decoder's thread; [`StreamDecoder::set_file_hasher`] can move the work
/// elsewhere (to a thread of its own, say, while chunks decode on others).
pub trait FileHasher {
    /// A file of `size` bytes starts: hash its bytes with `kind` (the archive
    /// header's [`DigestKind`]; a [`Digester`] computes either).
    fn start(&mut self, kind: DigestKind, size: u64);
    /// Hashes the next bytes of the current file (a hasher that hashes later,
    /// on another thread, keeps a clone of the piece: no copy of the bytes).
    fn update(&mut self, data: &Piece);
    /// Hashes the next bytes of the current file, whose BLAKE3 `subtrees`
    /// were hashed where they were decoded (a [`crate::digest::Blake3Tree`] uses
    /// them; this default hashes the bytes again).
    fn update_with_subtrees(&mut self, data: &Piece, subtrees: Subtrees) {
        let _ = subtrees;
        self.update(data);
    }
    /// The digest of the bytes given since `start`.
    fn finish(&mut self) -> [u8; 32];
}

/// The default [`FileHasher`]: hashes in place.
struct InlineHasher(Digester);

impl FileHasher for InlineHasher {
    fn start(&mut self, kind: DigestKind, _size: u64) {
        self.0 = Digester::new(kind);
    }

    fn update(&mut self, data: &Piece) {
        self.0.update(data);
    }

    fn finish(&mut self) -> [u8; 32] {
        self.0.finish()
    }
}

struct OpenSegment {
    chunks_left: u64,
    bytes_left: u64,
    chunk_no: u64,
    /// For a delta segment: the base tensor's bytes and where the next chunk starts in them.
    base: Option<(Vec<u8>, usize)>,
    /// For a retained segment: its archive-wide index and what is kept of it
    /// for its copies (its chunk records, while it is decoded, in `source`).
    retain: Option<(u64, Retained)>,
    /// For a retained segment read from shared input: where its chunk records
    /// lie, kept instead of its bytes.
    #[cfg(feature = "shared-input")]
    source: Option<SourceRecords>,
}

/// A retained segment and the copies still to come. Its copies are made from
/// its bytes (`bytes`), or (feature `shared-input`) read back from the
/// caller's output (`written_at`) or decoded again from its chunk records
/// (`source`), with the bytes held only where neither of those is there.
struct Retained {
    /// Its bytes (so far, while it is decoded), if held.
    bytes: Vec<u8>,
    copies_left: u64,
    len: u64,
    /// The bytes counted against [`DecodeLimits::max_retained_bytes`] for it:
    /// its length where its bytes are held, else 0.
    counted: u64,
    /// Where its chunk records lie in shared input, if that was kept instead of
    /// its bytes (`bytes` is then empty).
    #[cfg(feature = "shared-input")]
    source: Option<SourceRecords>,
    /// The file it lies in and its offset there, when the caller keeps that
    /// file readable ([`WrittenOutput::keep`]): its copies are read back.
    #[cfg(feature = "shared-input")]
    written_at: Option<(u64, u64)>,
}

impl Retained {
    /// Whether its bytes are held (they count against the limit exactly then).
    fn holds(&self) -> bool {
        self.counted > 0
    }

    /// Piece `at..` of its bytes held, if any are left there.
    fn held_piece(&self, at: usize) -> Option<Piece> {
        let end = (at + COPY_PIECE).min(self.bytes.len());
        (at < end).then(|| Piece::new(self.bytes[at..end].to_vec()))
    }
}

/// A retained segment of shared input, kept as the places of its chunk records
/// there ([`StreamDecoder::share_input`]): each copy decodes them again (and
/// checks their checksums again), so a decoder over a mapped archive holds a
/// few bytes per chunk for it, not the segment. Decoding a copy costs what
/// decoding its source did, where holding the source cost its size in memory
/// until the last copy: 2x the output of a folder of two identical models.
#[cfg(feature = "shared-input")]
struct SourceRecords {
    /// The shared input the records lie in.
    input: SharedInput,
    /// The archive offset of `input`'s first byte.
    input_offset: u64,
    /// Each chunk record's place in `input`, and its decoded length.
    chunks: Vec<(core::ops::Range<usize>, u64)>,
    /// The decoded length of the chunks so far.
    len: u64,
    /// The segment's length, as its record declares.
    declared: u64,
}

#[cfg(feature = "shared-input")]
impl SourceRecords {
    /// Chunk `i`'s bytes, decoded again, its record's checksum checked again.
    fn decode(&self, i: usize, limits: &Limits) -> Result<LeBytes, DecodeError> {
        let record = (*self.input)
            .as_ref()
            .get(self.chunks[i].0.clone())
            .ok_or(FormatError::Truncated { what: "copy source" })?;
        let (_, body) = open_record(record)?;
        Ok(self.checked(i, decode_chunk_bytes(body, limits)?)?)
    }

    /// Chunk `i`'s bytes decoded again (here or elsewhere), if as long as the
    /// first time: only input changed since (a file rewritten under its
    /// mapping) could make them differ.
    fn checked(&self, i: usize, data: LeBytes) -> Result<LeBytes, FormatError> {
        let decoded_len = self.chunks[i].1;
        if data.len() as u64 != decoded_len {
            return Err(FormatError::LengthMismatch {
                what: "copy source (decodes to another length than before)",
                expected: decoded_len,
                found: data.len() as u64,
            });
        }
        Ok(data)
    }

    /// All the chunks' bytes so far, decoded again.
    fn decode_all(&self, limits: &Limits) -> Result<Vec<u8>, DecodeError> {
        let mut bytes = Vec::with_capacity(self.len as usize);
        for i in 0..self.chunks.len() {
            bytes.extend_from_slice(&self.decode(i, limits)?);
        }
        Ok(bytes)
    }
}

/// The retained segments awaiting copies, by archive-wide index: a vector in
/// index order (segments close in that order, so an insert is a push) searched by
/// bisection, where a segment whose last copy is made leaves a hole (`None`) that is
/// swept once holes are half the entries: every operation costs O(log n) amortized
/// and the entries stay within twice the live ones. (A `BTreeMap` did the same with
/// about 5 KB more of gzipped WebAssembly, most of the npm package's margin.)
#[derive(Default)]
struct RetainedSegments {
    entries: Vec<(u64, Option<Retained>)>,
    holes: usize,
}

impl RetainedSegments {
    fn position(&self, index: u64) -> Option<usize> {
        self.entries.binary_search_by_key(&index, |e| e.0).ok()
    }

    fn get(&self, index: u64) -> Option<&Retained> {
        self.entries[self.position(index)?].1.as_ref()
    }

    fn get_mut(&mut self, index: u64) -> Option<&mut Retained> {
        let at = self.position(index)?;
        self.entries[at].1.as_mut()
    }

    fn insert(&mut self, index: u64, segment: Retained) {
        match self.entries.binary_search_by_key(&index, |e| e.0) {
            Ok(at) => {
                if self.entries[at].1.is_none() {
                    self.holes -= 1;
                }
                self.entries[at].1 = Some(segment);
            }
            Err(at) => self.entries.insert(at, (index, Some(segment))),
        }
    }

    fn remove(&mut self, index: u64) {
        if let Some(at) = self.position(index) {
            if self.entries[at].1.take().is_some() {
                self.holes += 1;
            }
        }
        if self.holes * 2 > self.entries.len() {
            self.entries.retain(|e| e.1.is_some());
            self.holes = 0;
        }
    }

    fn is_empty(&self) -> bool {
        self.holes == self.entries.len()
    }

    fn bytes(&self) -> u64 {
        self.entries
            .iter()
            .flat_map(|e| &e.1)
            .map(|r| r.bytes.len() as u64)
            .sum()
    }
}

/// Counts `len` more bytes of retained segments held in `total`, refused past
/// `limit` ([`DecodeLimits::max_retained_bytes`]).
fn hold_retained(total: &mut u64, len: u64, limit: u64) -> Result<(), FormatError> {
    *total = total.saturating_add(len);
    if *total > limit {
        return Err(FormatError::LimitExceeded {
            limit: "retained bytes (segments kept for later copies)",
            requested: *total,
            allowed: limit,
        });
    }
    Ok(())
}

/// A copy being emitted: the source's index and the bytes emitted so far.
struct PendingCopy {
    source: u64,
    at: usize,
    /// Of a source kept as its chunk records: the next chunk to emit, ...
    #[cfg(feature = "shared-input")]
    next_out: usize,
    /// ... the next chunk not started ahead ([`StreamDecoder::next_event_ahead`]),
    #[cfg(feature = "shared-input")]
    next_start: usize,
    /// ... those started, in order, ...
    #[cfg(feature = "shared-input")]
    started: VecDeque<Box<dyn PendingChunk>>,
    /// ... and the last one decoded, with how many of its bytes were emitted,
    /// while some are left: pieces are cut as from a source's bytes.
    #[cfg(feature = "shared-input")]
    carry: Option<(LeBytes, usize)>,
    /// Pieces are read back from the caller's output ([`WrittenOutput`]) so
    /// far; once a read fails, the rest is decoded again.
    #[cfg(feature = "shared-input")]
    reading_back: bool,
}

#[cfg(feature = "shared-input")]
impl PendingCopy {
    /// The next piece of a copy of `source`: read back from `written`, taken
    /// from the bytes held, or cut from its chunk records decoded again (or
    /// started ahead) where a source's bytes would be cut (so the events are
    /// those that pushing the input gives); `None` at its end. Adds the bytes of
    /// the records read to `reread`.
    fn next_piece(
        &mut self,
        source: &Retained,
        written: Option<&mut Box<dyn WrittenOutput>>,
        limits: &Limits,
        reread: &mut u64,
    ) -> Result<Option<Piece>, DecodeError> {
        let want = (source.len - self.at as u64).min(COPY_PIECE as u64) as usize;
        if self.reading_back {
            if let (Some((file, offset)), Some(output)) = (source.written_at, written) {
                let mut bytes = alloc::vec![0; want];
                if want == 0 || output.read_at(file, offset + self.at as u64, &mut bytes) {
                    return Ok((want > 0).then(|| Piece::new(bytes)));
                }
            }
            // Not read back: the rest is decoded again, from the chunk it
            // starts in; without its records (input not shared), the copy
            // cannot be made (a source read back holds no bytes).
            self.reading_back = false;
            let records = source.source.as_ref().ok_or(FormatError::Invalid {
                what: "copy source (its bytes could not be read back from the output)",
            })?;
            self.seek(records, limits, reread)?;
        }
        let Some(records) = &source.source else {
            return Ok(source.held_piece(self.at));
        };
        let mut bytes = Vec::new();
        while bytes.len() < want {
            let (data, used) = match self.carry.take() {
                Some(carry) => carry,
                None => {
                    let (range, _) = records
                        .chunks
                        .get(self.next_out)
                        .ok_or(FormatError::Invalid { what: "copy source" })?;
                    let data = match self.started.pop_front() {
                        Some(pending) => records.checked(self.next_out, pending.wait()?.bytes)?,
                        None => records.decode(self.next_out, limits)?,
                    };
                    *reread += range.len() as u64;
                    self.next_out += 1;
                    self.next_start = self.next_start.max(self.next_out);
                    (data, 0)
                }
            };
            // A whole chunk that is the whole piece is handed on as it is.
            if bytes.is_empty() && used == 0 && data.len() == want {
                return Ok(Some(Piece::from(data)));
            }
            let take = (want - bytes.len()).min(data.len() - used);
            bytes.extend_from_slice(&data[used..used + take]);
            if used + take < data.len() {
                self.carry = Some((data, used + take));
            }
        }
        Ok((want > 0).then(|| Piece::new(bytes)))
    }

    /// Sets the chunk to decode next (and the bytes of it already emitted) at
    /// the copy's byte `at`, after pieces read back.
    fn seek(&mut self, records: &SourceRecords, limits: &Limits, reread: &mut u64) -> Result<(), DecodeError> {
        self.started.clear();
        self.carry = None;
        let mut start = 0u64;
        let mut next = records.chunks.len();
        for (i, (range, len)) in records.chunks.iter().enumerate() {
            if start + len > self.at as u64 {
                let skip = (self.at as u64 - start) as usize;
                next = i;
                if skip > 0 {
                    self.carry = Some((records.decode(i, limits)?, skip));
                    *reread += range.len() as u64;
                    next = i + 1;
                }
                break;
            }
            start += len;
        }
        (self.next_out, self.next_start) = (next, next);
        Ok(())
    }
}

/// A chunk decoded elsewhere (see [`StreamDecoder::next_event_ahead`]).
#[derive(Debug)]
pub struct DecodedChunk {
    /// What [`crate::decode_chunk_bytes`] gives.
    pub bytes: LeBytes,
    /// The BLAKE3 subtrees of `bytes` ([`Subtrees::hash`]) when the chunk was
    /// started with its [`ChunkPlace`] and they were hashed where it was decoded.
    pub subtrees: Option<Subtrees>,
}

impl From<LeBytes> for DecodedChunk {
    fn from(bytes: LeBytes) -> Self {
        DecodedChunk { bytes, subtrees: None }
    }
}

/// A chunk decoding elsewhere (see [`StreamDecoder::next_event_ahead`]).
pub trait PendingChunk {
    /// True once [`Self::wait`] would return without blocking.
    fn is_ready(&mut self) -> bool;
    /// Waits for, and returns, the decoded chunk.
    fn wait(self: Box<Self>) -> Result<DecodedChunk, FormatError>;
}

/// A chunk already decoded.
impl PendingChunk for Result<LeBytes, FormatError> {
    fn is_ready(&mut self) -> bool {
        true
    }

    fn wait(self: Box<Self>) -> Result<DecodedChunk, FormatError> {
        (*self).map(DecodedChunk::from)
    }
}

/// A chunk already decoded, perhaps with its subtrees hashed.
impl PendingChunk for Result<DecodedChunk, FormatError> {
    fn is_ready(&mut self) -> bool {
        true
    }

    fn wait(self: Box<Self>) -> Result<DecodedChunk, FormatError> {
        *self
    }
}

/// Where the chunks the scan ahead meets go in their file (see
/// [`StreamDecoder::start_ahead`]).
#[derive(Clone, Copy, Debug)]
struct ScanFile {
    /// The file's number ([`ChunkPlace::file`]).
    number: u64,
    /// The file's size.
    size: u64,
    /// Where the next chunk's bytes go.
    next: u64,
    /// False in a segment stored as a difference from a base: its chunks'
    /// bytes are not the file's until XORed with the base.
    hashable: bool,
}

/// FILE records counted, to number the files of the chunks started ahead
/// ([`ChunkPlace::file`]). Empty in WebAssembly, which starts nothing ahead: the
/// count made its module 36 B larger, gzipped, past the npm package's budget
/// (`scripts/build-npm.sh`).
#[derive(Clone, Copy, Debug, Default)]
struct FileNumbers {
    /// FILE records decoded (the next one's number).
    #[cfg(not(target_arch = "wasm32"))]
    decoded: u64,
    /// The number of the next FILE record the scan ahead meets.
    #[cfg(not(target_arch = "wasm32"))]
    scanned: u64,
}

#[cfg(not(target_arch = "wasm32"))]
impl FileNumbers {
    fn count_decoded(&mut self) {
        self.decoded += 1;
    }

    fn decoded(&self) -> u64 {
        self.decoded
    }

    /// The scan ahead starts again where the decoder stands.
    fn restart_scan(&mut self) {
        self.scanned = self.decoded;
    }

    /// The number of the FILE record the scan ahead meets.
    fn next_scanned(&mut self) -> u64 {
        self.scanned += 1;
        self.scanned - 1
    }
}

#[cfg(target_arch = "wasm32")]
impl FileNumbers {
    fn count_decoded(&mut self) {}

    fn decoded(&self) -> u64 {
        0
    }

    fn restart_scan(&mut self) {}

    fn next_scanned(&mut self) -> u64 {
        0
    }
}

/// How far [`StreamDecoder::next_event_ahead`] starts chunk records ahead of the
/// one whose turn it is: a chunk starts while fewer than `max_chunks` are
/// pending, and either no more than `workers` are (one each and a spare, so a
/// worker finishing early finds the next at once, however large chunks are) or
/// they declare less than `workers` × the larger of `min_bytes_per_worker` and
/// the largest chunk started so far or this one (with small chunks, several
/// each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ahead {
    /// Chunks pending at most.
    pub max_chunks: usize,
    /// Threads decoding the pending chunks.
    pub workers: usize,
    /// Bytes pending per worker, at least (as chunks declare them).
    pub min_bytes_per_worker: u64,
}

impl Ahead {
    /// Bytes the pending chunks may declare, with chunks of up to `largest` bytes.
    fn budget(&self, largest: u64) -> u64 {
        self.min_bytes_per_worker
            .max(largest)
            .saturating_mul(self.workers as u64)
    }

    /// Whether one more chunk may start beside `pending` ones that declare
    /// `pending_bytes`, with chunks of up to `largest` bytes (this one included).
    /// (`max_chunks` is checked by the caller.)
    fn allows(&self, pending: usize, pending_bytes: u64, largest: u64) -> bool {
        pending <= self.workers || pending_bytes < self.budget(largest)
    }
}

/// Input bytes shared with the caller (feature `shared-input`): the archive
/// mapped into memory, say. See [`StreamDecoder::share_input`].
#[cfg(feature = "shared-input")]
pub type SharedInput = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Output the caller has written from a [`StreamDecoder`]'s events, read back
/// for the copies of retained segments instead of decoding their sources again
/// (feature `shared-input`; see [`StreamDecoder::read_copies_back`]). Files are
/// numbered from 0 in archive order, as [`ChunkPlace::file`] numbers them.
///
/// What it reads is hashed into the copy's file like decoded bytes, so bytes
/// read back wrong fail that file's digest check (as corruption), never pass
/// as the copy. A file it does not keep has its sources kept as without it;
/// a read that fails makes the decoder decode the rest of the copy again from
/// shared input, or fail the copy where the input was pushed (and the source
/// held nothing).
#[cfg(feature = "shared-input")]
pub trait WrittenOutput {
    /// A segment that later segments copy starts in file `file` (the open
    /// one): whether the caller will keep that file's bytes readable through
    /// [`Self::read_at`] until the decode ends.
    fn keep(&mut self, file: u64) -> bool;
    /// Fills `buf` with the bytes at `offset` in file `file` (one [`Self::keep`]
    /// said yes to), as the [`Event::Data`] pieces the decoder returned for it
    /// gave them: the decoder asks only for bytes of events already returned.
    /// Returns false where it cannot.
    fn read_at(&mut self, file: u64, offset: u64, buf: &mut [u8]) -> bool;
}

/// The decoder's input: a buffer of its own that pushed bytes are copied into,
/// or (feature `shared-input`) input shared with the caller, not copied.
#[derive(Default)]
struct Input {
    own: Vec<u8>,
    /// When set, the input (and `own` unused).
    #[cfg(feature = "shared-input")]
    shared: Option<SharedInput>,
}

impl Input {
    fn bytes(&self) -> &[u8] {
        #[cfg(feature = "shared-input")]
        if let Some(shared) = &self.shared {
            return (**shared).as_ref();
        }
        &self.own
    }

    /// The buffer of its own, `pos..end` of any shared input first moved into
    /// it (to `0..end - pos`; `pos` and `end` follow).
    fn own(&mut self, pos: &mut usize, end: &mut usize) -> &mut Vec<u8> {
        #[cfg(feature = "shared-input")]
        if let Some(shared) = self.shared.take() {
            self.own.clear();
            self.own.extend_from_slice(&(*shared).as_ref()[*pos..*end]);
            *end -= *pos;
            *pos = 0;
        }
        let _ = (pos, end);
        &mut self.own
    }
}

/// A push-style archive decoder. See the module docs.
pub struct StreamDecoder {
    limits: DecodeLimits,
    /// Input: `buf[pos..end]` is pushed and not yet consumed; past `end` (in a
    /// buffer of its own), space already initialized for [`Self::fill`] to read
    /// into.
    buf: Input,
    /// Start of unconsumed bytes in `buf`.
    pos: usize,
    /// End of the pushed bytes in `buf`.
    end: usize,
    /// Archive offset of `buf[pos]`.
    offset: u64,
    state: State,
    file: Option<OpenFile>,
    segment: Option<OpenSegment>,
    seen: Vec<IndexEntry>,
    index_offset: u64,
    output_total: u64,
    /// Decoded bytes of the chunks seen so far (against `max_ratio`).
    decoded_total: u64,
    loc: Location,
    failed: Option<DecodeError>,
    /// Events decoded from the last record, not yet returned (at most three).
    queue: VecDeque<Event>,
    /// Chunks started ahead by [`Self::next_event_ahead`], in archive order: each
    /// record's offset, its declared decoded length and its pending result, used
    /// when the record is reached.
    predecoded: VecDeque<(u64, u64, Box<dyn PendingChunk>)>,
    /// Archive offset just past the last record scanned for chunks to start ahead.
    scanned_to: u64,
    /// The largest chunk started ahead so far, as declared (see [`Ahead`]).
    largest_started: u64,
    /// Archive offset just past the last whole record [`Self::record_remaining`]
    /// walked over (or stale, behind `offset`).
    walked_to: u64,
    /// Where the chunk at `scanned_to` would go in its file, if known (BLAKE3
    /// and XXH3-128 archives only: chunks are started with their [`ChunkPlace`]).
    scan_file: Option<ScanFile>,
    /// Where base tensors come from (delta segments).
    base: Option<Box<dyn BaseProvider>>,
    /// SEGMENT records seen so far (the next one's archive-wide index).
    segments_seen: u64,
    /// The files' numbers, for the chunks started ahead.
    files: FileNumbers,
    /// Retained segments awaiting copies, by archive-wide index.
    retained: RetainedSegments,
    /// Bytes declared by the retained segments held or being decoded.
    retained_total: u64,
    /// The copy being emitted.
    copy: Option<PendingCopy>,
    /// The shared input and the archive offset of its first byte, while the
    /// decoder reads it ([`Self::share_input`]).
    #[cfg(feature = "shared-input")]
    shared: Option<(SharedInput, u64)>,
    /// Bytes of chunk records read again for copies ([`Self::reread_bytes`]).
    #[cfg(feature = "shared-input")]
    reread: u64,
    /// The caller's output, from which copies are read back ([`Self::read_copies_back`]).
    #[cfg(feature = "shared-input")]
    written: Option<Box<dyn WrittenOutput>>,
    /// Chunks of copies' sources started by the scan ahead, in archive order:
    /// each copy's SEGMENT record offset, what the chunk counts against the
    /// bytes pending (see `start_ahead`) and its pending result, handed to the
    /// copy when its record is reached.
    #[cfg(feature = "shared-input")]
    copy_ahead: VecDeque<(u64, u64, Box<dyn PendingChunk>)>,
    /// The copy record the scan ahead stopped in, and its next chunk to start.
    #[cfg(feature = "shared-input")]
    scan_copy: (u64, usize),
    /// Hashes the open file's bytes.
    hasher: Box<dyn FileHasher>,
    /// The hash of the FILE records' digests (from the header).
    digest_kind: DigestKind,
    /// SHA-256 digests are the caller's to compute and check
    /// ([`StreamDecoder::leave_sha256_to_caller`]).
    sha256_by_caller: bool,
}

impl Default for StreamDecoder {
    fn default() -> Self {
        Self::new(DecodeLimits::default())
    }
}

impl StreamDecoder {
    /// A decoder with the given limits.
    pub fn new(limits: DecodeLimits) -> Self {
        StreamDecoder {
            limits,
            buf: Input::default(),
            pos: 0,
            end: 0,
            offset: 0,
            state: State::Header,
            file: None,
            segment: None,
            seen: Vec::new(),
            index_offset: 0,
            output_total: 0,
            decoded_total: 0,
            loc: Location::default(),
            failed: None,
            queue: VecDeque::new(),
            predecoded: VecDeque::new(),
            scanned_to: 0,
            largest_started: 0,
            walked_to: 0,
            scan_file: None,
            base: None,
            segments_seen: 0,
            files: FileNumbers::default(),
            retained: RetainedSegments::default(),
            retained_total: 0,
            copy: None,
            #[cfg(feature = "shared-input")]
            shared: None,
            #[cfg(feature = "shared-input")]
            reread: 0,
            #[cfg(feature = "shared-input")]
            written: None,
            #[cfg(feature = "shared-input")]
            copy_ahead: VecDeque::new(),
            #[cfg(feature = "shared-input")]
            scan_copy: (0, 0),
            hasher: Box::new(InlineHasher(Digester::new(DigestKind::Sha256))),
            digest_kind: DigestKind::Sha256,
            sha256_by_caller: false,
        }
    }

    /// Hashes files with `hasher` instead of in this thread. Call before the
    /// first event: bytes already hashed stay with the previous hasher.
    pub fn set_file_hasher(&mut self, hasher: Box<dyn FileHasher>) {
        self.hasher = hasher;
    }

    /// Neither computes nor checks SHA-256 file digests: each file's
    /// [`Event::FileEnd`] then carries the digest the archive states, and the
    /// caller must hash the file's [`Event::Data`] itself and compare before it
    /// trusts the file. BLAKE3 and XXH3 digests are still checked here. For
    /// hosts with a faster SHA-256 than this crate's where it runs: the npm
    /// package under Node, where node:crypto uses the CPU's SHA instructions
    /// and the WebAssembly build has none (its SHA-256 took 31% of a
    /// default-settings BF16 archive's decode in Node, `node --cpu-prof`). Call
    /// before the first event.
    pub fn leave_sha256_to_caller(&mut self) {
        self.sha256_by_caller = true;
    }

    /// Whether this decoder hashes the files' bytes (see
    /// [`Self::leave_sha256_to_caller`]).
    fn hashes_files(&self) -> bool {
        !(self.sha256_by_caller && self.digest_kind == DigestKind::Sha256)
    }

    /// A decoder that takes the base tensors of delta segments (a fine-tune
    /// stored against its base) from `base`. Without one, such a segment fails
    /// with [`FormatError::BaseMissing`]; with a base whose tensor has another
    /// SHA-256, with [`FormatError::BaseMismatch`] (both [`crate::ErrorKind::Base`]).
    pub fn with_base(limits: DecodeLimits, base: Box<dyn BaseProvider>) -> Self {
        StreamDecoder {
            base: Some(base),
            ..Self::new(limits)
        }
    }

    /// The hash of the archive's file digests: what the header said, once it is
    /// read (SHA-256 before).
    pub fn digest_kind(&self) -> DigestKind {
        self.digest_kind
    }

    /// Bytes of retained segments held for later copies right now.
    pub fn retained_bytes(&self) -> u64 {
        self.retained.bytes()
    }

    /// Appends input bytes. Decoding happens in [`Self::next_event`].
    pub fn push(&mut self, input: &[u8]) {
        self.space(input.len()).copy_from_slice(input);
        self.end += input.len();
    }

    /// Appends up to `max` input bytes that `read` writes into the slice it gets
    /// (of `max` bytes), returning how many it wrote: [`Self::push`] without the
    /// copy, for a caller reading a file (`read` is `File::read`, say). What
    /// `read` returns is returned; an error appends nothing.
    pub fn fill<E>(&mut self, max: usize, read: impl FnOnce(&mut [u8]) -> Result<usize, E>) -> Result<usize, E> {
        let n = read(self.space(max))?.min(max);
        self.end += n;
        Ok(n)
    }

    /// `n` bytes of writable space just past the pushed bytes. The consumed bytes
    /// are dropped first (the rest moved to the buffer's start) once they are as
    /// many as the rest, or when the buffer would otherwise grow and they are a
    /// quarter of the rest: the bytes moved stay within four times those consumed,
    /// and the buffer within about 1.25 times what is buffered at once, plus `n`.
    /// (Dropping them only at half grew the 2-thread CLI's buffer to twice its
    /// window: its peak RSS was 4 MB higher on a synthetic BF16 archive; now its
    /// moves are 1.1–1.3 times the archive.)
    fn space(&mut self, n: usize) -> &mut [u8] {
        // The input is the decoder's own from now on.
        #[cfg(feature = "shared-input")]
        {
            self.shared = None;
        }
        let buf = self.buf.own(&mut self.pos, &mut self.end);
        let kept = self.end - self.pos;
        if self.pos > 0 && (self.pos >= kept || (buf.len() < self.end + n && self.pos >= kept / 4)) {
            buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        if buf.len() < self.end + n {
            buf.resize(self.end + n, 0);
        }
        &mut buf[self.end..self.end + n]
    }

    /// Takes `input`, the rest of the archive (or all of it), without copying
    /// it: as [`Self::push`] would, but the decoder reads it where it lies, and
    /// the chunk records that [`Self::next_event_ahead`] hands its `start` are
    /// slices of it (so a caller holding `input` can find them in it and let
    /// other threads decode them there). Bytes pushed afterwards are appended
    /// (what is left of `input` is then copied into a buffer first); given
    /// while bytes pushed earlier are not consumed, `input` is copied after them.
    ///
    /// While it reads `input`, a segment retained for later copies is kept as
    /// the places of its chunk records in `input`, which each copy decodes
    /// again, instead of as its bytes (see [`Self::reread_bytes`]).
    #[cfg(feature = "shared-input")]
    pub fn share_input(&mut self, input: SharedInput) {
        if self.buffered() > 0 {
            self.push((*input).as_ref());
            return;
        }
        self.end = (*input).as_ref().len();
        self.pos = 0;
        self.shared = Some((input.clone(), self.offset));
        self.buf.shared = Some(input);
    }

    /// Bytes of shared input read again so far: the chunk records of retained
    /// segments, decoded again for their copies (see [`Self::share_input`]). A
    /// caller that releases the pages of a mapped archive behind the decoder can
    /// release those again once this grows.
    #[cfg(feature = "shared-input")]
    pub fn reread_bytes(&self) -> u64 {
        self.reread
    }

    /// Reads the copies of retained segments back from `output`, the files the
    /// caller writes from the events, instead of decoding their sources again
    /// (sources kept as their chunk records, while the decoder reads shared
    /// input: see [`Self::share_input`]) or holding their bytes (input pushed):
    /// a source in a file `output` keeps holds nothing. The events are the
    /// same either way, and so is every check but one: bytes read back are not
    /// covered by chunk checksums, only by their file's digest, so reading back
    /// is for callers whose digests are checked (not
    /// [`Self::leave_sha256_to_caller`] ones that skip the check). Where
    /// `output` does not keep a file, its sources are kept as without it; where
    /// a read fails, the rest of the copy is decoded again from shared input,
    /// and from pushed input, which cannot be read again, the copy fails
    /// (`copy source (its bytes could not be read back from the output)`).
    #[cfg(feature = "shared-input")]
    pub fn read_copies_back(&mut self, output: Box<dyn WrittenOutput>) {
        self.written = Some(output);
    }

    /// Bytes pushed but not yet consumed.
    pub fn buffered(&self) -> usize {
        self.end - self.pos
    }

    /// Bytes still to come of the first record not wholly buffered, once its
    /// first five bytes (which give its length) are; `None` before that, or when
    /// what is buffered is not a record. A caller reading the archive in pieces
    /// can read that much, so that a record ends where the buffer does: when it
    /// is consumed nothing is left to move to the buffer's start to make room
    /// (a fixed 1 MiB read moved about half of every record there).
    pub fn record_remaining(&mut self) -> Option<usize> {
        if matches!(self.state, State::Done) {
            return None;
        }
        // Records start after the archive header.
        let first = if self.offset == 0 && matches!(self.state, State::Header) {
            HEADER_LEN as u64
        } else {
            self.offset
        };
        let mut at = self.walked_to.max(first);
        loop {
            let skip = usize::try_from(at - self.offset).ok()?;
            let avail = self.buf.bytes()[..self.end].get(self.pos + skip..)?;
            let head = RecordHead::parse(avail).ok()?;
            if avail.len() < head.total_len() {
                return Some(head.total_len() - avail.len());
            }
            at += head.total_len() as u64;
            self.walked_to = at;
        }
    }

    /// True once the END record was verified.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Decodes the next event from buffered bytes. `Ok(None)` means more input
    /// is needed. After an error, the same error is returned again.
    pub fn next_event(&mut self) -> Result<Option<Event>, DecodeError> {
        // Nothing to do between records: this instance holds no scan-ahead code
        // (the WebAssembly module, which has no threads, is smaller for it).
        self.next_inner(|_| true)
    }

    /// [`Self::next_event`], with the chunk records already buffered started
    /// ahead of time: `start` gets each one's whole record (its framing checked,
    /// not yet its checksum), the program limits and, in an archive whose file
    /// digests are BLAKE3 or XXH3-128, where its bytes go in their file (when that
    /// is known: not in a segment stored against a base), and returns a [`PendingChunk`]
    /// that gives what [`crate::decode_chunk_record`] would, checksum check
    /// included — decoded on another thread meanwhile, say (`start` must copy
    /// the record if it keeps it, unless it holds what was given to
    /// [`Self::share_input`]) — and, given a place, may give the BLAKE3 [`Subtrees`] of
    /// the bytes too, so that the file's hasher need not hash them again. (An
    /// XXH3-128 digest cannot be cut into parts that way: a caller may hash a
    /// chunk's bytes into a digest it shares with its [`FileHasher`] when every
    /// byte before them has been, keeping the order itself.) How
    /// many are pending at once is bounded by `ahead`; more are
    /// started as records are consumed, so workers never idle behind a batch
    /// barrier. When the next record is a chunk whose result is not ready, this
    /// waits for it if `wait`, else returns `Ok(None)` at once (so the caller can
    /// push more input meanwhile, and start more chunks). The events, their
    /// order, every check and every error are exactly those of
    /// [`Self::next_event`]; only the decoding moves. Memory stays bounded by the
    /// input buffered plus the pending chunks, which declare at most
    /// (`ahead.workers` + 1) × the larger of `ahead.min_bytes_per_worker` and
    /// the largest chunk (whose size the program limits bound). A copy of a
    /// segment kept as its chunk records ([`Self::share_input`]) has them
    /// started the same way, as many as `ahead.workers` + 1 at once.
    pub fn next_event_ahead<F>(&mut self, ahead: Ahead, start: &mut F, wait: bool) -> Result<Option<Event>, DecodeError>
    where
        F: FnMut(&[u8], &Limits, Option<ChunkPlace>) -> Box<dyn PendingChunk>,
    {
        self.next_inner(|dec| {
            if matches!(dec.state, State::FileOrIndex | State::Segment | State::Chunk) {
                dec.start_ahead(ahead, &mut *start);
            }
            #[cfg(feature = "shared-input")]
            if matches!(dec.state, State::Copy) {
                dec.start_copy_ahead(ahead, &mut *start);
            }
            // Unless told to wait, a chunk whose result is not ready stops here.
            wait || !matches!(dec.state, State::Chunk)
                || dec
                    .predecoded
                    .front_mut()
                    .is_none_or(|(at, _, pending)| *at != dec.offset || pending.is_ready())
        })
    }

    /// The byte budget of `ahead` now: `ahead.workers` × the larger of
    /// `ahead.min_bytes_per_worker` and the largest chunk started so far (beyond
    /// one chunk per worker and a spare, chunks start ahead while the pending ones
    /// declare less). A caller filling the decoder on one thread while chunks
    /// decode on others can read ahead as much input: about what the chunks it
    /// may start hold (a record is no larger than what it decodes to, but for a
    /// few bytes of framing, unless its data compresses not at all).
    pub fn ahead_budget(&self, ahead: &Ahead) -> u64 {
        ahead.budget(self.largest_started)
    }

    /// The event loop: `between` runs before each record is decoded and returns
    /// false to return `Ok(None)` there (input may be needed, or a chunk's result).
    fn next_inner(&mut self, mut between: impl FnMut(&mut Self) -> bool) -> Result<Option<Event>, DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        loop {
            if let Some(ev) = self.queue.pop_front() {
                return Ok(Some(ev));
            }
            if !between(self) {
                return Ok(None);
            }
            match self.step() {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(e) => {
                    let mut loc = self.loc.clone();
                    loc.offset = Some(self.offset);
                    let e = e.at(&loc);
                    self.failed = Some(e.clone());
                    return Err(e);
                }
            }
        }
    }

    /// Call when the input has ended: fails unless the archive was complete.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if !self.is_done() || !self.queue.is_empty() {
            let mut loc = self.loc.clone();
            loc.offset = Some(self.offset + self.buffered() as u64);
            return Err(DecodeError::new(FormatError::Truncated {
                what: "archive (input ended early)",
            })
            .at(&loc));
        }
        Ok(())
    }

    /// Starts the next chunks of the copy being made ahead, where its source
    /// is kept as its chunk records: as many as a worker each and a spare
    /// (within `ahead.max_chunks`), with no place in their file (the copy's
    /// bytes are hashed as they are emitted).
    #[cfg(feature = "shared-input")]
    fn start_copy_ahead<F>(&mut self, ahead: Ahead, start: &mut F)
    where
        F: FnMut(&[u8], &Limits, Option<ChunkPlace>) -> Box<dyn PendingChunk> + ?Sized,
    {
        let Some(copy) = self.copy.as_mut().filter(|c| !c.reading_back) else {
            return;
        };
        let Some(records) = self.retained.get(copy.source).and_then(|r| r.source.as_ref()) else {
            return;
        };
        let most = ahead.max_chunks.min(ahead.workers + 1);
        while copy.started.len() < most {
            let Some((range, _)) = records.chunks.get(copy.next_start) else {
                break;
            };
            let Some(record) = (*records.input).as_ref().get(range.clone()) else {
                break;
            };
            copy.started.push_back(start(record, &self.limits.program, None));
            copy.next_start += 1;
        }
    }

    /// Starts the complete chunk records buffered past those already started
    /// (skipping FILE and SEGMENT records between them, stopping at an INDEX or
    /// an incomplete record) within `ahead`. A chunk whose framing, checksum or
    /// header is bad ends the scan: [`Self::record`] reports it when it gets there. Results are
    /// keyed by record offset and only used by the chunk record at that offset,
    /// after the same checks as always, so what is started ahead never changes
    /// an event or an error.
    fn start_ahead<F>(&mut self, ahead: Ahead, start: &mut F)
    where
        F: FnMut(&[u8], &Limits, Option<ChunkPlace>) -> Box<dyn PendingChunk> + ?Sized,
    {
        // `scanned_to` is a record boundary at or past `offset` (or stale, behind it).
        let from = self.scanned_to.max(self.offset);
        let Ok(skip) = usize::try_from(from - self.offset) else {
            return;
        };
        let mut at = self.pos + skip;
        if from == self.offset {
            // The scan starts here: where the file stands is known.
            self.scan_file = self.file_now();
            self.files.restart_scan();
        }
        let mut pending_bytes = self.predecoded.iter().fold(0u64, |sum, p| sum.saturating_add(p.1));
        #[cfg(feature = "shared-input")]
        {
            pending_bytes = self
                .copy_ahead
                .iter()
                .fold(pending_bytes, |sum, p| sum.saturating_add(p.1));
        }
        while self.pending_ahead() < ahead.max_chunks {
            let Some(avail) = self.buf.bytes()[..self.end].get(at..) else {
                break;
            };
            let Ok(head) = RecordHead::parse(avail) else { break };
            if avail.len() < head.total_len() {
                break;
            }
            let offset = self.offset + (at - self.pos) as u64;
            let body = &avail[5..5 + head.body_len as usize];
            match head.kind {
                // Not checked yet (their checksums neither): a record that does
                // not parse leaves the places unknown until the decoder reaches it.
                RecordKind::File => {
                    let number = self.files.next_scanned();
                    self.scan_file = FileRecord::parse(body).ok().map(|file| ScanFile {
                        number,
                        size: file.size,
                        next: 0,
                        hashable: true,
                    });
                }
                RecordKind::Segment => {
                    let seg = SegmentRecord::parse(body);
                    // From shared input a copy of a segment kept as its records
                    // is decoded again: its source's chunks start here like any
                    // (within the same bounds), so that consecutive small copies
                    // keep every thread busy. A copy whose source is not (yet)
                    // kept so stops the scan: chunks started past it would wait,
                    // decoded, for all of it (two threads' peak RSS rose by about
                    // 10 MB on a folder of the corpus twice).
                    #[cfg(feature = "shared-input")]
                    if let (
                        Some(_),
                        Ok(SegmentRecord {
                            source: SegmentSource::Copy { segment },
                            ..
                        }),
                    ) = (&self.shared, &seg)
                    {
                        let Some(retained) = self.retained.get(*segment) else {
                            break;
                        };
                        // A copy read back from the caller's output has nothing to start.
                        if retained.written_at.is_none() {
                            let Some(records) = retained.source.as_ref() else {
                                break;
                            };
                            let mut next = if self.scan_copy.0 == offset {
                                self.scan_copy.1
                            } else {
                                0
                            };
                            while let Some((range, declared)) = records.chunks.get(next) {
                                // A source lies apart from what is read ahead, and its
                                // reading maps pages of its own (a 2 MiB folio of a
                                // mapped archive for a record of a few bytes: 25 MB
                                // more at once on the corpus's small copies), so a
                                // chunk of it counts at least a worker's share.
                                let cost = (*declared).max(ahead.min_bytes_per_worker);
                                let largest = self.largest_started.max(*declared);
                                let pending = self.predecoded.len() + self.copy_ahead.len();
                                if pending >= ahead.max_chunks || !ahead.allows(pending, pending_bytes, largest) {
                                    break;
                                }
                                let Some(record) = (*records.input).as_ref().get(range.clone()) else {
                                    break;
                                };
                                self.copy_ahead
                                    .push_back((offset, cost, start(record, &self.limits.program, None)));
                                pending_bytes = pending_bytes.saturating_add(cost);
                                self.largest_started = largest;
                                next += 1;
                            }
                            self.scan_copy = (offset, next);
                            if next < records.chunks.len() {
                                break;
                            }
                        }
                    }
                    self.scan_file = match (self.scan_file, seg) {
                        (Some(file), Ok(seg)) => Some(match seg.source {
                            SegmentSource::Chunks => ScanFile { hashable: true, ..file },
                            SegmentSource::Copy { .. } => ScanFile {
                                next: file.next.saturating_add(seg.len),
                                ..file
                            },
                            SegmentSource::BaseDelta { .. } => ScanFile {
                                hashable: false,
                                ..file
                            },
                        }),
                        _ => None,
                    };
                }
                RecordKind::Chunk => {
                    // The declared length decides first, before the record's
                    // checksum: a chunk kept waiting is not hashed on every call.
                    let Ok(header) = ChunkRecord::parse(body) else {
                        break;
                    };
                    let largest = self.largest_started.max(header.decoded_len);
                    if !ahead.allows(self.pending_ahead(), pending_bytes, largest) {
                        break;
                    }
                    let digest = self.digest_kind;
                    let place = self.scan_file.filter(|f| f.hashable && digest != DigestKind::Sha256);
                    // The record's checksum is the job's to check (see `step`).
                    let pending = start(
                        &avail[..head.total_len()],
                        &self.limits.program,
                        place.map(|f| ChunkPlace {
                            file: f.number,
                            file_offset: f.next,
                            file_size: f.size,
                            digest,
                        }),
                    );
                    if let Some(file) = self.scan_file.as_mut() {
                        file.next = file.next.saturating_add(header.decoded_len);
                    }
                    pending_bytes = pending_bytes.saturating_add(header.decoded_len);
                    self.largest_started = largest;
                    self.predecoded.push_back((offset, header.decoded_len, pending));
                }
                _ => break,
            }
            at += head.total_len();
            self.scanned_to = self.offset + (at - self.pos) as u64;
        }
    }

    /// Chunks started ahead and not yet taken: of records, and of copies'
    /// sources.
    fn pending_ahead(&self) -> usize {
        #[cfg(feature = "shared-input")]
        return self.predecoded.len() + self.copy_ahead.len();
        #[cfg(not(feature = "shared-input"))]
        self.predecoded.len()
    }

    /// Where the next record's chunks go in their file, as far as the records
    /// decoded so far say.
    fn file_now(&self) -> Option<ScanFile> {
        let file = self.file.as_ref()?;
        Some(ScanFile {
            // The open file is the last FILE record seen.
            number: self.files.decoded().saturating_sub(1),
            size: file.record.size,
            next: file.bytes_seen,
            hashable: match self.state {
                State::Chunk => self.segment.as_ref().is_some_and(|s| s.base.is_none()),
                _ => true,
            },
        })
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
        self.offset += n as u64;
    }

    /// Consumes one header or record if complete. Returns false when more input is needed.
    fn step(&mut self) -> Result<bool, DecodeError> {
        let avail = self.buffered();
        match self.state {
            State::Header => {
                if avail < HEADER_LEN {
                    return Ok(false);
                }
                self.digest_kind = check_header(&self.buf.bytes()[self.pos..self.pos + HEADER_LEN])?;
                self.consume(HEADER_LEN);
                self.state = State::FileOrIndex;
                Ok(true)
            }
            State::Copy => {
                self.copy_step()?;
                Ok(true)
            }
            State::Done => {
                if avail > 0 {
                    return Err(FormatError::TrailingBytes {
                        what: "archive",
                        count: avail as u64,
                    }
                    .into());
                }
                Ok(false)
            }
            _ => {
                if avail < 5 {
                    return Ok(false);
                }
                let head = RecordHead::parse(&self.buf.bytes()[self.pos..self.end])?;
                if avail < head.total_len() {
                    return Ok(false);
                }
                let start = self.pos;
                // A chunk decoded here (not started ahead) is decoded before its
                // checksum is checked, while the record is in cache (see
                // `UncheckedRecord`): `record` checks it before the chunk's bytes
                // are used, and here it is checked after any error `record`
                // returns, so that a bad checksum is the error, as if it had
                // been checked first. Every other record is checked first. Not
                // in WebAssembly: there the record was just copied in, piece by
                // piece, so it is in cache already, and the module is smaller
                // without (the npm package's size budget).
                let started = self.predecoded.front().is_some_and(|(at, _, _)| *at == self.offset);
                let deferred = head.kind == RecordKind::Chunk && !started && !cfg!(target_arch = "wasm32");
                if head.kind == RecordKind::Chunk {
                    // An error in this record, its checksum's included, is this
                    // chunk's (`record` says the same when it gets there).
                    if let (State::Chunk, Some(seg)) = (&self.state, &self.segment) {
                        self.loc.chunk = Some(seg.chunk_no);
                    }
                }
                let checked = deferred || self.checked_ahead();
                if !checked {
                    open_record(&self.buf.bytes()[start..start + head.total_len()])?;
                }
                let offset = self.offset;
                // Take the buffer out so the body can be borrowed while `self` changes.
                let buf = core::mem::take(&mut self.buf);
                let record = &buf.bytes()[start..start + head.total_len()];
                let body = &record[5..5 + head.body_len as usize];
                let mut result = self.record(head.kind, body, offset, deferred.then_some(record));
                if deferred && result.is_err() {
                    if let Err(e) = open_record(record) {
                        result = Err(e.into());
                    }
                }
                self.buf = buf;
                result?;
                self.consume(head.total_len());
                Ok(true)
            }
        }
    }

    /// Whether the record here is a chunk started ahead whose job succeeded,
    /// and so checked its record's checksum where it was decoded. If the job
    /// failed, the record is checked here as any other, so an error is the one
    /// it would be without starting ahead (a bad checksum before what the body
    /// says). Waits for the job.
    #[cfg(not(target_arch = "wasm32"))]
    fn checked_ahead(&mut self) -> bool {
        if self.predecoded.front().is_none_or(|(at, _, _)| *at != self.offset) {
            return false;
        }
        let Some((at, declared, pending)) = self.predecoded.pop_front() else {
            return false;
        };
        // Waited for here, its result stays first for the record to take.
        let result = pending.wait();
        let ok = result.is_ok();
        self.predecoded.push_front((at, declared, Box::new(result)));
        ok
    }

    /// The WebAssembly module starts nothing ahead (it has no threads): every
    /// record is checked where it is read, and the module is smaller without
    /// the waiting above (`scripts/build-npm.sh`: 298 B more gzipped with it,
    /// 266 B over the npm package's 100 KiB budget).
    #[cfg(target_arch = "wasm32")]
    fn checked_ahead(&mut self) -> bool {
        false
    }

    /// Takes in the record `kind` with `body` at `offset`. A chunk record whose
    /// checksum is not checked yet comes as `unchecked`: it is checked once the
    /// chunk is decoded, before its bytes are used.
    fn record(
        &mut self,
        kind: RecordKind,
        body: &[u8],
        offset: u64,
        unchecked: Option<&[u8]>,
    ) -> Result<(), DecodeError> {
        match (&self.state, kind) {
            (State::FileOrIndex, RecordKind::File) => {
                let record = FileRecord::parse(body)?;
                self.loc = Location {
                    file: Some(record.path.clone()),
                    ..Location::default()
                };
                self.output_total = self.output_total.saturating_add(record.size);
                if self.output_total > self.limits.max_output_bytes {
                    return Err(FormatError::LimitExceeded {
                        limit: "output bytes",
                        requested: self.output_total,
                        allowed: self.limits.max_output_bytes,
                    }
                    .into());
                }
                self.seen.push(IndexEntry {
                    kind,
                    offset,
                    decoded_len: 0,
                });
                self.queue.push_back(Event::FileStart {
                    path: record.path.clone(),
                    size: record.size,
                });
                self.files.count_decoded();
                if self.hashes_files() {
                    self.hasher.start(self.digest_kind, record.size);
                }
                let segments_left = record.segments;
                self.file = Some(OpenFile {
                    record,
                    segments_left,
                    bytes_seen: 0,
                });
                if segments_left == 0 {
                    self.close_file()?;
                } else {
                    self.state = State::Segment;
                }
            }
            (State::Segment, RecordKind::Segment) => {
                let seg = SegmentRecord::parse(body)?;
                let index = self.segments_seen;
                self.segments_seen += 1;
                self.loc.segment = Some(seg.name.clone());
                self.loc.chunk = None;
                self.seen.push(IndexEntry {
                    kind,
                    offset,
                    decoded_len: 0,
                });
                let file = self
                    .file
                    .as_mut()
                    .ok_or(FormatError::Invalid { what: "record order" })?;
                file.segments_left -= 1;
                let room = file.record.size - file.bytes_seen;
                if seg.len > room {
                    return Err(FormatError::LengthMismatch {
                        what: "segment length (beyond its file's size)",
                        expected: room,
                        found: seg.len,
                    }
                    .into());
                }
                let chunks = seg.chunks;
                let len = seg.len;
                // Read from shared input, a retained segment is kept as its
                // chunk records (but for a delta, whose bytes need the base too),
                // which hold no decoded bytes.
                #[cfg(feature = "shared-input")]
                let as_records = seg.retain > 0 && self.shared.is_some() && seg.source == SegmentSource::Chunks;
                // Its copies are read back if the caller keeps the file it lies in.
                #[cfg(feature = "shared-input")]
                let written_at = match (&mut self.written, &self.file) {
                    (Some(output), Some(file)) if seg.retain > 0 => {
                        let number = self.files.decoded().saturating_sub(1);
                        output.keep(number).then_some((number, file.bytes_seen))
                    }
                    _ => None,
                };
                #[cfg(feature = "shared-input")]
                let holds = !as_records && written_at.is_none();
                #[cfg(not(feature = "shared-input"))]
                let holds = true;
                let holds = holds && seg.retain > 0;
                if holds {
                    // Before decoding anything: what the archive asks to keep must fit.
                    hold_retained(&mut self.retained_total, len, self.limits.max_retained_bytes)?;
                }
                let mut base = None;
                match &seg.source {
                    SegmentSource::Chunks => {}
                    SegmentSource::Copy { segment } => {
                        let source = self.retained.get(*segment).ok_or(FormatError::Invalid {
                            what: "copy source (not a retained earlier segment)",
                        })?;
                        if source.len != len {
                            return Err(FormatError::LengthMismatch {
                                what: "copy length (differs from its source's)",
                                expected: source.len,
                                found: len,
                            }
                            .into());
                        }
                        // A copy is output like decoded chunks: earned by the archive read so far.
                        self.decoded_total = self.decoded_total.saturating_add(len);
                        let read_so_far = offset + (body.len() + archive::RECORD_OVERHEAD) as u64;
                        self.limits.check_ratio(self.decoded_total, read_so_far)?;
                    }
                    SegmentSource::BaseDelta { sha256 } => {
                        base = Some((fetch_base(self.base.as_deref(), &seg.name, sha256, len)?, 0));
                    }
                }
                self.queue.push_back(Event::SegmentStart {
                    name: seg.name,
                    kind: seg.kind,
                    len,
                });
                let retain = (seg.retain > 0).then(|| {
                    let kept = Retained {
                        bytes: Vec::new(),
                        copies_left: seg.retain,
                        len,
                        counted: if holds { len } else { 0 },
                        #[cfg(feature = "shared-input")]
                        source: None,
                        #[cfg(feature = "shared-input")]
                        written_at,
                    };
                    (index, kept)
                });
                #[cfg(feature = "shared-input")]
                let source = match &self.shared {
                    Some((input, input_offset)) if as_records => Some(SourceRecords {
                        input: input.clone(),
                        input_offset: *input_offset,
                        chunks: Vec::new(),
                        len: 0,
                        declared: len,
                    }),
                    _ => None,
                };
                if let SegmentSource::Copy { segment } = seg.source {
                    // The chunks the scan ahead started for this copy.
                    #[cfg(feature = "shared-input")]
                    let started: VecDeque<_> = {
                        while self.copy_ahead.front().is_some_and(|c| c.0 < offset) {
                            self.copy_ahead.pop_front();
                        }
                        let mut started = VecDeque::new();
                        while self.copy_ahead.front().is_some_and(|c| c.0 == offset) {
                            started.extend(self.copy_ahead.pop_front().map(|c| c.2));
                        }
                        started
                    };
                    self.copy = Some(PendingCopy {
                        source: segment,
                        at: 0,
                        #[cfg(feature = "shared-input")]
                        next_out: 0,
                        #[cfg(feature = "shared-input")]
                        next_start: started.len(),
                        #[cfg(feature = "shared-input")]
                        started,
                        #[cfg(feature = "shared-input")]
                        carry: None,
                        #[cfg(feature = "shared-input")]
                        reading_back: self.retained.get(segment).is_some_and(|r| r.written_at.is_some()),
                    });
                    self.state = State::Copy;
                } else if chunks == 0 {
                    self.segment = Some(OpenSegment {
                        chunks_left: 0,
                        bytes_left: 0,
                        chunk_no: 0,
                        base: None,
                        retain,
                        #[cfg(feature = "shared-input")]
                        source,
                    });
                    self.close_segment()?;
                } else {
                    self.segment = Some(OpenSegment {
                        chunks_left: chunks,
                        bytes_left: len,
                        chunk_no: 0,
                        base,
                        retain,
                        #[cfg(feature = "shared-input")]
                        source,
                    });
                    self.state = State::Chunk;
                }
            }
            (State::Chunk, RecordKind::Chunk) => {
                let seg = self
                    .segment
                    .as_mut()
                    .ok_or(FormatError::Invalid { what: "record order" })?;
                self.loc.chunk = Some(seg.chunk_no);
                let header = ChunkRecord::parse(body)?;
                let last = seg.chunks_left == 1;
                if header.decoded_len > seg.bytes_left || (last && header.decoded_len != seg.bytes_left) {
                    return Err(FormatError::LengthMismatch {
                        what: "chunk lengths (do not add up to the segment's)",
                        expected: seg.bytes_left,
                        found: header.decoded_len,
                    }
                    .into());
                }
                // Before decoding: what this chunk adds must be earned by the
                // archive read so far (a bomb is refused, not decoded).
                self.decoded_total = self.decoded_total.saturating_add(header.decoded_len);
                let read_so_far = offset + (body.len() + archive::RECORD_OVERHEAD) as u64;
                self.limits.check_ratio(self.decoded_total, read_so_far)?;
                let DecodedChunk {
                    bytes: mut data,
                    subtrees,
                } = match self.predecoded.pop_front() {
                    Some((at, _, pending)) if at == offset => pending.wait()?,
                    other => {
                        // Nothing started ahead for this record (or, defensively,
                        // for another one: drop it all).
                        if other.is_some() {
                            self.predecoded.clear();
                        }
                        let decoded = decode_chunk_bytes(body, &self.limits.program);
                        if let Some(record) = unchecked {
                            open_record(record)?;
                        }
                        decoded?.into()
                    }
                };
                // A delta's bytes change below: what was hashed is not the file's.
                let subtrees = subtrees.filter(|_| seg.base.is_none());
                if let Some((base, at)) = seg.base.as_mut() {
                    let part = base.get(*at..*at + data.len()).ok_or(FormatError::LengthMismatch {
                        what: "chunk lengths (beyond the base tensor)",
                        expected: base.len() as u64,
                        found: (*at + data.len()) as u64,
                    })?;
                    xor_into(&mut data, part);
                    *at += data.len();
                }
                // A retained segment of shared input keeps where this record
                // lies there, not its bytes.
                #[cfg(feature = "shared-input")]
                if let Some(source) = seg.source.as_mut() {
                    let place = self.shared.as_ref().and_then(|(input, input_offset)| {
                        let same = Arc::ptr_eq(input, &source.input) && *input_offset == source.input_offset;
                        let start = usize::try_from(offset.checked_sub(*input_offset)?).ok()?;
                        same.then_some(start..start + body.len() + archive::RECORD_OVERHEAD)
                    });
                    match place {
                        Some(range) => {
                            source.chunks.push((range, data.len() as u64));
                            source.len += data.len() as u64;
                        }
                        // Input pushed since the segment started, so this
                        // record is not in the shared input: the segment's
                        // bytes are kept after all (unless its copies are
                        // read back), those so far decoded again.
                        None => {
                            if let Some((_, r)) = seg.retain.as_mut().filter(|r| r.1.written_at.is_none()) {
                                let limit = self.limits.max_retained_bytes;
                                hold_retained(&mut self.retained_total, source.declared, limit)?;
                                r.bytes = source.decode_all(&self.limits.program)?;
                                r.counted = source.declared;
                            }
                            seg.source = None;
                        }
                    }
                }
                if let Some((_, r)) = seg.retain.as_mut().filter(|r| r.1.holds()) {
                    r.bytes.extend_from_slice(&data);
                }
                seg.bytes_left -= data.len() as u64;
                seg.chunks_left -= 1;
                seg.chunk_no += 1;
                self.seen.push(IndexEntry {
                    kind,
                    offset,
                    decoded_len: data.len() as u64,
                });
                let file = self
                    .file
                    .as_mut()
                    .ok_or(FormatError::Invalid { what: "record order" })?;
                file.bytes_seen += data.len() as u64;
                let data = Piece::from(data);
                if self.hashes_files() {
                    match subtrees {
                        Some(subtrees) => self.hasher.update_with_subtrees(&data, subtrees),
                        None => self.hasher.update(&data),
                    }
                }
                self.queue.push_back(Event::Data(data));
                if last {
                    self.close_segment()?;
                }
            }
            (State::FileOrIndex, RecordKind::Index) => {
                if !self.retained.is_empty() {
                    return Err(FormatError::Invalid {
                        what: "retained segments (fewer copies than declared)",
                    }
                    .into());
                }
                let entries = parse_index(body, offset)?;
                if entries != self.seen {
                    return Err(FormatError::Corrupt {
                        what: "index (does not match the records)",
                    }
                    .into());
                }
                self.index_offset = offset;
                self.loc = Location::default();
                self.state = State::End;
            }
            (State::End, RecordKind::End) => {
                let archive_len = offset + archive::END_LEN as u64;
                let index_offset = parse_end(body, archive_len)?;
                if index_offset != self.index_offset {
                    return Err(FormatError::Corrupt {
                        what: "END record (index offset)",
                    }
                    .into());
                }
                self.seen = Vec::new();
                self.state = State::Done;
                self.queue.push_back(Event::End);
            }
            _ => {
                return Err(FormatError::Invalid {
                    what: "record order (unexpected record kind here)",
                }
                .into())
            }
        }
        Ok(())
    }

    /// Emits the next piece of the copy being made; closes the segment after the last.
    fn copy_step(&mut self) -> Result<(), DecodeError> {
        let hashes = self.hashes_files();
        let copy = self
            .copy
            .as_mut()
            .ok_or(FormatError::Invalid { what: "record order" })?;
        let source = self
            .retained
            .get_mut(copy.source)
            .ok_or(FormatError::Invalid { what: "copy source" })?;
        #[cfg(feature = "shared-input")]
        let piece = copy.next_piece(source, self.written.as_mut(), &self.limits.program, &mut self.reread)?;
        #[cfg(not(feature = "shared-input"))]
        let piece = source.held_piece(copy.at);
        if let Some(piece) = piece {
            copy.at += piece.len();
            let file = self
                .file
                .as_mut()
                .ok_or(FormatError::Invalid { what: "record order" })?;
            file.bytes_seen += piece.len() as u64;
            if hashes {
                self.hasher.update(&piece);
            }
            self.queue.push_back(Event::Data(piece));
        }
        if copy.at as u64 >= source.len {
            source.copies_left -= 1;
            if source.copies_left == 0 {
                let counted = source.counted;
                self.retained.remove(copy.source);
                self.retained_total -= counted;
            }
            self.copy = None;
            self.close_segment()?;
        }
        Ok(())
    }

    fn close_segment(&mut self) -> Result<(), DecodeError> {
        if let Some(segment) = self.segment.take() {
            if let Some((index, kept)) = segment.retain {
                #[cfg(feature = "shared-input")]
                let kept = Retained {
                    source: segment.source,
                    ..kept
                };
                self.retained.insert(index, kept);
            }
        }
        self.queue.push_back(Event::SegmentEnd);
        let file = self
            .file
            .as_ref()
            .ok_or(FormatError::Invalid { what: "record order" })?;
        if file.segments_left == 0 {
            self.close_file()
        } else {
            self.state = State::Segment;
            Ok(())
        }
    }

    fn close_file(&mut self) -> Result<(), DecodeError> {
        let file = self.file.take().ok_or(FormatError::Invalid { what: "record order" })?;
        if file.bytes_seen != file.record.size {
            return Err(FormatError::LengthMismatch {
                what: "file size (segments do not add up)",
                expected: file.record.size,
                found: file.bytes_seen,
            }
            .into());
        }
        let digest = if self.hashes_files() {
            self.hasher.finish()
        } else {
            file.record.digest
        };
        if digest != file.record.digest {
            return Err(mismatch(self.digest_kind, &file.record.digest, &digest).into());
        }
        self.state = State::FileOrIndex;
        self.queue.push_back(Event::FileEnd {
            path: file.record.path,
            digest,
            kind: self.digest_kind,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn segment(len: usize, copies: u64) -> Retained {
        Retained {
            bytes: vec![7; len],
            copies_left: copies,
            len: len as u64,
            counted: len as u64,
            #[cfg(feature = "shared-input")]
            source: None,
            #[cfg(feature = "shared-input")]
            written_at: None,
        }
    }

    #[test]
    fn retained_segments_find_remove_and_sweep_their_holes() {
        let mut kept = RetainedSegments::default();
        assert!(kept.is_empty());
        for index in 0..100u64 {
            kept.insert(index * 3, segment(index as usize, 1));
        }
        // Out of order too, though segments close in index order.
        kept.insert(1, segment(5, 2));
        assert_eq!(kept.bytes(), (0..100).sum::<u64>() + 5);
        assert_eq!(kept.get(1).map(|r| r.copies_left), Some(2));
        assert!(kept.get(2).is_none() && kept.get(1000).is_none());
        kept.get_mut(3).unwrap().copies_left = 9;
        assert_eq!(kept.get(3).map(|r| r.copies_left), Some(9));

        for index in 0..60u64 {
            kept.remove(index * 3);
            assert!(kept.get(index * 3).is_none());
            // Holes never outnumber the live entries.
            assert!(kept.holes * 2 <= kept.entries.len());
        }
        kept.remove(5); // absent: nothing happens
        assert_eq!(kept.bytes(), (60..100).sum::<u64>() + 5);
        assert_eq!(kept.get(180).map(|r| r.bytes.len()), Some(60));
        assert!(!kept.is_empty());

        // A removed index may come back.
        kept.insert(0, segment(1, 1));
        assert_eq!(kept.get(0).map(|r| r.bytes.len()), Some(1));
        for index in (60..100u64).map(|i| i * 3).chain([0, 1]) {
            kept.remove(index);
        }
        assert!(kept.is_empty());
        assert_eq!(kept.bytes(), 0);
    }
}
