//! `ctx`: context-coded words. Each `b`-bit word (`b` 2..=16) is split into a high
//! part `H` (its top `k` bits, `1 <= k < b`) and a low part `L` (its low `b - k`
//! bits). `H` is coded with one table; `L` with the table of its context `H`: either
//! the context's own table, or a fallback table shared by every context without one.
//! Both are static rANS tables (the `rans` encoding's table format) driving four
//! interleaved rANS states, as in [`super::rans`].
//!
//! Order-0 coding of whole words has the same entropy (`H(X) = H(H) + H(L | H)`), but
//! its table lists every distinct word; here the model costs one small table per
//! context that pays for itself, so a float's sign and exponent with the top bits of
//! its mantissa (`Merge.fields[1+e+t, m-t]`, first field `ctx` with `k = 1 + e`), or a
//! whole FP8 byte, is coded close to its joint entropy with a table of a few hundred
//! bytes.
//!
//! # Payload
//!
//! An empty stream (`count = 0`) has an empty payload. Otherwise:
//!
//! 1. `k: u8`, `1 <= k < b`; `lb = b - k`.
//! 2. **Tables**, one bit string read most significant bit first, zero-padded to a
//!    whole byte (`EG`, `bits` and the symbol set as in `wire::tables`). A *table* over
//!    `w`-bit symbols is the `rans` table: the present symbols as a symbol set of width
//!    `w`; if exactly one symbol is present, nothing more (the table has `scale_bits =
//!    0`, `M = 1`, and that symbol has frequency 1); otherwise `bits(4, scale_bits - 1)`
//!    and the frequencies, exactly as in `format/src/wire/rans.rs` (module docs).
//!    - The `H` table (`w = k`). Its present symbols, in increasing order, are the
//!      contexts.
//!    - One bit per context, in increasing order: `1` = the context has its own
//!      table, `0` = it uses the fallback table.
//!    - If any bit was `0`: the fallback table (`w = lb`).
//!    - The own tables (`w = lb`) of the contexts whose bit was `1`, in increasing
//!      order of context.
//!
//!    The sum of `2^scale_bits` over all tables read (the `H` table, the fallback and
//!    the own tables, a one-symbol table counting 1) MUST NOT exceed `2^18`
//!    ([`MAX_SLOTS`]): it bounds the decoder's tables at 2 MiB.
//! 3. **States**: `min(4, count)` little-endian `u32`s, each in `[2^16, 2^32)`.
//! 4. **Words**: little-endian `u16`s up to the end of the payload (even length).
//!
//! Decoding word `i` (for `i` in `0..count`) with state `x = x_{i mod 4}`: one rANS
//! step with the `H` table gives `h`, then one with the table of context `h` gives
//! `l`; the word is `h << lb | l`. A rANS step with a table of `scale_bits = s`,
//! `M = 2^s`: `slot = x mod M`; the symbol owning `slot` (with frequency `f` and
//! start `start`) is the result; `x = f * (x >> s) + slot - start`; if `x < 2^16`,
//! then `x = (x << 16) | next word`. (With a one-symbol table the step returns that
//! symbol and leaves `x` unchanged.) After the last word every state must be exactly
//! `2^16` and every word must have been read.
//!
//! The encoder runs from the last word to the first, coding `l` then `h` (the
//! reverse of the decoder) with the `rans` encoder's step; emitted words are stored in
//! reverse order of emission.

use alloc::vec;
use alloc::vec::Vec;

use super::rans::{
    check_end, finish_stream, ln, normalize_with, put, read_freqs, read_states, symbol_set_bits, table_freq_bits,
    write_table, Emitted, EncSym, LnInv, StreamErrors,
};
use super::tables::{ceil_log2, read_symbol_set, write_symbol_set, BitReader, BitWriter};
use super::MAX_ENTROPY_WIDTH;
use crate::error::{FormatError, Result};
use crate::stream::Word;

/// Interleaved states.
const LANES: usize = 4;
/// Lower bound of a normalized state; also the encoder's initial state.
const RANS_L: u32 = 1 << 16;
/// Most table slots (summed over all tables) a payload may declare.
pub const MAX_SLOTS: u64 = 1 << 18;
/// Largest `scale_bits` the encoder gives a context's own table.
const CTX_MAX_SCALE: u32 = 12;
/// Largest `scale_bits` the encoder gives the `H` and fallback tables (unless the
/// alphabet needs more).
const MAIN_MAX_SCALE: u32 = 15;

const WHAT: &str = "ctx literal";
/// How the shared rANS framing names this coder's errors.
const STREAM_ERRORS: StreamErrors = StreamErrors {
    states: "ctx states",
    low_state: "ctx state (below 2^16)",
    odd_stream: "ctx word stream (odd length)",
    short_stream: "ctx word stream",
    final_state: "ctx literal (final state mismatch)",
    literal: WHAT,
};
const LN_2: f64 = core::f64::consts::LN_2;

/// A static rANS table: symbols in increasing order, frequencies summing to
/// `2^scale` (a one-symbol table has `scale = 0` and frequency 1).
#[derive(Clone, Debug)]
pub(super) struct Table {
    pub(super) syms: Vec<u32>,
    pub(super) freqs: Vec<u32>,
    pub(super) scale: u32,
}

impl Table {
    pub(super) fn write(&self, w: &mut BitWriter) {
        if self.syms.len() == 1 {
            write_symbol_set(w, &self.syms);
        } else {
            write_table(w, &self.syms, &self.freqs, self.scale);
        }
    }

    pub(super) fn read(br: &mut BitReader<'_>, width: u8) -> Result<Table> {
        let syms = read_symbol_set(br, width)?;
        if syms.len() == 1 {
            return Ok(Table {
                syms,
                freqs: vec![1],
                scale: 0,
            });
        }
        let (scale, freqs) = read_freqs(br, syms.len())?;
        Ok(Table { syms, freqs, scale })
    }

    pub(super) fn slots(&self) -> u64 {
        1u64 << self.scale
    }

    pub(super) fn bits(&self) -> usize {
        let mut w = BitWriter::default();
        self.write(&mut w);
        w.bit_len()
    }

    /// Bits to code `counts` (by symbol, aligned with `syms`) with this table.
    fn data_bits(&self, counts: &[u64]) -> f64 {
        if self.scale == 0 {
            return 0.0;
        }
        counts
            .iter()
            .zip(&self.freqs)
            .map(|(&c, &f)| c as f64 * (f64::from(self.scale) - ln(f64::from(f)) / LN_2))
            .sum()
    }
}

/// The table for symbols `syms` (increasing, non-empty) with `counts` that
/// minimizes its own bits plus the data's, `scale_bits` up to `max_scale` (or the
/// alphabet's need). Returns the table and that cost in bits.
fn fit(syms: Vec<u32>, counts: &[u64], max_scale: u32, ln_inv: &mut LnInv) -> (Table, f64) {
    fit_scales(syms, counts, max_scale, ln_inv, true)
}

/// [`fit`], trying every scale unless `stop_early`.
fn fit_scales(syms: Vec<u32>, counts: &[u64], max_scale: u32, ln_inv: &mut LnInv, stop_early: bool) -> (Table, f64) {
    if syms.len() == 1 {
        let t = Table {
            syms,
            freqs: vec![1],
            scale: 0,
        };
        let b = t.bits() as f64;
        return (t, b);
    }
    let n: u64 = counts.iter().sum();
    let lo = ceil_log2(syms.len() as u64).max(1);
    let hi = max_scale.max(lo);
    let mut best: Option<(Table, f64)> = None;
    // The table's bits: its symbol set (the same at every scale), then its
    // frequencies (counted: `write_table` writes the same).
    let set_bits = symbol_set_bits(&syms);
    // The data's entropy: no table codes them in fewer bits.
    let entropy: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| c as f64 * ln(n as f64 / c as f64) / LN_2)
        .sum();
    for scale in lo..=hi {
        let t = Table {
            freqs: normalize_with(counts, n, scale, ln_inv),
            syms: Vec::new(),
            scale,
        };
        let table_bits = set_bits + table_freq_bits(syms.len(), &t.freqs, scale);
        // rANS's own loss, as in `rans::encode`.
        let precision = n as f64 * 0.005 / f64::from(1u32 << (2 * (16 - scale)));
        let cost = table_bits as f64 + t.data_bits(counts) + precision;
        if best.as_ref().is_none_or(|b| cost < b.1) {
            best = Some((t, cost));
        }
        // Larger scales only pay when the data is big against the table.
        if scale > lo + 2 && n < (1u64 << scale) {
            break;
        }
        // Over the scales a table's bits grow (about a bit per frequency a
        // scale) while the data's fall towards their entropy: once this scale's
        // table alone costs at least the best cost so far less the entropy, no
        // larger scale's (no smaller) can do better. Trying every scale (a
        // table normalized at each, up to 12 or 15, for every context of every
        // estimate) was 12% of one-thread compression of the corpus (`perf record`).
        if stop_early && best.as_ref().is_some_and(|b| table_bits as f64 >= b.1 - entropy) {
            break;
        }
    }
    let (mut t, cost) = best.expect("at least one scale");
    t.syms = syms;
    (t, cost)
}

/// Bits to code `counts` (symbol, count) under ideal probabilities `pool / total`;
/// infinite if a symbol is missing from the pool.
fn cross_bits(counts: &[(u32, u64)], pool: &[u64], total: u64) -> f64 {
    let mut bits = 0.0;
    for &(s, c) in counts {
        let p = pool[s as usize];
        if p == 0 {
            return f64::INFINITY;
        }
        bits += c as f64 * ln(total as f64 / p as f64) / LN_2;
    }
    bits
}

/// How a stream will be coded: the tables and which context uses which.
struct Plan {
    lb: u8,
    h: Table,
    /// Own table of each context (by position among the `H` symbols), or `None`.
    own: Vec<Option<Table>>,
    fallback: Option<Table>,
    /// Estimated payload bytes.
    estimate: f64,
}

/// Plans the tables for words with joint `counts` (`2^width` entries) split at `k`.
fn plan(counts: &[u64], n: u64, width: u8, k: u8) -> Plan {
    let lb = width - k;
    let lsize = 1usize << lb;
    let (hsyms, hcounts): (Vec<u32>, Vec<u64>) = counts
        .chunks_exact(lsize)
        .enumerate()
        .map(|(h, c)| (h as u32, c.iter().sum::<u64>()))
        .filter(|&(_, c)| c > 0)
        .unzip();
    // One cache of logarithms for every table planned here.
    let mut ln_inv = LnInv::default();
    let (h, h_bits) = fit(hsyms.clone(), &hcounts, MAIN_MAX_SCALE, &mut ln_inv);
    // Each context's present low parts and their counts.
    let ctx: Vec<Vec<(u32, u64)>> = hsyms
        .iter()
        .map(|&hs| {
            let row = &counts[hs as usize * lsize..(hs as usize + 1) * lsize];
            row.iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(l, &c)| (l as u32, c))
                .collect()
        })
        .collect();
    let tables = plan_contexts(&ctx, lsize, h.slots(), &mut ln_inv);
    let table_bits = h.bits() + tables.table_bits;
    let data_bits = h_bits - h.bits() as f64 + tables.data_bits;
    // Estimate: tables, data, states, flush.
    let estimate = 1.0 + table_bits.div_ceil(8) as f64 + (4 * LANES.min(n as usize)) as f64 + data_bits / 8.0 + 2.0;
    Plan {
        lb,
        h,
        own: tables.own,
        fallback: tables.fallback,
        estimate,
    }
}

/// The tables of symbols coded under contexts: each context's own table, or the
/// fallback table shared by the contexts whose own table does not pay.
pub(super) struct ContextTables {
    /// Own table of each context, or `None` (the context uses the fallback).
    pub(super) own: Vec<Option<Table>>,
    /// The shared table, present when any context has no own table.
    pub(super) fallback: Option<Table>,
    /// Bits of the per-context flags and of every table.
    pub(super) table_bits: usize,
    /// Bits of the symbols coded with these tables.
    pub(super) data_bits: f64,
}

/// Plans the tables for contexts `ctx` (each non-empty: its present symbols, below
/// `lsize` and in increasing order, with their counts): a context gets its own table where that costs fewer
/// bits than coding it with the pooled fallback, and the slots of all tables plus
/// `other_slots` stay within [`MAX_SLOTS`].
pub(super) fn plan_contexts(
    ctx: &[Vec<(u32, u64)>],
    lsize: usize,
    other_slots: u64,
    ln_inv: &mut LnInv,
) -> ContextTables {
    let own_fit: Vec<(Table, f64)> = ctx
        .iter()
        .map(|c| {
            let (s, cs): (Vec<u32>, Vec<u64>) = c.iter().copied().unzip();
            fit(s, &cs, CTX_MAX_SCALE, ln_inv)
        })
        .collect();
    // Start with every context on the fallback; move those whose own table pays.
    let mut shared = vec![true; ctx.len()];
    let mut pool = vec![0u64; lsize];
    for _ in 0..4 {
        pool.fill(0);
        for (c, _) in ctx.iter().zip(&shared).filter(|(_, &s)| s) {
            for &(l, n) in c {
                pool[l as usize] += n;
            }
        }
        let total: u64 = pool.iter().sum();
        if total == 0 {
            break;
        }
        let next: Vec<bool> = ctx
            .iter()
            .zip(&own_fit)
            .map(|(c, (_, own))| cross_bits(c, &pool, total) <= *own)
            .collect();
        if next == shared {
            break;
        }
        shared = next;
    }
    loop {
        let mut pool = vec![0u64; lsize];
        for (c, _) in ctx.iter().zip(&shared).filter(|(_, &s)| s) {
            for &(l, n) in c {
                pool[l as usize] += n;
            }
        }
        let fallback = if shared.iter().any(|&s| s) {
            let (s, cs): (Vec<u32>, Vec<u64>) = pool
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(l, &c)| (l as u32, c))
                .unzip();
            Some(fit(s, &cs, MAIN_MAX_SCALE, ln_inv).0)
        } else {
            None
        };
        let slots = other_slots
            + fallback.as_ref().map_or(0, Table::slots)
            + own_fit
                .iter()
                .zip(&shared)
                .filter(|(_, &s)| !s)
                .map(|(t, _)| t.0.slots())
                .sum::<u64>();
        if slots > MAX_SLOTS {
            // Demote the largest own table (it stays codable by the pooled fallback).
            let worst = (0..ctx.len())
                .filter(|&i| !shared[i])
                .max_by_key(|&i| own_fit[i].0.slots())
                .expect("own tables exceed the budget");
            shared[worst] = true;
            continue;
        }
        let mut table_bits = ctx.len();
        let mut data_bits = 0.0;
        if let Some(fb) = &fallback {
            table_bits += fb.bits();
        }
        for (i, c) in ctx.iter().enumerate() {
            let t = if shared[i] {
                fallback.as_ref().expect("a shared context has the fallback")
            } else {
                table_bits += own_fit[i].0.bits();
                &own_fit[i].0
            };
            // Both lists are in increasing symbol order: one merging pass (a
            // search per symbol was quadratic: a fifth of compressing the GGUF
            // corpus file, its f16 scales' contexts holding up to 1024 symbols).
            let mut present = c.iter().peekable();
            let cs: Vec<u64> = t
                .syms
                .iter()
                .map(|&s| {
                    while present.next_if(|x| x.0 < s).is_some() {}
                    present.next_if(|x| x.0 == s).map_or(0, |x| x.1)
                })
                .collect();
            data_bits += t.data_bits(&cs);
        }
        let own = own_fit
            .iter()
            .zip(&shared)
            .map(|((t, _), &s)| if s { None } else { Some(t.clone()) })
            .collect();
        return ContextTables {
            own,
            fallback,
            table_bits,
            data_bits,
        };
    }
}

/// Writes what [`read_context_tables`] reads: one bit per context (own table or
/// fallback), the fallback table if there is one, then the own tables in order.
pub(super) fn write_context_tables(w: &mut BitWriter, own: &[Option<Table>], fallback: Option<&Table>) {
    for o in own {
        w.put(u32::from(o.is_some()), 1);
    }
    if let Some(fb) = fallback {
        fb.write(w);
    }
    for t in own.iter().flatten() {
        t.write(w);
    }
}

/// Reads the tables of `nctx` contexts over `width`-bit symbols: one bit per
/// context (own table or fallback), the fallback table if any context uses it,
/// then the own tables in order. `budget` holds the slots already declared and
/// gains these tables'; more than [`MAX_SLOTS`] in all is `Invalid` (`over`),
/// checked table by table before anything is built from them.
pub(super) fn read_context_tables(
    br: &mut BitReader<'_>,
    nctx: usize,
    width: u8,
    budget: &mut u64,
    over: &'static str,
) -> Result<(Option<Table>, Vec<Option<Table>>)> {
    let mut own_flags = Vec::with_capacity(nctx);
    for _ in 0..nctx {
        own_flags.push(br.bits(1)? == 1);
    }
    let mut take = |br: &mut BitReader<'_>| -> Result<Table> {
        let t = Table::read(br, width)?;
        *budget += t.slots();
        if *budget > MAX_SLOTS {
            return Err(FormatError::Invalid { what: over });
        }
        Ok(t)
    };
    let fallback = if own_flags.iter().any(|&o| !o) {
        Some(take(br)?)
    } else {
        None
    };
    let own = own_flags
        .iter()
        .map(|&o| if o { take(br).map(Some) } else { Ok(None) })
        .collect::<Result<Vec<_>>>()?;
    Ok((fallback, own))
}

/// For an empty output: `Some` of the result (an empty payload is the only valid
/// one); `None` when there are words to decode.
pub(super) fn empty_output(payload: &[u8], out_len: usize, what: &'static str) -> Option<Result<()>> {
    if out_len > 0 {
        return None;
    }
    Some(if payload.is_empty() {
        Ok(())
    } else {
        Err(FormatError::TrailingBytes {
            what,
            count: payload.len() as u64,
        })
    })
}

fn valid_split(width: u8, k: u8) -> bool {
    (2..=MAX_ENTROPY_WIDTH).contains(&width) && k >= 1 && k < width
}

/// Estimated payload bytes of [`encode`] (within a few bytes), or `None` where it
/// does not apply.
pub fn estimate<W: Word>(symbols: &[W], width: u8, k: u8) -> Option<f64> {
    if !valid_split(width, k) {
        return None;
    }
    if symbols.is_empty() {
        return Some(0.0);
    }
    let counts = super::tables::symbol_counts(symbols, width)?;
    Some(plan(&counts, symbols.len() as u64, width, k).estimate)
}

/// [`estimate`] from the words' census: `counts[v]` is how often word `v` occurs
/// (`2^width` entries, as many words as their sum). The same plan as [`encode`],
/// so an encoder can price a part of a stream from its histogram alone.
pub fn estimate_counts(counts: &[u64], width: u8, k: u8) -> Option<f64> {
    if !valid_split(width, k) || counts.len() != 1usize << width {
        return None;
    }
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return Some(0.0);
    }
    Some(plan(counts, n, width, k).estimate)
}

/// The split `k` (1..width) with the smallest estimate, and that estimate.
pub fn best_split<W: Word>(symbols: &[W], width: u8) -> Option<(u8, f64)> {
    if !(2..=MAX_ENTROPY_WIDTH).contains(&width) {
        return None;
    }
    let counts = super::tables::symbol_counts(symbols, width)?;
    let n = symbols.len() as u64;
    if n == 0 {
        return Some((1, 0.0));
    }
    (1..width)
        .map(|k| (k, plan(&counts, n, width, k).estimate))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// Encodes `symbols` (each below `2^width`, `width` 2..=16) split at `k`
/// (`1 <= k < width`). Returns `None` for a bad width or split, or a symbol that
/// does not fit `width`.
pub fn encode<W: Word>(symbols: &[W], width: u8, k: u8) -> Option<Vec<u8>> {
    if !valid_split(width, k) {
        return None;
    }
    let counts = super::tables::symbol_counts(symbols, width)?;
    if symbols.is_empty() {
        return Some(Vec::new());
    }
    let p = plan(&counts, symbols.len() as u64, width, k);
    let lb = p.lb;

    let mut w = BitWriter::default();
    p.h.write(&mut w);
    write_context_tables(&mut w, &p.own, p.fallback.as_ref());
    let mut out = vec![k];
    out.extend(w.finish());

    // The encoder step by H symbol, and by whole word for the low part.
    let steps = |t: &Table| -> Vec<EncSym> {
        let mut s = 0;
        t.freqs
            .iter()
            .map(|&f| {
                let e = EncSym::new(s, f, t.scale);
                s += f;
                e
            })
            .collect()
    };
    let mut enc_h = vec![EncSym::default(); 1usize << k];
    for (&s, e) in p.h.syms.iter().zip(steps(&p.h)) {
        enc_h[s as usize] = e;
    }
    let mut enc_l = vec![EncSym::default(); 1usize << width];
    let fb_steps = p.fallback.as_ref().map(|t| (t, steps(t)));
    for (&hs, own) in p.h.syms.iter().zip(&p.own) {
        let (t, st) = match own {
            Some(t) => (t, steps(t)),
            None => {
                let (t, st) = fb_steps.as_ref().expect("shared contexts have a fallback");
                (*t, st.clone())
            }
        };
        for (&l, &e) in t.syms.iter().zip(&st) {
            enc_l[((hs as usize) << lb) | l as usize] = e;
        }
    }

    let mut states = [RANS_L; LANES];
    // Two steps a word: the low part's, then the high part's.
    let mut words = Emitted::with_room(2 * symbols.len());
    let mut step = |x: &mut u32, sym: &W| {
        let v = sym.to_u64() as usize;
        put(x, &mut words, &enc_l[v]);
        put(x, &mut words, &enc_h[v >> lb]);
    };
    // From the last word to the first (word `i` in state `i mod 4`); whole
    // rounds with constant lane indices, so the states stay in registers.
    let full = symbols.len() / LANES * LANES;
    for (i, sym) in symbols.iter().enumerate().skip(full).rev() {
        step(&mut states[i % LANES], sym);
    }
    for round in symbols[..full].chunks_exact(LANES).rev() {
        for l in (0..LANES).rev() {
            step(&mut states[l], &round[l]);
        }
    }
    finish_stream(&mut out, &states, symbols.len(), words.words());
    Some(out)
}

/// The low parts' tables, by slot: `freq << 16 | (slot - start)` of the symbol
/// owning it, and apart (off the critical path, and keeping the hot part at four
/// bytes a slot) the symbol.
struct LowSlots<W> {
    fb: Vec<u32>,
    syms: Vec<W>,
}

impl<W: Word> LowSlots<W> {
    /// Appends the slots of a table; returns where they start.
    fn push(&mut self, t: &Table) -> Result<u32> {
        let base = self.fb.len();
        let mut start = 0u64;
        for (&s, &f) in t.syms.iter().zip(&t.freqs) {
            // `f < 2^16` unless it is a one-symbol table's 1.
            self.fb.extend((0..f).map(|b| f << 16 | b));
            self.syms
                .resize(self.syms.len() + f as usize, W::from_u64(u64::from(s)));
            start += u64::from(f);
        }
        if start != t.slots() || self.fb.len() - base != t.slots() as usize {
            return Err(FormatError::Corrupt {
                what: "ctx frequency table (does not sum to 2^scale_bits)",
            });
        }
        Ok(base as u32)
    }
}

/// Decodes `out.len()` words of `width` bits from a payload made by [`encode`].
pub fn decode<W: Word>(payload: &[u8], width: u8, out: &mut [W]) -> Result<()> {
    if !(2..=MAX_ENTROPY_WIDTH).contains(&width) || u32::from(width) > W::BITS {
        return Err(FormatError::BadWidth { width });
    }
    if let Some(done) = empty_output(payload, out.len(), WHAT) {
        return done;
    }
    let (&k, rest) = payload.split_first().ok_or(FormatError::Truncated { what: WHAT })?;
    if k == 0 || k >= width {
        return Err(FormatError::Invalid {
            what: "ctx split (k must be in 1..width)",
        });
    }
    let lb = width - k;

    // Tables. Each symbol set holds at most 2^width symbols in all (2^k contexts of
    // at most 2^lb low parts, plus the H and fallback tables), and slots are
    // budgeted before anything is built.
    let mut br = BitReader::new(rest);
    let h = Table::read(&mut br, k)?;
    let mut budget = h.slots();
    let (fallback, own) = read_context_tables(
        &mut br,
        h.syms.len(),
        lb,
        &mut budget,
        "ctx tables (more than 2^18 slots)",
    )?;
    let table_end = 1 + br.finish()?;

    // The low parts' slot entries: the fallback table first, then the own tables.
    let mut low = LowSlots {
        fb: Vec::with_capacity(budget as usize),
        syms: Vec::with_capacity(budget as usize),
    };
    let fb = match &fallback {
        Some(t) => LowTable::new(low.push(t)?, t.scale),
        None => LowTable::default(),
    };
    // Per `H` symbol (by position): its step and its context's table.
    let mut info = Vec::with_capacity(h.syms.len());
    let mut start = 0u32;
    for ((&hs, &f), o) in h.syms.iter().zip(&h.freqs).zip(&own) {
        let low = match o {
            Some(t) => LowTable::new(low.push(t)?, t.scale),
            None => fb,
        };
        info.push(HighSym {
            f,
            start,
            out: hs << lb,
            low,
        });
        start += f;
    }
    if u64::from(start) != h.slots() {
        return Err(FormatError::Corrupt {
            what: "ctx frequency table (does not sum to 2^scale_bits)",
        });
    }
    let (x, body) = read_states(&payload[table_end..], out.len(), &STREAM_ERRORS)?;
    // Slot -> position of the `H` symbol owning it, in a byte where that suffices
    // (2^14 slots in 16 KiB, which stays in L1 next to the low tables). The wasm
    // build keeps one instance (u16) of the loop: the package's size budget is
    // tighter than its speed budget there.
    if h.syms.len() <= 256 && !cfg!(target_arch = "wasm32") {
        run::<W, u8>(&h, &info, &low, x, body, out)
    } else {
        run::<W, u16>(&h, &info, &low, x, body, out)
    }
}

/// Builds the `H` slot table with `I` entries and decodes every word.
///
/// What did not make this loop faster (`cargo bench -p brevis-format --bench
/// coders -- decode/ctx/top13`, 173-180 Mwords/s here; throwaway builds, one
/// criterion run each on a noisy machine):
/// - eight lanes instead of four, words in the same order (a format change): 164
///   Mwords/s, so the lanes' dependency chains are not what bounds it;
/// - groups of eight words whose `H` steps all renormalize before their low
///   steps, so that a group's words come from one block without a branch (a
///   format change), in a first scalar version: 107;
/// - the `H` step renormalized by a select instead of a branch: 85 (see
///   [`Tables::word`]);
/// - built for BMI2 (`shrx`, not shifts through `cl`): 179 against 180;
/// - `H` and fallback tables capped at 2^12 slots (4 and 16 KiB of slot entries
///   instead of up to 32 and 128): `brevis verify --threads 1` of the default
///   BF16 and FP32 all-MiniLM archives as fast (best of 25 each), the archives
///   9 and 8 KB larger.
///
/// What is left is most likely the `H` step's branch, taken about one step in
/// four or five. A faster `ctx` needs lanes renormalized together, in SIMD
/// registers, in a layout of its own.
fn run<W: Word, I: Word>(
    h: &Table,
    info: &[HighSym],
    low: &LowSlots<W>,
    mut x: [u32; LANES],
    body: &[u8],
    out: &mut [W],
) -> Result<()> {
    let mut slots = Vec::with_capacity(h.slots() as usize);
    for (j, &f) in h.freqs.iter().enumerate() {
        slots.resize(slots.len() + f as usize, I::from_u64(j as u64));
    }
    let t = Tables {
        slots: &slots,
        info,
        fb: &low.fb,
        low_syms: &low.syms,
        h_scale: h.scale,
        h_mask: (1u32 << h.scale) - 1,
    };
    let mut pos = 0usize;
    let mut quads = out.chunks_exact_mut(LANES);
    for q in &mut quads {
        // A quad takes 8 rANS steps, so at most 8 renormalization words: with 16
        // bytes left, they are read from that block without bounds checks; near
        // the end, word by word.
        match body.get(pos..).and_then(|b| b.first_chunk::<16>()) {
            Some(block) => {
                // Two halves of four steps, each taking at most 4 words: the words
                // come from a register, shifted out as they are used.
                let mut used = 0u32;
                for half in 0..2 {
                    let mut win = window(block, used);
                    for l in 2 * half..2 * half + 2 {
                        let (w, xs) = t.word(x[l], |v| {
                            // Selects, not shifts by a variable: the fewest cycles from
                            // `v` to the state and the window (the critical path).
                            let need = v < RANS_L;
                            used += u32::from(need);
                            let x = if need { v << 16 | (win as u32 & 0xffff) } else { v };
                            win = if need { win >> 16 } else { win };
                            x
                        });
                        x[l] = xs;
                        q[l] = W::from_u64(u64::from(w));
                    }
                }
                pos += 2 * used as usize;
            }
            None => {
                for (l, d) in q.iter_mut().enumerate() {
                    let (w, xs) = t.word(x[l], |v| renorm_at(v, body, &mut pos));
                    x[l] = xs;
                    *d = W::from_u64(u64::from(w));
                }
            }
        }
    }
    for (l, d) in quads.into_remainder().iter_mut().enumerate() {
        let (w, xs) = t.word(x[l], |v| renorm_at(v, body, &mut pos));
        x[l] = xs;
        *d = W::from_u64(u64::from(w));
    }
    check_end(&x, pos, body, &STREAM_ERRORS)
}

/// The 4 words of `block` from word `used` (at most 4) on. Natively a shift of
/// the block as a `u128`; WebAssembly has no 128-bit shift (LLVM writes one
/// out with selects), so there a load at that offset.
#[inline(always)]
fn window(block: &[u8; 16], used: u32) -> u64 {
    if cfg!(target_arch = "wasm32") {
        window_loaded(block, used)
    } else {
        (u128::from_le_bytes(*block) >> (16 * used)) as u64
    }
}

/// [`window`] as WebAssembly takes it: a load at word `used`.
#[inline(always)]
fn window_loaded(block: &[u8; 16], used: u32) -> u64 {
    let at = (2 * used as usize).min(8);
    block[at..].first_chunk::<8>().map_or(0, |w| u64::from_le_bytes(*w))
}

/// Renormalizes `v` from the word stream at `pos` (zeros past its end; `pos` still
/// advances so the overrun is reported).
#[inline(always)]
fn renorm_at(v: u32, body: &[u8], pos: &mut usize) -> u32 {
    let need = v < RANS_L;
    let w = body
        .get(*pos..)
        .and_then(|b| b.first_chunk::<2>())
        .map_or(0, |b| u32::from(u16::from_le_bytes(*b)));
    *pos += 2 * usize::from(need);
    if need {
        v << 16 | w
    } else {
        v
    }
}

/// Where a context's low-part table lies in the slot entries.
#[derive(Clone, Copy, Default)]
struct LowTable {
    base: u32,
    mask: u32,
    scale: u32,
}

impl LowTable {
    fn new(base: u32, scale: u32) -> Self {
        LowTable {
            base,
            mask: (1u32 << scale) - 1,
            scale,
        }
    }
}

/// An `H` symbol: its frequency and first slot, its part of the word
/// (`symbol << lb`), and its context's table.
#[derive(Clone, Copy)]
struct HighSym {
    f: u32,
    start: u32,
    out: u32,
    low: LowTable,
}

/// The decoder's tables.
struct Tables<'a, I, W> {
    /// `H` slot -> position of its symbol in `info`.
    slots: &'a [I],
    info: &'a [HighSym],
    /// Low parts' slots (see [`LowSlots`]).
    fb: &'a [u32],
    low_syms: &'a [W],
    h_scale: u32,
    h_mask: u32,
}

/// Marks a branch as unlikely.
#[cold]
fn cold() {}

impl<I: Word, W: Word> Tables<'_, I, W> {
    /// Decodes one word from state `x`: the `H` step, then its context's step,
    /// each renormalized by `renorm` (which must return states of `2^16` and above
    /// unchanged). Returns the word and the new state.
    #[inline(always)]
    fn word(&self, x: u32, mut renorm: impl FnMut(u32) -> u32) -> (u32, u32) {
        // Every slot below 2^h_scale is filled, and every position is in `info`,
        // so the fallbacks are never taken (they only spare a panic path).
        let slot = x & self.h_mask;
        let j = self.slots.get(slot as usize).map_or(0, |&j| j.to_u64() as usize);
        let Some(hi) = self.info.get(j) else {
            return (0, x);
        };
        // Cannot overflow: f * (x >> scale) + slot - start < f * 2^(32 - scale) <= 2^32.
        let v =
            hi.f.wrapping_mul(x >> self.h_scale)
                .wrapping_add(slot)
                .wrapping_sub(hi.start);
        // A branch, not a select, and marked unlikely (each step renormalizes about
        // one time in four or five): the low step's lookup then need not wait for
        // the stream word, whose position depends on every step before it, across
        // lanes. That chain, not the work, bounds a select-based decoder.
        let x = if v < RANS_L {
            cold();
            renorm(v)
        } else {
            v
        };
        let lo = hi.low;
        let i = lo.base as usize + (x & lo.mask) as usize;
        let e = self.fb.get(i).copied().unwrap_or(0);
        let ls = self.low_syms.get(i).map_or(0, |&s| s.to_u64() as u32);
        let v = (e >> 16).wrapping_mul(x >> lo.scale).wrapping_add(e & 0xffff);
        (hi.out | ls, renorm(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::mask;
    use std::vec::Vec;

    use crate::wire::tables::testing::Rng;

    /// Float-like words: a skewed "exponent" in the top bits, low bits whose
    /// distribution depends on it.
    fn floatish(n: usize, width: u8, k: u8, seed: u64) -> Vec<u16> {
        let mut rng = Rng(seed | 1);
        let lb = width - k;
        (0..n)
            .map(|_| {
                let r = rng.next();
                let h = (r % 7).min((r >> 8) % 9) & mask(k);
                let l = if h.is_multiple_of(2) {
                    ((r >> 20) % 3) & mask(lb)
                } else {
                    (r >> 30) & mask(lb)
                };
                (h << lb | l) as u16
            })
            .collect()
    }

    fn round_trip<W: Word>(v: &[W], width: u8, k: u8) -> Vec<u8> {
        let p = encode(v, width, k).expect("applies");
        let mut back = std::vec![W::default(); v.len()];
        decode(&p, width, &mut back).unwrap();
        assert_eq!(back, v, "width {width} k {k}");
        p
    }

    #[test]
    fn fit_stopping_early_costs_what_trying_every_scale_does() {
        let mut r = Rng(0x5eed);
        for case in 0..300 {
            // Skewed alphabets of 2 to 64 symbols, from a handful of words to millions.
            let len = 2 + (r.next() % 63) as usize;
            let n_scale = 1u64 << (3 + r.next() % 20);
            let ratio = 0.3 + 0.69 * (r.next() % 1000) as f64 / 1000.0;
            let counts: Vec<u64> = (0..len)
                .map(|i| ((n_scale as f64 * ratio.powi(i as i32)) as u64).max(1) + r.next() % 3)
                .collect();
            let syms: Vec<u32> = (0..len as u32).collect();
            let max_scale = if case % 2 == 0 { CTX_MAX_SCALE } else { MAIN_MAX_SCALE };
            let mut ln_inv = LnInv::default();
            let (_, early) = fit(syms.clone(), &counts, max_scale, &mut ln_inv);
            let (_, every) = fit_scales(syms, &counts, max_scale, &mut ln_inv, false);
            assert_eq!(early, every, "case {case}");
        }
    }

    #[test]
    fn both_windows_are_the_same_words() {
        let block: [u8; 16] = core::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0xa5);
        for used in 0..=4 {
            let shifted = (u128::from_le_bytes(block) >> (16 * used)) as u64;
            assert_eq!(window_loaded(&block, used), shifted, "used {used}");
            assert_eq!(window(&block, used), shifted, "used {used}");
        }
    }

    #[test]
    fn round_trips_every_split() {
        for width in [2u8, 3, 8, 9, 12, 16] {
            for k in 1..width {
                for n in [1usize, 2, 3, 4, 5, 9, 100, 5000] {
                    let v = floatish(n, width, k, n as u64 * 31 + u64::from(width));
                    round_trip(&v, width, k);
                    let mut rng = Rng(n as u64 + 7);
                    let u: Vec<u16> = (0..n).map(|_| (rng.next() & mask(width)) as u16).collect();
                    round_trip(&u, width, k);
                    if width <= 8 {
                        let b: Vec<u8> = v.iter().map(|&x| x as u8).collect();
                        round_trip(&b, width, k);
                    }
                }
            }
        }
        // Empty and constant streams.
        assert!(round_trip::<u8>(&[], 8, 4).is_empty());
        round_trip(&[77u8; 1000], 8, 3);
    }

    #[test]
    fn beats_separate_fields_when_low_bits_depend_on_high() {
        let v = floatish(200_000, 12, 4, 9);
        let p = round_trip(&v, 12, 4);
        let hi: Vec<u16> = v.iter().map(|&x| x >> 8).collect();
        let lo: Vec<u16> = v.iter().map(|&x| x & 255).collect();
        let sep = super::super::rans::encode(&hi, 4).unwrap().len() + super::super::rans::encode(&lo, 8).unwrap().len();
        assert!(p.len() * 100 < sep * 97, "{} vs {sep}", p.len());
        let est = estimate(&v, 12, 4).unwrap();
        assert!(
            (est - p.len() as f64).abs() < 16.0 + p.len() as f64 * 1e-3,
            "{est} vs {}",
            p.len()
        );
        assert_eq!(best_split(&v, 12).unwrap().0, 4);
        // The census alone gives the same estimate.
        let counts = crate::wire::tables::symbol_counts(&v, 12).unwrap();
        assert_eq!(estimate_counts(&counts, 12, 4), Some(est));
        assert_eq!(estimate_counts(&counts[1..], 12, 4), None);
        assert_eq!(estimate_counts(&std::vec![0; 4096], 12, 4), Some(0.0));
    }

    #[test]
    fn wide_alphabets_stay_within_the_slot_budget() {
        // Every 16-bit word present, k = 4: 16 contexts of 4096 symbols.
        let mut v: Vec<u16> = (0..=u16::MAX).collect();
        let mut rng = Rng(3);
        v.extend((0..100_000).map(|_| (rng.next() % 3000) as u16));
        for k in [1u8, 4, 8, 15] {
            round_trip(&v, 16, k);
        }
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(encode(&[0u8], 1, 1).is_none());
        assert!(encode(&[0u8], 8, 0).is_none());
        assert!(encode(&[0u8], 8, 8).is_none());
        assert!(encode(&[0u16], 17, 3).is_none());
        assert!(encode(&[9u8], 3, 1).is_none());
        let v = floatish(3000, 10, 5, 1);
        let p = round_trip(&v, 10, 5);
        let mut out = std::vec![0u16; v.len()];
        for cut in 0..p.len() {
            assert!(decode(&p[..cut], 10, &mut out).is_err(), "cut {cut}");
        }
        let mut long = p.clone();
        long.extend([0, 0]);
        assert!(decode(&long, 10, &mut out).is_err());
        assert!(decode(&p, 10, &mut out[..v.len() - 1]).is_err());
        let mut bad_k = p.clone();
        bad_k[0] = 10;
        assert!(matches!(decode(&bad_k, 10, &mut out), Err(FormatError::Invalid { .. })));
        bad_k[0] = 0;
        assert!(matches!(decode(&bad_k, 10, &mut out), Err(FormatError::Invalid { .. })));
        assert!(matches!(decode(&p, 1, &mut out), Err(FormatError::BadWidth { .. })));
        assert!(matches!(decode(&p, 17, &mut out), Err(FormatError::BadWidth { .. })));
        assert!(matches!(
            decode::<u8>(&p, 10, &mut [0u8; 4]),
            Err(FormatError::BadWidth { .. })
        ));
        assert!(matches!(
            decode::<u8>(&[1], 8, &mut []),
            Err(FormatError::TrailingBytes { .. })
        ));
    }

    #[test]
    fn slot_budget_is_enforced() {
        // k = 8 over 16 bits: 256 contexts, each an own table of 2 symbols at
        // scale 16 (65536 slots): the fifth table goes over 2^18.
        let mut w = BitWriter::default();
        // H table: symbols 0..=255 (one run), scale 8, equal frequencies.
        let hs: Vec<u32> = (0..256).collect();
        write_table(&mut w, &hs, &[1; 256], 8);
        for _ in 0..256 {
            w.put(1, 1);
        }
        for _ in 0..256 {
            write_table(&mut w, &[0, 1], &[1, 65535], 16);
        }
        let mut p = std::vec![8u8];
        p.extend(w.finish());
        p.extend([0, 0, 1, 0].repeat(4));
        let mut out = std::vec![0u16; 4];
        assert!(matches!(decode(&p, 16, &mut out), Err(FormatError::Invalid { .. })));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300), n in 0usize..300, width in 2u8..=16) {
            let mut out = std::vec![0u16; n];
            if decode(&bytes, width, &mut out).is_ok() {
                proptest::prop_assert!(out.iter().all(|&s| u64::from(s) <= mask(width)));
            }
            let mut out8 = std::vec![0u8; n];
            let _ = decode(&bytes, width.min(8), &mut out8);
        }

        #[test]
        fn flipped_payloads_never_panic(seed in proptest::prelude::any::<u64>(), flips in proptest::collection::vec((proptest::prelude::any::<usize>(), 1u8..=255), 1..4), n in 1usize..400, width in proptest::sample::select(std::vec![2u8, 5, 8, 11, 16]), k in 1u8..16) {
            let k = 1 + k % (width - 1);
            let v = floatish(n, width, k, seed);
            let mut p = encode(&v, width, k).unwrap();
            for &(at, x) in &flips {
                let i = at % p.len();
                p[i] ^= x;
            }
            let mut out = std::vec![0u16; n];
            if decode(&p, width, &mut out).is_ok() {
                proptest::prop_assert!(out.iter().all(|&s| u64::from(s) <= mask(width)));
            }
        }

        #[test]
        fn round_trip_any(v in proptest::collection::vec(proptest::prelude::any::<u16>(), 0..500), width in 2u8..=16, k in 1u8..16) {
            let k = 1 + k % (width - 1);
            let v: Vec<u16> = v.iter().map(|&x| x & mask(width) as u16).collect();
            round_trip(&v, width, k);
        }
    }
}
