//! # brevis-encoder
//!
//! The encoder side of Brevis: container readers ([`containers`]) map files onto
//! segments, the synthesizer ([`synth`]) finds a program per chunk, and
//! [`compress`] verifies every program with the real decoder before
//! [`writer::ArchiveWriter`] writes it. The `brevis` binary wraps this in a CLI.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod atomic;
pub mod base;
pub mod compress;
pub mod containers;
pub mod synth;
pub mod writer;

pub use base::BaseTensors;
pub use compress::{
    compress_files, compress_files_with_base, CompressOptions, FileReport, InputFile, SegmentReport,
    DEFAULT_CHUNK_BYTES, FAST_DECODE_CHUNK_BYTES,
};
