//! `huffman`: canonical Huffman code, length-limited, four interleaved bit streams.
//!
//! The encoder counts the symbols and builds an optimal length-limited code
//! (package-merge). The format allows code lengths up to 16; the encoder uses the
//! shortest limit from `max(11, ceil(log2 S))` (for `S` present symbols) up to 16 that
//! costs at most 0.03% more data bits than the 16-bit-limited optimum, since shorter
//! codes mean a smaller decode table. The decoder looks up the next `max(11, maxlen)`
//! bits (`maxlen` the longest code length present) in a table of that many bits'
//! entries (16-bit entries for widths up to 11, 32-bit above), so it does one lookup
//! per word; four independent bit streams let it overlap four lookups. The table's
//! size is a constant of each decode loop, which lets the compiler drop the lookups'
//! bounds checks.
//!
//! The count of words is not stored; decoding fewer words than were coded can go
//! unnoticed (integrity is the archive checksums' job), but the one-bit padding makes
//! decoding more words than were coded fail whenever the longest code exceeds 7 bits.
//!
//! # Payload
//!
//! An empty stream (`count = 0`) has an empty payload. Otherwise the payload is:
//!
//! 1. **Table**, a bit string read most significant bit first, zero-padded to a whole
//!    byte; `EG` (Exp-Golomb) and `zigzag` are defined in `wire::tables`
//!    (`format/src/wire/tables.rs`), which both entropy coders share.
//!    - The present symbols, coded as a symbol set (see `wire::tables`, the same as
//!      `rans`). If exactly one symbol is present, the table ends here: every word is
//!      that symbol, and nothing follows the table.
//!    - Otherwise (`S >= 2` symbols): the code length `l` (1..=16) of every present
//!      symbol in increasing symbol order, each as `EG(zigzag(l - prev))`, `prev`
//!      starting at `ceil(log2 S)` and then the previous length. The lengths must form
//!      a complete prefix code (`sum 2^-l = 1`).
//! 2. **Stream sizes**: the byte lengths of streams 0, 1 and 2, as varints (canonical
//!    LEB128); stream 3 is the rest of the payload.
//! 3. **Streams 0..=3**, concatenated. Stream `k` holds the codes of words `i` with
//!    `i mod 4 = k`, in increasing `i`, each code most significant bit first, packed
//!    most significant bit first into bytes, padded to a whole byte with **one** bits:
//!    its length is exactly `ceil(bits / 8)` bytes and every padding bit is 1. (Only
//!    the longest code is all ones, so with codes longer than 7 bits a decoder asked
//!    for more words than were coded runs out of bits instead of decoding padding.)
//!
//! Codes are canonical (as in Deflate): symbols sorted by (length, symbol value) get
//! consecutive codes; the first is all zeros, and each next code is the previous plus
//! one, shifted left by the difference of their lengths.

use alloc::vec;
use alloc::vec::Vec;

use super::tables::{ceil_log2, census, start_decode, write_symbol_set, BitReader, BitWriter, Census};
use crate::bytes::{put_varint, ByteReader};
use crate::error::{FormatError, Result};
use crate::stream::Word;

/// Longest code length the format allows.
const MAX_CODE_LEN: u32 = 16;
/// The shortest length limit the encoder tries.
const MIN_LIMIT: u32 = 11;
/// How much bigger than the best 16-bit-limited code (in parts per 10 000 of the coded
/// bits) a shorter limit may make the data; shorter codes mean a smaller decode table.
const LIMIT_SLACK: u64 = 3;
/// Widths up to this one use 16-bit decode table entries (`symbol << 5 | length`).
const NARROW_WIDTH: u8 = 11;
/// Interleaved bit streams.
const STREAMS: usize = 4;

const WHAT: &str = "huffman literal";

/// Encodes `symbols` (each below `2^width`, `width` 1..=16). Returns `None` for a
/// width outside 1..=16 or a symbol that does not fit `width`.
pub fn encode<W: Word>(symbols: &[W], width: u8) -> Option<Vec<u8>> {
    let (syms, cs) = match census(symbols, width)? {
        Census::Payload(p) => return Some(p),
        Census::Symbols(syms, cs) => (syms, cs),
    };
    let mut w = BitWriter::default();
    write_symbol_set(&mut w, &syms);
    let lens = choose_lengths(&cs);
    let mut prev = ceil_log2(syms.len() as u64);
    for &l in &lens {
        w.put_delta(i64::from(l) - i64::from(prev));
        prev = u32::from(l);
    }
    let mut out = w.finish();

    // (code, length) by symbol value.
    let codes = canonical_codes(&lens);
    let mut enc = vec![(0u32, 0u32); 1usize << width];
    for ((&s, &c), &l) in syms.iter().zip(&codes).zip(&lens) {
        enc[s as usize] = (c, u32::from(l));
    }
    let bits: u64 = cs.iter().zip(&lens).map(|(&c, &l)| c * u64::from(l)).sum();
    let cap = (bits / 8 / STREAMS as u64 + 8) as usize;
    let mut streams: [BitWriter; STREAMS] = core::array::from_fn(|_| BitWriter::with_capacity(cap));
    let mut quads = symbols.chunks_exact(STREAMS);
    for q in &mut quads {
        for (s, st) in q.iter().zip(streams.iter_mut()) {
            let (c, l) = enc[s.to_u64() as usize];
            st.put(c, l);
        }
    }
    for (s, st) in quads.remainder().iter().zip(streams.iter_mut()) {
        let (c, l) = enc[s.to_u64() as usize];
        st.put(c, l);
    }
    let streams = streams.map(BitWriter::finish_ones);
    for s in &streams[..STREAMS - 1] {
        put_varint(&mut out, s.len() as u64);
    }
    for s in &streams {
        out.extend_from_slice(s);
    }
    Some(out)
}

/// Decodes `out.len()` symbols of `width` bits from a payload made by [`encode`].
pub fn decode<W: Word>(payload: &[u8], width: u8, out: &mut [W]) -> Result<()> {
    let Some((syms, mut br)) = start_decode(payload, width, out, WHAT)? else {
        return Ok(());
    };
    let lens = read_lengths(&mut br, syms.len())?;
    let table_end = br.finish()?;
    let maxlen = u32::from(lens.iter().copied().max().unwrap_or(1));
    let kraft: u64 = lens.iter().map(|&l| 1u64 << (maxlen - u32::from(l))).sum();
    if kraft != 1u64 << maxlen {
        return Err(FormatError::Corrupt {
            what: "huffman code lengths (not a complete prefix code)",
        });
    }

    let codes = canonical_codes(&lens);
    let rest = &payload[table_end..];
    if width <= NARROW_WIDTH {
        decode_streams::<W, u16>(rest, &syms, &lens, &codes, maxlen, out)
    } else {
        decode_streams::<W, u32>(rest, &syms, &lens, &codes, maxlen, out)
    }
}

/// A decode table entry: `symbol << 5 | length`.
trait Entry: Copy + Default {
    fn new(sym: u32, len: u32) -> Self;
    fn get(self) -> u32;
}
impl Entry for u16 {
    fn new(sym: u32, len: u32) -> Self {
        (sym << 5 | len) as u16
    }
    #[inline(always)]
    fn get(self) -> u32 {
        u32::from(self)
    }
}
impl Entry for u32 {
    fn new(sym: u32, len: u32) -> Self {
        sym << 5 | len
    }
    #[inline(always)]
    fn get(self) -> u32 {
        self
    }
}

/// Decodes the stream sizes and the four streams that follow the table.
fn decode_streams<W: Word, E: Entry>(
    rest: &[u8],
    syms: &[u32],
    lens: &[u8],
    codes: &[u32],
    maxlen: u32,
    out: &mut [W],
) -> Result<()> {
    // One instance per table size, so that the table's length and the lookup shift are
    // constants: the compiler then sees every lookup in bounds. Codes up to 11 bits
    // share the 11-bit table (at most 8 KiB, built in a few microseconds).
    match maxlen {
        0..=11 => decode_with::<W, E, { 1 << 11 }>(rest, syms, lens, codes, out),
        12 => decode_with::<W, E, { 1 << 12 }>(rest, syms, lens, codes, out),
        13 => decode_with::<W, E, { 1 << 13 }>(rest, syms, lens, codes, out),
        14 => decode_with::<W, E, { 1 << 14 }>(rest, syms, lens, codes, out),
        15 => decode_with::<W, E, { 1 << 15 }>(rest, syms, lens, codes, out),
        _ => decode_with::<W, E, { 1 << 16 }>(rest, syms, lens, codes, out),
    }
}

/// [`decode_streams`] with a lookup table of `SLOTS = 2^bits` entries, `bits` at least
/// the longest code length.
fn decode_with<W: Word, E: Entry, const SLOTS: usize>(
    rest: &[u8],
    syms: &[u32],
    lens: &[u8],
    codes: &[u32],
    out: &mut [W],
) -> Result<()> {
    let bits = SLOTS.trailing_zeros();
    // Lookup table on the next `bits` bits: a code of length `l` fills the
    // `2^(bits - l)` slots that start with it.
    let mut table = vec![E::default(); SLOTS];
    for ((&s, &c), &l) in syms.iter().zip(codes).zip(lens) {
        let span = 1usize << (bits - u32::from(l));
        let at = (c as usize) << (bits - u32::from(l));
        // Always in bounds for a complete code (checked by the caller).
        let slots = table
            .get_mut(at..at + span)
            .ok_or(FormatError::Corrupt { what: WHAT })?;
        slots.fill(E::new(s, u32::from(l)));
    }
    let table: &[E; SLOTS] = table
        .as_slice()
        .try_into()
        .map_err(|_| FormatError::Corrupt { what: WHAT })?;

    let mut r = ByteReader::new(rest);
    let mut sizes = [0usize; STREAMS];
    for size in sizes.iter_mut().take(STREAMS - 1) {
        *size = r.varint_usize("huffman stream size", rest.len() as u64)?;
    }
    let mut starts = [0usize; STREAMS];
    let mut ends = [0usize; STREAMS];
    let mut lanes = [Lane::default(); STREAMS];
    for k in 0..STREAMS {
        let len = if k + 1 < STREAMS { sizes[k] } else { r.remaining() };
        starts[k] = r.position();
        r.bytes(len, "huffman stream")?;
        ends[k] = starts[k] + len;
        lanes[k].pos = starts[k];
    }

    // Fast path: every lane has 8 bytes to load at its position. A lane may read the
    // next lane's first bytes; only its own bits count (see `Lane`), and a lane that
    // ends up consuming past its end is an error below.
    let per = (56 / bits) as usize;
    let block = STREAMS * per;
    let mut done = 0;
    for chunk in out.chunks_exact_mut(block) {
        if !lanes.iter().all(|l| l.pos + 8 <= rest.len()) {
            break;
        }
        for l in lanes.iter_mut() {
            l.refill(rest);
        }
        for quad in chunk.chunks_exact_mut(STREAMS) {
            for (d, l) in quad.iter_mut().zip(lanes.iter_mut()) {
                *d = l.decode(table);
            }
        }
        done += block;
    }
    for (i, d) in out[done..].iter_mut().enumerate() {
        let l = &mut lanes[i % STREAMS];
        l.refill(rest);
        *d = l.decode(table);
    }
    for (k, l) in lanes.iter().enumerate() {
        l.check_end(&rest[starts[k]..ends[k]], starts[k])?;
    }
    Ok(())
}
/// Reads the code lengths of `nsym >= 2` symbols.
fn read_lengths(br: &mut BitReader<'_>, nsym: usize) -> Result<Vec<u8>> {
    let mut lens = Vec::with_capacity(nsym);
    let mut prev = i64::from(ceil_log2(nsym as u64));
    for _ in 0..nsym {
        let l = prev + br.delta("huffman code length")?;
        if l < 1 || l > i64::from(MAX_CODE_LEN) {
            return Err(FormatError::Invalid {
                what: "huffman code length",
            });
        }
        lens.push(l as u8);
        prev = l;
    }
    Ok(lens)
}

/// Where one of the four bit streams is being read, most significant bit first.
///
/// `word` holds the 8 bytes of the payload from byte `pos` on (big-endian; zeros past
/// the payload's end), of which the top `used` bits are consumed. Bytes past the
/// lane's own stream may be another lane's: a code is decided by its own bits alone
/// (every table slot that starts with it holds it), so they change nothing unless the
/// lane reads past its end, which `check_end` rejects.
#[derive(Clone, Copy, Default)]
struct Lane {
    pos: usize,
    used: u32,
    word: u64,
}

impl Lane {
    /// Moves `pos` up to the first byte not wholly consumed and reloads `word`: at
    /// least 57 bits are then unconsumed.
    #[inline(always)]
    fn refill(&mut self, payload: &[u8]) {
        self.pos += (self.used >> 3) as usize;
        self.used &= 7;
        self.word = match payload.get(self.pos..).and_then(|d| d.first_chunk::<8>()) {
            Some(b) => u64::from_be_bytes(*b),
            None => {
                let mut b = [0u8; 8];
                let tail = payload.get(self.pos..).unwrap_or(&[]);
                b[..tail.len()].copy_from_slice(tail);
                u64::from_be_bytes(b)
            }
        };
    }

    /// Decodes one symbol; at least `log2 SLOTS` unconsumed bits must be in `word`.
    #[inline(always)]
    fn decode<W: Word, E: Entry, const SLOTS: usize>(&mut self, table: &[E; SLOTS]) -> W {
        // The top `log2 SLOTS` unconsumed bits: below `SLOTS`, so in bounds.
        let e = table[((self.word << self.used) >> (64 - SLOTS.trailing_zeros())) as usize].get();
        self.used += e & 31;
        W::from_u64(u64::from(e >> 5))
    }

    /// The stream (`data`, starting at payload offset `start`) must end exactly in its
    /// last byte, padded with one bits.
    fn check_end(&self, data: &[u8], start: usize) -> Result<()> {
        let consumed = (self.pos - start) as u64 * 8 + u64::from(self.used);
        let len = data.len() as u64;
        if consumed > len * 8 {
            return Err(FormatError::Truncated { what: "huffman stream" });
        }
        if consumed.div_ceil(8) < len {
            return Err(FormatError::TrailingBytes {
                what: "huffman stream",
                count: len - consumed.div_ceil(8),
            });
        }
        let pad = (len * 8 - consumed) as u32;
        if pad > 0 && data.last().is_some_and(|&b| !b & ((1u8 << pad) - 1) != 0) {
            return Err(FormatError::Corrupt {
                what: "huffman stream (padding bits not all ones)",
            });
        }
        Ok(())
    }
}

/// Code lengths for `counts` (at least two): the shortest limit from
/// `max(MIN_LIMIT, ceil(log2 S))` up to 16 whose coded size is within `LIMIT_SLACK`
/// of the 16-bit-limited optimum.
fn choose_lengths(counts: &[u64]) -> Vec<u8> {
    let cost = |lens: &[u8]| -> u64 { counts.iter().zip(lens).map(|(&c, &l)| c * u64::from(l)).sum() };
    let lo = MIN_LIMIT.max(ceil_log2(counts.len() as u64));
    let best = limited_lengths(counts, MAX_CODE_LEN);
    let target = cost(&best) + cost(&best) * LIMIT_SLACK / 10_000;
    for limit in lo..MAX_CODE_LEN {
        let lens = limited_lengths(counts, limit);
        if cost(&lens) <= target {
            return lens;
        }
    }
    best
}

/// Canonical codes for `lens` (in increasing symbol order).
fn canonical_codes(lens: &[u8]) -> Vec<u32> {
    let mut bl_count = [0u32; MAX_CODE_LEN as usize + 1];
    for &l in lens {
        bl_count[usize::from(l)] += 1;
    }
    let mut next = [0u32; MAX_CODE_LEN as usize + 2];
    let mut code = 0u32;
    for l in 1..=MAX_CODE_LEN as usize {
        code = (code + bl_count[l - 1]) << 1;
        next[l] = code;
    }
    lens.iter()
        .map(|&l| {
            let c = next[usize::from(l)];
            next[usize::from(l)] += 1;
            c
        })
        .collect()
}

/// Optimal code lengths of at most `limit` bits for `weights` (at least two, all
/// positive, `2^limit >= weights.len()`), by package-merge.
///
/// List `d` (for depth `d`, from `limit` up to 1) merges the leaves with the pairs of
/// list `d + 1`; the first `2S - 2` items of list 1 are chosen, and a chosen package
/// chooses its two items in the list below. Leaves come in weight order in every list,
/// so the chosen leaves of a list are a prefix, and a leaf's length is the number of
/// lists whose chosen prefix holds it.
fn limited_lengths(weights: &[u64], limit: u32) -> Vec<u8> {
    let n = weights.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (weights[i], i));
    let leaves: Vec<u64> = order.iter().map(|&i| weights[i]).collect();
    // flags[j]: list of depth `limit - j`; true marks a package.
    let mut flags: Vec<Vec<bool>> = vec![vec![false; n]];
    let mut prev = leaves.clone();
    for _ in 1..limit {
        let mut cur = Vec::with_capacity(n + prev.len() / 2);
        let mut f = Vec::with_capacity(n + prev.len() / 2);
        let mut packages = prev.chunks_exact(2).map(|p| p[0] + p[1]).peekable();
        let mut li = leaves.iter().peekable();
        loop {
            match (li.peek(), packages.peek()) {
                (Some(&&l), Some(&p)) if l <= p => {
                    cur.push(l);
                    f.push(false);
                    li.next();
                }
                (_, Some(&p)) => {
                    cur.push(p);
                    f.push(true);
                    packages.next();
                }
                (Some(&&l), None) => {
                    cur.push(l);
                    f.push(false);
                    li.next();
                }
                (None, None) => break,
            }
        }
        flags.push(f);
        prev = cur;
    }
    let mut lens = vec![0u8; n];
    let mut take = 2 * n - 2;
    for f in flags.iter().rev() {
        let chosen = &f[..take.min(f.len())];
        let leaves_taken = chosen.iter().filter(|&&p| !p).count();
        for &i in &order[..leaves_taken] {
            lens[i] += 1;
        }
        take = 2 * (chosen.len() - leaves_taken);
    }
    lens
}

#[cfg(test)]
mod tests {
    use super::super::tables::testing::{coder_tests, geometric, round_trip};
    use super::*;

    coder_tests!(Huffman, "huffman", read_lengths, rare: 1300, tables: [200, 700], data: 1.005, small: (1.05, 32.0));

    #[test]
    fn lengths_are_optimal_and_limited() {
        // Fibonacci weights want a code as deep as the alphabet.
        let mut w = std::vec![1u64, 1];
        while w.len() < 30 {
            let k = w.len();
            w.push(w[k - 1] + w[k - 2]);
        }
        for limit in [5u32, 8, 12, 16] {
            let lens = limited_lengths(&w, limit);
            assert!(lens.iter().all(|&l| l >= 1 && u32::from(l) <= limit));
            let kraft: f64 = lens.iter().map(|&l| 0.5f64.powi(i32::from(l))).sum();
            assert!((kraft - 1.0).abs() < 1e-12, "limit {limit}: kraft {kraft}");
        }
        // Unconstrained, package-merge matches Huffman's cost.
        let w = [5u64, 9, 12, 13, 16, 45];
        let lens = limited_lengths(&w, 16);
        let cost: u64 = w.iter().zip(&lens).map(|(&w, &l)| w * u64::from(l)).sum();
        assert_eq!(cost, 224);
    }

    #[test]
    fn padding_never_decodes_as_words() {
        let v = geometric(500, 8, 0.9, 8);
        let p = round_trip::<Huffman, _>(&v, 8);
        // Longest code over 7 bits: padding cannot decode as an extra word.
        for extra in 1..=8 {
            let mut out = std::vec![0u16; v.len() + extra];
            assert!(decode(&p, 8, &mut out).is_err());
        }
        // Fewer words may go unnoticed (the count is not stored, and the last codes of
        // a stream may be all ones), but only as the prefix.
        let mut out = std::vec![0u16; v.len() - 4];
        if decode(&p, 8, &mut out).is_ok() {
            assert_eq!(out, v[..v.len() - 4]);
        }
    }

    /// A lane reads ahead into the next lane's bytes; moving the boundary between two
    /// streams must still be caught, whichever bytes the lane finds there.
    #[test]
    fn moved_stream_boundaries_fail() {
        for width in [8u8, 16] {
            let v = geometric(4001, width, 0.97, u64::from(width));
            let p = round_trip::<Huffman, _>(&v, width);
            let mut out = std::vec![0u16; v.len()];
            let (syms, mut br) = start_decode(&p, width, &mut out, WHAT).unwrap().unwrap();
            read_lengths(&mut br, syms.len()).unwrap();
            let table_end = br.finish().unwrap();
            let mut r = ByteReader::new(&p[table_end..]);
            let sizes: std::vec::Vec<u64> = (0..3)
                .map(|_| r.varint_usize("size", u64::MAX).unwrap() as u64)
                .collect();
            let streams = &p[table_end + r.position()..];
            for k in 0..3 {
                for delta in [-1i64, 1] {
                    let mut moved = sizes.clone();
                    moved[k] = sizes[k].wrapping_add_signed(delta);
                    if k + 1 < 3 {
                        moved[k + 1] = sizes[k + 1].wrapping_add_signed(-delta);
                    }
                    let mut q = p[..table_end].to_vec();
                    for &m in &moved {
                        put_varint(&mut q, m);
                    }
                    q.extend_from_slice(streams);
                    assert!(
                        decode(&q, width, &mut out).is_err(),
                        "width {width}, stream {k}, {delta:+}"
                    );
                }
            }
        }
    }

    #[test]
    fn rejects_incomplete_and_oversubscribed_codes() {
        // Symbols {0, 1, 2} (one run of 3) with lengths 1, 2, 3 (incomplete) or 1, 1, 2.
        for lens in [[1u8, 2, 3], [1, 1, 2]] {
            let mut w = BitWriter::default();
            write_symbol_set(&mut w, &[0, 1, 2]);
            let mut prev = 2u8;
            for l in lens {
                w.put_delta(i64::from(l) - i64::from(prev));
                prev = l;
            }
            let mut p = w.finish();
            p.extend_from_slice(&[0, 0, 0]);
            let mut out = [0u8; 1];
            assert!(
                matches!(decode(&p, 2, &mut out), Err(FormatError::Corrupt { .. })),
                "{lens:?}"
            );
        }
    }
}
