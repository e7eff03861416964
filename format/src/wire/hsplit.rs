//! `hsplit` (tag 8): each word split into a high part of at most 16 bits,
//! Huffman-coded with a code of at most 12 bits in four bit streams that each hold
//! one contiguous run of words, and its `k` low bits, stored packed. Words of 1 to
//! 32 bits: FP32's sign and exponent coded, its mantissa packed, in one literal.
//!
//! Made to decode fast. The low bits of a float's mantissa are close to uniform, so
//! storing them as they are costs little (a few tenths of a percent of a BF16
//! tensor against coding whole words), while the high part (sign and exponent) is
//! very skewed: its codes are short, and the decoder's 2^12-entry table gives up to
//! three words a lookup. Because each stream holds a contiguous run of words (not
//! words dealt round-robin, as in `huffman`), a lookup's words are stored next to
//! each other, and the four streams give four independent chains of lookups.
//!
//! # Payload
//!
//! An empty stream (`count = 0`) has an empty payload. Otherwise, with `h = b - k`:
//!
//! 1. `[u8] k`, the low bits per word: `0 <= k < b` and `h <= 16`.
//! 2. **Table** of the high parts (`word >> k`, `h` bits each), a bit string exactly
//!    as `huffman`'s table for a stream of width `h` (the symbol set, then, when at
//!    least two symbols are present, their code lengths), zero-padded to a whole
//!    byte, except that every code length MUST be at most 12.
//! 3. If at least two high parts are present: the **stream sizes**, the byte lengths
//!    of streams 0, 1 and 2 as varints.
//! 4. **Low bits**: the low `k` bits of every word, packed least significant bit
//!    first into `ceil(count * k / 8)` bytes, the last zero-padded (a `packed` body).
//! 5. If at least two high parts are present: **streams 0..4**, concatenated; stream
//!    3 is the rest of the payload. With `r = ceil(count / 4)`, stream `j` holds the
//!    codes of the high parts of words `j*r` to `min((j+1)*r, count) - 1` (so the
//!    last streams may hold none), each code most significant bit first, packed most
//!    significant bit first, padded to a whole byte with one bits (as in `huffman`:
//!    exactly `ceil(bits / 8)` bytes, every padding bit 1).
//!
//! With a single high part present, every word's high part is that symbol and the
//! payload ends after the low bits.
//!
//! Word `i` is `high_i << k | low_i`.

use alloc::vec;
use alloc::vec::Vec;

use super::bitpack;
use super::huffman::{canonical_codes, complete_code_depth, limited_lengths, read_lengths, write_lengths, Lane};
use super::tables::{present, read_symbol_set, symbol_counts, write_symbol_set, BitReader, BitWriter};
use crate::bytes::{put_varint, ByteReader};
use crate::error::{FormatError, Result};
use crate::stream::{mask, Word};

/// The widest words (`b`) an `hsplit` literal holds.
pub const MAX_WIDTH: u8 = 32;
/// The most bits a high part (`b - k`) may have: the decode table stores each in 16.
pub const MAX_HIGH_BITS: u8 = 16;
/// Bit streams (each one contiguous run of words).
pub const LANES: usize = 4;
/// Longest code length, and the bits the decode table looks up.
pub const TABLE_BITS: u32 = 12;
pub(super) const SLOTS: usize = 1 << TABLE_BITS;
/// Words one table entry holds at most.
const PER_ENTRY: usize = 3;
/// Lookups between two refills of a lane: 4 x 12 bits fit the 57 a refill leaves.
const LOOKUPS: usize = 4;
/// Words a lane may write between two checks of the room left in its run.
const ROOM: usize = LOOKUPS * PER_ENTRY;
/// A lookup's first word in its window, `k <= ROOM - PER_ENTRY`, is masked with
/// this (a no-op: `ROOM - PER_ENTRY < 16`), so that the compiler drops the stores'
/// bounds checks from `k < 16` alone; windows hold what a store at word 15 puts.
/// It was clamped with `min` before: a compare, a conditional move and a register
/// for the bound in every lookup of a loop short of registers. Without them
/// `decode/hsplit` ran +2.7% (BF16), +7.7% (FP16) and +8 to +10% (FP32 words)
/// (`cargo bench -p brevis-format --features simd --bench coders`, against a
/// baseline of the build before).
const AT_MASK: usize = 15;
// The mask is a no-op only while a round's stores start at words it keeps.
const _: () = assert!(ROOM - PER_ENTRY <= AT_MASK && (AT_MASK + 1).is_power_of_two());
/// How much bigger (parts per 10 000 of the estimated bits) a split with more low
/// bits may be and still be chosen: fewer Huffman-coded bits decode faster.
const SPLIT_SLACK: f64 = 100.0;

const WHAT: &str = "hsplit literal";

/// Encodes `symbols` (each below `2^width`, `width` 1..=32) with the split that
/// [`best_split`] picks. Returns `None` for a width outside 1..=32, a symbol that
/// does not fit `width`, or when no split has at most 4096 distinct high parts.
///
/// Words of more than 16 bits are split by the counts of their top 16 bits (a high
/// part has at most 16): the bits below those count as stored either way.
pub fn encode<W: Word>(symbols: &[W], width: u8) -> Option<Vec<u8>> {
    if width == 0 || width > MAX_WIDTH {
        return None;
    }
    if symbols.is_empty() {
        return Some(Vec::new());
    }
    let below = width.saturating_sub(MAX_HIGH_BITS);
    let k = if below == 0 {
        best_split(&symbol_counts(symbols, width)?, width)?
    } else {
        // (A word wider than `width` makes `encode_split` refuse.)
        let tops: Vec<u16> = symbols.iter().map(|s| (s.to_u64() >> below) as u16).collect();
        below + best_split(&symbol_counts(&tops, MAX_HIGH_BITS)?, MAX_HIGH_BITS)?
    };
    encode_split(symbols, width, k)
}

/// The number of low bits `k` to store packed, from the counts of every word value:
/// the largest `k` whose estimated size (order-0 entropy of the high parts, plus the
/// low bits) is within 1% of the smallest estimate, among the splits
/// with at most 4096 distinct high parts.
pub fn best_split(counts: &[u64], width: u8) -> Option<u8> {
    let n: u64 = counts.iter().sum();
    let estimates: Vec<(u8, f64)> = (0..width).filter_map(|k| Some((k, estimate(counts, n, k)?))).collect();
    let best = estimates.iter().map(|&(_, e)| e).fold(f64::INFINITY, f64::min);
    estimates
        .iter()
        .rev()
        .find(|&&(_, e)| e <= best * (1.0 + SPLIT_SLACK / 10_000.0))
        .map(|&(k, _)| k)
}

/// Estimated bits of all `n` words with `k` low bits packed, or `None` if the high
/// parts take more than 4096 values.
fn estimate(counts: &[u64], n: u64, k: u8) -> Option<f64> {
    let mut bits = n as f64 * f64::from(k);
    let mut present = 0usize;
    for group in counts.chunks(1 << k) {
        let c: u64 = group.iter().sum();
        if c > 0 {
            present += 1;
            bits += c as f64 * libm::log2(n as f64 / c as f64);
        }
    }
    // About four bits of table a present symbol.
    (present <= SLOTS).then_some(bits + 4.0 * present as f64)
}

/// Encodes `symbols` with `k` low bits packed. Returns `None` where `hsplit` cannot:
/// a width outside 1..=32, `k >= width`, high parts of more than 16 bits, a symbol
/// wider than `width`, or more than 4096 distinct high parts.
pub fn encode_split<W: Word>(symbols: &[W], width: u8, k: u8) -> Option<Vec<u8>> {
    if width == 0 || width > MAX_WIDTH || k >= width || width - k > MAX_HIGH_BITS {
        return None;
    }
    if symbols.is_empty() {
        return Some(Vec::new());
    }
    if symbols.iter().any(|s| s.to_u64() > mask(width)) {
        return None;
    }
    let highs: Vec<u16> = symbols.iter().map(|s| (s.to_u64() >> k) as u16).collect();
    let counts = symbol_counts(&highs, width - k)?;
    let (syms, cs) = present(&counts);
    if syms.len() > SLOTS {
        return None;
    }
    let mut out = vec![k];
    let mut w = BitWriter::default();
    write_symbol_set(&mut w, &syms);
    let lens = (syms.len() >= 2).then(|| limited_lengths(&cs, TABLE_BITS));
    if let Some(lens) = &lens {
        write_lengths(&mut w, lens);
    }
    out.extend_from_slice(&w.finish());

    let mut streams = Vec::new();
    if let Some(lens) = &lens {
        let mut code = vec![(0u32, 0u32); counts.len()];
        for ((&s, &c), &l) in syms.iter().zip(&canonical_codes(lens)).zip(lens) {
            code[s as usize] = (c, u32::from(l));
        }
        let run = highs.len().div_ceil(LANES);
        streams = highs
            .chunks(run)
            .map(|part| {
                let mut st = BitWriter::default();
                for &h in part {
                    let (c, l) = code[usize::from(h)];
                    st.put(c, l);
                }
                st.finish_ones()
            })
            .collect();
        streams.resize(LANES, Vec::new());
        for st in &streams[..LANES - 1] {
            put_varint(&mut out, st.len() as u64);
        }
    }
    bitpack::pack(symbols, k, &mut out);
    for st in &streams {
        out.extend_from_slice(st);
    }
    Some(out)
}

/// Decodes `out.len()` words of `width` bits from a payload made by [`encode`].
pub fn decode<W: Word>(payload: &[u8], width: u8, out: &mut [W]) -> Result<()> {
    if width == 0 || width > MAX_WIDTH || u32::from(width) > W::BITS {
        return Err(FormatError::BadWidth { width });
    }
    if out.is_empty() {
        return match payload.len() {
            0 => Ok(()),
            n => Err(FormatError::TrailingBytes {
                what: WHAT,
                count: n as u64,
            }),
        };
    }
    let (&k, rest) = payload.split_first().ok_or(FormatError::Truncated {
        what: "hsplit low-bit count",
    })?;
    if k >= width {
        return Err(FormatError::Invalid {
            what: "hsplit low-bit count (not below the width)",
        });
    }
    if width - k > MAX_HIGH_BITS {
        return Err(FormatError::Invalid {
            what: "hsplit low-bit count (high parts of over 16 bits)",
        });
    }
    let mut br = BitReader::new(rest);
    let syms = read_symbol_set(&mut br, width - k)?;
    let lens = match syms.len() {
        1 => None,
        n => Some(read_lengths(&mut br, n)?),
    };
    let mut r = ByteReader::new(&rest[br.finish()?..]);
    let mut sizes = [0usize; LANES - 1];
    if lens.is_some() {
        for s in sizes.iter_mut() {
            *s = r.varint_usize("hsplit stream size", rest.len() as u64)?;
        }
    }
    let low_bytes = (out.len() as u64 * u64::from(k)).div_ceil(8);
    let low = r.bytes(usize::try_from(low_bytes).unwrap_or(usize::MAX), "hsplit low bits")?;
    let streams = r.rest();
    // WebAssembly decodes the high parts of words over 16 bits (FP32's) into
    // 16-bit words: one instance of the lane loop there, a smaller module. The
    // low bits are unpacked below them from there, into `out`.
    #[cfg(target_arch = "wasm32")]
    if W::BITS > 16 {
        let mut highs = vec![0u16; out.len()];
        decode_highs(streams, &sizes, &syms, lens.as_deref(), &mut highs)?;
        return bitpack::unpack_below(low, k, &highs, out);
    }
    decode_highs(streams, &sizes, &syms, lens.as_deref(), out)?;
    if k > 0 {
        append_low_bits(low, k, out)?;
    }
    Ok(())
}

/// Puts the high parts in `out`: decoded from the streams, or, for a table of
/// one symbol (no `lens`), that symbol everywhere.
fn decode_highs<W: Word>(
    streams: &[u8],
    sizes: &[usize; LANES - 1],
    syms: &[u32],
    lens: Option<&[u8]>,
    out: &mut [W],
) -> Result<()> {
    match lens {
        Some(lens) => decode_high(streams, sizes, syms, lens, out),
        None if !streams.is_empty() => Err(FormatError::TrailingBytes {
            what: WHAT,
            count: streams.len() as u64,
        }),
        None => {
            out.fill(W::from_u64(u64::from(syms[0])));
            Ok(())
        }
    }
}

/// Shifts every word of `out` left by `k` and puts its low bits from `low` (which
/// holds exactly `ceil(out.len() * k / 8)` bytes) below, in the unpacking pass
/// itself.
fn append_low_bits<W: Word>(low: &[u8], k: u8, out: &mut [W]) -> Result<()> {
    bitpack::unpack_shift_in(low, k, out)
}

/// Decodes the high parts into `out` from the four streams (in WebAssembly,
/// 16-bit words only: see [`decode`]).
fn decode_high<W: Word>(
    streams: &[u8],
    sizes: &[usize; LANES - 1],
    syms: &[u32],
    lens: &[u8],
    out: &mut [W],
) -> Result<()> {
    if complete_code_depth(lens)? > TABLE_BITS {
        return Err(FormatError::Invalid {
            what: "hsplit code length (over 12 bits)",
        });
    }
    let codes = canonical_codes(lens);
    let table = multi_table(syms, lens, &codes)?;

    // Each stream's (start, end) in `streams`.
    let mut bounds = [(0usize, 0usize); LANES];
    let mut start = 0usize;
    for (j, b) in bounds.iter_mut().enumerate() {
        let end = match sizes.get(j) {
            Some(&len) => start.checked_add(len).filter(|&e| e <= streams.len()),
            None => Some(streams.len()),
        }
        .ok_or(FormatError::Truncated { what: "hsplit stream" })?;
        *b = (start, end);
        start = end;
    }
    let mut lanes = [Lane::default(); LANES];
    for (l, &(start, _)) in lanes.iter_mut().zip(&bounds) {
        l.pos = start;
    }
    let table: &[u64; SLOTS] = table
        .as_slice()
        .try_into()
        .map_err(|_| FormatError::Corrupt { what: WHAT })?;
    #[cfg(all(feature = "simd", target_arch = "x86_64"))]
    super::simd::hsplit_runs(streams, table, &mut lanes, out);
    #[cfg(not(all(feature = "simd", target_arch = "x86_64")))]
    decode_runs(streams, table, &mut lanes, out);

    for (l, &(start, end)) in lanes.iter().zip(&bounds) {
        l.check_end(&streams[start..end], start)?;
    }
    Ok(())
}

/// The decode table on the next 12 bits: entry = up to three high parts in bits
/// 0..16, 16..32 and 32..48, how many they are in bits 48..52, the first one's code
/// length in bits 52..56, and the bits they take in bits 56..64 (the top: a lane's
/// next lookup waits on them, and a shift alone extracts them).
///
/// Built by ranges, not slot by slot: a code of length `l` owns the `2^(12 - l)`
/// slots that start with it, and within them each code no longer than the bits
/// left owns a sub-range, and so on, three deep. Codes shortest first, so those
/// that fit are a prefix of the list; every code visited fills a range of its own
/// (disjoint from its siblings'), so at most 3 x 4096 fills, each a `fill` of a
/// run of slots. Slot by slot (each slot's first code looked up, then the next
/// ones from the bits left, zero-padded) it was 3.3-3.7% of a one-thread `verify`
/// of the `--fast-decode` BF16 corpus archive, whose small tensors each build one
/// (`perf record`; 1.6-1.8% built by ranges).
/// `tests::tables_built_by_ranges_match_slot_by_slot` holds it to that definition.
fn multi_table(syms: &[u32], lens: &[u8], codes: &[u32]) -> Result<Vec<u64>> {
    // (length, code, symbol), shortest first. Lengths are 1 to 12 (the caller
    // checked the code is complete and no deeper).
    // (A pass per length, not a sort: a sort's code made the WebAssembly module
    // 2.3 KB gzipped larger, past the npm package's budget.)
    let mut by_len = Vec::with_capacity(lens.len());
    for len in 1..=TABLE_BITS {
        for ((&l, &c), &s) in lens.iter().zip(codes).zip(syms) {
            if u32::from(l) == len {
                by_len.push((len, c as usize, u64::from(s)));
            }
        }
    }
    let mut table = vec![0u64; SLOTS];
    let mut fill = |at: usize, left: u32, entry: u64| -> Result<()> {
        table
            .get_mut(at..at + (1 << left))
            .ok_or(FormatError::Corrupt { what: WHAT })?
            .fill(entry);
        Ok(())
    };
    let fitting = |left: u32| by_len.iter().take_while(move |&&(l, _, _)| l <= left);
    for &(l1, c1, s1) in fitting(TABLE_BITS) {
        let left1 = TABLE_BITS - l1;
        let at1 = c1 << left1;
        let first = s1 | u64::from(l1) << 52;
        fill(at1, left1, first | 1 << 48 | u64::from(l1) << 56)?;
        for &(l2, c2, s2) in fitting(left1) {
            let left2 = left1 - l2;
            let at2 = at1 + (c2 << left2);
            let two = first | s2 << 16;
            fill(at2, left2, two | 2 << 48 | u64::from(l1 + l2) << 56)?;
            for &(l3, c3, s3) in fitting(left2) {
                let left3 = left2 - l3;
                fill(
                    at2 + (c3 << left3),
                    left3,
                    two | s3 << 32 | 3 << 48 | u64::from(l1 + l2 + l3) << 56,
                )?;
            }
        }
    }
    Ok(table)
}

/// Decodes the high parts of `out`'s [`LANES`] runs, each from its lane, with
/// the layout `W` takes ([`run_lanes`]). Always inlined: `simd::hsplit_runs`
/// compiles it a second time with BMI2.
#[inline(always)]
pub(super) fn decode_runs<W: Word>(streams: &[u8], table: &[u64; SLOTS], lanes: &mut [Lane; LANES], out: &mut [W]) {
    let run = out.len().div_ceil(LANES);
    if W::BITS == 16 && cfg!(target_endian = "little") {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        run_lanes::<AsLe16Bytes, { 2 * AT_MASK + 8 }>(streams, table, lanes, split_runs(bytes, 2 * run));
    } else {
        run_lanes::<AsWords<W>, { AT_MASK + PER_ENTRY }>(streams, table, lanes, split_runs(out, run));
    }
}

/// `out` cut into [`LANES`] runs of `run` units (the last ones shorter or empty).
fn split_runs<U>(out: &mut [U], run: usize) -> [&mut [U]; LANES] {
    let mut runs: [&mut [U]; LANES] = Default::default();
    let mut rest = out;
    for r in runs.iter_mut() {
        let len = run.min(rest.len());
        let (head, tail) = core::mem::take(&mut rest).split_at_mut(len);
        *r = head;
        rest = tail;
    }
    runs
}

/// How [`run_lanes`] stores the high parts in a run: as its words ([`AsWords`]), or,
/// for 16-bit words on little-endian targets, as their bytes ([`AsLe16Bytes`]), where
/// one 8-byte store puts all of a lookup's words.
trait Layout {
    /// What a run is a slice of.
    type Unit: Copy;
    /// Units a word takes.
    const PER_WORD: usize;
    /// Stores entry `e`'s (up to [`PER_ENTRY`]) words from word `at` of a window of
    /// `N` units, with `at <= ROOM - PER_ENTRY`. What it stores past them, a later
    /// store of the round or of the next one overwrites (the window of `N` units
    /// holds what it stores).
    fn put_entry<const N: usize>(window: &mut [Self::Unit; N], at: usize, e: u64);
    /// Stores `e`'s first word as word `at` of `run` (which has it).
    fn put_first(run: &mut [Self::Unit], at: usize, e: u64);
}

/// Runs of words, each stored alone: windows of `AT_MASK + PER_ENTRY` words.
struct AsWords<W>(core::marker::PhantomData<W>);

impl<W: Word> Layout for AsWords<W> {
    type Unit = W;
    const PER_WORD: usize = 1;

    #[inline(always)]
    fn put_entry<const N: usize>(window: &mut [W; N], at: usize, e: u64) {
        // `N = AT_MASK + PER_ENTRY`: the mask changes nothing but drops the checks.
        let at = at & AT_MASK;
        window[at] = W::from_u64(e & 0xffff);
        window[at + 1] = W::from_u64((e >> 16) & 0xffff);
        window[at + 2] = W::from_u64((e >> 32) & 0xffff);
    }

    #[inline(always)]
    fn put_first(run: &mut [W], at: usize, e: u64) {
        if let Some(d) = run.get_mut(at) {
            *d = W::from_u64(e & 0xffff);
        }
    }
}

/// Runs of little-endian 16-bit words as bytes: an entry's low 48 bits are its
/// three words in order, so one 8-byte store puts them (and a fourth, its bit
/// counts, which the next lookup's store overwrites). Windows of `2 * AT_MASK + 8`
/// bytes: room for an 8-byte store at word [`AT_MASK`]. Three
/// stores a lookup became one: BF16 and FP16 words decoded 4-5% faster, the low
/// bits still unpacked word by word (`bench/coders-ab.sh ded0df7 hsplit`, the
/// whole `wire::decode` of 512 Ki words).
struct AsLe16Bytes;

impl Layout for AsLe16Bytes {
    type Unit = u8;
    const PER_WORD: usize = 2;

    #[inline(always)]
    fn put_entry<const N: usize>(window: &mut [u8; N], at: usize, e: u64) {
        // `2 * at + 8 <= 2 * AT_MASK + 8 = N`: the mask changes nothing but drops
        // the checks.
        let at = 2 * (at & AT_MASK);
        window[at..at + 8].copy_from_slice(&e.to_le_bytes());
    }

    #[inline(always)]
    fn put_first(run: &mut [u8], at: usize, e: u64) {
        if let Some(d) = run.get_mut(2 * at..2 * at + 2) {
            d.copy_from_slice(&(e as u16).to_le_bytes());
        }
    }
}

/// Decodes every run from its lane: the four lanes in step while each has room for
/// a window of `N` units (the [`ROOM`] words of a round, and room for what
/// [`Layout::put_entry`] stores at any word up to [`AT_MASK`]), then each lane
/// alone, then its last words one at a time.
///
/// In WebAssembly, V8 keeps few of the four lanes' state in registers (its code
/// for this loop, `node --print-wasm-code`, loads and stores much of it on the
/// stack in every round), but two passes of two lanes each ran slower there
/// (`scripts/test-wasi.sh bench 'decode/hsplit'`, taking turns, three rounds:
/// BF16 522-627 against 638-813 Melem/s, FP16 464-543 against 643-1,032).
#[inline(always)]
fn run_lanes<L: Layout, const N: usize>(
    payload: &[u8],
    table: &[u64; SLOTS],
    lanes: &mut [Lane; LANES],
    runs: [&mut [L::Unit]; LANES],
) {
    let mut at = [0usize; LANES];
    let [r0, r1, r2, r3] = runs;
    let [l0, l1, l2, l3] = lanes;
    // One window a lane for a round of `LOOKUPS` lookups: the stores of a round
    // are in bounds by its type (see `step`), no check each.
    while let (Some(w0), Some(w1), Some(w2), Some(w3)) = (
        window::<L, N>(r0, at[0]),
        window::<L, N>(r1, at[1]),
        window::<L, N>(r2, at[2]),
        window::<L, N>(r3, at[3]),
    ) {
        l0.refill(payload);
        l1.refill(payload);
        l2.refill(payload);
        l3.refill(payload);
        let mut k = [0usize; LANES];
        for _ in 0..LOOKUPS {
            step::<L, N>(l0, table, w0, &mut k[0]);
            step::<L, N>(l1, table, w1, &mut k[1]);
            step::<L, N>(l2, table, w2, &mut k[2]);
            step::<L, N>(l3, table, w3, &mut k[3]);
        }
        for (a, k) in at.iter_mut().zip(k) {
            *a += k;
        }
    }
    for ((l, run), a) in [l0, l1, l2, l3].into_iter().zip([r0, r1, r2, r3]).zip(at.iter_mut()) {
        while let Some(w) = window::<L, N>(run, *a) {
            l.refill(payload);
            let mut k = 0;
            for _ in 0..LOOKUPS {
                step::<L, N>(l, table, w, &mut k);
            }
            *a += k;
        }
        while *a < run.len() / L::PER_WORD {
            l.refill(payload);
            let e = lookup(l, table);
            L::put_first(run, *a, e);
            l.used += ((e >> 52) & 15) as u32;
            *a += 1;
        }
    }
}

/// The window of `N` units of `run` from word `at`, if it has them.
#[inline(always)]
fn window<L: Layout, const N: usize>(run: &mut [L::Unit], at: usize) -> Option<&mut [L::Unit; N]> {
    run.get_mut(at * L::PER_WORD..)?.first_chunk_mut::<N>()
}

/// The table entry of a lane's next 12 bits.
#[inline(always)]
fn lookup(l: &Lane, table: &[u64; SLOTS]) -> u64 {
    table[((l.word << l.used) >> (64 - TABLE_BITS)) as usize]
}

/// One lookup of a round: stores its (up to three) words from word `*k` of the
/// window and moves on by the words and bits it decoded. An entry holds 1 to 3
/// words, so after at most `LOOKUPS - 1` lookups `*k <= ROOM - PER_ENTRY`; the
/// mask ([`AT_MASK`]) changes nothing but lets the compiler drop the bounds checks.
#[inline(always)]
fn step<L: Layout, const N: usize>(l: &mut Lane, table: &[u64; SLOTS], window: &mut [L::Unit; N], k: &mut usize) {
    let e = lookup(l, table);
    let at = *k & AT_MASK;
    L::put_entry(window, at, e);
    *k = at + ((e >> 48) & 15) as usize;
    l.used += (e >> 56) as u32;
}

#[cfg(test)]
mod tests {
    use super::super::tables::testing::{self as shared, geometric, round_trip, to_width, Rng};
    use super::*;
    use proptest::prelude::*;

    struct HSplit;
    impl shared::Coder for HSplit {
        const NAME: &'static str = "hsplit";
        const RARE_SYMBOL_BYTES: usize = 1300;
        const TABLE_BYTES: [usize; 2] = [200, 700];
        // The split may cost up to 1% over the best estimate (`SPLIT_SLACK`), the
        // 12-bit limit and the Huffman code's own redundancy come on top.
        const DATA_SLACK: f64 = 1.025;
        const SMALL_STREAM: (f64, f64) = (1.05, 40.0);
        fn encode<W: Word>(symbols: &[W], width: u8) -> Option<Vec<u8>> {
            encode(symbols, width)
        }
        fn decode<W: Word>(payload: &[u8], width: u8, out: &mut [W]) -> Result<()> {
            decode(payload, width, out)
        }
        fn table_len(payload: &[u8], width: u8) -> usize {
            let mut br = BitReader::new(&payload[1..]);
            let syms = read_symbol_set(&mut br, width - payload[0]).unwrap();
            read_lengths(&mut br, syms.len()).unwrap();
            1 + br.finish().unwrap()
        }
    }

    // The shared tests but `empty_and_single_symbol` (its payload sizes are
    // `huffman`'s; `empty_and_single_high_part` below is this coder's).
    super::super::tables::testing::coder_tests!(@each HSplit:
        round_trips_random_and_skewed,
        all_65536_symbols,
        table_is_compact,
        size_close_to_entropy,
        small_streams_have_small_overhead,
        every_truncation_fails
    );

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), n in 0usize..300, width in 1u8..=16) {
            shared::arbitrary_bytes_never_panic::<HSplit>(&bytes, n, width)?;
        }

        #[test]
        fn flipped_payloads_never_panic(seed in any::<u64>(), flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 1..4), n in 1usize..400, width in proptest::sample::select(std::vec![1u8, 3, 8, 10, 16])) {
            shared::flipped_payloads_never_panic::<HSplit>(seed, &flips, n, width)?;
        }

        #[test]
        fn every_wide_split_round_trips(v in proptest::collection::vec(any::<u32>(), 0..700), width in 17u8..=32, high in 1u8..=16) {
            let v: Vec<u32> = v.iter().map(|&x| (u64::from(x) & mask(width)) as u32).collect();
            let Some(p) = encode_split(&v, width, width - high) else { return Ok(()) };
            let mut back = std::vec![0u32; v.len()];
            decode(&p, width, &mut back).unwrap();
            prop_assert_eq!(back, v);
        }

        #[test]
        fn every_split_round_trips(v in proptest::collection::vec(any::<u16>(), 0..700), width in 1u8..=16, k in 0u8..16) {
            let v = to_width(&v, width);
            let Some(p) = encode_split(&v, width, k % width) else { return Ok(()) };
            let mut back = std::vec![0u16; v.len()];
            decode(&p, width, &mut back).unwrap();
            prop_assert_eq!(back, v);
        }
    }

    /// The decode table by its definition, slot by slot: the slot's first code,
    /// then each next code decided by the bits left (zero-padded), while it fits,
    /// three at most.
    fn multi_table_slot_by_slot(syms: &[u32], lens: &[u8], codes: &[u32]) -> Vec<u64> {
        let single =
            super::super::huffman::lookup_table(syms, lens, codes, TABLE_BITS, |s, l| u64::from(s) << 8 | u64::from(l))
                .unwrap();
        (0..SLOTS)
            .map(|slot| {
                let first = single[slot];
                let (mut entry, mut used, mut count) = (first >> 8, first & 0xff, 1);
                while count < PER_ENTRY {
                    let next = single[(slot << used) & (SLOTS - 1)];
                    if used + (next & 0xff) > u64::from(TABLE_BITS) {
                        break;
                    }
                    entry |= (next >> 8) << (16 * count);
                    used += next & 0xff;
                    count += 1;
                }
                entry | (count as u64) << 48 | (first & 0xff) << 52 | used << 56
            })
            .collect()
    }

    /// Codes of 2 to 300 symbols, skewed and flat, limited to 12 bits, with
    /// symbols spread over 16 bits: the table built by ranges is the table
    /// defined slot by slot.
    #[test]
    fn tables_built_by_ranges_match_slot_by_slot() {
        let mut rng = Rng(5);
        for n in [2usize, 3, 5, 17, 64, 300] {
            for skew in [1u64, 3, 40] {
                let weights: Vec<u64> = (0..n)
                    .map(|i| 1 + (rng.next() % 1000) * skew.pow(2) / (1 + i as u64))
                    .collect();
                let lens = limited_lengths(&weights, TABLE_BITS);
                let mut syms: Vec<u32> = (0..n as u32).map(|i| i * 211 % 65_536).collect();
                syms.sort_unstable();
                let codes = canonical_codes(&lens);
                assert_eq!(
                    multi_table(&syms, &lens, &codes).unwrap(),
                    multi_table_slot_by_slot(&syms, &lens, &codes),
                    "{n} symbols, skew {skew}"
                );
            }
        }
    }

    #[test]
    fn empty_and_single_high_part() {
        assert!(round_trip::<HSplit, u8>(&[], 8).is_empty());
        assert!(decode::<u8>(&[0], 8, &mut []).is_err());
        assert!(matches!(
            decode::<u8>(&[], 8, &mut [0]),
            Err(FormatError::Truncated { .. })
        ));
        // One high part, the low bits varying: k byte, symbol set, low bits.
        let v: Vec<u16> = (0..1000).map(|i| 0x3f00 | (i % 256)).collect();
        let p = encode_split(&v, 16, 8).unwrap();
        assert!(p.len() <= 1 + 4 + 1000, "{}", p.len());
        let mut back = std::vec![0u16; v.len()];
        decode(&p, 16, &mut back).unwrap();
        assert_eq!(back, v);
        let mut long = p.clone();
        long.push(0xff);
        assert!(matches!(
            decode(&long, 16, &mut back),
            Err(FormatError::TrailingBytes { .. })
        ));
    }

    /// Short codes (three words a lookup) at every length up to a few windows a
    /// lane: each run's last rounds, the stores past a lookup's words (16-bit words
    /// store four at a time) and the word-by-word tail all end inside their own run,
    /// in 8-, 16- and 32-bit words.
    #[test]
    fn three_words_a_lookup_end_every_run_exactly() {
        let mut rng = Rng(11);
        for n in 0..=200usize {
            // Mostly one high part (a 1-bit code), now and then three others.
            let v: Vec<u32> = (0..n)
                .map(|_| {
                    let r = rng.next();
                    let high = if r.is_multiple_of(8) { 1 + (r >> 8) % 3 } else { 0 };
                    ((high << 4) | ((r >> 16) % 16)) as u32
                })
                .collect();
            let v8: Vec<u8> = v.iter().map(|&x| x as u8).collect();
            let v16: Vec<u16> = v.iter().map(|&x| x as u16).collect();
            for width in [6u8, 8] {
                let p = encode_split(&v8, width, 4).unwrap();
                let mut back = std::vec![0u8; n];
                decode(&p, width, &mut back).unwrap();
                assert_eq!(back, v8, "u8 width {width} n {n}");
            }
            let p = encode_split(&v16, 16, 4).unwrap();
            let mut back = std::vec![0xffffu16; n];
            decode(&p, 16, &mut back).unwrap();
            assert_eq!(back, v16, "u16 n {n}");
            // High parts of at most 16 bits: the same ones above 16 low bits.
            let v32: Vec<u32> = v.iter().map(|&x| (x >> 4) << 16 | (x & 15)).collect();
            let p = encode_split(&v32, 32, 16).unwrap();
            let mut back = std::vec![u32::MAX; n];
            decode(&p, 32, &mut back).unwrap();
            assert_eq!(back, v32, "u32 n {n}");
        }
    }

    /// BF16-like words: the split keeps the mantissa's low bits packed, and the
    /// lanes (each a quarter of the words, of different spread) finish unevenly.
    #[test]
    fn float_like_words_split_at_the_mantissa() {
        let mut rng = Rng(7);
        let v: Vec<u16> = (0..100_003)
            .map(|i| {
                let exp = geometric(1, 8, [0.5, 0.7, 0.9, 0.3][i * 4 / 100_003], i as u64)[0];
                let sign = (rng.next() & 1) as u16;
                sign << 15 | (120 - exp.min(120)) << 7 | (rng.next() & 0x7f) as u16
            })
            .collect();
        let counts = symbol_counts(&v, 16).unwrap();
        assert_eq!(best_split(&counts, 16), Some(7));
        let p = round_trip::<HSplit, _>(&v, 16);
        assert_eq!(p[0], 7);
    }

    /// A code of 13 bits is valid for `huffman` but not here.
    #[test]
    fn codes_over_12_bits_are_rejected() {
        let lens: Vec<u8> = (1..=13).chain([13]).collect();
        let syms: Vec<u32> = (0..14).collect();
        let mut w = BitWriter::default();
        write_symbol_set(&mut w, &syms);
        write_lengths(&mut w, &lens);
        let mut p = std::vec![0u8];
        p.extend(w.finish());
        p.extend([0, 0, 0, 0]);
        let mut out = [0u16; 4];
        assert!(matches!(decode(&p, 4, &mut out), Err(FormatError::Invalid { .. })));
    }

    #[test]
    fn low_bit_count_must_be_below_the_width() {
        let v = [1u8, 2, 3, 0];
        let mut p = encode_split(&v, 2, 1).unwrap();
        p[0] = 2;
        assert!(matches!(decode(&p, 2, &mut [0u8; 4]), Err(FormatError::Invalid { .. })));
        assert!(encode_split(&v, 2, 2).is_none());
    }

    /// A lane reads ahead into the next lane's bytes; moving the boundary between two
    /// streams must still be caught.
    #[test]
    fn moved_stream_boundaries_fail() {
        for width in [8u8, 12] {
            let v = geometric(4001, width, 0.97, u64::from(width));
            let p = encode_split(&v, width, 0).unwrap();
            let mut br = BitReader::new(&p[1..]);
            let syms = read_symbol_set(&mut br, width).unwrap();
            read_lengths(&mut br, syms.len()).unwrap();
            let mut out = std::vec![0u16; v.len()];
            for (what, q) in shared::moved_boundaries(&p, 1 + br.finish().unwrap(), LANES - 1) {
                assert!(decode(&q, width, &mut out).is_err(), "width {width}, {what}");
            }
        }
    }

    /// Widths 1 to 32 (and the container's), high parts of at most 16 bits: the
    /// rest is refused on both sides.
    #[test]
    fn bad_widths_and_splits() {
        assert!(encode(&[0u8], 0).is_none());
        assert!(encode(&[0u64], 33).is_none());
        assert!(encode(&[8u8], 3).is_none());
        assert!(encode(&[1u32 << 20], 20).is_none());
        assert!(encode_split(&[0u32], 32, 15).is_none());
        assert!(encode_split(&[0u32], 32, 16).is_some());
        for (width, bad) in [(0u8, true), (33, true), (17, false)] {
            let r = decode::<u64>(&[0], width, &mut [0]);
            assert_eq!(matches!(r, Err(FormatError::BadWidth { .. })), bad, "width {width}");
        }
        assert!(matches!(
            decode::<u16>(&[0], 17, &mut [0]),
            Err(FormatError::BadWidth { .. })
        ));
        assert!(matches!(
            decode::<u8>(&[0], 9, &mut [0]),
            Err(FormatError::BadWidth { .. })
        ));
        // A `k` that leaves 17 high bits.
        let v: Vec<u32> = (0..100).map(|i| i * 40_503 % (1 << 24)).collect();
        let mut p = encode_split(&v, 24, 8).unwrap();
        p[0] = 7;
        let mut out = std::vec![0u32; v.len()];
        assert!(matches!(decode(&p, 24, &mut out), Err(FormatError::Invalid { .. })));
    }

    /// FP32 words: sign and exponent (and a mantissa bit or two) coded, the rest of
    /// the mantissa packed, in one literal that rebuilds the words.
    #[test]
    fn fp32_words_split_below_their_exponent() {
        let mut rng = Rng(0x1234_5678);
        let v: Vec<u32> = (0..20_000)
            .map(|_| {
                // Small weights of either sign: a handful of exponents.
                let x = (rng.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                (x * 0.05).to_bits()
            })
            .collect();
        let p = encode(&v, 32).unwrap();
        let k = p[0];
        assert!((16..32).contains(&k), "k {k}");
        assert!(p.len() < v.len() * 4, "{} bytes", p.len());
        let mut back = std::vec![0u32; v.len()];
        decode(&p, 32, &mut back).unwrap();
        assert_eq!(back, v);
        // Decoded into 64-bit words too.
        let mut wide = std::vec![0u64; v.len()];
        decode(&p, 32, &mut wide).unwrap();
        assert!(wide.iter().zip(&v).all(|(&w, &x)| w == u64::from(x)));
    }
}
