//! `zstd`: one zstd frame (RFC 8878) whose content is the [`super::raw`] payload.
//! Decoded by the pure-Rust `ruzstd`, so the decoder stays free of C. The frame
//! must decompress to exactly `count * ceil(b/8)` bytes; output is capped there,
//! so a frame cannot make the decoder allocate more than the literal declares.

use alloc::vec::Vec;

use crate::error::{FormatError, Result};
use crate::stream::Word;

/// The smallest window a frame may declare without the single-segment flag (RFC 8878).
const MIN_WINDOW: u64 = 1 << 10;

/// The largest window a frame decoding to `need` bytes may declare: `need`, or
/// the format's minimum window. Frames that libzstd writes with their content
/// size always fit (they are single-segment, window = content size, or their
/// window is smaller than the content).
fn max_window(need: usize) -> u64 {
    (need as u64).max(MIN_WINDOW)
}

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
    // A window larger than the content is never used, but ruzstd reserves the
    // declared window (up to 128 MiB) for every frame after the first: cap it.
    decoder.set_max_window_size(max_window(need));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One single-segment frame holding a raw block of two 7s.
    const TWO_SEVENS: [u8; 11] = [0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x02, 0x11, 0x00, 0x00, 0x07, 0x07];

    #[test]
    fn decodes_a_frame() {
        let mut out = [0u8; 2];
        decode(&TWO_SEVENS, 8, &mut out).unwrap();
        assert_eq!(out, [7, 7]);
    }

    /// Found by `cargo fuzz` (target `literal`, `-malloc_limit_mb=64`): two
    /// one-byte frames declaring 128 MiB windows. ruzstd reserved the second
    /// frame's whole window, so 20 bytes of payload allocated 128 MiB.
    #[test]
    fn windows_larger_than_the_content_are_refused() {
        let frame = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x88, 0x09, 0x00, 0x00, 0x07];
        let payload = [frame, frame].concat();
        let mut out = [0u8; 2];
        assert_eq!(
            decode(&payload, 7, &mut out),
            Err(FormatError::Corrupt {
                what: "zstd literal frame"
            })
        );
        // The same frames with a 1 KiB window (the minimum) decode.
        let small = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 0x09, 0x00, 0x00, 0x07];
        decode(&[small, small].concat(), 7, &mut out).unwrap();
        assert_eq!(out, [7, 7]);
    }
}
