//! What the bytes of an archive are (see `docs/FORMAT.md`).
//!
//! ```text
//! archive  = header record* end
//! header   = MAGIC (8 bytes) | u16 version | u16 flags (bit 0: BLAKE3, bit 1: XXH3-128 file digests)
//! record   = u8 kind | u32 body_len | body | u64 xxh3_64(kind, body_len, body)
//! records  = (FILE (SEGMENT CHUNK*)*)* INDEX, then END
//! ```
//!
//! All integers are little-endian; `varint` is canonical LEB128. Every record
//! carries its own checksum, so a flipped bit is caught at the record it hit
//! before anything in it is trusted.

use alloc::string::String;
use alloc::vec::Vec;

use crate::bytes::{put_string, put_varint, ByteReader};
use crate::dtype::DType;
use crate::error::{FormatError, Result};

/// The first eight bytes of every archive (PNG-style: non-ASCII first byte,
/// CR LF and ^Z to catch text-mode mangling).
pub const MAGIC: [u8; 8] = [0x89, b'B', b'R', b'V', b'\r', b'\n', 0x1a, b'\n'];
/// The format version this crate writes and reads.
pub const VERSION: u16 = 1;
/// Bytes of the archive header.
pub const HEADER_LEN: usize = 12;
/// Bytes of a record's framing: kind, body length and checksum.
pub const RECORD_OVERHEAD: usize = 1 + 4 + 8;
/// Largest record body a reader accepts (bounds the streaming decoder's buffer).
pub const MAX_RECORD_BODY: u32 = 64 << 20;
/// Largest decoded size of one chunk.
pub const MAX_CHUNK_DECODED: u64 = 16 << 20;
/// Largest path or tensor name, in bytes.
pub const MAX_NAME: u64 = 4096;
/// Most dimensions of a tensor.
pub const MAX_RANK: u64 = 32;
/// Body length of the END record.
pub const END_BODY_LEN: u32 = 16;
/// Bytes of the END record, framing included; the archive's last bytes.
pub const END_LEN: usize = RECORD_OVERHEAD + END_BODY_LEN as usize;

/// Record kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordKind {
    /// Starts a file.
    File = 1,
    /// Starts a segment of the current file.
    Segment = 2,
    /// A chunk of the current segment: a program.
    Chunk = 3,
    /// Offsets of every record, for random access.
    Index = 4,
    /// The last record: where the index is.
    End = 5,
}

impl RecordKind {
    /// The kind with wire value `v`.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            1 => RecordKind::File,
            2 => RecordKind::Segment,
            3 => RecordKind::Chunk,
            4 => RecordKind::Index,
            5 => RecordKind::End,
            _ => {
                return Err(FormatError::UnknownTag {
                    what: "record kind",
                    tag: v.into(),
                })
            }
        })
    }
}

/// The hash behind every FILE record's 32-byte digest; the archive header says which.
///
/// SHA-256 is what model hubs publish for a file (a Git LFS object id is its
/// SHA-256), so an archive can prove that it rebuilds that very file. BLAKE3 hashes
/// several times faster (its SIMD lanes hash independent 1 KiB blocks), which a
/// decoder running at a GB/s notices. XXH3-128 is several times faster again (a
/// decoder of `--fast-decode` archives spent a quarter of its time in BLAKE3), and
/// as good at catching damage, but it is not a cryptographic hash: no one can
/// check it against a published SHA-256, nor does it stand against someone who
/// crafts a collision. The choice is the archive writer's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DigestKind {
    /// SHA-256 (FIPS 180-4): header flags bits 0 and 1 clear.
    #[default]
    Sha256,
    /// BLAKE3 with its default 32-byte output, unkeyed: header flags bit 0 set.
    Blake3,
    /// XXH3-128 with seed 0, its 16 bytes big-endian (as `xxhsum -H2` prints it),
    /// then 16 zero bytes: header flags bit 1 set.
    Xxh3,
}

impl DigestKind {
    /// Every kind, in the order of their flag bits.
    pub const ALL: [DigestKind; 3] = [DigestKind::Sha256, DigestKind::Blake3, DigestKind::Xxh3];

    /// Its name: `sha256`, `blake3` or `xxh3-128`.
    pub fn name(self) -> &'static str {
        match self {
            DigestKind::Sha256 => "sha256",
            DigestKind::Blake3 => "blake3",
            DigestKind::Xxh3 => "xxh3-128",
        }
    }

    /// The kind named `name` ([`DigestKind::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        DigestKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The hash's own bytes in a FILE record's 32-byte `digest`: all of them, or
    /// XXH3-128's first 16 (the rest are zero). What a person compares.
    pub fn hash_bytes(self, digest: &[u8; 32]) -> &[u8] {
        match self {
            DigestKind::Sha256 | DigestKind::Blake3 => digest,
            DigestKind::Xxh3 => &digest[..16],
        }
    }
}

/// Bits of the header's `flags`.
pub mod header_flags {
    /// FILE records carry BLAKE3 digests instead of SHA-256.
    pub const BLAKE3: u16 = 1;
    /// FILE records carry XXH3-128 digests instead of SHA-256 (never with `BLAKE3`).
    pub const XXH3: u16 = 2;
    /// Every bit this version defines; a reader rejects the others.
    pub const KNOWN: u16 = BLAKE3 | XXH3;
}

/// The archive header of an archive whose FILE records carry `digest` digests.
pub fn header(digest: DigestKind) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..10].copy_from_slice(&VERSION.to_le_bytes());
    let flags = match digest {
        DigestKind::Sha256 => 0,
        DigestKind::Blake3 => header_flags::BLAKE3,
        DigestKind::Xxh3 => header_flags::XXH3,
    };
    h[10..12].copy_from_slice(&flags.to_le_bytes());
    h
}

/// Checks an archive header; returns the kind of its FILE records' digests.
pub fn check_header(h: &[u8]) -> Result<DigestKind> {
    let h = h
        .get(..HEADER_LEN)
        .ok_or(FormatError::Truncated { what: "archive header" })?;
    if h[..8] != MAGIC {
        return Err(FormatError::Invalid {
            what: "archive magic (not a Brevis archive)",
        });
    }
    let version = u16::from_le_bytes([h[8], h[9]]);
    if version != VERSION {
        return Err(FormatError::UnknownTag {
            what: "archive version",
            tag: version.into(),
        });
    }
    let flags = u16::from_le_bytes([h[10], h[11]]);
    if flags & !header_flags::KNOWN != 0 {
        return Err(FormatError::UnknownTag {
            what: "archive flags",
            tag: flags.into(),
        });
    }
    match (flags & header_flags::BLAKE3 != 0, flags & header_flags::XXH3 != 0) {
        (false, false) => Ok(DigestKind::Sha256),
        (true, false) => Ok(DigestKind::Blake3),
        (false, true) => Ok(DigestKind::Xxh3),
        (true, true) => Err(FormatError::Invalid {
            what: "archive flags (BLAKE3 and XXH3 digests both set)",
        }),
    }
}

/// XXH3-64 (seed 0), the checksum of records and of decoded chunks. Both
/// crates compute the same function; they differ in speed. xxhash-rust picks
/// its SIMD at compile time, which for a portable x86-64 build is SSE2;
/// twox-hash (with `std`) picks AVX2 at run time where the CPU has it, and hashes
/// 1.6 times as fast on `bench/RESULTS.md`'s machine (`cargo bench -p
/// brevis-decoder --bench digests -- checksum`: 28.9 against 17.6 GiB/s on a MiB
/// in cache). In WebAssembly xxhash-rust's `simd128` code is the fast one
/// (twox-hash has none), and without `std` twox-hash has no SIMD at all.
#[inline]
fn xxh3_64(bytes: &[u8]) -> u64 {
    #[cfg(all(target_arch = "x86_64", feature = "std"))]
    return twox_hash::XxHash3_64::oneshot(bytes);
    #[cfg(not(all(target_arch = "x86_64", feature = "std")))]
    return xxhash_rust::xxh3::xxh3_64(bytes);
}

/// XXH3-128 (seed 0), incrementally (its state is a few hundred bytes: box it to
/// keep it off a hot stack): the hash of [`DigestKind::Xxh3`] file
/// digests. The same two crates as the record checksum (XXH3-64), for the same reasons.
/// xxhash-rust's `Xxh3Default` is its hasher with the default secret built in,
/// not copied into each state as `Xxh3`'s is: the npm package's module was 591 B
/// smaller gzipped with it (`scripts/build-npm.sh`: 95,547 against 94,956 B), and
/// `verifyArchive` as fast (`bench/wasm/ab.sh 2094571 595c95e`, both orders, in
/// `bench/wasm/AB.md`: 0.98-1.03).
#[derive(Clone)]
pub struct Xxh3Hasher(Xxh3Inner);

#[cfg(all(target_arch = "x86_64", feature = "std"))]
type Xxh3Inner = twox_hash::XxHash3_128;
#[cfg(not(all(target_arch = "x86_64", feature = "std")))]
type Xxh3Inner = xxhash_rust::xxh3::Xxh3Default;

impl Xxh3Hasher {
    /// A hasher with nothing hashed yet.
    pub fn new() -> Self {
        #[cfg(all(target_arch = "x86_64", feature = "std"))]
        return Xxh3Hasher(twox_hash::XxHash3_128::new());
        #[cfg(not(all(target_arch = "x86_64", feature = "std")))]
        return Xxh3Hasher(xxhash_rust::xxh3::Xxh3Default::new());
    }

    /// Hashes the next bytes.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        #[cfg(all(target_arch = "x86_64", feature = "std"))]
        self.0.write(bytes);
        #[cfg(not(all(target_arch = "x86_64", feature = "std")))]
        self.0.update(bytes);
    }

    /// The hash of every byte given so far.
    pub fn finish(&self) -> u128 {
        #[cfg(all(target_arch = "x86_64", feature = "std"))]
        return self.0.finish_128();
        #[cfg(not(all(target_arch = "x86_64", feature = "std")))]
        return self.0.digest128();
    }
}

impl Default for Xxh3Hasher {
    fn default() -> Self {
        Self::new()
    }
}

/// Frames `body` as a record of `kind`, appending it to `out`.
pub fn put_record(out: &mut Vec<u8>, kind: RecordKind, body: &[u8]) {
    let start = out.len();
    out.push(kind as u8);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    let sum = xxh3_64(&out[start..]);
    out.extend_from_slice(&sum.to_le_bytes());
}

/// A record's framing, read from its first five bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHead {
    /// The kind.
    pub kind: RecordKind,
    /// Body length.
    pub body_len: u32,
}

impl RecordHead {
    /// Reads and checks the first five bytes of a record.
    pub fn parse(b: &[u8]) -> Result<Self> {
        let b = b.get(..5).ok_or(FormatError::Truncated { what: "record header" })?;
        let kind = RecordKind::from_u8(b[0])?;
        let body_len = u32::from_le_bytes([b[1], b[2], b[3], b[4]]);
        if body_len > MAX_RECORD_BODY {
            return Err(FormatError::LimitExceeded {
                limit: "record body bytes",
                requested: body_len.into(),
                allowed: MAX_RECORD_BODY.into(),
            });
        }
        Ok(RecordHead { kind, body_len })
    }

    /// Bytes of the whole record, framing included.
    pub fn total_len(&self) -> usize {
        RECORD_OVERHEAD + self.body_len as usize
    }
}

/// Checks a complete record's checksum and returns its head and body.
pub fn open_record(b: &[u8]) -> Result<(RecordHead, &[u8])> {
    let head = RecordHead::parse(b)?;
    let b = b
        .get(..head.total_len())
        .ok_or(FormatError::Truncated { what: "record" })?;
    let body = &b[5..5 + head.body_len as usize];
    let stored = u64::from_le_bytes(b[5 + head.body_len as usize..].try_into().unwrap_or([0; 8]));
    // Over the kind, the length and the body, which lie side by side.
    let computed = xxh3_64(&b[..5 + head.body_len as usize]);
    if stored != computed {
        return Err(FormatError::Checksum {
            what: "record",
            stored,
            computed,
        });
    }
    Ok((head, body))
}

/// A complete record whose checksum is not checked yet: [`open_record`] in two
/// steps, so that a reader can decode a chunk's body first and check the checksum
/// after ([`UncheckedRecord::read_then_check`]).
///
/// Why: a chunk record is usually read from memory the cache has not seen (a
/// mapped or freshly loaded archive). Hashed there first, its loads waited on
/// memory, while the decoder's, spread over its work, are fetched ahead by the
/// hardware: decoding first, then hashing the record from cache, made the
/// decoders faster on `--fast-decode` archives (figures in
/// `docs/ARCHITECTURE.md`).
#[derive(Clone, Copy, Debug)]
pub struct UncheckedRecord<'a> {
    /// Its framing.
    pub head: RecordHead,
    /// The whole record: framing, body and checksum.
    bytes: &'a [u8],
}

impl<'a> UncheckedRecord<'a> {
    /// The record at the start of `b`: its framing checked, and that `b` holds
    /// all of it.
    pub fn parse(b: &'a [u8]) -> Result<Self> {
        let head = RecordHead::parse(b)?;
        let bytes = b
            .get(..head.total_len())
            .ok_or(FormatError::Truncated { what: "record" })?;
        Ok(UncheckedRecord { head, bytes })
    }

    /// The body, not yet checked against the checksum.
    pub fn body(&self) -> &'a [u8] {
        &self.bytes[5..5 + self.head.body_len as usize]
    }

    /// Checks the checksum. (By [`open_record`], which reads the five bytes
    /// of framing again: one copy of the check in the WebAssembly module.)
    pub fn check(&self) -> Result<()> {
        open_record(self.bytes).map(|_| ())
    }

    /// `read` of the body, then the checksum checked: a mismatch is the error
    /// whatever `read` returned, as if it had been checked first. `read` must
    /// treat the body as hostile (it is not checked yet), and its result must
    /// not be used unless this returns it: the format asks that nothing a
    /// record says be acted on before its checksum is checked (`docs/FORMAT.md`).
    pub fn read_then_check<T, E: From<FormatError>>(
        &self,
        read: impl FnOnce(&'a [u8]) -> core::result::Result<T, E>,
    ) -> core::result::Result<T, E> {
        let result = read(self.body());
        self.check()?;
        result
    }
}

/// Starts a file: `string path | varint size | [32] digest | varint segments`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRecord {
    /// Relative path, `/`-separated, no `..`, no leading `/`.
    pub path: String,
    /// Bytes of the rebuilt file.
    pub size: u64,
    /// Digest of the rebuilt file: SHA-256, BLAKE3 or XXH3-128 (16 bytes, then
    /// zeros), as the archive header says ([`DigestKind`]).
    pub digest: [u8; 32],
    /// Segments that follow.
    pub segments: u64,
}

/// What a segment holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SegmentKind {
    /// Bytes with no tensor meaning (headers, graphs, whole plain files).
    Opaque,
    /// A tensor's raw data.
    Tensor {
        /// Element type.
        dtype: DType,
        /// Dimensions (empty for a scalar).
        shape: Vec<u64>,
    },
}

/// Where a segment's bytes come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SegmentSource {
    /// Its chunks, as always (format 1 before dedup and deltas).
    #[default]
    Chunks,
    /// A copy of an earlier segment of the archive: `segment` is that segment's
    /// archive-wide index (SEGMENT records counted from 0, in archive order),
    /// which carries a retain mark. No chunks follow.
    Copy {
        /// Archive-wide index of the source segment.
        segment: u64,
    },
    /// Its chunks decode to the XOR of its bytes with a base tensor's bytes
    /// (same length), given by the caller and identified by its SHA-256.
    BaseDelta {
        /// SHA-256 of the base tensor's bytes.
        sha256: [u8; 32],
    },
}

/// Bits of a SEGMENT record's kind byte (`docs/FORMAT.md`).
pub mod segment_flags {
    /// dtype and shape follow the name.
    pub const TENSOR: u8 = 1;
    /// `copies: varint` follows: later segments copy this one's bytes.
    pub const RETAIN: u8 = 2;
    /// `source: varint` follows: the bytes are those of an earlier segment.
    pub const COPY: u8 = 4;
    /// `base_sha256[32]` follows: the chunks hold the XOR with a base tensor.
    pub const BASE_DELTA: u8 = 8;
    /// Every bit a reader knows.
    pub const KNOWN: u8 = TENSOR | RETAIN | COPY | BASE_DELTA;
}

/// Starts a segment: `u8 kind | string name | [u8 dtype | varint rank | varint dims…]
/// | [varint copies] | [varint source] | [base_sha256] | varint len | varint chunks`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentRecord {
    /// Opaque or tensor.
    pub kind: SegmentKind,
    /// Tensor name, or a label for opaque bytes.
    pub name: String,
    /// Bytes of the segment.
    pub len: u64,
    /// Chunks that follow.
    pub chunks: u64,
    /// How many later segments are copies of this one (0: none). A streaming
    /// reader keeps the bytes of a retained segment until its last copy.
    pub retain: u64,
    /// Chunks, a copy of an earlier segment, or a delta against a base tensor.
    pub source: SegmentSource,
}

/// A chunk: `varint decoded_len | u64 xxh3 of decoded bytes | u8 root width | program`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkRecord<'a> {
    /// Bytes the program rebuilds.
    pub decoded_len: u64,
    /// xxh3-64 of those bytes.
    pub decoded_xxh3: u64,
    /// Width of the root stream (a multiple of 8, 8..=64); the bytes are its
    /// words in little-endian order.
    pub root_width: u8,
    /// The serialized program.
    pub program: &'a [u8],
}

impl FileRecord {
    /// Serializes the body.
    pub fn body(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_string(&mut b, &self.path);
        put_varint(&mut b, self.size);
        b.extend_from_slice(&self.digest);
        put_varint(&mut b, self.segments);
        b
    }

    /// Parses and validates a body.
    pub fn parse(body: &[u8]) -> Result<Self> {
        let mut r = ByteReader::new(body);
        let path = r.string("file path", MAX_NAME)?;
        check_path(path)?;
        let size = r.varint("file size")?;
        let digest = r.array("file digest")?;
        let segments = r.varint("file segment count")?;
        r.finish("FILE record")?;
        if segments > size.saturating_add(1) {
            // Every segment but a lone empty one holds at least one byte.
            return Err(FormatError::Invalid {
                what: "file segment count (more segments than bytes)",
            });
        }
        Ok(FileRecord {
            path: path.into(),
            size,
            digest,
            segments,
        })
    }
}

/// Checks that an archived path is relative and cannot escape the output folder.
pub fn check_path(path: &str) -> Result<()> {
    let bad = path.is_empty()
        || path.starts_with('/')
        || path.contains('\\')
        || path.contains('\0')
        || path.split('/').any(|c| c.is_empty() || c == "." || c == "..")
        || path.as_bytes().get(1) == Some(&b':');
    if bad {
        return Err(FormatError::Invalid {
            what: "file path (must be relative, `/`-separated, without `.`, `..` or empty parts)",
        });
    }
    Ok(())
}

impl SegmentRecord {
    /// A segment of `len` bytes in `chunks` chunks (no copies, no base).
    pub fn new(kind: SegmentKind, name: impl Into<String>, len: u64, chunks: u64) -> Self {
        SegmentRecord {
            kind,
            name: name.into(),
            len,
            chunks,
            retain: 0,
            source: SegmentSource::Chunks,
        }
    }

    /// The kind byte: [`segment_flags`] bits.
    pub fn kind_byte(&self) -> u8 {
        let mut k = 0;
        if matches!(self.kind, SegmentKind::Tensor { .. }) {
            k |= segment_flags::TENSOR;
        }
        if self.retain > 0 {
            k |= segment_flags::RETAIN;
        }
        match self.source {
            SegmentSource::Chunks => {}
            SegmentSource::Copy { .. } => k |= segment_flags::COPY,
            SegmentSource::BaseDelta { .. } => k |= segment_flags::BASE_DELTA,
        }
        k
    }

    /// Serializes the body.
    pub fn body(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.push(self.kind_byte());
        put_string(&mut b, &self.name);
        if let SegmentKind::Tensor { dtype, shape } = &self.kind {
            b.push(dtype.code());
            put_varint(&mut b, shape.len() as u64);
            shape.iter().for_each(|&d| put_varint(&mut b, d));
        }
        if self.retain > 0 {
            put_varint(&mut b, self.retain);
        }
        match &self.source {
            SegmentSource::Chunks => {}
            SegmentSource::Copy { segment } => put_varint(&mut b, *segment),
            SegmentSource::BaseDelta { sha256 } => b.extend_from_slice(sha256),
        }
        put_varint(&mut b, self.len);
        put_varint(&mut b, self.chunks);
        b
    }

    /// Parses and validates a body: a tensor's length must equal its element
    /// count times its element size, and the chunk count must fit the length
    /// (0 for a copy).
    pub fn parse(body: &[u8]) -> Result<Self> {
        let mut r = ByteReader::new(body);
        let tag = r.u8("segment kind")?;
        let copy_and_more =
            tag & segment_flags::COPY != 0 && tag & (segment_flags::RETAIN | segment_flags::BASE_DELTA) != 0;
        if tag & !segment_flags::KNOWN != 0 || copy_and_more {
            // A reader from before a flag existed stops here, by name.
            return Err(FormatError::UnknownTag {
                what: "segment kind",
                tag: tag.into(),
            });
        }
        let name = String::from(r.string("segment name", MAX_NAME)?);
        let kind = if tag & segment_flags::TENSOR != 0 {
            let dtype = DType::from_code(r.u8("tensor dtype")?)?;
            let rank = r.varint_usize("tensor rank", MAX_RANK)?;
            let mut shape = Vec::with_capacity(rank);
            for _ in 0..rank {
                shape.push(r.varint("tensor dimension")?);
            }
            SegmentKind::Tensor { dtype, shape }
        } else {
            SegmentKind::Opaque
        };
        let retain = if tag & segment_flags::RETAIN != 0 {
            let n = r.varint("segment copies")?;
            if n == 0 {
                return Err(FormatError::Invalid {
                    what: "segment copies (a retained segment has at least one copy)",
                });
            }
            n
        } else {
            0
        };
        let source = if tag & segment_flags::COPY != 0 {
            SegmentSource::Copy {
                segment: r.varint("copy source segment")?,
            }
        } else if tag & segment_flags::BASE_DELTA != 0 {
            SegmentSource::BaseDelta {
                sha256: r.array("base tensor sha256")?,
            }
        } else {
            SegmentSource::Chunks
        };
        let len = r.varint("segment length")?;
        let chunks = r.varint("segment chunk count")?;
        r.finish("SEGMENT record")?;
        if let SegmentKind::Tensor { dtype, shape } = &kind {
            let bytes = tensor_bytes(*dtype, shape)?;
            if bytes != len {
                return Err(FormatError::LengthMismatch {
                    what: "tensor segment length",
                    expected: bytes,
                    found: len,
                });
            }
        }
        if matches!(source, SegmentSource::Copy { .. }) {
            if chunks != 0 {
                return Err(FormatError::Invalid {
                    what: "segment chunk count (a copy has no chunks)",
                });
            }
        } else {
            let min_chunks = len.div_ceil(MAX_CHUNK_DECODED);
            if chunks < min_chunks || chunks > len.max(1) {
                return Err(FormatError::Invalid {
                    what: "segment chunk count (does not fit its length)",
                });
            }
        }
        Ok(SegmentRecord {
            kind,
            name,
            len,
            chunks,
            retain,
            source,
        })
    }
}

/// Bytes of a tensor: product of the shape times the element size, checked.
pub fn tensor_bytes(dtype: DType, shape: &[u64]) -> Result<u64> {
    shape
        .iter()
        .try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d))
        .ok_or(FormatError::Invalid {
            what: "tensor shape (byte size overflows)",
        })
}

impl<'a> ChunkRecord<'a> {
    /// Serializes a chunk body.
    pub fn body(decoded_len: u64, decoded_xxh3: u64, root_width: u8, program: &[u8]) -> Vec<u8> {
        let mut b = Vec::with_capacity(program.len() + 20);
        put_varint(&mut b, decoded_len);
        b.extend_from_slice(&decoded_xxh3.to_le_bytes());
        b.push(root_width);
        b.extend_from_slice(program);
        b
    }

    /// Parses and validates a body (the program itself is parsed by the decoder).
    pub fn parse(body: &'a [u8]) -> Result<Self> {
        let mut r = ByteReader::new(body);
        let decoded_len = r.varint("chunk decoded length")?;
        if decoded_len == 0 || decoded_len > MAX_CHUNK_DECODED {
            return Err(FormatError::LimitExceeded {
                limit: "chunk decoded bytes",
                requested: decoded_len,
                allowed: MAX_CHUNK_DECODED,
            });
        }
        let decoded_xxh3 = r.u64_le("chunk checksum")?;
        let root_width = r.u8("chunk root width")?;
        if root_width == 0 || root_width % 8 != 0 || root_width > 64 {
            return Err(FormatError::BadWidth { width: root_width });
        }
        if decoded_len % u64::from(root_width / 8) != 0 {
            return Err(FormatError::Invalid {
                what: "chunk length (not a whole number of root words)",
            });
        }
        Ok(ChunkRecord {
            decoded_len,
            decoded_xxh3,
            root_width,
            program: r.rest(),
        })
    }

    /// Words in the root stream.
    pub fn root_count(&self) -> u64 {
        self.decoded_len / u64::from(self.root_width / 8)
    }
}

/// xxh3-64 of decoded bytes, as stored in chunk records.
pub fn chunk_checksum(bytes: &[u8]) -> u64 {
    xxh3_64(bytes)
}

/// One index entry: a record's kind, its offset in the archive, and for chunks
/// the decoded length (so a reader can plan range requests without reading chunks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The record's kind (FILE, SEGMENT or CHUNK).
    pub kind: RecordKind,
    /// Offset of the record from the start of the archive.
    pub offset: u64,
    /// Decoded bytes (chunks only; 0 otherwise).
    pub decoded_len: u64,
}

/// Serializes an index body: `varint n`, then per entry `u8 kind | varint offset
/// delta from the previous entry | [varint decoded_len, chunks only]`.
pub fn index_body(entries: &[IndexEntry]) -> Vec<u8> {
    let mut b = Vec::new();
    put_varint(&mut b, entries.len() as u64);
    let mut prev = 0;
    for e in entries {
        b.push(e.kind as u8);
        put_varint(&mut b, e.offset - prev);
        prev = e.offset;
        if e.kind == RecordKind::Chunk {
            put_varint(&mut b, e.decoded_len);
        }
    }
    b
}

/// Parses an index body; offsets must increase strictly and stay below `index_offset`.
pub fn parse_index(body: &[u8], index_offset: u64) -> Result<Vec<IndexEntry>> {
    let mut r = ByteReader::new(body);
    // Each entry takes at least two bytes.
    let n = r.varint_usize("index entry count", (body.len() / 2) as u64)?;
    let mut entries = Vec::with_capacity(n);
    let mut prev = 0u64;
    for i in 0..n {
        let kind = RecordKind::from_u8(r.u8("index entry kind")?)?;
        if matches!(kind, RecordKind::Index | RecordKind::End) {
            return Err(FormatError::Invalid {
                what: "index entry kind",
            });
        }
        let delta = r.varint("index offset")?;
        if i > 0 && delta == 0 {
            return Err(FormatError::Invalid {
                what: "index offsets (not increasing)",
            });
        }
        let offset = prev
            .checked_add(delta)
            .filter(|&o| o < index_offset && o >= HEADER_LEN as u64);
        let offset = offset.ok_or(FormatError::Invalid {
            what: "index offset (outside the archive)",
        })?;
        prev = offset;
        let decoded_len = if kind == RecordKind::Chunk {
            // What a CHUNK record may declare, so lengths summed from the index cannot overflow.
            let len = r.varint("index chunk length")?;
            if len == 0 || len > MAX_CHUNK_DECODED {
                return Err(FormatError::Invalid {
                    what: "index chunk length (must be 1..=16 MiB, as in the chunk)",
                });
            }
            len
        } else {
            0
        };
        entries.push(IndexEntry {
            kind,
            offset,
            decoded_len,
        });
    }
    r.finish("INDEX record")?;
    Ok(entries)
}

/// The END record's body: `u64 index offset | u64 archive length`.
pub fn end_body(index_offset: u64, archive_len: u64) -> [u8; END_BODY_LEN as usize] {
    let mut b = [0u8; END_BODY_LEN as usize];
    b[..8].copy_from_slice(&index_offset.to_le_bytes());
    b[8..].copy_from_slice(&archive_len.to_le_bytes());
    b
}

/// Parses the END record's body: returns the index offset; the archive length
/// stored must equal `archive_len`.
pub fn parse_end(body: &[u8], archive_len: u64) -> Result<u64> {
    let mut r = ByteReader::new(body);
    let index_offset = r.u64_le("END index offset")?;
    let stored_len = r.u64_le("END archive length")?;
    r.finish("END record")?;
    if stored_len != archive_len {
        return Err(FormatError::LengthMismatch {
            what: "archive length",
            expected: stored_len,
            found: archive_len,
        });
    }
    if index_offset < HEADER_LEN as u64 || index_offset >= archive_len.saturating_sub(END_LEN as u64).saturating_add(1)
    {
        return Err(FormatError::Invalid {
            what: "END index offset (outside the archive)",
        });
    }
    Ok(index_offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_say_the_digest_kind_and_unknown_flags_are_refused() {
        for kind in DigestKind::ALL {
            assert_eq!(check_header(&header(kind)).unwrap(), kind);
            assert_eq!(DigestKind::from_name(kind.name()), Some(kind));
        }
        // Written before the flags existed: all zeros is SHA-256.
        assert_eq!(header(DigestKind::Sha256)[10..], [0, 0]);
        assert_eq!(header(DigestKind::Xxh3)[10..], [2, 0]);
        // Two digest kinds at once is no kind.
        let mut both = header(DigestKind::Blake3);
        both[10] |= 2;
        assert!(matches!(check_header(&both), Err(FormatError::Invalid { .. })));
        for bit in 2..16 {
            let mut h = header(DigestKind::Blake3);
            h[10..12].copy_from_slice(&(1u16 << bit | 1).to_le_bytes());
            assert!(
                matches!(check_header(&h), Err(FormatError::UnknownTag { .. })),
                "bit {bit}"
            );
        }
    }

    #[test]
    fn xxh3_hasher_is_xxh3_128_however_the_bytes_are_cut() {
        // The reference vector of the empty input (xxHash's own test suite).
        assert_eq!(Xxh3Hasher::new().finish(), 0x99aa06d3014798d86001c324468d497f);
        let data: Vec<u8> = (0..5000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [1, 3, 16, 17, 128, 129, 240, 241, 1024, 1025, 5000] {
            let want = xxhash_rust::xxh3::xxh3_128(&data[..len]);
            for piece in [1, 7, 64, 1000, len] {
                let mut h = Xxh3Hasher::new();
                for p in data[..len].chunks(piece) {
                    h.update(p);
                }
                assert_eq!(h.finish(), want, "len {len}, pieces of {piece}");
            }
        }
    }

    #[test]
    fn records_round_trip_and_checksums_catch_flips() {
        let f = FileRecord {
            path: "a/b.safetensors".into(),
            size: 10,
            digest: [7; 32],
            segments: 2,
        };
        let mut out = Vec::new();
        put_record(&mut out, RecordKind::File, &f.body());
        let (head, body) = open_record(&out).unwrap();
        assert_eq!(head.kind, RecordKind::File);
        assert_eq!(FileRecord::parse(body).unwrap(), f);
        for bit in 0..out.len() * 8 {
            let mut bad = out.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(open_record(&bad).is_err(), "bit {bit}");
        }
    }

    #[test]
    fn read_then_check_reports_a_bad_checksum_over_what_the_body_says() {
        let mut out = Vec::new();
        put_record(&mut out, RecordKind::Chunk, b"a body");
        let record = UncheckedRecord::parse(&out).unwrap();
        assert_eq!(record.body(), b"a body");
        let read = |body: &[u8]| -> Result<usize> { Ok(body.len()) };
        assert_eq!(record.read_then_check(read).unwrap(), 6);
        let refuse = |_: &[u8]| -> Result<usize> { Err(FormatError::Invalid { what: "the body" }) };
        assert!(matches!(
            record.read_then_check(refuse),
            Err(FormatError::Invalid { what: "the body" })
        ));
        // A flipped bit anywhere the framing still parses: the checksum's
        // error, whether the reading succeeded or failed.
        for bit in 0..out.len() * 8 {
            let mut bad = out.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let Ok(record) = UncheckedRecord::parse(&bad) else {
                continue; // the framing: refused before anything is read
            };
            for result in [record.read_then_check(read), record.read_then_check(refuse)] {
                assert!(
                    matches!(result, Err(FormatError::Checksum { what: "record", .. })),
                    "bit {bit}: {result:?}"
                );
            }
        }
        assert!(UncheckedRecord::parse(&out[..out.len() - 1]).is_err());
    }

    #[test]
    fn segment_lengths_are_checked_against_shapes() {
        let s = SegmentRecord::new(
            SegmentKind::Tensor {
                dtype: DType::BF16,
                shape: alloc::vec![3, 5],
            },
            "w",
            30,
            1,
        );
        assert_eq!(SegmentRecord::parse(&s.body()).unwrap(), s);
        let bad = SegmentRecord { len: 31, ..s.clone() };
        assert!(matches!(
            SegmentRecord::parse(&bad.body()),
            Err(FormatError::LengthMismatch { .. })
        ));
        let overflow = SegmentRecord {
            kind: SegmentKind::Tensor {
                dtype: DType::F32,
                shape: alloc::vec![u64::MAX, 2],
            },
            ..s.clone()
        };
        assert!(matches!(
            SegmentRecord::parse(&overflow.body()),
            Err(FormatError::Invalid { .. })
        ));
        let too_many_chunks = SegmentRecord { chunks: 31, ..s };
        assert!(SegmentRecord::parse(&too_many_chunks.body()).is_err());
    }

    #[test]
    fn copies_retains_and_deltas_round_trip_and_unknown_bits_are_refused() {
        let opaque = SegmentRecord::new(SegmentKind::Opaque, "header", 100, 1);
        // Format-1 segments keep their kind bytes 0 and 1.
        assert_eq!(opaque.body()[0], 0);
        let tensor = SegmentRecord::new(
            SegmentKind::Tensor {
                dtype: DType::F32,
                shape: alloc::vec![25],
            },
            "w",
            100,
            1,
        );
        assert_eq!(tensor.body()[0], 1);
        let retained = SegmentRecord {
            retain: 3,
            ..tensor.clone()
        };
        let copy = SegmentRecord {
            chunks: 0,
            source: SegmentSource::Copy { segment: 7 },
            ..tensor.clone()
        };
        let delta = SegmentRecord {
            retain: 1,
            source: SegmentSource::BaseDelta { sha256: [9; 32] },
            ..tensor.clone()
        };
        for s in [&opaque, &tensor, &retained, &copy, &delta] {
            assert_eq!(&SegmentRecord::parse(&s.body()).unwrap(), s);
        }
        assert_eq!(retained.body()[0], 3);
        assert_eq!(copy.body()[0], 5);
        assert_eq!(delta.body()[0], 11);
        // A copy with chunks, a retained copy, unknown bits: refused.
        let copy_with_chunks = SegmentRecord {
            chunks: 1,
            ..copy.clone()
        };
        assert!(SegmentRecord::parse(&copy_with_chunks.body()).is_err());
        for tag in [16u8, 0x80, 4 | 2, 4 | 8] {
            let mut b = copy.body();
            b[0] = tag | 1;
            assert_eq!(
                SegmentRecord::parse(&b),
                Err(FormatError::UnknownTag {
                    what: "segment kind",
                    tag: (tag | 1).into()
                })
            );
        }
        // A retain mark with zero copies is not canonical.
        let mut b = tensor.body();
        b[0] |= segment_flags::RETAIN;
        b.insert(1 + 2 + 1 + 1 + 1, 0);
        assert!(SegmentRecord::parse(&b).is_err());
    }

    #[test]
    fn paths_cannot_escape() {
        for p in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "C:x", "a\\b"] {
            assert!(check_path(p).is_err(), "{p:?}");
        }
        for p in ["model.safetensors", "onnx/model.onnx", "a.b/c..d"] {
            check_path(p).unwrap();
        }
    }

    #[test]
    fn index_round_trips_and_rejects_bad_offsets() {
        let e = [
            IndexEntry {
                kind: RecordKind::File,
                offset: 12,
                decoded_len: 0,
            },
            IndexEntry {
                kind: RecordKind::Segment,
                offset: 60,
                decoded_len: 0,
            },
            IndexEntry {
                kind: RecordKind::Chunk,
                offset: 90,
                decoded_len: 4096,
            },
        ];
        let b = index_body(&e);
        assert_eq!(parse_index(&b, 1000).unwrap(), e);
        assert!(parse_index(&b, 90).is_err());
    }

    /// Found by `cargo fuzz` (target `structured`): an index giving a chunk
    /// 2^64 - 1 decoded bytes made `Archive::open` overflow summing a segment's
    /// chunk lengths (a panic with overflow checks). A chunk entry's length is
    /// now held to what a CHUNK record may declare.
    #[test]
    fn index_chunk_lengths_are_those_a_chunk_may_have() {
        let entry = |decoded_len| IndexEntry {
            kind: RecordKind::Chunk,
            offset: 12,
            decoded_len,
        };
        for len in [0, MAX_CHUNK_DECODED + 1, u64::MAX] {
            assert_eq!(
                parse_index(&index_body(&[entry(len)]), 1000),
                Err(FormatError::Invalid {
                    what: "index chunk length (must be 1..=16 MiB, as in the chunk)"
                }),
                "{len}"
            );
        }
        for len in [1, MAX_CHUNK_DECODED] {
            assert_eq!(parse_index(&index_body(&[entry(len)]), 1000).unwrap(), [entry(len)]);
        }
    }
}
