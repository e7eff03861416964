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
//! 1. **Table**, a bit string read most significant bit first, zero-padded to a whole
//!    byte; `EG` (Exp-Golomb), `bits(n, v)` and `zigzag` are defined in `wire::tables`
//!    (`format/src/wire/tables.rs`), which both entropy coders share.
//!    - The present symbols, coded as a symbol set (see `wire::tables`, the same as
//!      `huffman`). If exactly one symbol is present, the table ends here: every word
//!      is that symbol, and nothing follows the table.
//!    - Otherwise (`S >= 2` symbols): `bits(4, scale_bits - 1)` (`scale_bits` 1..=16,
//!      `M = 2^scale_bits`), then the frequencies `f` of the first `S - 1` present
//!      symbols in increasing symbol order. With `len(v)` the bit length of `v`
//!      (`len(1) = 1`), `prev` starting at `len(M / S)` (integer division), each `f` is
//!      `EG(zigzag(len(f) - prev))` then
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

use alloc::boxed::Box;
use alloc::collections::BinaryHeap;
use alloc::vec;
use alloc::vec::Vec;
use core::cmp::{Ordering, Reverse};

use super::tables::{ceil_log2, census, start_decode, write_symbol_set, BitReader, BitWriter, Census};
use crate::error::{FormatError, Result};
use crate::stream::Word;

/// Interleaved states.
const LANES: usize = 4;
/// Lower bound of a normalized state; also the encoder's initial state.
const RANS_L: u32 = 1 << 16;
/// Largest `scale_bits` the format allows.
const MAX_SCALE: u32 = 16;
/// Entries of the decoder's slot tables: `2^MAX_SCALE`.
const SLOTS: usize = 1 << MAX_SCALE;
/// Largest `scale_bits` the encoder picks unless the alphabet needs more (keeps the
/// decoder's slot table at 2^15 entries).
const PREFERRED_MAX_SCALE: u32 = 15;

const WHAT: &str = "rans literal";

/// Encodes `symbols` (each below `2^width`, `width` 1..=16). Returns `None` for a
/// width outside 1..=16 or a symbol that does not fit `width`.
pub fn encode<W: Word>(symbols: &[W], width: u8) -> Option<Vec<u8>> {
    Some(Plan::new(symbols, width)?.encode(symbols, width))
}

/// What [`encode`] does before it codes a word: the symbols counted, the table
/// quantized at each scale and each scale's payload size estimated. A caller
/// that only needs rANS where it beats another encoding reads
/// [`Plan::estimated_len`] first and codes the words ([`Plan::encode`]) only where
/// that can win: an encoder search tries rANS on every leaf stream, and coding
/// them all was a third of a BF16 compression's time.
pub struct Plan {
    /// The whole payload where the stream is empty or holds one symbol.
    payload: Option<Vec<u8>>,
    /// The present symbols, in increasing order.
    syms: Vec<u32>,
    /// The scales to code with, best estimate first: estimated payload bytes,
    /// `scale_bits`, the quantized frequencies.
    cands: Vec<(f64, u32, Vec<u32>)>,
}

impl Plan {
    /// Counts `symbols` and estimates the payload at each scale. `None` where
    /// [`encode`] gives `None`.
    pub fn new<W: Word>(symbols: &[W], width: u8) -> Option<Plan> {
        Some(Plan::counted(&census(symbols, width)?, symbols.len()))
    }

    /// [`Plan::new`] given the census of the `len` symbols (`tables::census`).
    pub(super) fn counted(census: &Census, len: usize) -> Plan {
        let (syms, cs) = match census {
            Census::Payload(p) => {
                return Plan {
                    payload: Some(p.clone()),
                    syms: Vec::new(),
                    cands: Vec::new(),
                }
            }
            Census::Symbols(syms, cs) => (syms.clone(), cs),
        };
        let n = len as u64;
        let lo = ceil_log2(syms.len() as u64).max(1);
        let hi = if lo <= PREFERRED_MAX_SCALE {
            PREFERRED_MAX_SCALE
        } else {
            MAX_SCALE
        };
        let lanes = LANES.min(len);
        let mut cands: Vec<(f64, u32, Vec<u32>)> = Vec::new();
        // The table's symbol set is the same at every scale; its frequencies' bits
        // are counted, and the logarithms shared across the scales.
        let set_bits = symbol_set_bits(&syms);
        let mut ln_inv = LnInv::default();
        for scale in lo..=hi {
            let freqs = normalize_with(cs, n, scale, &mut ln_inv);
            let table_bits = set_bits + table_freq_bits(syms.len(), &freqs, scale);
            let data_bits: f64 = cs
                .iter()
                .zip(&freqs)
                .map(|(&c, &f)| c as f64 * (f64::from(scale) - ln(f64::from(f)) / LN_2))
                .sum();
            // rANS's own loss grows with 2^scale_bits / 2^16: about 0.005 bits a symbol at
            // scale 16, a quarter of that per bit less (measured).
            let precision_bits = n as f64 * 0.005 / f64::from(1u32 << (2 * (MAX_SCALE - scale)));
            // Table, states, data, and about one word lost to the final flush.
            let est = table_bits.div_ceil(8) as f64 + (4 * lanes) as f64 + (data_bits + precision_bits) / 8.0 + 2.0;
            cands.push((est, scale, freqs));
        }
        // The estimate is within a few bytes (and 0.01%): [`Plan::encode`] codes with
        // the best, and the second best if it is close, and keeps the smaller.
        cands.sort_by(|a, b| a.0.total_cmp(&b.0));
        let close = cands[0].0 * 1.0005 + 32.0;
        cands.truncate(2);
        cands.retain(|c| c.0 <= close);
        Plan {
            payload: None,
            syms,
            cands,
        }
    }

    /// The payload's length in bytes as estimated from the symbol counts: within
    /// a few bytes and 0.01% of what [`Plan::encode`] gives on the corpus's
    /// streams (exact for an empty or one-symbol stream).
    pub fn estimated_len(&self) -> f64 {
        match &self.payload {
            Some(p) => p.len() as f64,
            None => self.cands[0].0,
        }
    }

    /// Codes `symbols`, which must be those the plan was made from: the payload
    /// [`encode`] gives.
    pub fn encode<W: Word>(self, symbols: &[W], width: u8) -> Vec<u8> {
        if let Some(p) = self.payload {
            return p;
        }
        let syms = self.syms;
        self.cands
            .into_iter()
            .map(|(_, scale, freqs)| encode_with(symbols, &syms, &freqs, scale, width))
            .min_by_key(|p| p.len())
            .expect("a plan with symbols has a scale to code with")
    }
}

/// Encodes with a given quantized table (`syms` strictly increasing, `freqs` summing to
/// `2^scale`, at least two symbols).
fn encode_with<W: Word>(symbols: &[W], syms: &[u32], freqs: &[u32], scale: u32, width: u8) -> Vec<u8> {
    let mut w = BitWriter::default();
    write_table(&mut w, syms, freqs, scale);
    let mut out = w.finish();

    // The encoder step of each symbol value.
    let mut enc = vec![EncSym::default(); 1usize << width];
    let mut start = 0u32;
    for (&s, &f) in syms.iter().zip(freqs) {
        enc[s as usize] = EncSym::new(start, f, scale);
        start += f;
    }
    let mut states = [RANS_L; LANES];
    let mut words = Emitted::with_room(symbols.len());
    // From the last word to the first (word `i` in state `i mod 4`); whole
    // rounds with constant lane indices, so the states stay in registers.
    let full = symbols.len() / LANES * LANES;
    for (i, sym) in symbols.iter().enumerate().skip(full).rev() {
        put(&mut states[i % LANES], &mut words, &enc[sym.to_u64() as usize]);
    }
    for round in symbols[..full].chunks_exact(LANES).rev() {
        for l in (0..LANES).rev() {
            put(&mut states[l], &mut words, &enc[round[l].to_u64() as usize]);
        }
    }
    finish_stream(&mut out, &states, symbols.len(), words.words());
    out
}

/// One symbol's rANS encoder step, with the division by its frequency turned
/// into a multiplication: the step is `x = (x / f) * M + x mod f + start`,
/// which is `x + start + q * (M - f)` with `q = x / f`, and `q` is the high
/// half of `x * ceil(2^64 / f)` (exact for every 32-bit `x`: the reciprocal's
/// rounding adds less than `x / 2^64 < 1 / f` to `x / f`, which never carries
/// it past the next integer). A frequency of 1 has no 64-bit reciprocal; it
/// takes `2^64 - 1`, making `q = x - 1`, and one more `M - 1` in the bias
/// (`x + start + M - 1 + (x - 1)(M - 1) = x * M + start`), as in ryg_rans.
#[derive(Clone, Copy, Default)]
pub(super) struct EncSym {
    /// States at or above this renormalize first: `f << (32 - scale)`.
    x_max: u64,
    /// `ceil(2^64 / f)`, or `2^64 - 1` for `f = 1`.
    rcp: u64,
    /// `start`, or `start + M - 1` for `f = 1`.
    bias: u32,
    /// `M - f`.
    cmpl: u32,
}

impl EncSym {
    /// The step for a symbol of frequency `f` (at least 1) starting at slot
    /// `start` in a table of `2^scale` slots.
    pub(super) fn new(start: u32, f: u32, scale: u32) -> Self {
        let m = 1u32 << scale;
        let (rcp, bias) = if f == 1 {
            (u64::MAX, start + m - 1)
        } else {
            (u64::MAX / u64::from(f) + 1, start)
        };
        EncSym {
            x_max: u64::from(f) << (32 - scale),
            rcp,
            bias,
            cmpl: m - f,
        }
    }
}

/// The 16-bit words an encoder emits, in emission order. Room for one word a
/// step is made up front, so a step stores its word whether or not it
/// renormalizes and only counts it when it does: no branch on the data, which
/// mispredicted about as often as the coder emits.
pub(super) struct Emitted {
    buf: Vec<u16>,
    len: usize,
}

impl Emitted {
    /// Room for `steps` encoder steps (each emits at most one word).
    pub(super) fn with_room(steps: usize) -> Self {
        Emitted {
            buf: vec![0; steps + 1],
            len: 0,
        }
    }

    /// The words emitted so far.
    pub(super) fn words(&self) -> &[u16] {
        &self.buf[..self.len]
    }
}

/// One rANS encoder step: codes symbol `e` into state `x`, first emitting its
/// low 16 bits to `words` when it would overflow (the decoder's
/// renormalization, reversed). `words` must have room for this step.
#[inline(always)]
pub(super) fn put(x: &mut u32, words: &mut Emitted, e: &EncSym) {
    let renorm = u64::from(*x) >= e.x_max;
    words.buf[words.len] = *x as u16;
    words.len += usize::from(renorm);
    *x >>= u32::from(renorm) << 4;
    let q = ((u128::from(*x) * u128::from(e.rcp)) >> 64) as u32;
    *x = *x + e.bias + q * e.cmpl;
}

/// Appends the states of the `min(4, n)` lanes used by `n` symbols, then the
/// emitted words in the order the decoder reads them (the reverse of emission).
pub(super) fn finish_stream(out: &mut Vec<u8>, states: &[u32; LANES], n: usize, words: &[u16]) {
    let lanes = LANES.min(n);
    out.reserve(4 * lanes + 2 * words.len());
    for x in &states[..lanes] {
        out.extend_from_slice(&x.to_le_bytes());
    }
    for w in words.iter().rev() {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

/// Decodes `out.len()` symbols of `width` bits from a payload made by [`encode`].
pub fn decode<W: Word>(payload: &[u8], width: u8, out: &mut [W]) -> Result<()> {
    let Some(mut d) = Decoder::new(payload, width, out)? else {
        return Ok(());
    };
    let done = d.run(out, 0);
    d.finish(out, done)
}

/// One payload being decoded: its tables, states and word stream.
struct Decoder<'p, W> {
    slot_sym: Box<[W; SLOTS]>,
    slot_fb: Box<[u32; SLOTS]>,
    scale: u32,
    mask: u32,
    x: [u32; LANES],
    body: &'p [u8],
    pos: usize,
}

impl<'p, W: Word> Decoder<'p, W> {
    /// Reads the table and the states. `None` when `out` was already decoded (an
    /// empty stream or a single symbol).
    fn new(payload: &'p [u8], width: u8, out: &mut [W]) -> Result<Option<Self>> {
        let Some((syms, mut br)) = start_decode(payload, width, out, WHAT)? else {
            return Ok(None);
        };
        let (scale, freqs) = read_freqs(&mut br, syms.len())?;
        let table_end = br.finish()?;

        // By slot: the symbol, and `(slot - start) | freq << 16` of the symbol owning
        // it. Both tables have 2^16 entries (only the first 2^scale_bits are filled
        // and touched), so a slot cast to `u16` indexes them without a bounds check.
        let m = 1usize << scale;
        let mut slot_sym: Box<[W; SLOTS]> = vec![W::default(); SLOTS]
            .into_boxed_slice()
            .try_into()
            .map_err(|_| FormatError::Corrupt { what: WHAT })?;
        let mut slot_fb: Box<[u32; SLOTS]> = vec![0u32; SLOTS]
            .into_boxed_slice()
            .try_into()
            .map_err(|_| FormatError::Corrupt { what: WHAT })?;
        let mut start = 0usize;
        for (&s, &f) in syms.iter().zip(&freqs) {
            let f = f as usize;
            // `start + f <= 2^scale` (checked by `read_freqs`).
            let (Some(sd), Some(fd)) = (slot_sym.get_mut(start..start + f), slot_fb.get_mut(start..start + f)) else {
                return Err(FormatError::Corrupt {
                    what: "rans frequency table (does not sum to 2^scale_bits)",
                });
            };
            sd.fill(W::from_u64(u64::from(s)));
            // `f < 2^16`: at least two symbols share `2^scale <= 2^16` slots.
            for (b, e) in fd.iter_mut().enumerate() {
                *e = b as u32 | (f as u32) << 16;
            }
            start += f;
        }
        if start != m {
            return Err(FormatError::Corrupt {
                what: "rans frequency table (does not sum to 2^scale_bits)",
            });
        }

        let (x, body) = read_states(&payload[table_end..], out.len(), &STREAM_ERRORS)?;
        Ok(Some(Decoder {
            slot_sym,
            slot_fb,
            scale,
            mask: (m - 1) as u32,
            x,
            body,
            pos: 0,
        }))
    }

    /// The next 8 bytes of the word stream, if there are 8: enough for a quad.
    #[inline(always)]
    fn window(&self) -> Option<u64> {
        self.body
            .get(self.pos..)
            .and_then(|b| b.first_chunk::<8>())
            .map(|w| u64::from_le_bytes(*w))
    }

    /// The symbol of state `x`, and the state before renormalization.
    #[inline(always)]
    fn lookup(&self, x: u32) -> (W, u32) {
        // `mask < 2^16`: the slot fits a `u16`, so both lookups are unchecked.
        let slot = usize::from((x & self.mask) as u16);
        let s = self.slot_sym[slot];
        let e = self.slot_fb[slot];
        // Cannot overflow: f * (x >> scale) + slot - start < f * 2^(32 - scale) <= 2^32.
        let v = (e >> 16).wrapping_mul(x >> self.scale).wrapping_add(e & 0xffff);
        (s, v)
    }

    /// Decodes words `4k .. 4k + 4` (one per state) with the renormalization words
    /// taken from `win` (the next 8 bytes of the word stream): no bounds checks.
    #[inline(always)]
    fn quad(&mut self, quad: &mut [W], mut win: u64) {
        let mut used = 0usize;
        for (d, l) in quad.iter_mut().zip(0..LANES) {
            let (s, v) = self.lookup(self.x[l]);
            let need = v < RANS_L;
            let shift = u32::from(need) * 16;
            self.x[l] = (v << shift) | (win as u32 & ((1u32 << shift) - 1));
            win >>= shift;
            used += usize::from(need);
            *d = s;
        }
        self.pos += 2 * used;
    }

    /// Decodes one word with state `l`, reading its renormalization word (if any) at
    /// `pos`. Past the end of the word stream it reads zeros but still advances
    /// `pos`, so [`Self::finish`] reports the overrun (keeping this branch-free).
    #[inline(always)]
    fn step(&mut self, l: usize) -> W {
        let (s, v) = self.lookup(self.x[l]);
        let w = self
            .body
            .get(self.pos..)
            .and_then(|b| b.first_chunk::<2>())
            .map_or(0, |b| u32::from(u16::from_le_bytes(*b)));
        let need = v < RANS_L;
        self.x[l] = if need { v << 16 | w } else { v };
        self.pos += 2 * usize::from(need);
        s
    }

    /// Decodes `out[done..]` (`done` a multiple of 4); returns `out.len()`.
    fn run(&mut self, out: &mut [W], done: usize) -> usize {
        let rest = out.get_mut(done..).unwrap_or_default();
        let mut quads = rest.chunks_exact_mut(LANES);
        for q in &mut quads {
            match self.window() {
                Some(win) => self.quad(q, win),
                None => {
                    for (l, d) in q.iter_mut().enumerate() {
                        *d = self.step(l);
                    }
                }
            }
        }
        for (l, d) in quads.into_remainder().iter_mut().enumerate() {
            *d = self.step(l);
        }
        out.len()
    }

    /// After every word was decoded: the word stream must be used up exactly and
    /// every state back at `2^16`.
    fn finish(&self, out: &[W], done: usize) -> Result<()> {
        debug_assert_eq!(done, out.len());
        check_end(&self.x, self.pos, self.body, &STREAM_ERRORS)
    }
}

// ---------------------------------------------------------------------------------
// Frequency quantization.

/// `ln(1 + 1/f)` by `f`, computed once each: [`normalize_with`]'s marginal gains
/// and losses, which an encoder planning many tables (a `ctx` stream's contexts,
/// each at several scales) asks for over and over. The values are `libm::log1p`'s,
/// exactly, so a cached plan is the plan computed afresh.
#[derive(Default)]
pub(super) struct LnInv {
    /// `ln(1 + 1/f)` at index `f`, NaN where not computed yet (index 0 unused).
    v: Vec<f64>,
}

/// Largest `f` whose `ln(1 + 1/f)` is kept (`2^16`, the largest frequency in a
/// table of 16 scale bits); larger ones are computed each time.
const LN_INV_MAX: u32 = 1 << 16;

impl LnInv {
    /// `ln(1 + 1/f)` for `f >= 1`.
    #[inline]
    fn get(&mut self, f: u32) -> f64 {
        if f > LN_INV_MAX {
            return libm::log1p(1.0 / f64::from(f));
        }
        let i = f as usize;
        if i >= self.v.len() {
            self.v.resize((i + 1).next_power_of_two(), f64::NAN);
        }
        let x = self.v[i];
        if !x.is_nan() {
            return x;
        }
        let x = libm::log1p(1.0 / f64::from(f));
        self.v[i] = x;
        x
    }
}

/// [`normalize_with`] with logarithms of its own (for tests).
#[cfg(test)]
pub(super) fn normalize(counts: &[u64], n: u64, scale: u32) -> Vec<u32> {
    normalize_with(counts, n, scale, &mut LnInv::default())
}

/// Quantizes `counts` (all > 0, at least two, summing to `n`) to frequencies >= 1
/// summing to `2^scale` that minimize `sum c_i * -log2(f_i / 2^scale)`, taking the
/// logarithms from (and adding them to) `ln_inv`.
///
/// The cost is separable and convex in each `f_i`, so starting from rounded
/// proportional values, moving one unit at a time to the best marginal gain from the
/// cheapest marginal loss reaches the optimum. Each move takes the symbol with the
/// largest gain (or smallest loss), ties to the larger index: a function of the
/// current frequencies alone, so the moves can be found by scanning every symbol
/// ([`scan_moves`], when there are few) or with heaps ([`heap_moves`], when there
/// are many), and the two can take turns, with the same result.
pub(super) fn normalize_with(counts: &[u64], n: u64, scale: u32, ln_inv: &mut LnInv) -> Vec<u32> {
    // Rounding leaves the sum off by a few units at most for most tables; the
    // heaps only pay when many moves are due (many tiny counts raised to 1).
    normalize_scanning(counts, n, scale, ln_inv, SCAN_MOVES)
}

/// [`normalize_with`], scanning for at most `scan_budget` moves.
fn normalize_scanning(counts: &[u64], n: u64, scale: u32, ln_inv: &mut LnInv, scan_budget: usize) -> Vec<u32> {
    let m = 1u64 << scale;
    let mut f = rounded(counts, n, m);
    let mut sum: u64 = f.iter().map(|&v| u64::from(v)).sum();
    let exchanges = exchange_limit(counts);
    if sum.abs_diff(m) > scan_budget as u64 {
        // Many units to take back or hand out: a heap for those, then the
        // exchanges (rarely more than a few) scanned like the rest, which is
        // cheaper than building two more heaps for them.
        heap_moves(counts, m, &mut f, ln_inv, 0);
        sum = f.iter().map(|&v| u64::from(v)).sum();
    }
    if let Some(exchanged) = scan_moves(counts, m, &mut f, sum, ln_inv, exchanges, scan_budget) {
        heap_moves(counts, m, &mut f, ln_inv, exchanges - exchanged);
    }
    debug_assert_eq!(f.iter().map(|&v| u64::from(v)).sum::<u64>(), m);
    f
}

/// Each count's share of `m`, rounded, at least 1: where [`normalize_with`] starts.
fn rounded(counts: &[u64], n: u64, m: u64) -> Vec<u32> {
    // Rounded c * m / n; in u64 while that cannot overflow (counts below 2^40),
    // as u128 division is a slow library call.
    let round = |c: u64| {
        if c < 1 << 40 && n < 1 << 40 {
            (c * m * 2 + n) / (2 * n)
        } else {
            ((u128::from(c) * u128::from(m) * 2 + u128::from(n)) / (2 * u128::from(n))) as u64
        }
    };
    counts.iter().map(|&c| round(c).max(1) as u32).collect()
}

/// Most exchanges [`normalize_with`] makes (a handful at most after rounding).
fn exchange_limit(counts: &[u64]) -> usize {
    4 * counts.len() + 64
}

/// Moves [`normalize_with`] finds by scanning before it turns to heaps.
const SCAN_MOVES: usize = 24;

/// Gain (in nats) of `f -> f + 1` for a symbol of count `c`, `c ln((f + 1) / f)`,
/// or minus infinity where `f` cannot grow (log1p keeps it exact for large `f`).
#[inline]
fn gain(c: u64, f: u32, m: u64, ln_inv: &mut LnInv) -> f64 {
    if u64::from(f) < m {
        c as f64 * ln_inv.get(f)
    } else {
        f64::NEG_INFINITY
    }
}

/// Loss (in nats) of `f -> f - 1`, `c ln(f / (f - 1))`, or infinity where `f`
/// cannot shrink.
#[inline]
fn loss(c: u64, f: u32, ln_inv: &mut LnInv) -> f64 {
    if f > 1 {
        c as f64 * ln_inv.get(f - 1)
    } else {
        f64::INFINITY
    }
}

/// [`normalize_with`]'s moves by scanning every symbol's gain and loss, for at
/// most `budget` moves (at least `|sum - m|`): `None` when `f` is optimal, else
/// the exchanges made so far (the rest is left to [`heap_moves`]).
fn scan_moves(
    counts: &[u64],
    m: u64,
    f: &mut [u32],
    mut sum: u64,
    ln_inv: &mut LnInv,
    exchanges: usize,
    budget: usize,
) -> Option<usize> {
    let mut gains: Vec<f64> = counts.iter().zip(&*f).map(|(&c, &fi)| gain(c, fi, m, ln_inv)).collect();
    let mut losses: Vec<f64> = counts.iter().zip(&*f).map(|(&c, &fi)| loss(c, fi, ln_inv)).collect();
    // The largest gain and the smallest loss, ties to the larger index (as the
    // heaps order them); `None` where no symbol can move.
    let top_gain = |g: &[f64]| {
        let mut best: Option<(f64, usize)> = None;
        for (i, &v) in g.iter().enumerate() {
            if v != f64::NEG_INFINITY && best.is_none_or(|(b, _)| v >= b) {
                best = Some((v, i));
            }
        }
        best
    };
    let top_loss = |l: &[f64]| {
        let mut best: Option<(f64, usize)> = None;
        for (i, &v) in l.iter().enumerate() {
            if v != f64::INFINITY && best.is_none_or(|(b, _)| v <= b) {
                best = Some((v, i));
            }
        }
        best
    };
    let mut update = |i: usize, f: &[u32], gains: &mut [f64], losses: &mut [f64]| {
        gains[i] = gain(counts[i], f[i], m, ln_inv);
        losses[i] = loss(counts[i], f[i], ln_inv);
    };
    let mut moves = 0;
    while sum > m {
        let Some((_, i)) = top_loss(&losses) else { break };
        f[i] -= 1;
        sum -= 1;
        update(i, f, &mut gains, &mut losses);
        moves += 1;
    }
    while sum < m {
        let Some((_, i)) = top_gain(&gains) else { break };
        f[i] += 1;
        sum += 1;
        update(i, f, &mut gains, &mut losses);
        moves += 1;
    }
    for done in 0..exchanges {
        let (Some((g, i)), Some((l, j))) = (top_gain(&gains), top_loss(&losses)) else {
            return None;
        };
        if i == j || g <= l * (1.0 + 1e-12) {
            return None;
        }
        if moves >= budget {
            return Some(done);
        }
        f[i] += 1;
        f[j] -= 1;
        update(i, f, &mut gains, &mut losses);
        update(j, f, &mut gains, &mut losses);
        moves += 1;
    }
    None
}

/// [`normalize_with`]'s moves from `f` with a max-heap of gains and a min-heap of
/// losses, making at most `exchanges` exchanges.
fn heap_moves(counts: &[u64], m: u64, f: &mut [u32], ln_inv: &mut LnInv, exchanges: usize) {
    let mut sum: u64 = f.iter().map(|&v| u64::from(v)).sum();
    // Each heap is built (in one heapify, not pushed one by one: either way a
    // max-heap of totally ordered entries pops the same sequence) when first
    // needed, from the frequencies then: the losses' while units are taken
    // away, the gains' while units are handed out, both for the exchanges.
    let gains = |f: &[u32], ln_inv: &mut LnInv| -> BinaryHeap<(Key, u32, u32)> {
        f.iter()
            .enumerate()
            .filter(|&(_, &fi)| u64::from(fi) < m)
            .map(|(i, &fi)| (Key(gain(counts[i], fi, m, ln_inv)), i as u32, fi))
            .collect::<Vec<_>>()
            .into()
    };
    let losses = |f: &[u32], ln_inv: &mut LnInv| -> BinaryHeap<(Reverse<Key>, u32, u32)> {
        f.iter()
            .enumerate()
            .filter(|&(_, &fi)| fi > 1)
            .map(|(i, &fi)| (Reverse(Key(loss(counts[i], fi, ln_inv))), i as u32, fi))
            .collect::<Vec<_>>()
            .into()
    };
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
    if sum > m {
        let mut dec = losses(f, ln_inv);
        while sum > m {
            let Some((_, i)) = top_dec(&mut dec, f) else { break };
            f[i] -= 1;
            sum -= 1;
            if f[i] > 1 {
                dec.push((Reverse(Key(loss(counts[i], f[i], ln_inv))), i as u32, f[i]));
            }
        }
    }
    if sum < m {
        let mut inc = gains(f, ln_inv);
        while sum < m {
            let Some((_, i)) = top_inc(&mut inc, f) else { break };
            f[i] += 1;
            sum += 1;
            if u64::from(f[i]) < m {
                inc.push((Key(gain(counts[i], f[i], m, ln_inv)), i as u32, f[i]));
            }
        }
    }
    if exchanges == 0 {
        return;
    }
    let (mut inc, mut dec) = (gains(f, ln_inv), losses(f, ln_inv));
    let mut push = |i: usize, fi: u32, inc: &mut BinaryHeap<(Key, u32, u32)>, dec: &mut BinaryHeap<_>| {
        if u64::from(fi) < m {
            inc.push((Key(gain(counts[i], fi, m, ln_inv)), i as u32, fi));
        }
        if fi > 1 {
            dec.push((Reverse(Key(loss(counts[i], fi, ln_inv))), i as u32, fi));
        }
    };
    // Exchange units while it pays.
    for _ in 0..exchanges {
        let (Some((g, i)), Some((l, j))) = (top_inc(&mut inc, f), top_dec(&mut dec, f)) else {
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

/// Natural logarithm of a positive, finite `x`.
pub(super) fn ln(x: f64) -> f64 {
    libm::log(x)
}

/// Bit length of `v` (`bitlen(0) = 0`).
fn bitlen(v: u64) -> u32 {
    64 - v.leading_zeros()
}

// ---------------------------------------------------------------------------------
// Table.

pub(super) fn write_table(w: &mut BitWriter, syms: &[u32], freqs: &[u32], scale: u32) {
    write_symbol_set(w, syms);
    w.put(scale - 1, 4);
    let mut prev = bitlen((1u64 << scale) / syms.len() as u64);
    for &f in &freqs[..freqs.len() - 1] {
        let b = bitlen(u64::from(f));
        w.put_delta(i64::from(b) - i64::from(prev));
        w.put(f, b - 1);
        prev = b;
    }
}

/// Bits [`write_table`] writes for the symbol set `syms` (the same at every scale).
pub(super) fn symbol_set_bits(syms: &[u32]) -> usize {
    let mut w = BitWriter::default();
    write_symbol_set(&mut w, syms);
    w.bit_len()
}

/// Bits [`write_table`] writes after the symbol set for `freqs` (of `syms_len`
/// symbols, at least two) at `scale`: counted, not written, for an encoder pricing
/// a table at each of several scales.
pub(super) fn table_freq_bits(syms_len: usize, freqs: &[u32], scale: u32) -> usize {
    // EG(v) takes 2 floor(log2(v + 1)) + 1 bits.
    let eg_len = |v: u64| 2 * (63 - (v + 1).leading_zeros()) as usize + 1;
    let mut bits = 4;
    let mut prev = bitlen((1u64 << scale) / syms_len as u64);
    for &f in &freqs[..freqs.len() - 1] {
        let b = bitlen(u64::from(f));
        bits += eg_len(super::tables::zigzag(i64::from(b) - i64::from(prev))) + (b - 1) as usize;
        prev = b;
    }
    bits
}

/// What [`read_states`] and [`check_end`] report, in each coder's words: a
/// payload that ends before the states, a state below 2^16, a word stream of
/// odd length, one read past its end, states not back at 2^16, trailing words.
pub(super) struct StreamErrors {
    pub(super) states: &'static str,
    pub(super) low_state: &'static str,
    pub(super) odd_stream: &'static str,
    pub(super) short_stream: &'static str,
    pub(super) final_state: &'static str,
    pub(super) literal: &'static str,
}
const STREAM_ERRORS: StreamErrors = StreamErrors {
    states: "rans states",
    low_state: "rans state (below 2^16)",
    odd_stream: "rans word stream (odd length)",
    short_stream: "rans word stream",
    final_state: "rans literal (final state mismatch)",
    literal: WHAT,
};

pub(super) fn read_states<'a>(rest: &'a [u8], n: usize, what: &StreamErrors) -> Result<([u32; LANES], &'a [u8])> {
    let lanes = LANES.min(n);
    if rest.len() < 4 * lanes {
        return Err(FormatError::Truncated { what: what.states });
    }
    let mut x = [RANS_L; LANES];
    for (l, b) in rest[..4 * lanes].chunks_exact(4).enumerate() {
        x[l] = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if x[l] < RANS_L {
            return Err(FormatError::Corrupt { what: what.low_state });
        }
    }
    let body = &rest[4 * lanes..];
    if body.len() & 1 != 0 {
        return Err(FormatError::Corrupt { what: what.odd_stream });
    }
    Ok((x, body))
}

/// After every word was decoded: the word stream (`body`, read up to `pos`)
/// must be used up exactly and every state back at 2^16.
pub(super) fn check_end(x: &[u32; LANES], pos: usize, body: &[u8], what: &StreamErrors) -> Result<()> {
    if pos > body.len() {
        return Err(FormatError::Truncated {
            what: what.short_stream,
        });
    }
    if x.iter().any(|&s| s != RANS_L) {
        return Err(FormatError::Corrupt { what: what.final_state });
    }
    if pos < body.len() {
        return Err(FormatError::TrailingBytes {
            what: what.literal,
            count: (body.len() - pos) as u64,
        });
    }
    Ok(())
}

/// Reads `scale_bits` and the frequencies of `nsym >= 2` symbols.
pub(super) fn read_freqs(br: &mut BitReader<'_>, nsym: usize) -> Result<(u32, Vec<u32>)> {
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
        let b = prev + br.delta("rans frequency")?;
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

#[cfg(test)]
mod tests {
    use super::super::tables::testing::coder_tests;
    use super::*;

    coder_tests!(Rans, "rans", read_freqs, rare: 40, tables: [400, 2000], data: 1.002, small: (1.0, 48.0));

    /// `Plan::estimated_len` is within 0.05% and 16 bytes of the payload
    /// `Plan::encode` gives (the encoder's search skips coding rANS on that
    /// estimate, with a margin of 0.1% and 64 bytes), on streams from one symbol to
    /// near-uniform 16-bit words, short and long; and the plan codes what
    /// `encode` codes.
    #[test]
    fn plans_estimate_their_payloads_closely() {
        let mut rng = super::super::tables::testing::Rng(0x5DEE_CE66);
        let mut worst = 0.0f64;
        for (n, width, skew) in [
            (1usize, 8u8, 1u32),
            (5, 8, 2),
            (700, 3, 1),
            (5_000, 8, 1),
            (5_000, 8, 3),
            (40_000, 7, 1),
            (40_000, 8, 4),
            (100_000, 9, 2),
            (100_000, 13, 3),
            (200_000, 16, 1),
            (200_000, 16, 5),
            (300_000, 4, 6),
        ] {
            let max = 1u64 << width;
            // The minimum of `skew` draws: skewed towards 0 as exponents are.
            let v: Vec<u16> = (0..n)
                .map(|_| (0..skew).map(|_| rng.next() % max).min().unwrap() as u16)
                .collect();
            let plan = Plan::new(&v, width).unwrap();
            let est = plan.estimated_len();
            let payload = plan.encode(&v, width);
            assert_eq!(payload, encode(&v, width).unwrap(), "n {n} width {width}");
            let err = (est - payload.len() as f64).abs();
            assert!(
                err <= payload.len() as f64 * 0.0005 + 16.0,
                "n {n} width {width} skew {skew}: estimated {est}, coded {}",
                payload.len()
            );
            worst = worst.max(err);
        }
        // The bound is not vacuous: estimates are not exact.
        assert!(worst > 0.0);
    }

    /// The reciprocal step is the division step, `x = (x / f) * M + x mod f +
    /// start`, for every frequency of every scale up to 16, at the states
    /// where a rounding error would show: both ends of the range the step sees
    /// (from `(f << (32 - scale)) >> 16` after a renormalization to just below
    /// `f << (32 - scale)`), around multiples of `f`, and random ones.
    #[test]
    fn reciprocal_step_is_the_division_step() {
        let mut rng = super::super::tables::testing::Rng(11);
        for scale in 1..=MAX_SCALE {
            let m = 1u32 << scale;
            let fs: Vec<u32> = if scale >= 12 {
                // Every frequency at the largest scales is too many; take the
                // small, the large and a random sample.
                (1..64)
                    .chain(m - 64..m)
                    .chain((0..2000).map(|_| 1 + (rng.next() % u64::from(m - 1)) as u32))
                    .collect()
            } else {
                (1..m).collect()
            };
            for f in fs {
                let start = m - f;
                let e = EncSym::new(start, f, scale);
                // States from the smallest a renormalization leaves to just
                // below the threshold that would renormalize.
                let top = (u64::from(f) << (32 - scale)) - 1;
                let lo = ((top + 1) >> 16).max(1);
                let fq = u64::from(f);
                let mut xs = vec![lo, lo + 1, top, top - 1, u64::from(RANS_L)];
                for _ in 0..16 {
                    let q = lo / fq + rng.next() % (top / fq - lo / fq + 1);
                    xs.extend([q * fq, q * fq + fq - 1]);
                    xs.push(lo + rng.next() % (top - lo + 1));
                }
                for x in xs.into_iter().filter(|&x| (lo..=top).contains(&x)) {
                    let x = x as u32;
                    let want = (x / f) * m + x % f + start;
                    let mut got = x;
                    let mut words = Emitted::with_room(1);
                    put(&mut got, &mut words, &e);
                    assert!(words.words().is_empty(), "no renormalization below x_max");
                    assert_eq!(got, want, "x {x} f {f} scale {scale}");
                }
            }
        }
    }

    /// The counted table bits are the written ones, and a shared logarithm cache
    /// changes no frequency, over many skewed tables and scales.
    #[test]
    fn counted_tables_and_cached_logarithms_match() {
        let mut rng = super::super::tables::testing::Rng(7);
        let mut cache = LnInv::default();
        for _ in 0..300 {
            let nsym = 2 + (rng.next() % 300) as usize;
            let counts: Vec<u64> = (0..nsym)
                .map(|i| 1 + rng.next() % (1 + 50_000 / (1 + i as u64)))
                .collect();
            let syms: Vec<u32> = (0..nsym as u32).map(|i| i * 3).collect();
            let n = counts.iter().sum();
            let lo = super::super::tables::ceil_log2(nsym as u64).max(1);
            for scale in lo..=16 {
                let f = normalize(&counts, n, scale);
                assert_eq!(normalize_with(&counts, n, scale, &mut cache), f, "scale {scale}");
                let mut set = BitWriter::default();
                write_symbol_set(&mut set, &syms);
                let mut w = BitWriter::default();
                write_table(&mut w, &syms, &f, scale);
                assert_eq!(
                    set.bit_len() + table_freq_bits(nsym, &f, scale),
                    w.bit_len(),
                    "scale {scale}"
                );
            }
        }
    }

    /// Scanning for the first moves and heaps for the rest choose the same
    /// frequencies as heaps alone, whenever the scans hand over (before the first
    /// move, after a few, never), on skewed tables, tables full of ties, and
    /// tables whose rounding is far off.
    #[test]
    fn scans_and_heaps_choose_the_same_frequencies() {
        let mut rng = super::super::tables::testing::Rng(11);
        for round in 0..1500 {
            let nsym = 2 + (rng.next() % 400) as usize;
            let counts: Vec<u64> = match round % 3 {
                0 => (0..nsym)
                    .map(|i| 1 + rng.next() % (1 + 50_000 / (1 + i as u64)))
                    .collect(),
                1 => (0..nsym).map(|_| 1 + rng.next() % 4 * 25).collect(),
                _ => (0..nsym)
                    .map(|i| {
                        if i % 17 == 0 {
                            1 + rng.next() % 100_000
                        } else {
                            1 + rng.next() % 3
                        }
                    })
                    .collect(),
            };
            let n: u64 = counts.iter().sum();
            let lo = super::super::tables::ceil_log2(nsym as u64).max(1);
            let scale = lo + (rng.next() % u64::from(17 - lo)) as u32;
            let heaps = normalize_scanning(&counts, n, scale, &mut LnInv::default(), 0);
            for budget in [1, 2, 5, SCAN_MOVES, usize::MAX] {
                let f = normalize_scanning(&counts, n, scale, &mut LnInv::default(), budget);
                assert_eq!(f, heaps, "round {round}, scale {scale}, budget {budget}");
            }
        }
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
}
