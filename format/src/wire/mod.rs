//! Wire encodings of a `Lit`: how a literal's words are written.
//!
//! Encodings are not operators: a `Lit[b](n words)` is always decoded into exactly
//! `n` words of `b` bits; the encoding only says how those words are stored. Each
//! payload is self-contained (tables included), so its length is the literal's
//! exact cost. The encoder tries the applicable encodings and keeps the smallest.
//!
//! | tag | encoding | widths | payload |
//! |---|---|---|---|
//! | 0 | [`raw`] | 1..=64 | each word in `ceil(b/8)` little-endian bytes |
//! | 1 | [`bitpack`] | 1..=64 | `[u8] k`, then words packed in `k` bits, LSB first |
//! | 2 | [`huffman`] | 1..=16 | canonical Huffman code lengths, then the bit stream |
//! | 3 | [`rans`] | 1..=16 | quantized frequency table, then interleaved rANS states |
//! | 4 | [`zstd`] | 1..=64 | a zstd frame of the `raw` payload |
//! | 5 | [`ctx`] | 2..=16 | `[u8] k`, tables for the top `k` bits and for the rest given them, then interleaved rANS states |
//! | 6 | [`nbr`] | 2..=8 | centre, weights and thresholds, one table per neighbour context, then interleaved rANS states |
//! | 7 | [`huffman`] (`huffman8`) | 1..=16 | as `huffman`, in eight bit streams instead of four |
//! | 8 | [`hsplit`] | 1..=16 | `[u8] k`, a Huffman code of the high `b - k` bits, the low `k` bits packed, then four bit streams |

use alloc::vec::Vec;

use crate::error::{FormatError, Result};
use crate::stream::{Stream, Words, WordsMut};
pub use huffman::LengthRule;

pub mod bitpack;
pub mod ctx;
pub mod hsplit;
pub mod huffman;
pub mod nbr;
pub mod rans;
pub mod raw;
#[cfg(all(feature = "simd", target_arch = "x86_64"))]
mod simd;
/// The table and bit-I/O code both entropy coders ([`huffman`], [`rans`]) must agree on:
/// MSB-first bit I/O, Exp-Golomb codes, and the symbol-set coding that starts each table.
pub(crate) mod tables;
pub mod zstd;

/// The widest stream the entropy coders (Huffman, rANS) accept.
pub const MAX_ENTROPY_WIDTH: u8 = 16;

/// How a literal's words are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum LitEncoding {
    /// Words in `ceil(b/8)` little-endian bytes each.
    Raw = 0,
    /// Words packed in as few bits as the largest needs.
    BitPacked = 1,
    /// Canonical Huffman code.
    Huffman = 2,
    /// Interleaved rANS with a static, quantized frequency table.
    Rans = 3,
    /// A zstd frame of the raw payload.
    Zstd = 4,
    /// Context-coded: the top `k` bits with one table, the rest with a table chosen
    /// by them (see [`ctx`]).
    Ctx = 5,
    /// Neighbour-context coded: each word with the table picked by the distance of
    /// the previous words from a centre (see [`nbr`]); 2- to 8-bit words.
    Nbr = 6,
    /// Canonical Huffman code in eight interleaved bit streams (see [`huffman`]):
    /// faster to decode than four where the code is long.
    Huffman8 = 7,
    /// The high bits of each word Huffman-coded (codes of at most 12 bits, several
    /// words a table lookup), the low bits packed (see [`hsplit`]): the fastest
    /// entropy-coded literal to decode.
    HSplit = 8,
}

impl LitEncoding {
    /// All encodings, in tag order.
    pub const ALL: [LitEncoding; 9] = [
        LitEncoding::Raw,
        LitEncoding::BitPacked,
        LitEncoding::Huffman,
        LitEncoding::Rans,
        LitEncoding::Zstd,
        LitEncoding::Ctx,
        LitEncoding::Nbr,
        LitEncoding::Huffman8,
        LitEncoding::HSplit,
    ];

    /// The encoding with wire tag `tag`.
    pub fn from_tag(tag: u8) -> Result<Self> {
        Self::ALL.get(usize::from(tag)).copied().ok_or(FormatError::UnknownTag {
            what: "literal encoding",
            tag: tag.into(),
        })
    }

    /// Name used in the text form of programs.
    pub fn name(self) -> &'static str {
        match self {
            LitEncoding::Raw => "raw",
            LitEncoding::BitPacked => "packed",
            LitEncoding::Huffman => "huffman",
            LitEncoding::Rans => "rans",
            LitEncoding::Zstd => "zstd",
            LitEncoding::Ctx => "ctx",
            LitEncoding::Nbr => "nbr",
            LitEncoding::Huffman8 => "huffman8",
            LitEncoding::HSplit => "hsplit",
        }
    }

    /// Whether this encoding can store words of `width` bits.
    pub fn supports_width(self, width: u8) -> bool {
        match self {
            LitEncoding::Huffman | LitEncoding::Huffman8 | LitEncoding::Rans => width <= MAX_ENTROPY_WIDTH,
            LitEncoding::HSplit => width <= hsplit::MAX_WIDTH,
            LitEncoding::Ctx => (2..=MAX_ENTROPY_WIDTH).contains(&width),
            LitEncoding::Nbr => (2..=8).contains(&width),
            _ => true,
        }
    }
}

/// Decodes a literal payload into `count` words of `width` bits.
///
/// `count` must already be checked against the caller's limits: this allocates
/// `count` words.
pub fn decode(encoding: LitEncoding, width: u8, count: usize, payload: &[u8]) -> Result<Stream> {
    check_encoding_width(encoding, width)?;
    // `hsplit` writes every word (or fails): its output need not be zeroed first.
    let mut words = if encoding == LitEncoding::HSplit {
        Stream::for_overwrite(width, count)?
    } else {
        Stream::zeros(width, count)?
    }
    .into_words();
    #[cfg(target_arch = "wasm32")]
    if let Words::U8(w) = &mut words {
        if narrows(encoding) {
            narrow(w, |w| decode_words(encoding, width, payload, WordsMut::U16(w)))?;
            return Stream::new(width, words);
        }
    }
    decode_words(encoding, width, payload, words.as_mut())?;
    Stream::new(width, words)
}

/// [`decode`] into words the caller holds (`out.len()` of them, in the
/// container of `width`-bit words): a chunk's root literal written straight into
/// the file being rebuilt, with no buffer of its own and no copy. Every word of
/// `out` is written, or an error returned (what `out` then holds is unspecified).
pub fn decode_into(encoding: LitEncoding, width: u8, payload: &[u8], mut out: WordsMut<'_>) -> Result<()> {
    check_encoding_width(encoding, width)?;
    crate::stream::check_container(width, &out)?;
    #[cfg(target_arch = "wasm32")]
    if let WordsMut::U8(o) = &mut out {
        if narrows(encoding) {
            // As `narrow`, through a 16-bit buffer of the coder's own.
            let mut wide = alloc::vec![0u16; o.len()];
            decode_words(encoding, width, payload, WordsMut::U16(&mut wide))?;
            for (d, &w) in o.iter_mut().zip(&wide) {
                *d = w as u8;
            }
            return crate::stream::check_fit(width, out);
        }
    }
    decode_words(encoding, width, payload, out.reborrow())?;
    crate::stream::check_fit(width, out)
}

/// Refuses a width the encoding cannot store.
fn check_encoding_width(encoding: LitEncoding, width: u8) -> Result<()> {
    if encoding.supports_width(width) {
        return Ok(());
    }
    Err(FormatError::Type {
        op: "Lit",
        rule: match encoding {
            LitEncoding::Ctx => "ctx literals hold 2- to 16-bit words",
            LitEncoding::Nbr => "nbr literals hold 2- to 8-bit words",
            LitEncoding::HSplit => "hsplit literals hold at most 32-bit words",
            _ => "entropy-coded literals hold at most 16-bit words",
        },
    })
}

/// Whether WebAssembly decodes this encoding's 8-bit words as 16-bit ones
/// (see `narrow`). Not `huffman8`'s: int8 weights are mostly `huffman8`
/// bytes, and an 8-bit instance of its loop alone (`huffman::run_bytes`)
/// decoded them 1.15x as fast in Node (`TARGET=wasi bench/coders-ab.sh`).
#[cfg(target_arch = "wasm32")]
fn narrows(encoding: LitEncoding) -> bool {
    !matches!(
        encoding,
        LitEncoding::Raw | LitEncoding::Zstd | LitEncoding::Nbr | LitEncoding::Huffman8
    )
}

/// Runs the encoding's decoder over `out`. (In WebAssembly the entropy coders
/// but `huffman8` have no 8-bit instances: their callers narrow.)
fn decode_words(encoding: LitEncoding, width: u8, payload: &[u8], out: WordsMut<'_>) -> Result<()> {
    use WordsMut::{U16, U32, U64, U8};
    match (encoding, out) {
        (LitEncoding::Raw, out) => crate::with_words_slice!(out, w => raw::decode(payload, width, w)),
        (LitEncoding::Zstd, out) => crate::with_words_slice!(out, w => zstd::decode(payload, width, w)),
        #[cfg(not(target_arch = "wasm32"))]
        (LitEncoding::BitPacked, U8(w)) => bitpack::decode(payload, width, w),
        (LitEncoding::BitPacked, U16(w)) => bitpack::decode(payload, width, w),
        (LitEncoding::BitPacked, U32(w)) => bitpack::decode(payload, width, w),
        (LitEncoding::BitPacked, U64(w)) => bitpack::decode(payload, width, w),
        #[cfg(not(target_arch = "wasm32"))]
        (LitEncoding::Huffman, U8(w)) => huffman::decode(payload, width, w),
        (LitEncoding::Huffman, U16(w)) => huffman::decode(payload, width, w),
        (LitEncoding::Huffman8, U8(w)) => huffman::decode8(payload, width, w),
        (LitEncoding::Huffman8, U16(w)) => huffman::decode8(payload, width, w),
        #[cfg(not(target_arch = "wasm32"))]
        (LitEncoding::HSplit, U8(w)) => hsplit::decode(payload, width, w),
        (LitEncoding::HSplit, U16(w)) => hsplit::decode(payload, width, w),
        (LitEncoding::HSplit, U32(w)) => hsplit::decode(payload, width, w),
        #[cfg(not(target_arch = "wasm32"))]
        (LitEncoding::Rans, U8(w)) => rans::decode(payload, width, w),
        (LitEncoding::Rans, U16(w)) => rans::decode(payload, width, w),
        #[cfg(not(target_arch = "wasm32"))]
        (LitEncoding::Ctx, U8(w)) => ctx::decode(payload, width, w),
        (LitEncoding::Ctx, U16(w)) => ctx::decode(payload, width, w),
        (LitEncoding::Nbr, U8(w)) => nbr::decode(payload, width, w),
        _ => unreachable_width(),
    }
}

/// Runs a coder's decoder on 8-bit words in WebAssembly: through a 16-bit
/// buffer, so the module holds one instance of each entropy decoder (a smaller
/// module). (Natively each coder has an 8-bit instance.) Words of at most 8
/// bits: the narrowing loses nothing.
///
/// The 16-bit words are decoded into the output's own buffer grown to
/// `2 * out.len()` bytes, which then keeps each word's low byte in place and
/// shrinks back: one large allocation at a time, never the output plus a buffer
/// twice its size (the module's heap never shrinks, and a 4 MiB chunk asked for
/// 12 MiB at once).
#[cfg(target_arch = "wasm32")]
fn narrow<F: FnOnce(&mut [u16]) -> Result<()>>(out: &mut Vec<u8>, decode: F) -> Result<()> {
    let n = out.len();
    // The output's own allocation, grown (in place where the heap allows).
    let mut buf = core::mem::take(out);
    buf.resize(2 * n, 0);
    // The allocator aligns every block to 8 bytes: this cannot fail, and is an
    // error rather than a panic if an allocator ever made it one.
    decode(
        bytemuck::try_cast_slice_mut(&mut buf).map_err(|_| FormatError::Invalid {
            what: "16-bit decode buffer (misaligned allocation)",
        })?,
    )?;
    // Little-endian: word `i`'s low byte is byte `2i`. Block by block, each block
    // of words copied out whole before its bytes are written (a block's writes end
    // where its words began), then narrowed in a loop that vectorizes.
    const BLOCK: usize = 2048;
    let mut words = [0u16; BLOCK];
    let mut i = 0;
    while i < n {
        let m = BLOCK.min(n - i);
        let src = &buf[2 * i..2 * (i + m)];
        // A `u16` slice's bytes always cast (no alignment to meet).
        bytemuck::cast_slice_mut::<u16, u8>(&mut words[..m]).copy_from_slice(src);
        for (o, &w) in buf[i..i + m].iter_mut().zip(&words[..m]) {
            *o = w as u8;
        }
        i += m;
    }
    buf.truncate(n);
    buf.shrink_to_fit();
    *out = buf;
    Ok(())
}

fn unreachable_width() -> Result<()> {
    Err(FormatError::Type {
        op: "Lit",
        rule: "entropy-coded literals hold at most 16-bit words",
    })
}

/// The exact payload length [`encode`] would give, where it is known without
/// coding the words: `huffman` and `huffman8` (their streams' lengths follow
/// from the code lengths); `None` for every other encoding, and where
/// [`encode`] gives `None`.
pub fn huffman_len(encoding: LitEncoding, stream: &Stream) -> Option<usize> {
    if !matches!(encoding, LitEncoding::Huffman | LitEncoding::Huffman8) {
        return None;
    }
    huffman_len_counted(encoding, stream, &count_symbols(stream)?, LengthRule::SMALLEST)
}

/// A stream's symbols counted once ([`count_symbols`]) for the trials that
/// price or plan an entropy-coded literal from the counts: [`huffman_len_counted`]
/// and [`rans_plan_counted`].
pub struct SymbolCounts(tables::Census);

/// Counts the symbols of a stream of 8- or 16-bit words of at most 16 bits
/// (the entropy coders' streams); `None` for any other.
pub fn count_symbols(stream: &Stream) -> Option<SymbolCounts> {
    let census = match stream.words() {
        Words::U8(w) => tables::census(w, stream.width()),
        Words::U16(w) => tables::census(w, stream.width()),
        _ => None,
    };
    census.map(SymbolCounts)
}

/// [`huffman_len`] given the counts of the same stream ([`count_symbols`]), of
/// the payload [`encode_with`] makes with `rule`.
pub fn huffman_len_counted(
    encoding: LitEncoding,
    stream: &Stream,
    counts: &SymbolCounts,
    rule: LengthRule,
) -> Option<usize> {
    let lanes = huffman_lanes(encoding)?;
    if !encoding.supports_width(stream.width()) {
        return None;
    }
    match stream.words() {
        Words::U8(w) => huffman::encoded_len_counted(w, stream.width(), lanes, &counts.0, rule),
        Words::U16(w) => huffman::encoded_len_counted(w, stream.width(), lanes, &counts.0, rule),
        _ => None,
    }
}

/// The bit streams of a Huffman encoding: [`huffman::LANES`] for `huffman`,
/// [`huffman::LANES8`] for `huffman8`; `None` for the others.
fn huffman_lanes(encoding: LitEncoding) -> Option<usize> {
    match encoding {
        LitEncoding::Huffman => Some(huffman::LANES),
        LitEncoding::Huffman8 => Some(huffman::LANES8),
        _ => None,
    }
}

/// The `rans` literal of `stream` planned but not yet coded ([`rans::Plan`]: its
/// estimated length first, the payload only if wanted, with [`rans_encode`]).
/// `None` where [`encode`] gives `None` for [`LitEncoding::Rans`].
pub fn rans_plan(stream: &Stream) -> Option<rans::Plan> {
    rans_plan_counted(stream, &count_symbols(stream)?)
}

/// [`rans_plan`] given the counts of the same stream ([`count_symbols`]).
pub fn rans_plan_counted(stream: &Stream, counts: &SymbolCounts) -> Option<rans::Plan> {
    if !LitEncoding::Rans.supports_width(stream.width()) {
        return None;
    }
    Some(rans::Plan::counted(&counts.0, stream.len()))
}

/// Codes `stream` with a plan [`rans_plan`] made for it: what [`encode`] gives for
/// [`LitEncoding::Rans`].
pub fn rans_encode(plan: rans::Plan, stream: &Stream) -> Vec<u8> {
    crate::with_words!(stream.words(), w => plan.encode(w, stream.width()))
}

/// Encodes a stream with one of the pure-Rust encodings (everything but zstd,
/// whose encoder lives in the encoder crate). Returns `None` where the encoding
/// does not apply to this stream.
pub fn encode(encoding: LitEncoding, stream: &Stream) -> Option<Vec<u8>> {
    encode_with(encoding, stream, LengthRule::SMALLEST)
}

/// [`encode`], with the code lengths of `huffman` and `huffman8` limited by
/// `rule` (the other encodings do not use it).
pub fn encode_with(encoding: LitEncoding, stream: &Stream, rule: LengthRule) -> Option<Vec<u8>> {
    let width = stream.width();
    if !encoding.supports_width(width) {
        return None;
    }
    match encoding {
        LitEncoding::Raw => Some(crate::with_words!(stream.words(), w => raw::encode(w, width))),
        LitEncoding::BitPacked => Some(crate::with_words!(stream.words(), w => bitpack::encode(w, width))),
        LitEncoding::Huffman | LitEncoding::Huffman8 => {
            let lanes = huffman_lanes(encoding)?;
            match stream.words() {
                Words::U8(w) => huffman::encode_with(w, width, lanes, rule),
                Words::U16(w) => huffman::encode_with(w, width, lanes, rule),
                _ => None,
            }
        }
        LitEncoding::HSplit => match stream.words() {
            Words::U8(w) => hsplit::encode(w, width),
            Words::U16(w) => hsplit::encode(w, width),
            Words::U32(w) => hsplit::encode(w, width),
            _ => None,
        },
        LitEncoding::Rans => match stream.words() {
            Words::U8(w) => rans::encode(w, width),
            Words::U16(w) => rans::encode(w, width),
            _ => None,
        },
        LitEncoding::Zstd => None,
        // The split with the smallest estimate; the search also tries given splits
        // through `ctx::encode`.
        LitEncoding::Ctx => match stream.words() {
            Words::U8(w) => ctx::encode(w, width, ctx::best_split(w, width)?.0),
            Words::U16(w) => ctx::encode(w, width, ctx::best_split(w, width)?.0),
            _ => None,
        },
        LitEncoding::Nbr => match stream.words() {
            Words::U8(w) => nbr::encode(w, width),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::mask;
    use crate::wire::tables::testing::Rng;
    use std::vec::Vec;

    /// With the feature `recycle`, `hsplit` literals decode into kept buffers of
    /// dropped chunks, which hold the previous chunk's words: each decodes to its
    /// own words still. Each literal is dropped as a chunk's bytes are (into the
    /// pool) before the next decodes, with words of 8, 16 and 32 bits and counts
    /// that shrink and grow the kept buffer. (Other tests share the pool, and a
    /// literal asks for a buffer no larger than a kept one: when checked, 5 of
    /// the 12 got a kept buffer, the others a zeroed one.)
    #[cfg(feature = "recycle")]
    #[test]
    fn hsplit_literals_decode_exactly_into_kept_buffers() {
        let mut rng = Rng(7);
        for width in [8u8, 16, 32] {
            for n in [70_000usize, 40_000, 90_000, 90_000] {
                let values: Vec<u64> = (0..n)
                    .map(|_| (rng.next() % 5) << (width - 3) | (rng.next() & 0x1f))
                    .collect();
                let want = Stream::from_u64s(width, &values).unwrap();
                let payload = encode(LitEncoding::HSplit, &want).unwrap();
                let got = decode(LitEncoding::HSplit, width, n, &payload).unwrap();
                assert_eq!(got, want, "width {width}, {n} words");
                drop(got.into_le_bytes().unwrap());
            }
        }
    }

    /// One count of the symbols serves Huffman's size and rANS's plan: the
    /// counted functions give the coded payloads' lengths (Huffman) and the coded
    /// payload (rANS), on empty, one-symbol, skewed and flat streams of bytes and
    /// 16-bit words; wider streams have no counts. (The plan's estimate is held
    /// to its payload by `rans::tests::plans_estimate_their_payloads_closely`.)
    #[test]
    fn counted_trials_are_the_uncounted_ones() {
        let mut rng = Rng(31);
        for width in [1u8, 5, 8, 12, 16] {
            for n in [0usize, 1, 2, 700, 9000] {
                for skew in [0u64, 1, 3] {
                    let values: Vec<u64> = (0..n)
                        .map(|_| match skew {
                            0 => 1,
                            s => (0..s).map(|_| rng.next() & mask(width)).min().unwrap(),
                        })
                        .collect();
                    let s = Stream::from_u64s(width, &values).unwrap();
                    let counts = count_symbols(&s).unwrap();
                    for enc in [LitEncoding::Huffman, LitEncoding::Huffman8] {
                        let coded = encode(enc, &s).map(|p| p.len());
                        assert_eq!(
                            huffman_len_counted(enc, &s, &counts, LengthRule::SMALLEST),
                            coded,
                            "{enc:?} w{width} n{n}"
                        );
                        let rule = LengthRule::FAST_DECODE;
                        let coded = encode_with(enc, &s, rule).map(|p| p.len());
                        assert_eq!(
                            huffman_len_counted(enc, &s, &counts, rule),
                            coded,
                            "{enc:?} w{width} n{n}"
                        );
                    }
                    let counted = rans_plan_counted(&s, &counts).unwrap();
                    assert_eq!(rans_encode(counted, &s), encode(LitEncoding::Rans, &s).unwrap());
                }
            }
        }
        assert!(count_symbols(&Stream::from_u64s(32, &[1, 2]).unwrap()).is_none());
    }
}
