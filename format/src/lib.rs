//! # brevis-format
//!
//! What the bytes of a Brevis archive are, shared by the encoder and the decoder:
//!
//! - [`stream`]: word streams of a fixed bit width (`b[n]` in the DSL's notation);
//! - [`wire`]: the wire encodings of a literal (raw, bit-packed, canonical Huffman,
//!   rANS, zstd frames);
//! - [`ops`]: the reversible operators' semantics *and* their inverses, side by side;
//! - [`program`]: the program tree, its typing rules, canonical binary serialization
//!   and text form;
//! - [`archive`]: the archive's records (files, segments, chunks, index, trailer).
//!
//! The crate is `#![no_std]` + `alloc` and forbids `unsafe`, so the WebAssembly
//! decoder can use it unchanged. The opt-in feature `simd` (x86-64, with `std`)
//! adds AVX2 and BMI2 twins of hot decode loops, chosen at run time; their one
//! `unsafe` call each is fenced in `wire::simd` (see `docs/UNSAFE.md`). The opt-in
//! feature `recycle` (with `std`) decodes literals into buffers of chunks already
//! dropped instead of zeroed ones (`spare`). The opt-in feature `huge-pages` (with
//! `std`) asks Linux for transparent huge pages for large output buffers; its one
//! `unsafe` call (`madvise`) is fenced in `pages`. Every
//! length, count and offset read from bytes is untrusted and checked before it
//! allocates or indexes; see `docs/FORMAT.md`.
#![no_std]
#![cfg_attr(not(any(feature = "simd", feature = "huge-pages")), forbid(unsafe_code))]
#![cfg_attr(any(feature = "simd", feature = "huge-pages"), deny(unsafe_code))]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(any(feature = "std", test))]
extern crate std;

/// Runs `$body` with `$w` bound to the typed slice/vec inside a [`Words`](crate::stream::Words).
#[macro_export]
macro_rules! with_words {
    ($words:expr, $w:ident => $body:expr) => {
        match $words {
            $crate::stream::Words::U8($w) => $body,
            $crate::stream::Words::U16($w) => $body,
            $crate::stream::Words::U32($w) => $body,
            $crate::stream::Words::U64($w) => $body,
        }
    };
}

/// Mutable twin of [`with_words!`].
#[macro_export]
macro_rules! with_words_mut {
    ($words:expr, $w:ident => $body:expr) => {
        match $words {
            $crate::stream::Words::U8($w) => $body,
            $crate::stream::Words::U16($w) => $body,
            $crate::stream::Words::U32($w) => $body,
            $crate::stream::Words::U64($w) => $body,
        }
    };
}

/// Runs `$body` with `$w` bound to the slice inside a
/// [`WordsMut`](crate::stream::WordsMut), whatever its container.
#[macro_export]
macro_rules! with_words_slice {
    ($words:expr, $w:ident => $body:expr) => {
        match $words {
            $crate::stream::WordsMut::U8($w) => $body,
            $crate::stream::WordsMut::U16($w) => $body,
            $crate::stream::WordsMut::U32($w) => $body,
            $crate::stream::WordsMut::U64($w) => $body,
        }
    };
}

pub mod archive;
pub mod bytes;
pub mod dtype;
pub mod error;
pub mod ops;
#[cfg(feature = "huge-pages")]
pub mod pages;
pub mod program;
#[cfg(feature = "recycle")]
pub mod spare;
pub mod stream;
pub mod wire;

pub use dtype::DType;
pub use error::{FormatError, Result};
pub use program::Node;
pub use stream::{Stream, Word};
