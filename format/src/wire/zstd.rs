//! `zstd`: one zstd frame (RFC 8878) whose content is the [`super::raw`] payload.
//! Decoded by the pure-Rust `ruzstd`, so the decoder stays free of C. The frame
//! must decompress to exactly `count * ceil(b/8)` bytes; output is capped there,
//! so a frame cannot make the decoder allocate more than the literal declares.

use alloc::vec::Vec;

use crate::error::{FormatError, Result};
use crate::stream::Word;

/// Decodes a zstd-framed raw payload into `out.len()` words of `width` bits.
pub fn decode<W: Word>(payload: &[u8], width: u8, out: &mut [W]) -> Result<()> {
    let need = out
        .len()
        .checked_mul(super::raw::word_bytes(width))
        .ok_or(FormatError::Invalid {
            what: "zstd literal length",
        })?;
    let mut raw: Vec<u8> = alloc::vec![0u8; need];
    let mut decoder = ruzstd::decoding::FrameDecoder::new();
    let written = decoder
        .decode_all(payload, &mut raw)
        .map_err(|_| FormatError::Corrupt {
            what: "zstd literal frame",
        })?;
    if written != need {
        return Err(FormatError::LengthMismatch {
            what: "zstd literal content",
            expected: need as u64,
            found: written as u64,
        });
    }
    super::raw::decode(&raw, width, out)
}
