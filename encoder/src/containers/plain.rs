//! Plain files: one opaque segment. How its bytes are viewed (as bytes, or as
//! 16- or 32-bit words at some alignment) is decided per chunk by [`choose_view`].

use super::SegmentPlan;

/// Segments of a file with no known container: all of it, opaque.
pub fn plan(data: &[u8]) -> Vec<SegmentPlan> {
    vec![SegmentPlan::opaque("data", 0..data.len())]
}

/// How to view opaque bytes: words of `width` bits starting `phase` bytes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    /// Word width in bits (8, 16 or 32).
    pub width: u8,
    /// Bytes to skip before the first word.
    pub phase: usize,
}

/// Bytes of each window inspected when choosing a view.
const SAMPLE: usize = 1 << 18;
/// Below this many bytes, words are not worth guessing at: the estimate is noise.
const MIN_SAMPLE: usize = 4096;
/// Bits charged per distinct symbol of a column: roughly what its code table
/// costs, so small or sparse samples do not look cheaper than they are.
const TABLE_BITS_PER_SYMBOL: f64 = 12.0;
/// Longest record tried when looking for columns.
pub const MAX_RECORD: usize = 64;

/// Picks how to view `bytes`. The bytes are cut into records of `r` bytes for
/// each `r` in `1..=64` and each record column priced by its order-0 entropy
/// (plus a table): float data is cheapest at `r` = 2 or 4 and becomes 16- or
/// 32-bit words (aligned where the top nine bits — sign and exponent — are most
/// predictable); any other best `r` (text: 1; block-quantized data such as
/// GGUF's 20- and 34-byte blocks) keeps the bytes as bytes, and the
/// synthesizer splits them into columns itself.
pub fn choose_view(bytes: &[u8]) -> View {
    let bytes_view = View { width: 8, phase: 0 };
    let sample = &bytes[..bytes.len().min(SAMPLE)];
    if sample.len() < MIN_SAMPLE {
        return bytes_view;
    }
    let costs: Vec<f64> = (1..=MAX_RECORD).map(|r| record_cost(sample, r)).collect();
    let cost = |r: usize| costs[r - 1];
    let (best_r, best) = (1..=MAX_RECORD)
        .map(|r| (r, cost(r)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((1, 8.0));
    // Prefer words only when they clearly pay (1%) over bytes, and are within
    // 1% of the best record length (a multiple of them).
    for (width, wb) in [(32u8, 4usize), (16, 2)] {
        if best_r % wb == 0 && cost(wb) <= best * 1.01 && cost(wb) < cost(1) * 0.99 {
            let phase = (0..wb)
                .min_by(|&a, &b| top_bits_entropy(sample, wb, a).total_cmp(&top_bits_entropy(sample, wb, b)))
                .unwrap_or(0);
            return View { width, phase };
        }
    }
    bytes_view
}

/// Bytes per block when looking for where a view stops fitting.
const PHASE_BLOCK: usize = 1 << 16;

/// How many leading bytes of `bytes` the word view `view` (chosen on their start)
/// fits: up to the first 64 KiB block whose words clearly sit at another
/// alignment (the top bits' entropy at its best phase at least half a bit below
/// the view's), a multiple of 64 KiB; all of `bytes` if none. Files that pack
/// tensors back to back without padding (CTranslate2's model.bin) change
/// alignment at every odd-sized tensor, so one view per 4 MiB chunk would code
/// the rest of such a chunk as misaligned words.
pub fn view_extent(bytes: &[u8], view: View) -> usize {
    let wb = usize::from(view.width / 8);
    if wb < 2 {
        return bytes.len();
    }
    for (k, block) in bytes.chunks_exact(PHASE_BLOCK).enumerate().skip(1) {
        let at_view = top_bits_entropy(block, wb, view.phase);
        let best = (0..wb)
            .map(|p| top_bits_entropy(block, wb, p))
            .fold(f64::INFINITY, f64::min);
        if best < at_view - 0.5 {
            return k * PHASE_BLOCK;
        }
    }
    bytes.len()
}

/// The record length whose byte columns are estimated cheapest, if it is at
/// least 2 and beats coding the bytes as one stream by at least 1%. Column
/// costs do not depend on where the first record starts, so no alignment
/// search is needed.
pub fn record_len(bytes: &[u8]) -> Option<usize> {
    let sample = &bytes[..bytes.len().min(SAMPLE)];
    if sample.len() < MIN_SAMPLE {
        return None;
    }
    let plain = record_cost(sample, 1);
    let (r, best) = (2..=MAX_RECORD)
        .map(|r| (r, record_cost(sample, r)))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    (best < plain * 0.99).then_some(r)
}

/// Estimated bits per byte when `s` is cut into `r`-byte records and each
/// column is coded by its own order-0 model with its own table.
fn record_cost(s: &[u8], r: usize) -> f64 {
    let mut hist = vec![[0u32; 256]; r];
    for (i, &b) in s.iter().enumerate() {
        hist[i % r][usize::from(b)] += 1;
    }
    let bits: f64 = hist
        .iter()
        .map(|h| {
            let n: f64 = h.iter().map(|&c| f64::from(c)).sum();
            let distinct = h.iter().filter(|&&c| c > 0).count() as f64;
            let e: f64 = h
                .iter()
                .filter(|&&c| c > 0)
                .map(|&c| -f64::from(c) * (f64::from(c) / n).log2())
                .sum();
            e + distinct * TABLE_BITS_PER_SYMBOL
        })
        .sum();
    bits / s.len() as f64
}

/// Entropy in bits of the top nine bits of `wb`-byte little-endian words of `s[phase..]`.
fn top_bits_entropy(s: &[u8], wb: usize, phase: usize) -> f64 {
    let body = &s[phase.min(s.len())..];
    let mut hist = vec![0u32; 512];
    let mut n = 0usize;
    for w in body.chunks_exact(wb) {
        let top = (usize::from(w[wb - 1]) << 1) | usize::from(w[wb - 2] >> 7);
        hist[top] += 1;
        n += 1;
    }
    let n = n.max(1) as f64;
    hist.iter()
        .filter(|&&c| c > 0)
        .map(|&c| -f64::from(c) * (f64::from(c) / n).log2())
        .sum::<f64>()
        / n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_at_an_offset_are_seen_as_words() {
        let mut bytes = vec![0xAAu8; 3];
        for i in 0..20000u32 {
            let x = ((i as f32) * 0.37).sin() * 0.05;
            bytes.extend_from_slice(&x.to_le_bytes());
        }
        assert_eq!(choose_view(&bytes), View { width: 32, phase: 3 });
    }

    #[test]
    fn block_records_are_found() {
        // 20-byte records: a 4-byte header that barely changes, 16 random bytes.
        let mut bytes = Vec::new();
        let mut x = 12345u32;
        for i in 0..20000u32 {
            bytes.extend_from_slice(&(0x3c00_0000u32 | (i % 7)).to_le_bytes());
            for _ in 0..16 {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                bytes.push((x >> 16) as u8);
            }
        }
        assert_eq!(record_len(&bytes[5..]), Some(20));
        assert_eq!(choose_view(&bytes).width, 8);
    }

    #[test]
    fn a_change_of_alignment_ends_the_view() {
        // FP16-like words at phase 0 for 192 KiB, then one byte of padding and
        // words at phase 1.
        let mut bytes = Vec::new();
        let mut x = 12345u32;
        let mut word = || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let exp = 12 + (x >> 28) % 3;
            ((exp << 10) | ((x >> 8) & 0x3ff)) as u16
        };
        for _ in 0..3 * PHASE_BLOCK / 2 {
            bytes.extend(word().to_le_bytes());
        }
        bytes.push(0);
        for _ in 0..3 * PHASE_BLOCK / 2 {
            bytes.extend(word().to_le_bytes());
        }
        let view = choose_view(&bytes);
        assert_eq!(view, View { width: 16, phase: 0 });
        let n = view_extent(&bytes, view);
        assert!(n == 3 * PHASE_BLOCK || n == 4 * PHASE_BLOCK, "{n}");
        assert_eq!(choose_view(&bytes[n..]).phase, 1);
        assert_eq!(view_extent(&bytes[..3 * PHASE_BLOCK], view), 3 * PHASE_BLOCK);
    }

    #[test]
    fn text_is_seen_as_bytes() {
        let text = "the quick brown fox jumps over the lazy dog. ".repeat(500);
        assert_eq!(choose_view(text.as_bytes()).width, 8);
    }
}
