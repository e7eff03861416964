//! `huffman` and `huffman8`: canonical Huffman code, length-limited, in `L`
//! interleaved bit streams: `L = 4` for `huffman` (tag 2), `L = 8` for `huffman8`
//! (tag 7). The two differ in nothing else.
//!
//! The encoder counts the symbols and builds an optimal length-limited code
//! (package-merge). The format allows code lengths up to 16; the encoder uses the
//! shortest limit from `max(11, ceil(log2 S))` (for `S` present symbols) up to 16 that
//! costs at most 0.03% more data bits than the 16-bit-limited optimum, since shorter
//! codes mean a smaller decode table. The decoder looks up the next `bits` bits (at
//! least the longest code length present, and at least 11) in a table of `2^bits`
//! entries, so it does one lookup per word; `L` independent bit streams let it overlap
//! `L` lookups. Natively the table has 2^11, 2^13 or 2^16 entries, a constant of
//! each instance of the decode loop, so the lookups carry no bounds checks and the
//! loop is unrolled by `L`; in WebAssembly one instance per lane count serves every
//! table size (indices masked instead), which keeps the module small, and
//! `huffman8`'s eight lanes decode four at a time (`run_halves`). With
//! 16-bit words the table (256 KiB) lives in L2 and each lookup waits on the one
//! before in its stream: eight streams decode BF16 words about 20% faster than four
//! (`cargo bench -p brevis-format --bench coders -- decode/huffman`) for `4 x 2`
//! bytes more of stream sizes and padding at most.
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
//! 2. **Stream sizes**: the byte lengths of streams 0 to `L - 2`, as varints
//!    (canonical LEB128); stream `L - 1` is the rest of the payload.
//! 3. **Streams 0..L**, concatenated. Stream `k` holds the codes of words `i` with
//!    `i mod L = k`, in increasing `i`, each code most significant bit first, packed
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
use crate::bytes::{put_varint, varint_len, ByteReader};
use crate::error::{FormatError, Result};
use crate::stream::Word;

/// Longest code length the format allows.
const MAX_CODE_LEN: u32 = 16;
/// The shortest length limit the encoder tries.
const MIN_LIMIT: u32 = 11;

/// How the encoder picks a `huffman` or `huffman8` literal's longest code: the
/// shortest limit, from 11 bits up, whose coded size is within a slack (parts per
/// 10 000 of the coded bits) of the best code limited to 16 bits. Shorter codes
/// decode faster: a smaller table, and more codes between two refills of a lane
/// (`56 / bits`: five of at most 11 bits, four of 12 or 13).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LengthRule {
    slack_per_10k: u64,
}

impl LengthRule {
    /// Within 3 parts per 10 000: the smallest archives (the default).
    pub const SMALLEST: LengthRule = LengthRule { slack_per_10k: 3 };
    /// Within 15 parts per 10 000 (`brevis compress --fast-decode`). Bytes of int8
    /// weights, whose codes run to 12 bits under [`LengthRule::SMALLEST`], cost 7
    /// to 11 parts per 10 000 more at 11 bits: the int8 all-MiniLM ONNX file's
    /// `--fast-decode` archive grew by 0.07% (20,804,828 to 20,819,780 B) and
    /// `decode_all` of it ran 1.09x as fast natively (best of 15, three rounds in
    /// turns) and 1.00-1.13x in Node (best of 15 `decodeArchive` calls, four runs,
    /// both orders); isnet's quint8 ONNX archive grew 0.08% and decoded 1.08x as
    /// fast natively. (Measured with throwaway builds that used this slack for
    /// every archive; their `--fast-decode` archives are byte for byte what this
    /// rule makes.)
    pub const FAST_DECODE: LengthRule = LengthRule { slack_per_10k: 15 };
}

/// Widths up to this one use 16-bit decode table entries (`symbol << 5 | length`).
const NARROW_WIDTH: u8 = 11;
/// Interleaved bit streams of `huffman` (tag 2).
pub const LANES: usize = 4;
/// Interleaved bit streams of `huffman8` (tag 7): twice the independent lookups in
/// flight, which is what a lookup table in L2 (long codes) waits on.
pub const LANES8: usize = 8;

const WHAT: &str = "huffman literal";

/// Encodes `symbols` (each below `2^width`, `width` 1..=16) in [`LANES`] bit
/// streams. Returns `None` for a width outside 1..=16 or a symbol that does not
/// fit `width`.
pub fn encode<W: Word>(symbols: &[W], width: u8) -> Option<Vec<u8>> {
    encode_lanes::<W, LANES>(symbols, width, LengthRule::SMALLEST)
}

/// [`encode`] in [`LANES8`] bit streams (`huffman8`).
pub fn encode8<W: Word>(symbols: &[W], width: u8) -> Option<Vec<u8>> {
    encode_lanes::<W, LANES8>(symbols, width, LengthRule::SMALLEST)
}

/// [`encode`] (`lanes` = [`LANES`]) or [`encode8`] ([`LANES8`]) with code
/// lengths limited by `rule`; `None` also for another lane count.
pub fn encode_with<W: Word>(symbols: &[W], width: u8, lanes: usize, rule: LengthRule) -> Option<Vec<u8>> {
    match lanes {
        LANES => encode_lanes::<W, LANES>(symbols, width, rule),
        LANES8 => encode_lanes::<W, LANES8>(symbols, width, rule),
        _ => None,
    }
}

/// The exact length of [`encode`]'s payload (`lanes` = [`LANES`]) or
/// [`encode8`]'s ([`LANES8`]), without coding the words: the table is built,
/// and each bit stream's length is its codes' total length, rounded up to a
/// byte. `None` where the encoder would return `None` (or for another lane count).
pub fn encoded_len<W: Word>(symbols: &[W], width: u8, lanes: usize) -> Option<usize> {
    encoded_len_counted(symbols, width, lanes, &census(symbols, width)?, LengthRule::SMALLEST)
}

/// [`encoded_len`] given the symbols' census (`tables::census` of the same
/// symbols and width), of the payload [`encode_with`] makes with `rule`.
pub(super) fn encoded_len_counted<W: Word>(
    symbols: &[W],
    width: u8,
    lanes: usize,
    census: &Census,
    rule: LengthRule,
) -> Option<usize> {
    match lanes {
        LANES => Some(encoded_len_lanes::<W, LANES>(symbols, width, census, rule)),
        LANES8 => Some(encoded_len_lanes::<W, LANES8>(symbols, width, census, rule)),
        _ => None,
    }
}

fn encoded_len_lanes<W: Word, const L: usize>(symbols: &[W], width: u8, census: &Census, rule: LengthRule) -> usize {
    let (syms, cs) = match census {
        Census::Payload(p) => return p.len(),
        Census::Symbols(syms, cs) => (syms, cs),
    };
    let mut w = BitWriter::default();
    write_symbol_set(&mut w, syms);
    let lens = choose_lengths(cs, rule);
    write_lengths(&mut w, &lens);
    let mut len_of = vec![0u8; 1usize << width];
    for (&s, &l) in syms.iter().zip(&lens) {
        len_of[s as usize] = l;
    }
    let mut bits = [0u64; L];
    let mut rounds = symbols.chunks_exact(L);
    for r in &mut rounds {
        for (b, s) in bits.iter_mut().zip(r) {
            *b += u64::from(len_of[s.to_u64() as usize]);
        }
    }
    for (b, s) in bits.iter_mut().zip(rounds.remainder()) {
        *b += u64::from(len_of[s.to_u64() as usize]);
    }
    let streams = bits.map(|b| b.div_ceil(8) as usize);
    let sizes: usize = streams[..L - 1].iter().map(|&b| varint_len(b as u64)).sum();
    w.finish().len() + sizes + streams.iter().sum::<usize>()
}

/// Decodes `out.len()` symbols of `width` bits from a payload made by [`encode`].
pub fn decode<W: Word>(payload: &[u8], width: u8, out: &mut [W]) -> Result<()> {
    decode_lanes(payload, width, out, LANES)
}

/// Decodes `out.len()` symbols of `width` bits from a payload made by [`encode8`].
pub fn decode8<W: Word>(payload: &[u8], width: u8, out: &mut [W]) -> Result<()> {
    decode_lanes(payload, width, out, LANES8)
}

fn encode_lanes<W: Word, const L: usize>(symbols: &[W], width: u8, rule: LengthRule) -> Option<Vec<u8>> {
    let (syms, cs) = match census(symbols, width)? {
        Census::Payload(p) => return Some(p),
        Census::Symbols(syms, cs) => (syms, cs),
    };
    let mut w = BitWriter::default();
    write_symbol_set(&mut w, &syms);
    let lens = choose_lengths(&cs, rule);
    write_lengths(&mut w, &lens);
    let mut out = w.finish();

    // (code, length) by symbol value.
    let codes = canonical_codes(&lens);
    let mut enc = vec![(0u32, 0u32); 1usize << width];
    for ((&s, &c), &l) in syms.iter().zip(&codes).zip(&lens) {
        enc[s as usize] = (c, u32::from(l));
    }
    let bits: u64 = cs.iter().zip(&lens).map(|(&c, &l)| c * u64::from(l)).sum();
    let cap = (bits / 8 / L as u64 + 8) as usize;
    let mut streams: [BitWriter; L] = core::array::from_fn(|_| BitWriter::with_capacity(cap));
    let mut quads = symbols.chunks_exact(L);
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
    for s in &streams[..L - 1] {
        put_varint(&mut out, s.len() as u64);
    }
    for s in &streams {
        out.extend_from_slice(s);
    }
    Some(out)
}

/// Whether `huffman8` decodes its lanes four at a time ([`run_halves`]): in
/// WebAssembly only. Natively, eight at once are faster: with this set natively,
/// `bench/coders-ab.sh` gave 0.76x on BF16's exponent bytes and 7-bit mantissas.
/// In WebAssembly, eight at once were still slower once lookups rotated:
/// 0.84-0.86x on int8-like bytes, exponents and
/// mantissas (`TARGET=wasi bench/coders-ab.sh`, one run).
const HALVES8: bool = cfg!(target_arch = "wasm32");

/// Decodes a payload of `lanes` bit streams ([`LANES`] or [`LANES8`]).
fn decode_lanes<W: Word>(payload: &[u8], width: u8, out: &mut [W], lanes: usize) -> Result<()> {
    decode_lanes_in::<W, HALVES8>(payload, width, out, lanes)
}

/// [`decode_lanes`], with `HALVES` as [`run`] takes it (the tests decode both
/// ways on every target).
fn decode_lanes_in<W: Word, const HALVES: bool>(payload: &[u8], width: u8, out: &mut [W], lanes: usize) -> Result<()> {
    let Some((syms, br)) = start_decode(payload, width, out, WHAT)? else {
        return Ok(());
    };
    // (WebAssembly keeps one entry type: a smaller module.)
    if width <= NARROW_WIDTH && !cfg!(target_arch = "wasm32") {
        Streams::<u16>::read(payload, &syms, br, lanes)?.decode::<W, HALVES>(out)
    } else {
        Streams::<u32>::read(payload, &syms, br, lanes)?.decode::<W, HALVES>(out)
    }
}

/// A decode table entry: a symbol and its code length.
trait Entry: Copy + Default {
    fn new(sym: u32, len: u32) -> Self;
    fn get(self) -> u32;
    /// The code length and the symbol of an entry's [`Entry::get`].
    fn split(e: u32) -> (u32, u32);
}
/// `symbol << 5 | length` (natively only, for widths up to [`NARROW_WIDTH`]).
impl Entry for u16 {
    fn new(sym: u32, len: u32) -> Self {
        (sym << 5 | len) as u16
    }
    #[inline(always)]
    fn get(self) -> u32 {
        u32::from(self)
    }
    #[inline(always)]
    fn split(e: u32) -> (u32, u32) {
        (e & 31, e >> 5)
    }
}
/// `length << 16 | symbol`: the length, on the lane's dependency chain (the next
/// lookup waits on it), takes one shift to extract, and the symbol none where the
/// output words are bytes or 16-bit words (the store truncates), where `symbol << 5 |
/// length` took a shift and a mask. In Node (`TARGET=wasi bench/coders-ab.sh`, three
/// runs), `huffman8` decoded 1.04-1.09x as fast, `huffman` 1.00-1.03x, and the npm
/// package the `--fast-decode` int8 ONNX corpus archive 1.04-1.05x (`bench/wasm/ab.sh`,
/// two runs). Natively it was no faster on 16-bit symbols (0.99-1.01x) and, with the
/// u16 entries laid out the same way, 0.95-0.97x on BF16 exponents, 7-bit mantissas
/// and int8-like bytes (`bench/coders-ab.sh`, with and without `simd`): they keep
/// `symbol << 5 | length`.
impl Entry for u32 {
    fn new(sym: u32, len: u32) -> Self {
        len << 16 | sym
    }
    #[inline(always)]
    fn get(self) -> u32 {
        self
    }
    #[inline(always)]
    fn split(e: u32) -> (u32, u32) {
        (e >> 16, e & 0xffff)
    }
}

/// A payload's decode table and bit streams, read and checked before any word
/// is decoded. Only [`Streams::decode`] depends on the output's word type: the
/// rest has one instance for all of them (a smaller WebAssembly module).
struct Streams<'a, E> {
    /// The payload after the code lengths: the stream sizes, then the streams.
    rest: &'a [u8],
    table: Vec<E>,
    /// Bits each lookup takes (`table.len()` is `2^bits`).
    bits: u32,
    /// Each stream's (start, end) in `rest`; the first `n` are used.
    bounds: [(usize, usize); LANES8],
    n: usize,
}

impl<'a, E: Entry> Streams<'a, E> {
    /// Reads the code lengths of `syms` (from `br`), builds the table, and
    /// reads the sizes of the `n` streams (at most [`LANES8`]) that follow.
    fn read(payload: &'a [u8], syms: &[u32], mut br: BitReader<'_>, n: usize) -> Result<Self> {
        let lens = read_lengths(&mut br, syms.len())?;
        let table_end = br.finish()?;
        let maxlen = complete_code_depth(&lens)?;
        let codes = canonical_codes(&lens);
        let rest = &payload[table_end..];
        let bits = table_bits(maxlen);
        let table = lookup_table(syms, &lens, &codes, bits, E::new)?;

        // Each stream's (start, end) in `rest`: the sizes of all but the last,
        // then the streams.
        let mut r = ByteReader::new(rest);
        let mut bounds = [(0usize, 0usize); LANES8];
        let streams = bounds.get_mut(..n).ok_or(FormatError::Corrupt { what: WHAT })?;
        for st in streams[..n.saturating_sub(1)].iter_mut() {
            st.1 = r.varint_usize("huffman stream size", rest.len() as u64)?;
        }
        for (k, st) in streams.iter_mut().enumerate() {
            let len = if k + 1 < n { st.1 } else { r.remaining() };
            let start = r.position();
            r.bytes(len, "huffman stream")?;
            *st = (start, start + len);
        }
        Ok(Streams {
            rest,
            table,
            bits,
            bounds,
            n,
        })
    }

    /// Decodes `out` (with `HALVES` as [`run`] takes it), then checks that each
    /// stream ended where its size says.
    fn decode<W: Word, const HALVES: bool>(self, out: &mut [W]) -> Result<()> {
        let rest = self.rest;
        let mut lanes = [Lane::default(); LANES8];
        let lanes = &mut lanes[..self.n];
        for (l, &(start, _)) in lanes.iter_mut().zip(self.bounds.iter()) {
            l.pos = start;
        }

        #[cfg(not(target_arch = "wasm32"))]
        match self.bits {
            11 => run::<W, _, HALVES>(rest, &Fixed::<E, { 1 << 11 }>::new(&self.table)?, lanes, out),
            13 => run::<W, _, HALVES>(rest, &Fixed::<E, { 1 << 13 }>::new(&self.table)?, lanes, out),
            _ => run::<W, _, HALVES>(rest, &Fixed::<E, { 1 << 16 }>::new(&self.table)?, lanes, out),
        }
        // In WebAssembly one loop per lane count serves every table size (a
        // smaller module).
        #[cfg(target_arch = "wasm32")]
        {
            let table = Masked {
                table: &self.table,
                mask: self.table.len() - 1,
                bits: self.bits,
            };
            if W::BITS == 8 {
                run_bytes(rest, &table, lanes, out);
            } else {
                run::<W, _, HALVES>(rest, &table, lanes, out);
            }
        }

        for (l, &(start, end)) in lanes.iter().zip(self.bounds.iter()) {
            l.check_end(&rest[start..end], start)?;
        }
        Ok(())
    }
}

/// Bits a decode table for codes of at most `maxlen` bits looks up. Natively, one
/// instance of the decode loop per table size (see [`Fixed`]): 11 bits for codes up
/// to 11 (at most 8 KiB, built in microseconds), 13 (in L1 still), or 16. In
/// WebAssembly, where one instance per lane count serves every size (a smaller
/// module), exactly `max(11, maxlen)`.
fn table_bits(maxlen: u32) -> u32 {
    if cfg!(target_arch = "wasm32") {
        maxlen.max(11)
    } else {
        match maxlen {
            0..=11 => 11,
            12..=13 => 13,
            _ => 16,
        }
    }
}

/// A decode table on the next [`Lookup::bits`] bits of a stream.
trait Lookup {
    /// The entries' type, whose [`Entry::split`] reads what [`Self::entry`] gives.
    type E: Entry;
    /// The entry of the code at bit `used` from the top of `word` (`used` plus
    /// the table's bits at most 64).
    fn entry(&self, word: u64, used: u32) -> u32;
    /// How many bits it looks up.
    fn bits(&self) -> u32;
}

/// A table whose size is a constant, so the compiler sees every lookup in bounds
/// and shifts by a constant.
#[cfg(not(target_arch = "wasm32"))]
struct Fixed<'a, E, const SLOTS: usize>(&'a [E; SLOTS]);

#[cfg(not(target_arch = "wasm32"))]
impl<'a, E, const SLOTS: usize> Fixed<'a, E, SLOTS> {
    /// `table`, which must have `SLOTS` entries.
    fn new(table: &'a [E]) -> Result<Self> {
        Ok(Fixed(
            table.try_into().map_err(|_| FormatError::Corrupt { what: WHAT })?,
        ))
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl<E: Entry, const SLOTS: usize> Lookup for Fixed<'_, E, SLOTS> {
    type E = E;

    #[inline(always)]
    fn entry(&self, word: u64, used: u32) -> u32 {
        // Below `SLOTS`: in bounds.
        self.0[((word << used) >> (64 - SLOTS.trailing_zeros())) as usize].get()
    }

    fn bits(&self) -> u32 {
        SLOTS.trailing_zeros()
    }
}

/// A table of any size: indices masked by `len - 1`, which changes none of them but
/// shows the compiler they are in bounds. Its lookups rotate instead of shifting
/// twice: in Node, `huffman8` decoded int8-like bytes and 7-bit mantissas 1.07x as
/// fast in both of two runs, BF16 exponents 0.97x and 1.08x, BF16 words 1.05x
/// (one run), and `huffman` 1.02-1.06x (`TARGET=wasi bench/coders-ab.sh`).
#[cfg(target_arch = "wasm32")]
struct Masked<'a, E> {
    table: &'a [E],
    mask: usize,
    bits: u32,
}

#[cfg(target_arch = "wasm32")]
impl<E: Entry> Lookup for Masked<'_, E> {
    type E = E;

    #[inline(always)]
    fn entry(&self, word: u64, used: u32) -> u32 {
        // The bits from `used` on rotated to the bottom: one shift by a variable
        // count where `word << used >> (64 - bits)` takes two (and x86-64 needs
        // each count in `cl`).
        self.table[word.rotate_left(used + self.bits) as usize & self.mask].get()
    }

    fn bits(&self) -> u32 {
        self.bits
    }
}

/// Decodes `out` from `lanes` ([`LANES`] or [`LANES8`] of them) with `table`, in a
/// loop unrolled by the lane count (the lanes' state kept in registers or locals).
/// With `HALVES` ([`HALVES8`] but in tests), eight lanes decode four at a time
/// ([`run_halves`]). A constant, so that the module holds no loop it never
/// runs. Not inlined natively: inlined into the caller's match on the table
/// size, `huffman8` decoded 0.81-0.89x as fast (`bench/coders-ab.sh`); in
/// WebAssembly, not inlining it cost `huffman` 0.66-0.88x.
#[cfg_attr(not(target_arch = "wasm32"), inline(never))]
fn run<W: Word, T: Lookup, const HALVES: bool>(payload: &[u8], table: &T, lanes: &mut [Lane], out: &mut [W]) {
    if let Ok(fixed) = <&mut [Lane; LANES]>::try_from(&mut *lanes) {
        run_lanes(payload, table, fixed, out);
    } else if let Ok(fixed) = <&mut [Lane; LANES8]>::try_from(&mut *lanes) {
        if HALVES {
            run_halves(payload, table, fixed, out);
        } else {
            run_lanes(payload, table, fixed, out);
        }
    } else {
        // Not reached (no other lane count exists); still correct, only slower.
        run_tail(payload, table, lanes, out);
    }
}

/// [`run`] for bytes in WebAssembly, where only `huffman8` decodes into bytes
/// (the other entropy coders' bytes go through their 16-bit instance: see
/// `wire::narrow`): [`run_halves`] alone, so that the module holds one more
/// instance of one loop, not of all of them (about 1.2 KB gzipped). Decoding
/// bytes directly, not through 16-bit words narrowed afterwards, `huffman8`
/// decoded int8-like bytes 1.15x, BF16 exponent bytes 1.18x and 7-bit
/// mantissas 1.18x as fast in Node (`TARGET=wasi bench/coders-ab.sh`).
#[cfg(target_arch = "wasm32")]
fn run_bytes<W: Word, T: Lookup>(payload: &[u8], table: &T, lanes: &mut [Lane], out: &mut [W]) {
    match <&mut [Lane; LANES8]>::try_from(&mut *lanes) {
        Ok(fixed) => run_halves(payload, table, fixed, out),
        // Not reached (only `huffman8` decodes bytes here); still correct, only slower.
        _ => run_tail(payload, table, lanes, out),
    }
}

/// Decodes `out` from `lanes` (round-robin) with `table`, leaving the lanes as
/// they end. Inlined into [`run`], where the lane count is a constant.
#[inline(always)]
fn run_lanes<W: Word, T: Lookup>(payload: &[u8], table: &T, lanes: &mut [Lane], out: &mut [W]) {
    let l_count = lanes.len();
    // Fast path: every lane has 8 bytes to load at its position. A lane may read the
    // next lane's first bytes; only its own bits count (see `Lane`), and a lane that
    // ends up consuming past its end is an error for the caller.
    let per = (56 / table.bits()) as usize;
    let block = l_count * per;
    let mut done = 0;
    for chunk in out.chunks_exact_mut(block) {
        if !lanes.iter().all(|l| l.pos + 8 <= payload.len()) {
            break;
        }
        for l in lanes.iter_mut() {
            l.refill(payload);
        }
        for quad in chunk.chunks_exact_mut(l_count) {
            for (d, l) in quad.iter_mut().zip(lanes.iter_mut()) {
                *d = l.decode(table);
            }
        }
        done += block;
    }
    run_tail(payload, table, lanes, &mut out[done..]);
}

/// Decodes `out` from `lanes` (round-robin), refilling before every word: the
/// last words of a payload, where a lane may have fewer than 8 bytes left.
fn run_tail<W: Word, T: Lookup>(payload: &[u8], table: &T, lanes: &mut [Lane], out: &mut [W]) {
    for quad in out.chunks_mut(lanes.len()) {
        for (d, l) in quad.iter_mut().zip(lanes.iter_mut()) {
            l.refill(payload);
            *d = l.decode(table);
        }
    }
}

/// [`run_lanes`] for [`LANES8`] lanes, each block of words decoded in two passes of
/// four lanes (lanes 0-3 fill words `8i..8i + 4`, then lanes 4-7 the others). Eight
/// lanes' state (16 values, with the table, output and payload pointers beside
/// them) is more than an engine's registers hold when it compiles WebAssembly for
/// x86-64; four lanes' is not. In Node, the int8 ONNX corpus file's
/// `--fast-decode` archive (mostly `huffman8`) decoded about 20% faster this way
/// (`bench/wasm/AB.md`). Tried and dropped: each lane's state in two values (its
/// bit position, and its next bits left-aligned, shifted by each code's length)
/// with each half run over sections of 64 blocks, so that four lanes stay in
/// registers for longer: that int8 archive decoded 0.92x as fast in Node
/// (`bench/wasm/ab.sh`; 449 B more bundle), and natively, with eight lanes at once
/// or in halves, it was no faster (`bench/coders-ab.sh`: 0.86-1.05x on BF16 words,
/// exponent bytes and 7-bit mantissas).
fn run_halves<W: Word, T: Lookup>(payload: &[u8], table: &T, lanes: &mut [Lane; LANES8], out: &mut [W]) {
    let per = (56 / table.bits()) as usize;
    let block = LANES8 * per;
    let mut done = 0;
    for chunk in out.chunks_exact_mut(block) {
        if !lanes.iter().all(|l| l.pos + 8 <= payload.len()) {
            break;
        }
        run_half::<W, T, 0>(payload, table, lanes, chunk);
        run_half::<W, T, { LANES8 / 2 }>(payload, table, lanes, chunk);
        done += block;
    }
    run_tail(payload, table, lanes, &mut out[done..]);
}

/// One pass of [`run_halves`]: lanes `FIRST..FIRST + 4` (each with 8 bytes to
/// load) decode words `FIRST..FIRST + 4` of each group of [`LANES8`] in `block`,
/// their state copied to locals for the pass.
#[inline(always)]
fn run_half<W: Word, T: Lookup, const FIRST: usize>(
    payload: &[u8],
    table: &T,
    lanes: &mut [Lane; LANES8],
    block: &mut [W],
) {
    const HALF: usize = LANES8 / 2;
    let mut local = [Lane::default(); HALF];
    local.copy_from_slice(&lanes[FIRST..FIRST + HALF]);
    for l in local.iter_mut() {
        l.refill(payload);
    }
    for group in block.chunks_exact_mut(LANES8) {
        for (d, l) in group[FIRST..FIRST + HALF].iter_mut().zip(local.iter_mut()) {
            *d = l.decode(table);
        }
    }
    lanes[FIRST..FIRST + HALF].copy_from_slice(&local);
}

/// Writes the code lengths `lens` (of at least two symbols, in increasing symbol
/// order) as the table's deltas.
pub(super) fn write_lengths(w: &mut BitWriter, lens: &[u8]) {
    let mut prev = ceil_log2(lens.len() as u64);
    for &l in lens {
        w.put_delta(i64::from(l) - i64::from(prev));
        prev = u32::from(l);
    }
}

/// The longest of the code lengths `lens`, which must form a complete prefix code.
pub(super) fn complete_code_depth(lens: &[u8]) -> Result<u32> {
    let maxlen = u32::from(lens.iter().copied().max().unwrap_or(1));
    let kraft: u64 = lens.iter().map(|&l| 1u64 << (maxlen - u32::from(l))).sum();
    if kraft != 1u64 << maxlen {
        return Err(FormatError::Corrupt {
            what: "huffman code lengths (not a complete prefix code)",
        });
    }
    Ok(maxlen)
}

/// The lookup table on the next `bits` bits (at least the longest code) of a
/// complete code: a code of length `l` fills the `2^(bits - l)` slots that start
/// with it, each with `entry(symbol, l)`.
pub(super) fn lookup_table<E: Copy + Default>(
    syms: &[u32],
    lens: &[u8],
    codes: &[u32],
    bits: u32,
    entry: fn(u32, u32) -> E,
) -> Result<Vec<E>> {
    let mut table = vec![E::default(); 1 << bits];
    for ((&s, &c), &l) in syms.iter().zip(codes).zip(lens) {
        let span = 1usize << (bits - u32::from(l));
        let at = (c as usize) << (bits - u32::from(l));
        // Always in bounds for a complete code (checked by the caller).
        let slots = table
            .get_mut(at..at + span)
            .ok_or(FormatError::Corrupt { what: WHAT })?;
        slots.fill(entry(s, u32::from(l)));
    }
    Ok(table)
}

/// Reads the code lengths of `nsym >= 2` symbols.
pub(super) fn read_lengths(br: &mut BitReader<'_>, nsym: usize) -> Result<Vec<u8>> {
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

/// The big-endian word of the bytes of `payload` from `pos` on, zeros past its end:
/// the last few loads of a payload (kept out of the decode loop).
#[cold]
#[inline(never)]
fn load_tail(payload: &[u8], pos: usize) -> u64 {
    let mut b = [0u8; 8];
    let tail = payload.get(pos..).unwrap_or(&[]);
    let n = tail.len().min(8);
    b[..n].copy_from_slice(&tail[..n]);
    u64::from_be_bytes(b)
}

/// `u64::from_be_bytes(b)`. WebAssembly has no byte swap: LLVM writes one out
/// as 22 shifts, masks and ors, one SIMD shuffle does it, on every refill of
/// every Huffman and `hsplit` lane.
#[inline(always)]
fn be_u64(b: [u8; 8]) -> u64 {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        use core::arch::wasm32::{i8x16_swizzle, u64x2_extract_lane, u64x2_splat, u8x16};
        let reversed = i8x16_swizzle(
            u64x2_splat(u64::from_le_bytes(b)),
            u8x16(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8),
        );
        u64x2_extract_lane::<0>(reversed)
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        u64::from_be_bytes(b)
    }
}

/// Where one of the `L` bit streams is being read, most significant bit first.
///
/// `word` holds the 8 bytes of the payload from byte `pos` on (big-endian; zeros past
/// the payload's end), of which the top `used` bits are consumed. Bytes past the
/// lane's own stream may be another lane's: a code is decided by its own bits alone
/// (every table slot that starts with it holds it), so they change nothing unless the
/// lane reads past its end, which `check_end` rejects.
#[derive(Clone, Copy, Default)]
pub(super) struct Lane {
    pub(super) pos: usize,
    pub(super) used: u32,
    pub(super) word: u64,
}

impl Lane {
    /// Moves `pos` up to the first byte not wholly consumed and reloads `word`: at
    /// least 57 bits are then unconsumed.
    #[inline(always)]
    pub(super) fn refill(&mut self, payload: &[u8]) {
        self.pos += (self.used >> 3) as usize;
        self.used &= 7;
        self.word = match payload.get(self.pos..).and_then(|d| d.first_chunk::<8>()) {
            Some(b) => be_u64(*b),
            None => load_tail(payload, self.pos),
        };
    }

    /// Decodes one symbol; at least the table's `bits` unconsumed bits must be in `word`.
    #[inline(always)]
    fn decode<W: Word, T: Lookup>(&mut self, table: &T) -> W {
        let (len, sym) = T::E::split(table.entry(self.word, self.used));
        self.used += len;
        W::from_u64(u64::from(sym))
    }

    /// The stream (`data`, starting at payload offset `start`) must end exactly in its
    /// last byte, padded with one bits.
    pub(super) fn check_end(&self, data: &[u8], start: usize) -> Result<()> {
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
/// `max(MIN_LIMIT, ceil(log2 S))` up to 16 whose coded size is within `rule`'s
/// slack of the 16-bit-limited optimum. Package-merge's lists are built once for
/// all the limits ([`PackageMerge`]).
fn choose_lengths(counts: &[u64], rule: LengthRule) -> Vec<u8> {
    let cost = |lens: &[u8]| -> u64 { counts.iter().zip(lens).map(|(&c, &l)| c * u64::from(l)).sum() };
    let lo = MIN_LIMIT.max(ceil_log2(counts.len() as u64));
    let merge = PackageMerge::new(counts, MAX_CODE_LEN);
    let best = merge.lengths(MAX_CODE_LEN);
    let target = cost(&best) + cost(&best) * rule.slack_per_10k / 10_000;
    for limit in lo..MAX_CODE_LEN {
        let lens = merge.lengths(limit);
        if cost(&lens) <= target {
            return lens;
        }
    }
    best
}

/// Canonical codes for `lens` (in increasing symbol order).
pub(super) fn canonical_codes(lens: &[u8]) -> Vec<u32> {
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
/// positive, `2^limit >= weights.len()`), by package-merge ([`PackageMerge`]).
pub(super) fn limited_lengths(weights: &[u64], limit: u32) -> Vec<u8> {
    PackageMerge::new(weights, limit).lengths(limit)
}

/// Package-merge's lists for optimal length-limited codes, for every limit up to
/// the one they were built for.
///
/// For a limit `L`, list `d` (for depth `d`, from `L` up to 1) merges the leaves with
/// the pairs of list `d + 1`; the first `2S - 2` items of list 1 are chosen, and a
/// chosen package chooses its two items in the list below. Leaves come in weight
/// order in every list, so the chosen leaves of a list are a prefix, and a leaf's
/// length is the number of lists whose chosen prefix holds it. The `j`-th list
/// built (the leaves alone, then each merged with the pairs of the one before)
/// does not depend on `L`: limit `L` uses the first `L` of them, so one build
/// serves every limit (a Huffman trial tries several).
pub(super) struct PackageMerge {
    /// Leaf positions in weight order (ties by position).
    order: Vec<usize>,
    /// `flags[j]`: the `j`-th list built, `true` marking a package.
    flags: Vec<Vec<bool>>,
}

impl PackageMerge {
    /// The lists for `weights` (at least two, all positive) up to limit `max_limit`.
    pub(super) fn new(weights: &[u64], max_limit: u32) -> Self {
        let n = weights.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| (weights[i], i));
        // The leaves, then a sentinel above every weight and package (weights are
        // symbol counts: their sum, the heaviest package, is far below it), so
        // the merge below needs no end checks.
        let mut leaves: Vec<u64> = order.iter().map(|&i| weights[i]).collect();
        debug_assert!(weights
            .iter()
            .try_fold(0u64, |s, &w| s.checked_add(w))
            .is_some_and(|s| s < u64::MAX));
        leaves.push(u64::MAX);
        let mut flags: Vec<Vec<bool>> = vec![vec![false; n]];
        let mut prev = leaves[..n].to_vec();
        let mut packages = Vec::new();
        for _ in 1..max_limit {
            packages.clear();
            packages.extend(prev.chunks_exact(2).map(|p| p[0] + p[1]));
            packages.push(u64::MAX);
            let len = n + packages.len() - 1;
            let mut cur = vec![0u64; len];
            let mut f = vec![false; len];
            // Merged by weight, a leaf before a package of equal weight. The
            // sentinels keep both indices in bounds.
            let (mut a, mut b) = (0, 0);
            for (c, is_package) in cur.iter_mut().zip(f.iter_mut()) {
                let (l, p) = (leaves[a], packages[b]);
                if l <= p {
                    *c = l;
                    a += 1;
                } else {
                    *c = p;
                    *is_package = true;
                    b += 1;
                }
            }
            flags.push(f);
            prev = cur;
        }
        PackageMerge { order, flags }
    }

    /// The optimal lengths of at most `limit` bits (`limit` at most the one the
    /// lists were built for, and `2^limit >= weights.len()`).
    pub(super) fn lengths(&self, limit: u32) -> Vec<u8> {
        let n = self.order.len();
        let mut lens = vec![0u8; n];
        let mut take = 2 * n - 2;
        for f in self.flags[..limit as usize].iter().rev() {
            let chosen = &f[..take.min(f.len())];
            let leaves_taken = chosen.iter().filter(|&&p| !p).count();
            for &i in &self.order[..leaves_taken] {
                lens[i] += 1;
            }
            take = 2 * (chosen.len() - leaves_taken);
        }
        lens
    }
}

#[cfg(test)]
mod tests {
    use super::super::tables::testing::{coder_tests, geometric, moved_boundaries, round_trip};
    use super::*;

    coder_tests!(Huffman, "huffman", read_lengths, rare: 1300, tables: [200, 700], data: 1.005, small: (1.05, 32.0));

    /// Both entry layouts give back every symbol and length they hold, the largest
    /// of each included: 16-bit symbols with 16-bit codes (u32 entries) and
    /// NARROW_WIDTH-bit ones (u16 entries).
    #[test]
    fn entries_split_into_what_they_were_made_of() {
        for sym in [0u32, 1, 0x7ff, 0x8000, 0xfffe, 0xffff] {
            for len in 1..=16u32 {
                assert_eq!(<u32 as Entry>::split(<u32 as Entry>::new(sym, len).get()), (len, sym));
                if sym < 1 << NARROW_WIDTH {
                    assert_eq!(<u16 as Entry>::split(<u16 as Entry>::new(sym, len).get()), (len, sym));
                }
            }
        }
    }

    /// `encoded_len` is the length of the payload `encode` and `encode8` write,
    /// for empty, single-symbol and skewed streams of every width, of lengths
    /// that are and are not whole rounds of lanes.
    #[test]
    fn encoded_len_is_the_payload_length() {
        let mut rng = super::super::tables::testing::Rng(5);
        for width in 1..=16u8 {
            for n in [0usize, 1, 3, 7, 8, 9, 100, 1001, 5000] {
                // 1: a single symbol; 3 and 40: skewed small values; 0: uniform.
                for skew in [1u64, 3, 40, 0] {
                    let words: Vec<u16> = (0..n)
                        .map(|_| {
                            let r = rng.next();
                            let v = if skew == 0 { r } else { r % (1 + (r >> 32) % skew * 7) };
                            (v & ((1 << width) - 1)) as u16
                        })
                        .collect();
                    let e4 = encode(&words, width).unwrap();
                    assert_eq!(encoded_len(&words, width, LANES), Some(e4.len()), "w{width} n{n}");
                    let e8 = encode8(&words, width).unwrap();
                    assert_eq!(encoded_len(&words, width, LANES8), Some(e8.len()), "w{width} n{n}");
                }
            }
        }
        assert_eq!(encoded_len(&[1u8, 2], 8, 5), None);
        assert_eq!(encoded_len(&[300u16], 8, LANES), None);
    }

    /// Bytes shaped like int8 weights (a rounded near-normal of standard deviation
    /// about 42, about 7.4 bits each):
    /// the default rule keeps codes over 11 bits, the fast-decode rule takes
    /// 11 bits for at most its slack, and both payloads decode and are priced
    /// exactly.
    #[test]
    fn fast_decode_rule_shortens_codes_within_its_slack() {
        let mut rng = super::super::tables::testing::Rng(11);
        let words: Vec<u8> = (0..200_000)
            .map(|_| {
                // The sum of four uniform variables: close to normal.
                let sum: i64 = (0..4).map(|_| (rng.next() % 1024) as i64).sum();
                ((sum - 2046) / 14).clamp(-128, 127) as i8 as u8
            })
            .collect();
        let Census::Symbols(_, counts) = census(&words, 8).unwrap() else {
            panic!("several symbols")
        };
        let cost = |lens: &[u8]| -> u64 { counts.iter().zip(lens).map(|(&c, &l)| c * u64::from(l)).sum() };
        let small = choose_lengths(&counts, LengthRule::SMALLEST);
        let fast = choose_lengths(&counts, LengthRule::FAST_DECODE);
        let longest = |lens: &[u8]| lens.iter().copied().max().unwrap();
        assert!(
            longest(&small) > 11 && longest(&fast) == 11,
            "the shape this test is about"
        );
        let best = cost(&PackageMerge::new(&counts, MAX_CODE_LEN).lengths(MAX_CODE_LEN));
        assert!(
            cost(&fast) * 10_000 <= best * (10_000 + 15),
            "{} over {best}",
            cost(&fast)
        );
        assert!(
            cost(&fast) * 10_000 > best * (10_000 + 3),
            "the default rule would take it"
        );
        for (rule, lanes) in [(LengthRule::SMALLEST, LANES), (LengthRule::FAST_DECODE, LANES8)] {
            let payload = encode_with(&words, 8, lanes, rule).unwrap();
            let c = census(&words, 8).unwrap();
            assert_eq!(encoded_len_counted(&words, 8, lanes, &c, rule), Some(payload.len()));
            let mut out = vec![0u8; words.len()];
            decode_lanes(&payload, 8, &mut out, lanes).unwrap();
            assert_eq!(out, words);
        }
        assert_eq!(encode_with(&words, 8, 5, LengthRule::FAST_DECODE), None);
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

    /// The lists, built as package-merge is usually written: both inputs peeked,
    /// a leaf taken before a package of equal weight.
    fn reference_flags(weights: &[u64], max_limit: u32) -> Vec<Vec<bool>> {
        let n = weights.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| (weights[i], i));
        let leaves: Vec<u64> = order.iter().map(|&i| weights[i]).collect();
        let mut flags = std::vec![std::vec![false; n]];
        let mut prev = leaves.clone();
        for _ in 1..max_limit {
            let (mut cur, mut f) = (Vec::new(), Vec::new());
            let mut packages = prev.chunks_exact(2).map(|p| p[0] + p[1]).peekable();
            let mut li = leaves.iter().copied().peekable();
            loop {
                let leaf = match (li.peek(), packages.peek()) {
                    (Some(&l), Some(&p)) => l <= p,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (None, None) => break,
                };
                cur.push(if leaf { li.next() } else { packages.next() }.expect("peeked"));
                f.push(!leaf);
            }
            flags.push(f);
            prev = cur;
        }
        flags
    }

    /// The merge with sentinels builds the reference's lists, on weights with
    /// many ties (leaves and packages of equal weight), skewed, flat and tiny.
    #[test]
    fn lists_are_the_references() {
        let mut rng = super::super::tables::testing::Rng(7);
        for round in 0..300 {
            let n = 2 + (rng.next() % 300) as usize;
            let w: Vec<u64> = (0..n)
                .map(|i| match round % 3 {
                    0 => 1 + rng.next() % 4,
                    1 => 1 + rng.next() % 100_000 / (1 + i as u64),
                    _ => 1 << (rng.next() % 12),
                })
                .collect();
            for limit in [1, ceil_log2(n as u64).max(1), MAX_CODE_LEN] {
                assert_eq!(
                    PackageMerge::new(&w, limit).flags,
                    reference_flags(&w, limit),
                    "round {round}"
                );
            }
        }
    }

    /// Lists built once for limit 16 give, at every smaller limit, the lengths of
    /// lists built for that limit alone (what `choose_lengths` relies on), on
    /// Fibonacci weights (deep codes, so the limits bind), skewed and flat
    /// counts, with ties.
    #[test]
    fn one_package_merge_serves_every_limit() {
        let mut rng = super::super::tables::testing::Rng(99);
        let mut fib = std::vec![1u64, 1];
        while fib.len() < 40 {
            let k = fib.len();
            fib.push(fib[k - 1] + fib[k - 2]);
        }
        let skewed: Vec<u64> = (0..700).map(|i| 1 + (rng.next() % 1000) / (i + 1)).collect();
        let flat: Vec<u64> = (0..3000).map(|_| 50 + rng.next() % 4).collect();
        let mut bound = 0;
        for w in [&fib, &skewed, &flat] {
            let all = PackageMerge::new(w, MAX_CODE_LEN);
            let unlimited = all.lengths(MAX_CODE_LEN);
            for limit in ceil_log2(w.len() as u64).max(1)..=MAX_CODE_LEN {
                let lens = all.lengths(limit);
                assert_eq!(
                    lens,
                    PackageMerge::new(w, limit).lengths(limit),
                    "limit {limit}, {} weights",
                    w.len()
                );
                bound += usize::from(lens != unlimited);
            }
        }
        // Some limits bind (their lengths differ from the 16-bit ones).
        assert!(bound > 5, "{bound}");
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
            for (what, q) in moved_boundaries(&p, table_end, LANES - 1) {
                assert!(decode(&q, width, &mut out).is_err(), "width {width}, {what}");
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

/// The shared coder tests for `huffman8` (eight streams).
#[cfg(test)]
mod tests8 {
    pub(super) use super::{decode8 as decode, encode8 as encode};

    mod coder {
        use super::super::super::tables::testing::coder_tests;

        coder_tests!(Huffman8, "huffman8", crate::wire::huffman::read_lengths, rare: 1300, tables: [200, 700], data: 1.005, small: (1.05, 40.0));
    }

    /// Four lanes at a time (WebAssembly's loop) decode what eight at a time do,
    /// to the last word of every length around a block's end, into 16-bit words
    /// and into bytes, and the streams' ends are checked the same way: a payload
    /// cut short fails both.
    #[test]
    fn four_lanes_at_a_time_decode_what_eight_do() {
        use super::super::tables::testing::geometric;
        use super::{decode_lanes_in, LANES8};
        for (n, width) in [
            (1usize, 8u8),
            (39, 8),
            (40, 8),
            (41, 8),
            (48, 8),
            (4099, 8),
            (65_537, 8),
            (5000, 12),
            (65_537, 16),
        ] {
            let v = geometric(n, width, 0.8, n as u64 + 7);
            let payload = encode(&v, width).unwrap();
            let mut eight = std::vec![0u16; n];
            let mut four = std::vec![0u16; n];
            decode_lanes_in::<_, false>(&payload, width, &mut eight, LANES8).unwrap();
            decode_lanes_in::<_, true>(&payload, width, &mut four, LANES8).unwrap();
            assert_eq!(eight, v, "{n} {width}");
            assert_eq!(four, v, "{n} {width}");
            let cut = &payload[..payload.len() - 1];
            let (e, f) = (
                decode_lanes_in::<_, false>(cut, width, &mut eight, LANES8),
                decode_lanes_in::<_, true>(cut, width, &mut four, LANES8),
            );
            assert!(e.is_err() && f.is_err(), "{n} {width}: {e:?} {f:?}");
            if width <= 8 {
                // Into bytes too: WebAssembly's 8-bit instance (`run_bytes`).
                let narrow: std::vec::Vec<u8> = v.iter().map(|&w| w as u8).collect();
                let mut bytes = std::vec![0u8; n];
                decode_lanes_in::<_, true>(&payload, width, &mut bytes, LANES8).unwrap();
                assert_eq!(bytes, narrow, "{n} {width}: bytes");
                assert!(decode_lanes_in::<u8, true>(cut, width, &mut bytes, LANES8).is_err());
            }
        }
    }

    /// Eight streams hold the same codes as four, dealt out differently: the
    /// payloads differ by the stream sizes and padding alone.
    #[test]
    fn eight_streams_cost_only_sizes_and_padding() {
        use super::super::tables::testing::geometric;
        for (n, width) in [(1usize, 8u8), (7, 8), (8, 3), (1000, 12), (65_537, 16)] {
            let v = geometric(n, width, 0.9, n as u64);
            let four = super::encode(&v, width).unwrap();
            let eight = encode(&v, width).unwrap();
            let mut back = std::vec![0u16; v.len()];
            decode(&eight, width, &mut back).unwrap();
            assert_eq!(back, v);
            assert!(
                eight.len() >= four.len() && eight.len() <= four.len() + 4 * 3 + 4,
                "{n} {width}: {} vs {}",
                eight.len(),
                four.len()
            );
        }
    }
}
