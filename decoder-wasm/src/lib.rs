//! # brevis-decoder
//!
//! Decodes Brevis archives: parses and runs the programs the encoder wrote, with
//! no search and no model of the data. `#![no_std]` + `alloc` and free of
//! `unsafe`, so the same code runs natively and in WebAssembly.
//!
//! Two doors:
//! - [`decode_all`] / [`Archive`]: a whole archive in memory — every file, or one
//!   tensor by name through the index (random access), or one file chunk by
//!   chunk in one chunk's memory ([`Archive::read_file_pieces`]); with `std`,
//!   `decode_all_threads` / `Archive::read_file_threads` decode each file's
//!   chunks on several threads (the same files, checks and errors);
//! - [`StreamDecoder`]: push bytes as they arrive, pull [`Event`]s (file started,
//!   segment started, decoded bytes, file finished and verified). Memory stays
//!   bounded by one record (at most 64 MiB, typically a few MiB), plus the
//!   segments the archive marks as retained for later copies (deduplicated
//!   tensors and files), which [`DecodeLimits::max_retained_bytes`] bounds.
//!
//! Segments stored as a difference from a fine-tune's base need the base:
//! pass a [`BaseProvider`] ([`StreamDecoder::with_base`], [`Archive::with_base`]).
//!
//! Every input is untrusted: each record's checksum is checked before it is
//! parsed, every count is checked against what the record can hold and against
//! [`DecodeLimits`], and each file's digest (SHA-256, BLAKE3 or XXH3-128) is
//! checked after it is rebuilt.
//!
//! ## Features
//! - `std` (default): `std::error::Error` for errors, `std::io` helpers, and
//!   `decode_all_threads` / `Archive::read_file_threads` (threads of `std`).
//! - `simd`: `brevis-format`'s AVX2 and BMI2 decode loops on x86-64, chosen at run
//!   time (the `brevis` CLI's setting; the `unsafe` they need is in `brevis-format`,
//!   see `docs/UNSAFE.md`). Hashing and the loops without a twin are the same either way.
//! - `wasm`: the wasm-bindgen bindings (module `wasm`, `src/wasm.rs`) that the npm package
//!   `brevis-decoder` is built on (`scripts/build-npm.sh`).
#![no_std]
// `forbid` unless the wasm bindings are built: wasm-bindgen's generated glue
// needs `unsafe`, allowed in that one module only.
#![cfg_attr(not(feature = "wasm"), forbid(unsafe_code))]
#![cfg_attr(feature = "wasm", deny(unsafe_code))]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(any(feature = "std", test))]
extern crate std;

mod archive;
pub mod digest;
mod error;
pub mod exec;
mod stream;
#[cfg(feature = "wasm")]
#[allow(unsafe_code)]
pub mod wasm;

#[cfg(feature = "std")]
pub use archive::decode_all_threads;
pub use archive::{decode_all, decode_all_with_base, Archive, BaseRef, ChunkInfo, DecodedFile, FileInfo, SegmentInfo};
pub use brevis_format as format;
pub use brevis_format::archive::DigestKind;
pub use digest::{digest, Blake3Tree, ChunkPlace, Digester, Subtrees};
pub use error::{DecodeError, ErrorKind, Location};
pub use exec::{decode_chunk, decode_chunk_bytes, decode_chunk_record, ParsedChunk};
pub use stream::{Ahead, DecodedChunk, Event, FileHasher, PendingChunk, Piece, StreamDecoder};
#[cfg(feature = "shared-input")]
pub use stream::{SharedInput, WrittenOutput};

/// The default [`DecodeLimits::max_retained_bytes`]: 4 GiB.
pub const DEFAULT_MAX_RETAINED: u64 = 4 << 30;

/// Where a fine-tune's base tensors come from, for segments stored as a
/// difference from a base tensor (`brevis compress --base`). The decoder asks
/// for a tensor by its name and the SHA-256 of its bytes, and checks the
/// SHA-256 of what it gets: a wrong base is refused, never used.
///
/// Closures `Fn(&str, &[u8; 32]) -> Option<Vec<u8>>` are providers.
pub trait BaseProvider {
    /// The bytes of base tensor `name` whose SHA-256 is `sha256`, or `None`
    /// when the base holds no such tensor.
    fn tensor(&self, name: &str, sha256: &[u8; 32]) -> Option<alloc::vec::Vec<u8>>;
}

impl<F: Fn(&str, &[u8; 32]) -> Option<alloc::vec::Vec<u8>>> BaseProvider for F {
    fn tensor(&self, name: &str, sha256: &[u8; 32]) -> Option<alloc::vec::Vec<u8>> {
        self(name, sha256)
    }
}

/// Fetches base tensor `name`/`sha256` from `base` and checks it: its length
/// must be `len` and its SHA-256 `sha256`.
pub(crate) fn fetch_base(
    base: Option<&dyn BaseProvider>,
    name: &str,
    sha256: &[u8; 32],
    len: u64,
) -> Result<alloc::vec::Vec<u8>, brevis_format::FormatError> {
    use sha2::{Digest, Sha256};
    let bytes = base
        .and_then(|b| b.tensor(name, sha256))
        .ok_or(brevis_format::FormatError::BaseMissing { sha256: *sha256 })?;
    let found: [u8; 32] = Sha256::digest(&bytes).into();
    if found != *sha256 || bytes.len() as u64 != len {
        let prefix = |h: &[u8; 32]| {
            let mut p = [0u8; 8];
            p.copy_from_slice(&h[..8]);
            p
        };
        return Err(brevis_format::FormatError::BaseMismatch {
            expected: prefix(sha256),
            found: prefix(&found),
        });
    }
    Ok(bytes)
}

/// XORs `base` into `data` (the same length).
pub(crate) fn xor_into(data: &mut [u8], base: &[u8]) {
    data.iter_mut().zip(base).for_each(|(d, b)| *d ^= b);
}

/// Output every archive may produce whatever its size, before
/// [`DecodeLimits::max_ratio`] applies: 64 MiB (four chunks of zeros, say).
pub const RATIO_ALLOWANCE: u64 = 64 << 20;

/// What an output buffer may take before its data arrives, for a file that
/// declares `declared` bytes from an archive of `archive_bytes` (in hand):
/// 64 bytes per archive byte, at least 16 MiB, at most the declared size; a
/// buffer grows beyond it only as data arrives, so a hostile declared size
/// allocates nothing large. (The npm package's `GrowableBytes` has the same rule.)
pub fn earned_capacity(declared: u64, archive_bytes: u64) -> u64 {
    declared.min(archive_bytes.saturating_mul(64).max(16 << 20))
}

/// The default [`DecodeLimits::max_ratio`]: 4096 bytes of output per byte of
/// archive. Real checkpoints compress 1.1–3x; even a model of mostly zeros
/// stays far below this, while a bomb (a few bytes of `Const` per 16 MiB
/// chunk) goes far above it.
pub const DEFAULT_MAX_RATIO: u64 = 4096;

/// Limits on what an archive may make the decoder do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Limits on each program (depth, nodes, working memory).
    pub program: brevis_format::program::Limits,
    /// Most bytes of output in all (guards against decompression bombs).
    /// `u64::MAX` means no cap.
    pub max_output_bytes: u64,
    /// Most bytes of output per byte of archive read, beyond the first
    /// [`RATIO_ALLOWANCE`] bytes: checked before each chunk is decoded (the
    /// streaming decoder counts the archive read so far) and, for
    /// [`Archive::open`], on the sizes the files declare. `0` means no limit;
    /// the default is [`DEFAULT_MAX_RATIO`].
    pub max_ratio: u64,
    /// Most bytes the streaming decoder keeps at once for later copies
    /// (segments an archive marks as retained: tied weights, identical files).
    /// Checked when a retained segment starts; the default is
    /// [`DEFAULT_MAX_RETAINED`].
    pub max_retained_bytes: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            program: Default::default(),
            max_output_bytes: u64::MAX,
            max_ratio: DEFAULT_MAX_RATIO,
            max_retained_bytes: DEFAULT_MAX_RETAINED,
        }
    }
}

impl DecodeLimits {
    /// Bytes of output [`DecodeLimits::max_ratio`] allows from `archive_bytes`
    /// bytes of archive.
    pub fn ratio_allowance(&self, archive_bytes: u64) -> u64 {
        if self.max_ratio == 0 {
            u64::MAX
        } else {
            RATIO_ALLOWANCE.max(self.max_ratio.saturating_mul(archive_bytes))
        }
    }

    /// Refuses `output` bytes from `archive_bytes` bytes of archive when that
    /// is beyond [`DecodeLimits::max_ratio`].
    pub(crate) fn check_ratio(&self, output: u64, archive_bytes: u64) -> Result<(), brevis_format::FormatError> {
        let allowed = self.ratio_allowance(archive_bytes);
        if output > allowed {
            return Err(brevis_format::FormatError::LimitExceeded {
                limit: "output per archive byte (max_ratio)",
                requested: output,
                allowed,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earned_capacity_is_the_declared_size_capped_by_what_the_archive_earned() {
        const MIB: u64 = 1 << 20;
        // Small files: all of it.
        assert_eq!(earned_capacity(100, 10), 100);
        // A hostile size from a small archive: the 16 MiB floor.
        assert_eq!(earned_capacity(1 << 40, 1000), 16 * MIB);
        // From a large archive: 64 bytes per archive byte.
        assert_eq!(earned_capacity(1 << 40, MIB), 64 * MIB);
        assert_eq!(earned_capacity(u64::MAX, u64::MAX), u64::MAX);
    }
}
