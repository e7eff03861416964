//! Plain files: one opaque segment. How its bytes are viewed (as bytes, or as
//! 16- or 32-bit words at some alignment) is decided per chunk by [`choose_view`].

use brevis_format::archive::SegmentKind;

use super::SegmentPlan;

/// Segments of a file with no known container: all of it, opaque.
pub fn plan(data: &[u8]) -> Vec<SegmentPlan> {
    vec![SegmentPlan {
        name: "data".into(),
        kind: SegmentKind::Opaque,
        range: 0..data.len(),
    }]
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
/// Bits charged per distinct symbol of a plane: roughly what its code table
/// costs, so small or sparse samples do not look cheaper than they are.
const TABLE_BITS_PER_SYMBOL: f64 = 12.0;

/// Picks the view of `bytes` whose byte planes have the lowest summed order-0
/// entropy on a sample: float data shows a low-entropy exponent plane at one
/// alignment, while text and integer data are best viewed as bytes.
pub fn choose_view(bytes: &[u8]) -> View {
    let mut best = View { width: 8, phase: 0 };
    let sample = &bytes[..bytes.len().min(SAMPLE)];
    if sample.len() < MIN_SAMPLE {
        return best;
    }
    let mut best_bits = plane_entropy(sample, 1, 0);
    for (width, wb) in [(16u8, 2usize), (32, 4)] {
        // Byte planes cost the same at every alignment, so they decide the width;
        // the alignment is where the top nine bits (sign and exponent of a float)
        // are most predictable.
        let phase = (0..wb)
            .min_by(|&a, &b| top_bits_entropy(sample, wb, a).total_cmp(&top_bits_entropy(sample, wb, b)))
            .unwrap_or(0);
        let bits = plane_entropy(sample, wb, phase);
        // Prefer the wider view only when it clearly pays (1%), so noise
        // does not flip a byte stream into words.
        if bits < best_bits * 0.99 {
            best_bits = bits;
            best = View { width, phase };
        }
    }
    best
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
        .map(|&c| -(c as f64) * (c as f64 / n).log2())
        .sum::<f64>()
        / n
}

/// Estimated bits per byte when `s[phase..]` is cut into `wb`-byte words and
/// each byte plane is coded by its own order-0 model.
fn plane_entropy(s: &[u8], wb: usize, phase: usize) -> f64 {
    let body = &s[phase.min(s.len())..];
    let n = body.len() / wb;
    if n == 0 {
        return 8.0;
    }
    let mut total = 0.0;
    for plane in 0..wb {
        let mut hist = [0u32; 256];
        for w in body.chunks_exact(wb) {
            hist[usize::from(w[plane])] += 1;
        }
        let distinct = hist.iter().filter(|&&c| c > 0).count() as f64;
        total += entropy_bits(&hist, n) + distinct * TABLE_BITS_PER_SYMBOL;
    }
    total / (n * wb) as f64
}

fn entropy_bits(hist: &[u32; 256], n: usize) -> f64 {
    let n = n as f64;
    hist.iter()
        .filter(|&&c| c > 0)
        .map(|&c| -(c as f64) * (c as f64 / n).log2())
        .sum()
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
    fn text_is_seen_as_bytes() {
        let text = "the quick brown fox jumps over the lazy dog. ".repeat(500);
        assert_eq!(choose_view(text.as_bytes()).width, 8);
    }
}
