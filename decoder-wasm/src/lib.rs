//! # brevis-decoder
//!
//! Decodes Brevis archives: parses and runs the programs the encoder wrote, with
//! no search and no model of the data. `#![no_std]` + `alloc` and free of
//! `unsafe`, so the same code runs natively and in WebAssembly.
//!
//! Two doors:
//! - [`decode_all`] / [`Archive`]: a whole archive in memory — every file, or one
//!   tensor by name through the index (random access);
//! - [`StreamDecoder`]: push bytes as they arrive, pull [`Event`]s (file started,
//!   segment started, decoded bytes, file finished and verified). Memory stays
//!   bounded by one record (at most 64 MiB, typically a few MiB).
//!
//! Every input is untrusted: each record's checksum is checked before it is
//! parsed, every count is checked against what the record can hold and against
//! [`DecodeLimits`], and each file's SHA-256 is checked after it is rebuilt.
//!
//! ## Features
//! - `std` (default): `std::error::Error` for errors and `std::io` helpers.
//! - `wasm`: the wasm-bindgen bindings under [`wasm`] that the npm package
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
mod error;
pub mod exec;
mod stream;
#[cfg(feature = "wasm")]
#[allow(unsafe_code)]
pub mod wasm;

pub use archive::{decode_all, Archive, ChunkInfo, DecodedFile, FileInfo, SegmentInfo};
pub use brevis_format as format;
pub use error::{DecodeError, ErrorKind, Location};
pub use exec::{decode_chunk, decode_chunk_into};
pub use stream::{Event, StreamDecoder};

/// Limits on what an archive may make the decoder do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Limits on each program (depth, nodes, working memory).
    pub program: brevis_format::program::Limits,
    /// Most bytes of output in all (guards against decompression bombs).
    /// `u64::MAX` means no cap.
    pub max_output_bytes: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            program: Default::default(),
            max_output_bytes: u64::MAX,
        }
    }
}
