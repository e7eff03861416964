//! Choosing a literal's wire encoding: encode the stream every applicable way
//! and keep the smallest by exact serialized size (tables included).

use brevis_format::program::{serialized_size, Node};
use brevis_format::stream::Stream;
use brevis_format::wire::{self, raw, LitEncoding};
use brevis_format::with_words;

/// Which of the slower encodings to try.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LitPolicy {
    /// Try zstd frames at this level (0 = never).
    pub zstd_level: i32,
    /// After a level-3 trial comes within this factor of the best, retry at `zstd_level`.
    pub zstd_retry_within: f64,
}

/// A literal node for `s` in `encoding`, if the encoding applies.
pub fn lit(s: &Stream, encoding: LitEncoding, zstd_level: i32) -> Option<Node> {
    let payload = match encoding {
        LitEncoding::Zstd => zstd_payload(s, zstd_level)?,
        e => wire::encode(e, s)?,
    };
    Some(Node::Lit {
        width: s.width(),
        count: s.len() as u64,
        encoding,
        payload,
    })
}

/// The raw payload compressed as one zstd frame (content size recorded, no checksum:
/// the chunk's own checksum covers it).
fn zstd_payload(s: &Stream, level: i32) -> Option<Vec<u8>> {
    let width = s.width();
    let bytes = with_words!(s.words(), w => raw::encode(w, width));
    let mut c = zstd::bulk::Compressor::new(level).ok()?;
    c.include_checksum(false).ok()?;
    c.include_contentsize(true).ok()?;
    c.compress(&bytes).ok()
}

/// `Const` if every word is equal, else the smallest literal.
pub fn leaf(s: &Stream, policy: &LitPolicy) -> Node {
    if let Some(v) = constant(s) {
        return Node::Const {
            width: s.width(),
            count: s.len() as u64,
            value: v,
        };
    }
    best_lit(s, policy)
}

/// The word every element equals, if the stream is non-empty and constant.
pub fn constant(s: &Stream) -> Option<u64> {
    with_words!(s.words(), w => {
        let first = *w.first()?;
        if w.iter().all(|&x| x == first) { Some(brevis_format::Word::to_u64(first)) } else { None }
    })
}

/// The smallest literal encoding of `s`.
pub fn best_lit(s: &Stream, policy: &LitPolicy) -> Node {
    best_lit_below(s, policy, usize::MAX)
}

/// Bytes of a `Lit` node of `s` around a payload of `payload` bytes.
fn lit_size(s: &Stream, payload: usize) -> usize {
    serialized_size(&Node::Lit {
        width: s.width(),
        count: s.len() as u64,
        encoding: LitEncoding::Raw,
        payload: Vec::new(),
    }) + payload
        + brevis_format::bytes::varint_len(payload as u64)
        - 1
}

/// The smallest literal encoding of `s`, where `bound` is the size of the best
/// program already found for `s` by other means: the slow zstd level is only
/// tried when a quick zstd trial comes within `zstd_retry_within` of both the
/// best literal and `bound` (otherwise it cannot win, and costs seconds).
///
/// Raw and bit-packed sizes are exact functions of the length and the largest
/// word, so those payloads are only built for the winner.
pub fn best_lit_below(s: &Stream, policy: &LitPolicy, bound: usize) -> Node {
    let width = s.width();
    let n = s.len();
    let raw_size = lit_size(s, n * raw::word_bytes(width));
    let max = with_words!(s.words(), w => w.iter().map(|x| brevis_format::Word::to_u64(*x)).max().unwrap_or(0));
    let k = (64 - max.leading_zeros()) as usize;
    let packed_size = lit_size(s, 1 + (n * k).div_ceil(8));
    // `None` stands for the cheapest of raw and packed, built only if it wins.
    let (mut best, mut best_size): (Option<Node>, usize) = (None, raw_size.min(packed_size));
    for enc in [LitEncoding::Huffman, LitEncoding::Rans] {
        if let Some(node) = lit(s, enc, 0) {
            let size = serialized_size(&node);
            if size < best_size {
                best = Some(node);
                best_size = size;
            }
        }
    }
    if policy.zstd_level > 0 && n >= 64 {
        let quick = policy.zstd_level.min(3);
        if let Some(node) = lit(s, LitEncoding::Zstd, quick) {
            let size = serialized_size(&node);
            let target = best_size.min(bound) as f64 * policy.zstd_retry_within;
            let retry = policy.zstd_level > quick && (size as f64) < target;
            if size < best_size {
                best = Some(node);
                best_size = size;
            }
            if retry {
                if let Some(node) = lit(s, LitEncoding::Zstd, policy.zstd_level) {
                    if serialized_size(&node) < best_size {
                        best = Some(node);
                    }
                }
            }
        }
    }
    best.unwrap_or_else(|| {
        let enc = if packed_size < raw_size {
            LitEncoding::BitPacked
        } else {
            LitEncoding::Raw
        };
        lit(s, enc, 0).expect("raw and packed apply to every stream")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_packed_sizes_are_exact_without_encoding() {
        for (width, values) in [
            (8u8, vec![0u64, 3, 200]),
            (13, vec![5, 8191, 0, 1]),
            (32, vec![7; 1000]),
            (1, vec![1, 0, 1]),
        ] {
            let s = Stream::from_u64s(width, &values).unwrap();
            let raw = lit(&s, LitEncoding::Raw, 0).unwrap();
            let n = s.len();
            assert_eq!(lit_size(&s, n * raw::word_bytes(width)), serialized_size(&raw));
            let packed = lit(&s, LitEncoding::BitPacked, 0).unwrap();
            let k = 64 - values.iter().max().unwrap().leading_zeros() as usize;
            assert_eq!(lit_size(&s, 1 + (n * k).div_ceil(8)), serialized_size(&packed));
        }
    }

    #[test]
    fn best_literal_is_never_larger_than_any_encoding() {
        let values: Vec<u64> = (0..5000u64).map(|i| (i * i) % 97).collect();
        let s = Stream::from_u64s(8, &values).unwrap();
        let policy = LitPolicy {
            zstd_level: 3,
            zstd_retry_within: 1.0,
        };
        let best = serialized_size(&best_lit(&s, &policy));
        for enc in LitEncoding::ALL {
            if let Some(n) = lit(&s, enc, 3) {
                assert!(best <= serialized_size(&n), "{enc:?}");
            }
        }
    }
}
