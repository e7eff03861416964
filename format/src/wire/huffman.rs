//! `huffman`: placeholder until the coder lands.

use alloc::vec::Vec;

use crate::error::{FormatError, Result};
use crate::stream::Word;

/// Encodes `symbols` (each below `2^width`, `width` 1..=16).
pub fn encode<W: Word>(_symbols: &[W], _width: u8) -> Option<Vec<u8>> {
    None
}

/// Decodes `out.len()` symbols of `width` bits.
pub fn decode<W: Word>(_payload: &[u8], _width: u8, _out: &mut [W]) -> Result<()> {
    Err(FormatError::Corrupt {
        what: "huffman literal",
    })
}
