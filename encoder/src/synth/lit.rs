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
    let mut best = lit(s, LitEncoding::Raw, 0).expect("raw applies to every stream");
    let mut best_size = serialized_size(&best);
    for enc in [LitEncoding::BitPacked, LitEncoding::Huffman, LitEncoding::Rans] {
        if let Some(n) = lit(s, enc, 0) {
            let size = serialized_size(&n);
            if size < best_size {
                best = n;
                best_size = size;
            }
        }
    }
    if policy.zstd_level > 0 && s.len() >= 64 {
        let quick = policy.zstd_level.min(3);
        if let Some(n) = lit(s, LitEncoding::Zstd, quick) {
            let size = serialized_size(&n);
            let retry = policy.zstd_level > quick && (size as f64) < best_size as f64 * policy.zstd_retry_within;
            if size < best_size {
                best = n;
                best_size = size;
            }
            if retry {
                if let Some(n) = lit(s, LitEncoding::Zstd, policy.zstd_level) {
                    if serialized_size(&n) < best_size {
                        best = n;
                    }
                }
            }
        }
    }
    best
}
