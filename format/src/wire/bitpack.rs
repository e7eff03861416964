//! `packed`: `[u8] k` (0..=b), then `count` words of `k` bits each, packed
//! least-significant bit first into bytes; the last byte is zero-padded.
//! `k = 0` means every word is zero and nothing follows.

use alloc::vec::Vec;

use crate::error::{FormatError, Result};
use crate::stream::{mask, Word};

/// Packs words in the fewest bits that hold the largest one.
pub fn encode<W: Word>(words: &[W], _width: u8) -> Vec<u8> {
    let max = words.iter().map(|w| w.to_u64()).max().unwrap_or(0);
    let k = (64 - max.leading_zeros()) as u8;
    let mut out = Vec::with_capacity(1 + (words.len() * usize::from(k)).div_ceil(8));
    out.push(k);
    let mut acc: u128 = 0;
    let mut nbits = 0u32;
    for &w in words {
        acc |= u128::from(w.to_u64()) << nbits;
        nbits += u32::from(k);
        while nbits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            nbits -= 8;
        }
    }
    if nbits > 0 {
        out.push(acc as u8);
    }
    out
}

/// Unpacks `out.len()` words of at most `width` bits.
pub fn decode<W: Word>(payload: &[u8], width: u8, out: &mut [W]) -> Result<()> {
    let (&k, body) = payload.split_first().ok_or(FormatError::Truncated {
        what: "packed literal bit count",
    })?;
    if k > width {
        return Err(FormatError::Invalid {
            what: "packed literal bit count (wider than the stream)",
        });
    }
    let bits = (out.len() as u128) * u128::from(k);
    let need = bits.div_ceil(8);
    if body.len() as u128 != need {
        return Err(FormatError::LengthMismatch {
            what: "packed literal payload",
            expected: need as u64,
            found: body.len() as u64,
        });
    }
    if k == 0 {
        out.iter_mut().for_each(|d| *d = W::default());
        return Ok(());
    }
    let m = mask(k);
    let mut acc: u128 = 0;
    let mut nbits = 0u32;
    let mut bytes = body.iter();
    for d in out.iter_mut() {
        while nbits < u32::from(k) {
            // Cannot run dry: the payload length was checked above.
            acc |= u128::from(*bytes.next().unwrap_or(&0)) << nbits;
            nbits += 8;
        }
        *d = W::from_u64((acc as u64) & m);
        acc >>= k;
        nbits -= u32::from(k);
    }
    if acc != 0 {
        return Err(FormatError::Corrupt {
            what: "packed literal (nonzero padding bits)",
        });
    }
    Ok(())
}
