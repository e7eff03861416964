//! `raw`: each word in `ceil(b/8)` little-endian bytes. The payload is exactly
//! `count * ceil(b/8)` bytes; high bits above `b` must be zero.

use alloc::vec;
use alloc::vec::Vec;

use crate::error::{FormatError, Result};
use crate::stream::{mask, Word};

/// Bytes one word takes in the raw encoding.
pub fn word_bytes(width: u8) -> usize {
    usize::from(width).div_ceil(8)
}

/// Writes words of `width` bits as raw little-endian bytes.
pub fn encode<W: Word>(words: &[W], width: u8) -> Vec<u8> {
    match word_bytes(width) {
        1 => encode_bytes::<W, 1>(words),
        2 => encode_bytes::<W, 2>(words),
        3 => encode_bytes::<W, 3>(words),
        4 => encode_bytes::<W, 4>(words),
        5 => encode_bytes::<W, 5>(words),
        6 => encode_bytes::<W, 6>(words),
        7 => encode_bytes::<W, 7>(words),
        _ => encode_bytes::<W, 8>(words),
    }
}

/// Words as `B` little-endian bytes each (a constant, so the loop vectorizes:
/// the encoder builds raw bytes of every stream it tries zstd on).
fn encode_bytes<W: Word, const B: usize>(words: &[W]) -> Vec<u8> {
    let mut out = vec![0u8; words.len() * B];
    for (o, &w) in out.chunks_exact_mut(B).zip(words) {
        o.copy_from_slice(&w.to_u64().to_le_bytes()[..B]);
    }
    out
}

/// Reads `out.len()` raw words of `width` bits.
pub fn decode<W: Word>(payload: &[u8], width: u8, out: &mut [W]) -> Result<()> {
    let wb = word_bytes(width);
    let need = out.len().checked_mul(wb).ok_or(FormatError::Invalid {
        what: "raw literal length",
    })?;
    if payload.len() != need {
        return Err(FormatError::LengthMismatch {
            what: "raw literal payload",
            expected: need as u64,
            found: payload.len() as u64,
        });
    }
    let m = mask(width);
    let mut bad = 0u64;
    if wb == core::mem::size_of::<W>() && wb == 1 {
        for (d, &b) in out.iter_mut().zip(payload) {
            bad |= u64::from(b) & !m;
            *d = W::from_u64(u64::from(b));
        }
    } else {
        bad = match wb {
            1 => words::<W, 1>(payload, out, m),
            2 => words::<W, 2>(payload, out, m),
            3 => words::<W, 3>(payload, out, m),
            4 => words::<W, 4>(payload, out, m),
            5 => words::<W, 5>(payload, out, m),
            6 => words::<W, 6>(payload, out, m),
            7 => words::<W, 7>(payload, out, m),
            _ => words::<W, 8>(payload, out, m),
        };
    }
    if bad != 0 {
        return Err(FormatError::WordTooWide { width });
    }
    Ok(())
}

/// Reads words of `B` bytes (a constant, so the loop vectorizes); returns the OR of
/// the bits above `m`.
#[inline]
fn words<W: Word, const B: usize>(payload: &[u8], out: &mut [W], m: u64) -> u64 {
    // Compile-time: no code for words narrower than `B` bytes, which `decode`
    // never asks for (a width fits its word), keeping the wasm module small.
    if B > core::mem::size_of::<W>() {
        return 0;
    }
    let mut bad = 0u64;
    for (d, c) in out.iter_mut().zip(payload.chunks_exact(B)) {
        let mut b = [0u8; 8];
        b[..B].copy_from_slice(c);
        let v = u64::from_le_bytes(b);
        bad |= v & !m;
        *d = W::from_u64(v);
    }
    bad
}
