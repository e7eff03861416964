//! `huffman`: canonical Huffman code, length-limited, four interleaved bit streams.
//!
//! The encoder counts the symbols and builds an optimal length-limited code
//! (package-merge). The format allows code lengths up to 16; the encoder uses the
//! shortest limit from `max(11, ceil(log2 S))` (for `S` present symbols) up to 16 that
//! costs at most 0.03% more data bits than the 16-bit-limited optimum, since shorter
//! codes mean a smaller decode table. The decoder looks up the next `maxlen` bits (the
//! longest code length present) in a table of `2^maxlen` entries (16-bit entries for
//! widths up to 11, 32-bit above), so it does one lookup per word; four independent
//! bit streams let it overlap four lookups.
//!
//! The count of words is not stored; decoding fewer words than were coded can go
//! unnoticed (integrity is the archive checksums' job), but the one-bit padding makes
//! decoding more words than were coded fail whenever the longest code exceeds 7 bits.
//!
//! # Payload
//!
//! An empty stream (`count = 0`) has an empty payload. Otherwise the payload is:
//!
//! 1. **Table**, a bit string read **most significant bit first** within each byte,
//!    zero-padded to a whole byte (the padding bits must be zero). `EG(v)` is order-0
//!    Exp-Golomb: with `u = v + 1` and `k = floor(log2 u)`, `k` zero bits and then the
//!    `k + 1` bits of `u`, most significant first (a decoder rejects `k > 32`).
//!    - The present symbols, as maximal runs of consecutive values, in increasing order:
//!      `EG(runs - 1)`, then per run `EG(gap)` and `EG(len - 1)`. The first run starts
//!      at `gap`; each later run starts at `previous run's end + 1 + gap`. Every run
//!      must end at or below `2^width`. (The same symbol-set coding as `rans`.)
//!    - If exactly one symbol is present, the table ends here: every word is that
//!      symbol, and nothing follows the table.
//!    - Otherwise (`S >= 2` symbols): the code length `l` (1..=16) of every present
//!      symbol in increasing symbol order, each as `EG(zigzag(l - prev))` (zigzag:
//!      `d >= 0 -> 2d`, `d < 0 -> -2d - 1`), `prev` starting at `ceil(log2 S)` and then
//!      the previous length. The lengths must form a complete prefix code
//!      (`sum 2^-l = 1`).
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

use crate::bytes::{put_varint, ByteReader};
use crate::error::{FormatError, Result};
use crate::stream::{mask, Word};

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
/// Widest symbols this coder takes.
const MAX_WIDTH: u8 = 16;

const WHAT: &str = "huffman literal";

/// Encodes `symbols` (each below `2^width`, `width` 1..=16). Returns `None` for a
/// width outside 1..=16 or a symbol that does not fit `width`.
pub fn encode<W: Word>(symbols: &[W], width: u8) -> Option<Vec<u8>> {
    if width == 0 || width > MAX_WIDTH {
        return None;
    }
    if symbols.is_empty() {
        return Some(Vec::new());
    }
    let size = 1usize << width;
    let lim = mask(width);
    let mut counts = vec![0u64; size];
    for s in symbols {
        let v = s.to_u64();
        if v > lim {
            return None;
        }
        counts[v as usize] += 1;
    }
    let (syms, cs): (Vec<u32>, Vec<u64>) = counts
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(s, &c)| (s as u32, c))
        .unzip();
    let mut w = BitWriter::default();
    write_symbol_set(&mut w, &syms);
    if syms.len() == 1 {
        return Some(w.finish());
    }
    let lens = choose_lengths(&cs);
    let mut prev = ceil_log2(syms.len() as u64);
    for &l in &lens {
        w.put_eg(zigzag(i64::from(l) - i64::from(prev)));
        prev = u32::from(l);
    }
    let mut out = w.finish();

    // (code, length) by symbol value.
    let codes = canonical_codes(&lens);
    let mut enc = vec![(0u32, 0u32); size];
    for ((&s, &c), &l) in syms.iter().zip(&codes).zip(&lens) {
        enc[s as usize] = (c, u32::from(l));
    }
    let bits: u64 = cs.iter().zip(&lens).map(|(&c, &l)| c * u64::from(l)).sum();
    let mut streams: [BitWriter; STREAMS] = Default::default();
    for s in streams.iter_mut() {
        s.out.reserve((bits / 8 / STREAMS as u64 + 8) as usize);
    }
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
    if width == 0 || width > MAX_WIDTH || u32::from(width) > W::BITS {
        return Err(FormatError::BadWidth { width });
    }
    if out.is_empty() {
        if !payload.is_empty() {
            return Err(FormatError::TrailingBytes {
                what: WHAT,
                count: payload.len() as u64,
            });
        }
        return Ok(());
    }
    let mut br = BitReader::new(payload);
    let syms = read_symbol_set(&mut br, width)?;
    if let [only] = syms[..] {
        let end = br.finish()?;
        if end != payload.len() {
            return Err(FormatError::TrailingBytes {
                what: WHAT,
                count: (payload.len() - end) as u64,
            });
        }
        out.fill(W::from_u64(u64::from(only)));
        return Ok(());
    }
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
    // Lookup table on the next `maxlen` bits.
    let mut table = vec![E::default(); 1usize << maxlen];
    for ((&s, &c), &l) in syms.iter().zip(codes).zip(lens) {
        let span = 1usize << (maxlen - u32::from(l));
        let at = (c as usize) << (maxlen - u32::from(l));
        // Always in bounds for a complete code (checked by the caller).
        let slots = table
            .get_mut(at..at + span)
            .ok_or(FormatError::Corrupt { what: WHAT })?;
        slots.fill(E::new(s, u32::from(l)));
    }

    let mut r = ByteReader::new(rest);
    let mut sizes = [0usize; STREAMS];
    for size in sizes.iter_mut().take(STREAMS - 1) {
        *size = r.varint_usize("huffman stream size", rest.len() as u64)?;
    }
    let mut st: [Bits<'_>; STREAMS] = Default::default();
    for (k, s) in st.iter_mut().enumerate() {
        let len = if k + 1 < STREAMS { sizes[k] } else { r.remaining() };
        s.data = r.bytes(len, "huffman stream")?;
    }

    let shift = 64 - maxlen;
    let per = (56 / maxlen) as usize;
    let block = STREAMS * per;
    let mut done = 0;
    while out.len() - done >= block && st.iter().all(|s| s.pos + 8 <= s.data.len()) {
        for s in st.iter_mut() {
            s.refill_fast();
        }
        for quad in out[done..done + block].chunks_exact_mut(STREAMS) {
            for (d, s) in quad.iter_mut().zip(st.iter_mut()) {
                *d = s.decode(&table, shift);
            }
        }
        done += block;
    }
    for (i, d) in out[done..].iter_mut().enumerate() {
        let s = &mut st[i % STREAMS];
        s.refill_slow();
        *d = s.decode(&table, shift);
    }
    for s in &st {
        s.check_end()?;
    }
    Ok(())
}

/// Reads the code lengths of `nsym >= 2` symbols.
fn read_lengths(br: &mut BitReader<'_>, nsym: usize) -> Result<Vec<u8>> {
    let mut lens = Vec::with_capacity(nsym);
    let mut prev = i64::from(ceil_log2(nsym as u64));
    for _ in 0..nsym {
        let z = br.eg()?;
        if z > 64 {
            return Err(FormatError::Invalid {
                what: "huffman code length",
            });
        }
        let l = prev + unzigzag(z);
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

/// One bit stream, read most significant bit first.
///
/// `buf` holds the next stream bits left-aligned: its top `nbits` bits are the next
/// ones; bits below may be stream bits already loaded or zeros. `pos` is the next byte
/// to load; it runs past the end of `data` when the slow path pads with zeros.
#[derive(Default)]
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
    buf: u64,
    nbits: u32,
}

impl Bits<'_> {
    /// Loads whole bytes until at least 56 bits are buffered (needs 8 bytes at `pos`).
    #[inline(always)]
    fn refill_fast(&mut self) {
        if let Some(b) = self.data.get(self.pos..).and_then(|d| d.first_chunk::<8>()) {
            // nbits <= 63 here: both refills leave it below 64.
            self.buf |= u64::from_be_bytes(*b) >> self.nbits;
            let k = (63 - self.nbits) >> 3;
            self.pos += k as usize;
            self.nbits += k << 3;
        }
    }

    /// Loads bytes one at a time (zeros past the end) until at least 56 bits are buffered.
    #[inline]
    fn refill_slow(&mut self) {
        while self.nbits < 56 {
            let b = self.data.get(self.pos).copied().unwrap_or(0);
            self.buf |= u64::from(b) << (56 - self.nbits);
            self.pos += 1;
            self.nbits += 8;
        }
    }

    /// Decodes one symbol; at least `maxlen` bits must be buffered.
    #[inline(always)]
    fn decode<W: Word, E: Entry>(&mut self, table: &[E], shift: u32) -> W {
        // `buf >> shift` is below 2^maxlen, the table's length.
        let e = table
            .get((self.buf >> shift) as usize)
            .copied()
            .unwrap_or_default()
            .get();
        let len = e & 31;
        self.buf <<= len;
        self.nbits -= len;
        W::from_u64(u64::from(e >> 5))
    }

    /// The stream must end exactly in its last byte, padded with one bits.
    fn check_end(&self) -> Result<()> {
        let consumed = self.pos as u64 * 8 - u64::from(self.nbits);
        let len = self.data.len() as u64;
        if consumed > len * 8 {
            return Err(FormatError::Truncated { what: "huffman stream" });
        }
        if consumed.div_ceil(8) < len {
            return Err(FormatError::TrailingBytes {
                what: "huffman stream",
                count: len - consumed.div_ceil(8),
            });
        }
        // Here pos >= len, so the padding bits are buffered.
        let pad = (len * 8 - consumed) as u32;
        if pad > 0 && !self.buf >> (64 - pad) != 0 {
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

fn ceil_log2(v: u64) -> u32 {
    if v <= 1 {
        0
    } else {
        64 - (v - 1).leading_zeros()
    }
}

fn zigzag(d: i64) -> u64 {
    if d >= 0 {
        (d as u64) << 1
    } else {
        ((-d as u64) << 1) - 1
    }
}

fn unzigzag(z: u64) -> i64 {
    if z & 1 == 0 {
        (z >> 1) as i64
    } else {
        -(((z + 1) >> 1) as i64)
    }
}

/// Writes the strictly increasing, non-empty symbol list as maximal runs.
fn write_symbol_set(w: &mut BitWriter, syms: &[u32]) {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &s in syms {
        match runs.last_mut() {
            Some((start, len)) if *start + *len == s => *len += 1,
            _ => runs.push((s, 1)),
        }
    }
    w.put_eg(runs.len() as u64 - 1);
    let mut end = 0u32;
    for (r, &(start, len)) in runs.iter().enumerate() {
        let gap = if r == 0 { start } else { start - end - 1 };
        w.put_eg(u64::from(gap));
        w.put_eg(u64::from(len) - 1);
        end = start + len;
    }
}

/// Reads the present symbols (strictly increasing, each below `2^width`, at least one).
fn read_symbol_set(br: &mut BitReader<'_>, width: u8) -> Result<Vec<u32>> {
    let limit = 1u64 << width;
    let runs = br.eg()? + 1;
    if runs > limit {
        return Err(FormatError::Invalid {
            what: "entropy table (more runs than symbols)",
        });
    }
    let mut syms = Vec::new();
    let mut end = 0u64;
    for r in 0..runs {
        let gap = br.eg()?;
        let len = br.eg()? + 1;
        let start = end + gap + u64::from(r > 0);
        end = start + len;
        if end > limit {
            return Err(FormatError::Invalid {
                what: "entropy table symbol (does not fit the width)",
            });
        }
        syms.extend(start as u32..end as u32);
    }
    Ok(syms)
}

// ---------------------------------------------------------------------------------
// Bit I/O for the table, most significant bit first.

#[derive(Default)]
struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    nbits: u32,
}

impl BitWriter {
    /// Appends the low `n` (<= 32) bits of `v`, most significant first.
    fn put(&mut self, v: u32, n: u32) {
        if n == 0 {
            return;
        }
        self.acc = self.acc << n | (u64::from(v) & mask(n as u8));
        self.nbits += n;
        while self.nbits >= 8 {
            self.nbits -= 8;
            self.out.push((self.acc >> self.nbits) as u8);
        }
    }

    /// Appends `EG(v)` (`v < 2^32`).
    fn put_eg(&mut self, v: u64) {
        let u = v + 1;
        let k = 63 - u.leading_zeros();
        self.put(0, k);
        if k + 1 > 32 {
            self.put((u >> 32) as u32, k + 1 - 32);
            self.put(u as u32, 32);
        } else {
            self.put(u as u32, k + 1);
        }
    }

    /// The bytes, padded with one bits (the bit streams' padding).
    fn finish_ones(mut self) -> Vec<u8> {
        if self.nbits > 0 {
            let pad = 8 - self.nbits;
            self.out.push((self.acc << pad | ((1u64 << pad) - 1)) as u8);
        }
        self.out
    }

    /// The bytes, zero-padded.
    fn finish(mut self) -> Vec<u8> {
        if self.nbits > 0 {
            self.out.push((self.acc << (8 - self.nbits)) as u8);
        }
        self.out
    }
}

struct BitReader<'a> {
    data: &'a [u8],
    /// Bits read.
    pos: usize,
}

impl<'a> BitReader<'a> {
    fn new(data: &'a [u8]) -> Self {
        BitReader { data, pos: 0 }
    }

    fn bit(&mut self) -> Result<u32> {
        let b = *self
            .data
            .get(self.pos / 8)
            .ok_or(FormatError::Truncated { what: "entropy table" })?;
        let v = u32::from(b >> (7 - (self.pos & 7))) & 1;
        self.pos += 1;
        Ok(v)
    }

    /// Reads `n` (<= 32) bits, most significant first.
    fn bits(&mut self, n: u32) -> Result<u32> {
        let mut v = 0u32;
        for _ in 0..n {
            v = v << 1 | self.bit()?;
        }
        Ok(v)
    }

    fn eg(&mut self) -> Result<u64> {
        let mut k = 0;
        while self.bit()? == 0 {
            k += 1;
            if k > 32 {
                return Err(FormatError::Invalid {
                    what: "entropy table (Exp-Golomb code too long)",
                });
            }
        }
        let rest = if k == 32 {
            u64::from(self.bits(32)?)
        } else {
            u64::from(self.bits(k)?)
        };
        Ok(((1u64 << k) | rest) - 1)
    }

    /// Byte length of what was read; the padding bits must be zero.
    fn finish(&self) -> Result<usize> {
        let end = self.pos.div_ceil(8);
        let used = self.pos & 7;
        if used != 0 {
            let last = self.data[end - 1];
            if last & ((1u8 << (8 - used)) - 1) != 0 {
                return Err(FormatError::Corrupt {
                    what: "entropy table (nonzero padding bits)",
                });
            }
        }
        Ok(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// `n` symbols below `2^width` with `P(k) ~ r^k`.
    fn geometric(n: usize, width: u8, r: f64, seed: u64) -> Vec<u16> {
        let size = 1usize << width;
        let mut cdf = Vec::with_capacity(size);
        let mut acc = 0.0;
        let mut p = 1.0;
        for _ in 0..size {
            acc += p;
            cdf.push(acc);
            p *= r;
        }
        let mut rng = Rng(seed | 1);
        (0..n)
            .map(|_| {
                let u = rng.unit() * acc;
                cdf.partition_point(|&c| c < u).min(size - 1) as u16
            })
            .collect()
    }

    fn entropy_bytes(symbols: &[u16]) -> f64 {
        let mut counts = std::collections::HashMap::new();
        for &s in symbols {
            *counts.entry(s).or_insert(0u64) += 1;
        }
        let n = symbols.len() as f64;
        counts.values().map(|&c| c as f64 * (n / c as f64).log2()).sum::<f64>() / 8.0
    }

    fn round_trip<W: Word>(symbols: &[W], width: u8) -> Vec<u8> {
        let p = encode(symbols, width).expect("applies");
        let mut back = std::vec![W::default(); symbols.len()];
        decode(&p, width, &mut back).unwrap();
        assert_eq!(back, symbols, "width {width}");
        p
    }

    fn to_width(v: &[u16], width: u8) -> Vec<u16> {
        v.iter().map(|&x| x & mask(width) as u16).collect()
    }

    /// Bytes of the table of a payload with at least two symbols.
    fn table_len(p: &[u8], width: u8) -> usize {
        let mut br = BitReader::new(p);
        let syms = read_symbol_set(&mut br, width).unwrap();
        read_lengths(&mut br, syms.len()).unwrap();
        br.finish().unwrap()
    }

    #[test]
    fn round_trips_random_and_skewed() {
        for width in [1u8, 3, 8, 10, 12, 16] {
            for n in [1usize, 2, 3, 4, 5, 7, 17, 100, 1000, 50_000] {
                let mut rng = Rng(0x9e37_79b9 + n as u64 + u64::from(width));
                let uniform: Vec<u16> = (0..n).map(|_| (rng.next() & mask(width)) as u16).collect();
                round_trip(&uniform, width);
                let skew = geometric(n, width, 0.9, n as u64 ^ 77);
                round_trip(&skew, width);
                let steep = geometric(n, width, 0.3, n as u64 ^ 5);
                round_trip(&steep, width);
                if width <= 8 {
                    let u8s: Vec<u8> = skew.iter().map(|&v| v as u8).collect();
                    round_trip(&u8s, width);
                }
            }
        }
    }

    #[test]
    fn empty_and_single_symbol() {
        let p = round_trip::<u8>(&[], 8);
        assert!(p.is_empty());
        assert!(decode::<u8>(&[0], 8, &mut []).is_err());
        let p = round_trip(&[5u8; 1000], 3);
        assert_eq!(p.len(), 1);
        let p = round_trip(&[65535u16; 77], 16);
        assert!(p.len() <= 5, "{}", p.len());
        let mut out = [0u16; 3];
        assert!(matches!(
            decode(&p, 16, &mut out[..0]),
            Err(FormatError::TrailingBytes { .. })
        ));
        let mut long = p.clone();
        long.push(0);
        assert!(matches!(
            decode(&long, 16, &mut out),
            Err(FormatError::TrailingBytes { .. })
        ));
        assert!(matches!(
            decode::<u8>(&[], 8, &mut [0]),
            Err(FormatError::Truncated { .. })
        ));
        let mut v = std::vec![0u8; 10_000];
        v[1234] = 1;
        let p = round_trip(&v, 1);
        assert!(p.len() < 1300, "{}", p.len());
    }

    #[test]
    fn all_65536_symbols() {
        let mut v: Vec<u16> = (0..=u16::MAX).collect();
        v.extend(geometric(200_000, 16, 0.9999, 3));
        let p = round_trip(&v, 16);
        std::println!("65536 symbols: {} B vs entropy {:.0} B", p.len(), entropy_bytes(&v));
        assert!((p.len() as f64) < entropy_bytes(&v) * 1.08);
        let mut rng = Rng(99);
        let sparse: Vec<u16> = (0..5000).map(|_| (rng.next() % 300) as u16 * 211).collect();
        round_trip(&sparse, 16);
    }

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
    fn table_is_compact() {
        let v = geometric(1 << 16, 8, 0.97, 1);
        let t = table_len(&encode(&v, 8).unwrap(), 8);
        assert!(t < 200, "table {t} bytes");
        let mut rng = Rng(5);
        let m: Vec<u16> = (0..1 << 16).map(|_| (rng.next() & 1023) as u16).collect();
        let t = table_len(&encode(&m, 10).unwrap(), 10);
        assert!(t < 700, "table {t} bytes");
    }

    #[test]
    fn size_close_to_entropy() {
        let v = geometric(1 << 20, 8, 0.97, 42);
        let v8: Vec<u8> = v.iter().map(|&x| x as u8).collect();
        let p = round_trip(&v8, 8);
        let table = table_len(&p, 8);
        let h = entropy_bytes(&v);
        let data = (p.len() - table) as f64;
        std::println!(
            "huffman: table {table} B, data {data} B, entropy {h:.1} B, overhead {:.4}%",
            (data / h - 1.0) * 100.0
        );
        assert!(data <= h * 1.005, "data {data} vs entropy {h}");
    }

    #[test]
    fn small_streams_have_small_overhead() {
        let v = geometric(300, 8, 0.8, 11);
        let p = round_trip(&v, 8);
        let h = entropy_bytes(&v);
        std::println!("huffman 300 words: {} B vs entropy {h:.1} B", p.len());
        assert!((p.len() as f64) < h * 1.05 + 32.0, "{} vs {h}", p.len());
    }

    #[test]
    fn every_truncation_fails() {
        let v = geometric(500, 8, 0.9, 8);
        let p = round_trip(&v, 8);
        let mut out = std::vec![0u16; v.len()];
        for k in 0..p.len() {
            assert!(decode(&p[..k], 8, &mut out).is_err(), "truncated to {k}");
        }
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
        let mut out = std::vec![0u16; v.len() - 1];
        assert!(decode(&p, 8, &mut out).is_err());
    }

    #[test]
    fn rejects_incomplete_and_oversubscribed_codes() {
        // Symbols {0, 1, 2} (one run of 3) with lengths 1, 2, 3 (incomplete) or 1, 1, 2.
        for lens in [[1u8, 2, 3], [1, 1, 2]] {
            let mut w = BitWriter::default();
            write_symbol_set(&mut w, &[0, 1, 2]);
            let mut prev = 2u8;
            for l in lens {
                w.put_eg(zigzag(i64::from(l) - i64::from(prev)));
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

    #[test]
    fn bad_widths() {
        assert!(encode(&[0u8], 0).is_none());
        assert!(encode(&[0u16], 17).is_none());
        assert!(encode(&[8u8], 3).is_none());
        assert!(matches!(
            decode::<u8>(&[0], 9, &mut [0]),
            Err(FormatError::BadWidth { .. })
        ));
        assert!(matches!(
            decode::<u16>(&[0], 0, &mut [0]),
            Err(FormatError::BadWidth { .. })
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), n in 0usize..300, width in 1u8..=16) {
            let mut out = std::vec![0u16; n];
            if decode(&bytes, width, &mut out).is_ok() {
                prop_assert!(out.iter().all(|&s| u64::from(s) <= mask(width)));
            }
            let mut out8 = std::vec![0u8; n];
            let _ = decode(&bytes, width.min(8), &mut out8);
        }

        #[test]
        fn flipped_payloads_never_panic(seed in any::<u64>(), flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 1..4), n in 1usize..400, width in prop::sample::select(std::vec![1u8, 3, 8, 10, 16])) {
            let v = to_width(&geometric(n, width, 0.8, seed), width);
            let mut p = encode(&v, width).unwrap();
            for (at, x) in flips {
                let k = at % p.len();
                p[k] ^= x;
            }
            let mut out = std::vec![0u16; n];
            if decode(&p, width, &mut out).is_ok() {
                prop_assert!(out.iter().all(|&s| u64::from(s) <= mask(width)));
            }
        }

        #[test]
        fn round_trip_any(v in proptest::collection::vec(any::<u16>(), 0..500), width in 1u8..=16) {
            let v = to_width(&v, width);
            round_trip(&v, width);
        }
    }

    #[test]
    #[ignore]
    fn throughput() {
        let v = geometric(4 << 20, 8, 0.97, 42);
        let v8: Vec<u8> = v.iter().map(|&x| x as u8).collect();
        let t = std::time::Instant::now();
        let p = encode(&v8, 8).unwrap();
        let enc = t.elapsed();
        let mut out = std::vec![0u8; v8.len()];
        // Best of several runs: the machine may be shared.
        let mut dec = std::time::Duration::MAX;
        for _ in 0..30 {
            let t = std::time::Instant::now();
            decode(&p, 8, &mut out).unwrap();
            dec = dec.min(t.elapsed());
        }
        assert_eq!(out, v8);
        let mb = v8.len() as f64 / 1e6;
        std::println!(
            "huffman: {} -> {} bytes ({:.4} bits/sym, {:+.4}% vs order-0 entropy), encode {:.0} MB/s, decode {:.0} MB/s",
            v8.len(),
            p.len(),
            p.len() as f64 * 8.0 / v8.len() as f64,
            (p.len() as f64 / entropy_bytes(&v) - 1.0) * 100.0,
            mb / enc.as_secs_f64(),
            mb / dec.as_secs_f64()
        );
    }
}
