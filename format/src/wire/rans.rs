//! `rans`: static order-0 rANS, four interleaved 32-bit states, 16-bit renormalization.
//!
//! The encoder counts the symbols, quantizes the counts to frequencies that sum to
//! `M = 2^scale_bits` (every present symbol gets at least 1; the quantization minimizes
//! the coded size exactly, see `normalize`), picks the `scale_bits` that minimizes the
//! whole payload (from `ceil(log2 S)` for `S` present symbols up to 15, or 16 when
//! `S > 2^15`; the decoder accepts 1..=16), and codes the words with four rANS states
//! in turn (word `i` with state `i mod 4`). The decoder is table-driven: a slot ->
//! symbol table of `2^scale_bits` entries and a (frequency, start) table by symbol,
//! with a branch-free renormalization.
//!
//! The final-state check catches most damage near the end of the data, but rANS
//! decoding resynchronizes after damage (different states can decode to the same
//! next state), so many bit flips decode to wrong words without an error: integrity
//! is the archive checksums' job.
//!
//! # Payload
//!
//! An empty stream (`count = 0`) has an empty payload. Otherwise the payload is:
//!
//! 1. **Table**, a bit string read **most significant bit first** within each byte,
//!    zero-padded to a whole byte (the padding bits must be zero). `EG(v)` below is
//!    order-0 Exp-Golomb: with `u = v + 1` and `k = floor(log2 u)`, `k` zero bits and
//!    then the `k + 1` bits of `u`, most significant first (a decoder rejects `k > 32`).
//!    `bits(n, v)` is `v` in `n` bits, most significant first.
//!    - The present symbols, as maximal runs of consecutive values, in increasing order:
//!      `EG(runs - 1)`, then per run `EG(gap)` and `EG(len - 1)`. The first run starts
//!      at `gap`; each later run starts at `previous run's end + 1 + gap` (runs are
//!      maximal, so there is at least one absent value between them). Every run must
//!      end at or below `2^width`.
//!    - If exactly one symbol is present, the table ends here: every word is that
//!      symbol, and nothing follows the table.
//!    - Otherwise (`S >= 2` symbols): `bits(4, scale_bits - 1)` (`scale_bits` 1..=16,
//!      `M = 2^scale_bits`), then the frequencies `f` of the first `S - 1` present
//!      symbols in increasing symbol order. With `len(v)` the bit length of `v`
//!      (`len(1) = 1`), `prev` starting at `len(M / S)` (integer division), each `f` is
//!      `EG(zigzag(len(f) - prev))` (zigzag: `d >= 0 -> 2d`, `d < 0 -> -2d - 1`) then
//!      `bits(len(f) - 1, f - 2^(len(f) - 1))` (the bits below its leading one);
//!      then `prev = len(f)`. Every `f` is in `1..M` and their sum is below `M`; the
//!      last symbol's frequency is `M` minus that sum (so at least 1). Symbol `k` in
//!      increasing order owns the slots `start_k .. start_k + f_k` of `0..M`, where
//!      `start_k` is the sum of the frequencies before it.
//! 2. **States**: `min(4, count)` little-endian `u32`s, the decoder's initial states
//!    `x_0 ..`, each in `[2^16, 2^32)`.
//! 3. **Words**: little-endian `u16`s up to the end of the payload (so its length is even).
//!
//! Decoding word `i` (for `i` in `0..count`) with state `x = x_{i mod 4}`:
//! `slot = x mod M`; the symbol `s` owning `slot` (with `f`, `start`) is the word;
//! `x = f * (x >> scale_bits) + slot - start`; if `x < 2^16`, then
//! `x = (x << 16) | next word`. After the last word every state must be exactly `2^16`
//! (the encoder's initial state) and every word must have been read.
//!
//! The encoder is the exact inverse, run from the last word to the first: for word `i`
//! with state `x` (initially `2^16`), if `x >= f << (32 - scale_bits)` it emits
//! `x mod 2^16` and sets `x >>= 16`; then `x = (x / f) * M + x mod f + start`. The words
//! it emits are stored in reverse order of emission.

use alloc::collections::BinaryHeap;
use alloc::vec;
use alloc::vec::Vec;
use core::cmp::{Ordering, Reverse};

use crate::error::{FormatError, Result};
use crate::stream::{mask, Word};

/// Interleaved states.
const LANES: usize = 4;
/// Lower bound of a normalized state; also the encoder's initial state.
const RANS_L: u32 = 1 << 16;
/// Largest `scale_bits` the format allows.
const MAX_SCALE: u32 = 16;
/// Largest `scale_bits` the encoder picks unless the alphabet needs more (keeps the
/// decoder's slot table at 2^15 entries).
const PREFERRED_MAX_SCALE: u32 = 15;
/// Widest symbols this coder takes.
const MAX_WIDTH: u8 = 16;

const WHAT: &str = "rans literal";

/// Encodes `symbols` (each below `2^width`, `width` 1..=16). Returns `None` for a
/// width outside 1..=16 or a symbol that does not fit `width`.
pub fn encode<W: Word>(symbols: &[W], width: u8) -> Option<Vec<u8>> {
    if width == 0 || width > MAX_WIDTH {
        return None;
    }
    if symbols.is_empty() {
        return Some(Vec::new());
    }
    let counts = count(symbols, width)?;
    let (syms, cs): (Vec<u32>, Vec<u64>) = counts
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(s, &c)| (s as u32, c))
        .unzip();
    if syms.len() == 1 {
        let mut w = BitWriter::default();
        write_symbol_set(&mut w, &syms);
        return Some(w.finish());
    }
    let n = symbols.len() as u64;
    let lo = ceil_log2(syms.len() as u64).max(1);
    let hi = if lo <= PREFERRED_MAX_SCALE {
        PREFERRED_MAX_SCALE
    } else {
        MAX_SCALE
    };
    let lanes = LANES.min(symbols.len());
    let mut cands: Vec<(f64, u32, Vec<u32>)> = Vec::new();
    for scale in lo..=hi {
        let freqs = normalize(&cs, n, scale);
        let mut w = BitWriter::default();
        write_table(&mut w, &syms, &freqs, scale);
        let data_bits: f64 = cs
            .iter()
            .zip(&freqs)
            .map(|(&c, &f)| c as f64 * (f64::from(scale) - ln(f64::from(f)) / LN_2))
            .sum();
        // rANS's own loss grows with 2^scale_bits / 2^16: about 0.005 bits a symbol at
        // scale 16, a quarter of that per bit less (measured).
        let precision_bits = n as f64 * 0.005 / f64::from(1u32 << (2 * (MAX_SCALE - scale)));
        // Table, states, data, and about one word lost to the final flush.
        let est = w.bit_len().div_ceil(8) as f64 + (4 * lanes) as f64 + (data_bits + precision_bits) / 8.0 + 2.0;
        cands.push((est, scale, freqs));
    }
    // The estimate is within a few bytes (and 0.01%): encode the best, and the second
    // best if it is close, and keep the smaller.
    cands.sort_by(|a, b| a.0.total_cmp(&b.0));
    let close = cands[0].0 * 1.0005 + 32.0;
    cands.truncate(2);
    cands.retain(|c| c.0 <= close);
    cands
        .into_iter()
        .map(|(_, scale, freqs)| encode_with(symbols, &syms, &freqs, scale, width))
        .min_by_key(|p| p.len())
}

/// Encodes with a given quantized table (`syms` strictly increasing, `freqs` summing to
/// `2^scale`, at least two symbols).
fn encode_with<W: Word>(symbols: &[W], syms: &[u32], freqs: &[u32], scale: u32, width: u8) -> Vec<u8> {
    let mut w = BitWriter::default();
    write_table(&mut w, syms, freqs, scale);
    let mut out = w.finish();

    // (start, freq) by symbol value.
    let mut enc = vec![(0u32, 0u32); 1usize << width];
    let mut start = 0u32;
    for (&s, &f) in syms.iter().zip(freqs) {
        enc[s as usize] = (start, f);
        start += f;
    }
    let mut states = [RANS_L; LANES];
    let mut words: Vec<u16> = Vec::with_capacity(symbols.len() / 2 + 16);
    for (i, sym) in symbols.iter().enumerate().rev() {
        let (start, f) = enc[sym.to_u64() as usize];
        let lane = i % LANES;
        let mut x = states[lane];
        let x_max = u64::from(f) << (32 - scale);
        if u64::from(x) >= x_max {
            words.push(x as u16);
            x >>= 16;
        }
        states[lane] = ((x / f) << scale) + (x % f) + start;
    }
    let lanes = LANES.min(symbols.len());
    out.reserve(4 * lanes + 2 * words.len());
    for x in &states[..lanes] {
        out.extend_from_slice(&x.to_le_bytes());
    }
    for w in words.iter().rev() {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out
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
    let (scale, freqs) = read_freqs(&mut br, syms.len())?;
    let table_end = br.finish()?;

    // Slot -> symbol, and `freq | start << 16` by symbol value.
    let m = 1usize << scale;
    let mut slot_sym: Vec<W> = Vec::with_capacity(m);
    let mut fs = vec![0u32; 1usize << width];
    let mut start = 0u32;
    for (&s, &f) in syms.iter().zip(&freqs) {
        slot_sym.extend((0..f).map(|_| W::from_u64(u64::from(s))));
        fs[s as usize] = f | start << 16;
        start += f;
    }
    if slot_sym.len() != m {
        return Err(FormatError::Corrupt {
            what: "rans frequency table (does not sum to 2^scale_bits)",
        });
    }
    let table = (&slot_sym[..], &fs[..]);

    let rest = &payload[table_end..];
    let lanes = LANES.min(out.len());
    if rest.len() < 4 * lanes {
        return Err(FormatError::Truncated { what: "rans states" });
    }
    let mut x = [RANS_L; LANES];
    for (l, b) in rest[..4 * lanes].chunks_exact(4).enumerate() {
        x[l] = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if x[l] < RANS_L {
            return Err(FormatError::Corrupt {
                what: "rans state (below 2^16)",
            });
        }
    }
    let body = &rest[4 * lanes..];
    if body.len() & 1 != 0 {
        return Err(FormatError::Corrupt {
            what: "rans word stream (odd length)",
        });
    }
    let slot_mask = (m - 1) as u32;
    // Reads past the end of `body` yield zeros; the overrun is reported after the loop.
    let mut pos = 0usize;
    let mut chunks = out.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        for (d, x) in chunk.iter_mut().zip(x.iter_mut()) {
            *d = step(x, table, scale, slot_mask, body, &mut pos);
        }
    }
    for (d, x) in chunks.into_remainder().iter_mut().zip(x.iter_mut()) {
        *d = step(x, table, scale, slot_mask, body, &mut pos);
    }
    if pos > body.len() {
        return Err(FormatError::Truncated {
            what: "rans word stream",
        });
    }
    if x.iter().any(|&x| x != RANS_L) {
        return Err(FormatError::Corrupt {
            what: "rans literal (final state mismatch)",
        });
    }
    if pos < body.len() {
        return Err(FormatError::TrailingBytes {
            what: WHAT,
            count: (body.len() - pos) as u64,
        });
    }
    Ok(())
}

/// Decodes one symbol with state `x` and renormalizes it, reading the word at `pos`
/// of `body`. Past the end of `body` it reads zeros but still advances `pos`, so the
/// caller detects the overrun after the loop (keeping this branch-free).
#[inline(always)]
fn step<W: Word>(x: &mut u32, table: (&[W], &[u32]), scale: u32, slot_mask: u32, body: &[u8], pos: &mut usize) -> W {
    // Both lookups are in bounds (the slot table has `slot_mask + 1` entries, the
    // frequency table one per value of the width); the fallbacks are never taken.
    let slot = *x & slot_mask;
    let s = table.0.get(slot as usize).copied().unwrap_or_default();
    let e = table.1.get(s.to_u64() as usize).copied().unwrap_or(1);
    // Cannot overflow: f * (x >> scale) + slot - start < f * 2^(32 - scale) <= 2^32,
    // and slot >= start.
    let v = (e & 0xffff)
        .wrapping_mul(*x >> scale)
        .wrapping_add(slot)
        .wrapping_sub(e >> 16);
    let w = body
        .get(*pos..)
        .and_then(|b| b.first_chunk::<2>())
        .map_or(0, |b| u32::from(u16::from_le_bytes(*b)));
    let need = v < RANS_L;
    *x = if need { v << 16 | w } else { v };
    *pos += 2 * usize::from(need);
    s
}

/// Symbol counts by value; `None` if a symbol does not fit `width`.
fn count<W: Word>(symbols: &[W], width: u8) -> Option<Vec<u64>> {
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
    Some(counts)
}

// ---------------------------------------------------------------------------------
// Frequency quantization.

/// Quantizes `counts` (all > 0, at least two, summing to `n`) to frequencies >= 1
/// summing to `2^scale` that minimize `sum c_i * -log2(f_i / 2^scale)`.
///
/// The cost is separable and convex in each `f_i`, so starting from rounded
/// proportional values, moving one unit at a time to the best marginal gain from the
/// cheapest marginal loss reaches the optimum.
fn normalize(counts: &[u64], n: u64, scale: u32) -> Vec<u32> {
    let m = 1u64 << scale;
    let mut f: Vec<u32> = counts
        .iter()
        .map(|&c| ((u128::from(c) * u128::from(m) * 2 + u128::from(n)) / (2 * u128::from(n))).max(1) as u32)
        .collect();
    let mut sum: u64 = f.iter().map(|&v| u64::from(v)).sum();

    // Gain (in nats) of f -> f + 1, and loss of f -> f - 1, for symbol i.
    let gain = |c: u64, f: u32| c as f64 * 2.0 * atanh_small(1.0 / (2.0 * f64::from(f) + 1.0));
    let loss = |c: u64, f: u32| c as f64 * 2.0 * atanh_small(1.0 / (2.0 * f64::from(f) - 1.0));
    let mut inc: BinaryHeap<(Key, u32, u32)> = BinaryHeap::with_capacity(counts.len());
    let mut dec: BinaryHeap<(Reverse<Key>, u32, u32)> = BinaryHeap::with_capacity(counts.len());
    let push = |i: usize, fi: u32, inc: &mut BinaryHeap<(Key, u32, u32)>, dec: &mut BinaryHeap<_>| {
        if u64::from(fi) < m {
            inc.push((Key(gain(counts[i], fi)), i as u32, fi));
        }
        if fi > 1 {
            dec.push((Reverse(Key(loss(counts[i], fi))), i as u32, fi));
        }
    };
    for (i, &fi) in f.iter().enumerate() {
        push(i, fi, &mut inc, &mut dec);
    }
    // Drops stale heap entries (pushed for an older value of f).
    fn top_inc(h: &mut BinaryHeap<(Key, u32, u32)>, f: &[u32]) -> Option<(f64, usize)> {
        while let Some(&(k, i, fi)) = h.peek() {
            if f[i as usize] == fi {
                return Some((k.0, i as usize));
            }
            h.pop();
        }
        None
    }
    fn top_dec(h: &mut BinaryHeap<(Reverse<Key>, u32, u32)>, f: &[u32]) -> Option<(f64, usize)> {
        while let Some(&(Reverse(k), i, fi)) = h.peek() {
            if f[i as usize] == fi {
                return Some((k.0, i as usize));
            }
            h.pop();
        }
        None
    }
    while sum > m {
        let Some((_, i)) = top_dec(&mut dec, &f) else { break };
        f[i] -= 1;
        sum -= 1;
        push(i, f[i], &mut inc, &mut dec);
    }
    while sum < m {
        let Some((_, i)) = top_inc(&mut inc, &f) else { break };
        f[i] += 1;
        sum += 1;
        push(i, f[i], &mut inc, &mut dec);
    }
    // Exchange units while it pays; a handful of moves at most after rounding.
    for _ in 0..4 * counts.len() + 64 {
        let (Some((g, i)), Some((l, j))) = (top_inc(&mut inc, &f), top_dec(&mut dec, &f)) else {
            break;
        };
        if i == j || g <= l * (1.0 + 1e-12) {
            break;
        }
        f[i] += 1;
        f[j] -= 1;
        push(i, f[i], &mut inc, &mut dec);
        push(j, f[j], &mut inc, &mut dec);
    }
    debug_assert_eq!(f.iter().map(|&v| u64::from(v)).sum::<u64>(), m);
    f
}

/// An `f64` ordered by `total_cmp`.
#[derive(Clone, Copy, Debug)]
struct Key(f64);
impl PartialEq for Key {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Key {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
}

const LN_2: f64 = core::f64::consts::LN_2;

/// `atanh(y)` for `0 <= y <= 1/3` by its series (`core` has no float math).
fn atanh_small(y: f64) -> f64 {
    let y2 = y * y;
    let mut term = y;
    let mut s = 0.0;
    for k in 0..24 {
        s += term / f64::from(2 * k + 1);
        term *= y2;
    }
    s
}

/// Natural logarithm of a positive, finite, normal `x`.
fn ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i32 - 1023;
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    if m > core::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    // ln m = 2 atanh((m - 1) / (m + 1)), |(m - 1) / (m + 1)| < 0.172.
    let t = (m - 1.0) / (m + 1.0);
    let t = if t < 0.0 { -atanh_small(-t) } else { atanh_small(t) };
    2.0 * t + f64::from(e) * LN_2
}

fn ceil_log2(v: u64) -> u32 {
    if v <= 1 {
        0
    } else {
        64 - (v - 1).leading_zeros()
    }
}

/// Bit length of `v` (`bitlen(0) = 0`).
fn bitlen(v: u64) -> u32 {
    64 - v.leading_zeros()
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

// ---------------------------------------------------------------------------------
// Table.

fn write_table(w: &mut BitWriter, syms: &[u32], freqs: &[u32], scale: u32) {
    write_symbol_set(w, syms);
    w.put(scale - 1, 4);
    let mut prev = bitlen((1u64 << scale) / syms.len() as u64);
    for &f in &freqs[..freqs.len() - 1] {
        let b = bitlen(u64::from(f));
        w.put_eg(zigzag(i64::from(b) - i64::from(prev)));
        w.put(f, b - 1);
        prev = b;
    }
}

/// Reads `scale_bits` and the frequencies of `nsym >= 2` symbols.
fn read_freqs(br: &mut BitReader<'_>, nsym: usize) -> Result<(u32, Vec<u32>)> {
    let scale = br.bits(4)? + 1;
    let m = 1u64 << scale;
    if nsym as u64 > m {
        return Err(FormatError::Invalid {
            what: "rans table (more symbols than slots)",
        });
    }
    let mut prev = i64::from(bitlen(m / nsym as u64));
    let mut freqs = Vec::with_capacity(nsym);
    let mut sum = 0u64;
    for _ in 0..nsym - 1 {
        let z = br.eg()?;
        if z > 64 {
            return Err(FormatError::Invalid { what: "rans frequency" });
        }
        let b = prev + unzigzag(z);
        if b < 1 || b > i64::from(scale) {
            return Err(FormatError::Invalid { what: "rans frequency" });
        }
        let b = b as u32;
        let f = 1u32 << (b - 1) | br.bits(b - 1)?;
        sum += u64::from(f);
        if sum >= m {
            return Err(FormatError::Invalid {
                what: "rans frequencies (sum reaches 2^scale_bits)",
            });
        }
        freqs.push(f);
        prev = i64::from(b);
    }
    freqs.push((m - sum) as u32);
    Ok((scale, freqs))
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

    fn bit_len(&self) -> usize {
        self.out.len() * 8 + self.nbits as usize
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

    #[test]
    fn round_trips_random_and_skewed() {
        for width in [1u8, 3, 8, 10, 12, 16] {
            for n in [1usize, 2, 3, 4, 5, 7, 100, 1000, 50_000] {
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
        // Two symbols, one of them once.
        let mut v = std::vec![0u8; 10_000];
        v[1234] = 1;
        let p = round_trip(&v, 1);
        assert!(p.len() < 40, "{}", p.len());
    }

    #[test]
    fn all_65536_symbols() {
        let mut v: Vec<u16> = (0..=u16::MAX).collect();
        v.extend(geometric(200_000, 16, 0.9999, 3));
        let p = round_trip(&v, 16);
        std::println!("65536 symbols: {} B vs entropy {:.0} B", p.len(), entropy_bytes(&v));
        assert!((p.len() as f64) < entropy_bytes(&v) * 1.08);
        // Sparse 16-bit alphabet.
        let mut rng = Rng(99);
        let sparse: Vec<u16> = (0..5000).map(|_| (rng.next() % 300) as u16 * 211).collect();
        round_trip(&sparse, 16);
    }

    #[test]
    fn table_is_compact() {
        // 8-bit, all 256 present, skewed.
        let v = geometric(1 << 16, 8, 0.97, 1);
        let p = encode(&v, 8).unwrap();
        let mut br = BitReader::new(&p);
        let syms = read_symbol_set(&mut br, 8).unwrap();
        read_freqs(&mut br, syms.len()).unwrap();
        let t = br.finish().unwrap();
        assert!(t < 400, "table {t} bytes");
        // 10-bit near-uniform (FP16 mantissas).
        let mut rng = Rng(5);
        let m: Vec<u16> = (0..1 << 16).map(|_| (rng.next() & 1023) as u16).collect();
        let p = encode(&m, 10).unwrap();
        let mut br = BitReader::new(&p);
        let syms = read_symbol_set(&mut br, 10).unwrap();
        read_freqs(&mut br, syms.len()).unwrap();
        let t = br.finish().unwrap();
        assert!(t < 2000, "table {t} bytes");
    }

    #[test]
    fn size_close_to_entropy() {
        let v = geometric(1 << 20, 8, 0.97, 42);
        let v8: Vec<u8> = v.iter().map(|&x| x as u8).collect();
        let p = round_trip(&v8, 8);
        let mut br = BitReader::new(&p);
        let syms = read_symbol_set(&mut br, 8).unwrap();
        read_freqs(&mut br, syms.len()).unwrap();
        let table = br.finish().unwrap();
        let h = entropy_bytes(&v);
        let data = (p.len() - table) as f64;
        std::println!(
            "rans: table {table} B, data {data} B, entropy {h:.1} B, overhead {:.4}%",
            (data / h - 1.0) * 100.0
        );
        assert!(data <= h * 1.002, "data {data} vs entropy {h}");
    }

    #[test]
    fn small_streams_have_small_overhead() {
        let v = geometric(300, 8, 0.8, 11);
        let p = round_trip(&v, 8);
        let h = entropy_bytes(&v);
        std::println!("rans 300 words: {} B vs entropy {h:.1} B", p.len());
        assert!((p.len() as f64) < h + 48.0, "{} vs {h}", p.len());
    }

    #[test]
    fn normalization_is_optimal_against_neighbors() {
        let counts = [1000u64, 1, 1, 3, 500, 77, 2, 9000, 12];
        let n: u64 = counts.iter().sum();
        for scale in 4..=12 {
            let f = normalize(&counts, n, scale);
            assert_eq!(f.iter().map(|&x| u64::from(x)).sum::<u64>(), 1 << scale);
            assert!(f.iter().all(|&x| x >= 1));
            let cost = |f: &[u32]| -> f64 {
                counts
                    .iter()
                    .zip(f)
                    .map(|(&c, &f)| -(c as f64) * f64::from(f).ln())
                    .sum()
            };
            let base = cost(&f);
            for i in 0..counts.len() {
                for j in 0..counts.len() {
                    if i != j && f[j] > 1 {
                        let mut g = f.clone();
                        g[i] += 1;
                        g[j] -= 1;
                        assert!(cost(&g) >= base - 1e-9, "scale {scale}: moving {j}->{i} improves");
                    }
                }
            }
        }
    }

    #[test]
    fn ln_is_accurate() {
        for x in [1.0f64, 1.5, 2.0, 3.0, 1e-3, 12345.678, 65535.0, 1e12] {
            assert!((ln(x) - x.ln()).abs() < 1e-12, "{x}");
        }
    }

    #[test]
    fn every_truncation_fails() {
        let v = geometric(500, 8, 0.9, 8);
        let p = round_trip(&v, 8);
        let mut out = std::vec![0u16; v.len()];
        for k in 0..p.len() {
            assert!(decode(&p[..k], 8, &mut out).is_err(), "truncated to {k}");
        }
        let mut out = std::vec![0u16; v.len() + 1];
        assert!(decode(&p, 8, &mut out).is_err());
        let mut out = std::vec![0u16; v.len() - 1];
        assert!(decode(&p, 8, &mut out).is_err());
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
            "rans: {} -> {} bytes ({:.4} bits/sym, {:+.4}% vs order-0 entropy), encode {:.0} MB/s, decode {:.0} MB/s",
            v8.len(),
            p.len(),
            p.len() as f64 * 8.0 / v8.len() as f64,
            (p.len() as f64 / entropy_bytes(&v) - 1.0) * 100.0,
            mb / enc.as_secs_f64(),
            mb / dec.as_secs_f64()
        );
    }
}
