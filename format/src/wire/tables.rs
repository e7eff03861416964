//! Both coders' payloads start with a **table**, a bit string read **most significant
//! bit first** within each byte and zero-padded to a whole byte (the padding bits must
//! be zero). Within a table:
//!
//! - `EG(v)` is order-0 Exp-Golomb: with `u = v + 1` and `k = floor(log2 u)`, `k` zero
//!   bits and then the `k + 1` bits of `u`, most significant first (a decoder rejects
//!   `k > 32`).
//! - `bits(n, v)` is `v` in `n` bits, most significant first.
//! - `zigzag` maps a signed difference to an unsigned value: `d >= 0 -> 2d`,
//!   `d < 0 -> -2d - 1`.
//!
//! # Symbol set
//!
//! Every table starts with the present symbols (at least one, each below `2^width`),
//! as maximal runs of consecutive values, in increasing order: `EG(runs - 1)`, then
//! per run `EG(gap)` and `EG(len - 1)`. The first run starts at `gap`; each later run
//! starts at `previous run's end + 1 + gap` (runs are maximal, so there is at least
//! one absent value between them). Every run must end at or below `2^width`.
//!
//! If exactly one symbol is present, the table ends there: every word is that symbol,
//! and nothing follows the table. An empty stream (`count = 0`) has an empty payload.

use alloc::vec;
use alloc::vec::Vec;

use super::MAX_ENTROPY_WIDTH;
use crate::error::{FormatError, Result};
use crate::stream::{mask, Word};

/// What a stream to entropy-code holds, as far as the coders' shared framing goes.
pub(crate) enum Census {
    /// The whole payload: the stream is empty or holds a single symbol.
    Payload(Vec<u8>),
    /// At least two present symbols, in increasing order, and their counts.
    Symbols(Vec<u32>, Vec<u64>),
}

/// Counts the symbols of a stream to encode. Returns `None` for a width outside
/// 1..=16 or a symbol that does not fit `width`.
pub(crate) fn census<W: Word>(symbols: &[W], width: u8) -> Option<Census> {
    if width == 0 || width > MAX_ENTROPY_WIDTH {
        return None;
    }
    if symbols.is_empty() {
        return Some(Census::Payload(Vec::new()));
    }
    let (syms, cs) = present(&symbol_counts(symbols, width)?);
    if syms.len() == 1 {
        let mut w = BitWriter::default();
        write_symbol_set(&mut w, &syms);
        return Some(Census::Payload(w.finish()));
    }
    Some(Census::Symbols(syms, cs))
}

/// The symbols with a non-zero count in `counts` (indexed by symbol), in increasing
/// order, and their counts.
pub(crate) fn present(counts: &[u64]) -> (Vec<u32>, Vec<u64>) {
    counts
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(s, &c)| (s as u32, c))
        .unzip()
}

/// How often each of the `2^width` symbols occurs in `symbols`, or `None` if a
/// symbol does not fit `width`.
pub(crate) fn symbol_counts<W: Word>(symbols: &[W], width: u8) -> Option<Vec<u64>> {
    let lim = mask(width);
    let size = 1usize << width;
    // Long streams count into four tables in turn: a run of one symbol (an
    // exponent byte, a zero) would otherwise make every increment wait on the
    // one before through memory. Short ones are not worth the larger tables.
    if symbols.len() < 4 * size || symbols.len() > u32::MAX as usize {
        let mut counts = vec![0u64; size];
        for s in symbols {
            let v = s.to_u64();
            if v > lim {
                return None;
            }
            counts[v as usize] += 1;
        }
        return Some(counts);
    }
    let mut tables = vec![0u32; 4 * size];
    let (t0, rest) = tables.split_at_mut(size);
    let (t1, rest) = rest.split_at_mut(size);
    let (t2, t3) = rest.split_at_mut(size);
    // Words above `lim` are counted masked and reported after the pass.
    let mut bad = 0u64;
    let mut rounds = symbols.chunks_exact(4);
    for r in &mut rounds {
        let v = [r[0].to_u64(), r[1].to_u64(), r[2].to_u64(), r[3].to_u64()];
        bad |= (v[0] | v[1] | v[2] | v[3]) & !lim;
        t0[(v[0] & lim) as usize] += 1;
        t1[(v[1] & lim) as usize] += 1;
        t2[(v[2] & lim) as usize] += 1;
        t3[(v[3] & lim) as usize] += 1;
    }
    for s in rounds.remainder() {
        let v = s.to_u64();
        bad |= v & !lim;
        t0[(v & lim) as usize] += 1;
    }
    if bad != 0 {
        return None;
    }
    Some(
        (0..size)
            .map(|i| u64::from(t0[i]) + u64::from(t1[i]) + u64::from(t2[i]) + u64::from(t3[i]))
            .collect(),
    )
}

/// Starts decoding `payload` into `out`: checks `width` (1..=16, and no wider than
/// `W`), then handles the empty stream and a single-symbol table (`what` names the
/// literal in errors). Returns `None` when that decoded `out`, or else the present
/// symbols (at least two) and the reader just after them.
pub(crate) fn start_decode<'a, W: Word>(
    payload: &'a [u8],
    width: u8,
    out: &mut [W],
    what: &'static str,
) -> Result<Option<(Vec<u32>, BitReader<'a>)>> {
    if width == 0 || width > MAX_ENTROPY_WIDTH || u32::from(width) > W::BITS {
        return Err(FormatError::BadWidth { width });
    }
    if out.is_empty() {
        if !payload.is_empty() {
            return Err(FormatError::TrailingBytes {
                what,
                count: payload.len() as u64,
            });
        }
        return Ok(None);
    }
    let mut br = BitReader::new(payload);
    let syms = read_symbol_set(&mut br, width)?;
    if let [only] = syms[..] {
        let end = br.finish()?;
        if end != payload.len() {
            return Err(FormatError::TrailingBytes {
                what,
                count: (payload.len() - end) as u64,
            });
        }
        out.fill(W::from_u64(u64::from(only)));
        return Ok(None);
    }
    Ok(Some((syms, br)))
}

/// Writes the strictly increasing, non-empty symbol list as maximal runs.
pub(crate) fn write_symbol_set(w: &mut BitWriter, syms: &[u32]) {
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
pub(crate) fn read_symbol_set(br: &mut BitReader<'_>, width: u8) -> Result<Vec<u32>> {
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

/// `ceil(log2 v)`, 0 for `v <= 1`.
pub(crate) fn ceil_log2(v: u64) -> u32 {
    if v <= 1 {
        0
    } else {
        64 - (v - 1).leading_zeros()
    }
}

pub(super) fn zigzag(d: i64) -> u64 {
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
// Bit I/O, most significant bit first.

/// Writes bits most significant first; the table writer, and Huffman's bit streams.
#[derive(Default)]
pub(crate) struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    nbits: u32,
}

impl BitWriter {
    /// An empty writer with room for `bytes` bytes.
    pub(crate) fn with_capacity(bytes: usize) -> Self {
        BitWriter {
            out: Vec::with_capacity(bytes),
            ..Self::default()
        }
    }

    /// Appends the low `n` (<= 32) bits of `v`, most significant first.
    pub(crate) fn put(&mut self, v: u32, n: u32) {
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
    pub(crate) fn put_eg(&mut self, v: u64) {
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

    /// Appends `EG(zigzag(d))`.
    pub(crate) fn put_delta(&mut self, d: i64) {
        self.put_eg(zigzag(d));
    }

    /// Bits written so far.
    pub(crate) fn bit_len(&self) -> usize {
        self.out.len() * 8 + self.nbits as usize
    }

    /// The bytes, padded with one bits (Huffman's bit streams).
    pub(crate) fn finish_ones(mut self) -> Vec<u8> {
        if self.nbits > 0 {
            let pad = 8 - self.nbits;
            self.out.push((self.acc << pad | ((1u64 << pad) - 1)) as u8);
        }
        self.out
    }

    /// The bytes, zero-padded (a table).
    pub(crate) fn finish(mut self) -> Vec<u8> {
        if self.nbits > 0 {
            self.out.push((self.acc << (8 - self.nbits)) as u8);
        }
        self.out
    }
}

/// Reads a table, most significant bit first.
pub(crate) struct BitReader<'a> {
    data: &'a [u8],
    /// Bits read.
    pos: usize,
}

impl<'a> BitReader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
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
    pub(crate) fn bits(&mut self, n: u32) -> Result<u32> {
        let mut v = 0u32;
        for _ in 0..n {
            v = v << 1 | self.bit()?;
        }
        Ok(v)
    }

    /// Reads `EG(v)`.
    pub(crate) fn eg(&mut self) -> Result<u64> {
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

    /// Reads `EG(zigzag(d))` and returns `d`; a zigzag value above 64 is rejected as
    /// an invalid `what`.
    pub(crate) fn delta(&mut self, what: &'static str) -> Result<i64> {
        let z = self.eg()?;
        if z > 64 {
            return Err(FormatError::Invalid { what });
        }
        Ok(unzigzag(z))
    }

    /// Byte length of what was read; the padding bits must be zero.
    pub(crate) fn finish(&self) -> Result<usize> {
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

/// Test support both coders' tests share: symbol generators, and the tests every
/// entropy coder must pass, instantiated per coder by [`coder_tests!`].
#[cfg(test)]
pub(crate) mod testing {
    use proptest::prelude::*;
    use std::vec::Vec;

    use crate::error::{FormatError, Result};
    use crate::stream::{mask, Word};

    /// An entropy coder under test, with the bounds its tests hold it to (defined by
    /// [`coder_tests!`]).
    pub(crate) trait Coder {
        /// Name in test output.
        const NAME: &'static str;
        /// Payload bound for 10 000 one-bit words, one of them 1.
        const RARE_SYMBOL_BYTES: usize;
        /// Table bounds: 8-bit skewed (all 256 present), 10-bit near-uniform.
        const TABLE_BYTES: [usize; 2];
        /// Data bytes allowed per byte of entropy on a large skewed stream.
        const DATA_SLACK: f64;
        /// `(a, b)`: 300 skewed words take fewer than `a * entropy + b` bytes.
        const SMALL_STREAM: (f64, f64);
        fn encode<W: Word>(symbols: &[W], width: u8) -> Option<Vec<u8>>;
        fn decode<W: Word>(payload: &[u8], width: u8, out: &mut [W]) -> Result<()>;
        /// Bytes of the table of a payload with at least two symbols.
        fn table_len(payload: &[u8], width: u8) -> usize;
    }

    /// Defines the coder's [`Coder`] (`$coder`, over the calling module's parent's
    /// `encode` and `decode`; `$read_rest` reads the table after the symbol set) and
    /// instantiates the shared tests for it, with the same names in every coder.
    macro_rules! coder_tests {
        ($coder:ident, $name:literal, $read_rest:path, rare: $rare:expr, tables: $tables:expr, data: $data:expr, small: $small:expr) => {
            use $crate::wire::tables::testing as shared;

            struct $coder;
            impl shared::Coder for $coder {
                const NAME: &'static str = $name;
                const RARE_SYMBOL_BYTES: usize = $rare;
                const TABLE_BYTES: [usize; 2] = $tables;
                const DATA_SLACK: f64 = $data;
                const SMALL_STREAM: (f64, f64) = $small;
                fn encode<W: $crate::stream::Word>(symbols: &[W], width: u8) -> Option<std::vec::Vec<u8>> {
                    super::encode(symbols, width)
                }
                fn decode<W: $crate::stream::Word>(payload: &[u8], width: u8, out: &mut [W]) -> $crate::error::Result<()> {
                    super::decode(payload, width, out)
                }
                fn table_len(payload: &[u8], width: u8) -> usize {
                    let mut br = $crate::wire::tables::BitReader::new(payload);
                    let syms = $crate::wire::tables::read_symbol_set(&mut br, width).unwrap();
                    $read_rest(&mut br, syms.len()).unwrap();
                    br.finish().unwrap()
                }
            }

            $crate::wire::tables::testing::coder_tests!(@each $coder:
                round_trips_random_and_skewed,
                empty_and_single_symbol,
                all_65536_symbols,
                table_is_compact,
                size_close_to_entropy,
                small_streams_have_small_overhead,
                every_truncation_fails,
                bad_widths
            );

            #[test]
            #[ignore]
            fn throughput() {
                shared::throughput::<$coder>();
            }

            proptest::proptest! {
                #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
                #[test]
                fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200), n in 0usize..300, width in 1u8..=16) {
                    shared::arbitrary_bytes_never_panic::<$coder>(&bytes, n, width)?;
                }

                #[test]
                fn flipped_payloads_never_panic(seed in proptest::prelude::any::<u64>(), flips in proptest::collection::vec((proptest::prelude::any::<usize>(), 1u8..=255), 1..4), n in 1usize..400, width in proptest::sample::select(std::vec![1u8, 3, 8, 10, 16])) {
                    shared::flipped_payloads_never_panic::<$coder>(seed, &flips, n, width)?;
                }

                #[test]
                fn round_trip_any(v in proptest::collection::vec(proptest::prelude::any::<u16>(), 0..500), width in 1u8..=16) {
                    shared::round_trip::<$coder, u16>(&shared::to_width(&v, width), width);
                }
            }
        };
        (@each $coder:ident: $($test:ident),*) => {
            $(
                #[test]
                fn $test() {
                    $crate::wire::tables::testing::$test::<$coder>();
                }
            )*
        };
    }
    pub(crate) use coder_tests;

    /// `payload` (`head`, then the sizes of streams `0..sizes` as varints, then the
    /// streams) with the boundary between two adjacent streams moved by one byte
    /// either way, each with a label for assertion messages: a lane reading ahead
    /// into the next lane's bytes must still see that its stream ends elsewhere.
    pub(crate) fn moved_boundaries(payload: &[u8], head: usize, sizes: usize) -> Vec<(std::string::String, Vec<u8>)> {
        let mut r = crate::bytes::ByteReader::new(&payload[head..]);
        let lens: Vec<u64> = (0..sizes).map(|_| r.varint("size").unwrap()).collect();
        let streams = &payload[head + r.position()..];
        let mut out = Vec::new();
        for k in 0..sizes {
            for delta in [-1i64, 1] {
                let mut moved = lens.clone();
                moved[k] = lens[k].wrapping_add_signed(delta);
                if k + 1 < sizes {
                    moved[k + 1] = lens[k + 1].wrapping_add_signed(-delta);
                }
                let mut q = payload[..head].to_vec();
                for &m in &moved {
                    crate::bytes::put_varint(&mut q, m);
                }
                q.extend_from_slice(streams);
                out.push((std::format!("stream {k}, {delta:+}"), q));
            }
        }
        out
    }

    /// A xorshift generator for test data (seed it non-zero).
    pub(crate) struct Rng(pub(crate) u64);
    impl Rng {
        /// The next 64 random bits.
        pub(crate) fn next(&mut self) -> u64 {
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
    pub(crate) fn geometric(n: usize, width: u8, r: f64, seed: u64) -> Vec<u16> {
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

    pub(crate) fn round_trip<C: Coder, W: Word>(symbols: &[W], width: u8) -> Vec<u8> {
        let p = C::encode(symbols, width).expect("applies");
        let mut back = std::vec![W::default(); symbols.len()];
        C::decode(&p, width, &mut back).unwrap();
        assert_eq!(back, symbols, "width {width}");
        p
    }

    pub(crate) fn to_width(v: &[u16], width: u8) -> Vec<u16> {
        v.iter().map(|&x| x & mask(width) as u16).collect()
    }

    pub(crate) fn round_trips_random_and_skewed<C: Coder>() {
        for width in [1u8, 3, 8, 10, 12, 16] {
            for n in [1usize, 2, 3, 4, 5, 7, 17, 100, 1000, 50_000] {
                let mut rng = Rng(0x9e37_79b9 + n as u64 + u64::from(width));
                let uniform: Vec<u16> = (0..n).map(|_| (rng.next() & mask(width)) as u16).collect();
                round_trip::<C, _>(&uniform, width);
                let skew = geometric(n, width, 0.9, n as u64 ^ 77);
                round_trip::<C, _>(&skew, width);
                let steep = geometric(n, width, 0.3, n as u64 ^ 5);
                round_trip::<C, _>(&steep, width);
                if width <= 8 {
                    let u8s: Vec<u8> = skew.iter().map(|&v| v as u8).collect();
                    round_trip::<C, _>(&u8s, width);
                }
            }
        }
    }

    pub(crate) fn empty_and_single_symbol<C: Coder>() {
        let p = round_trip::<C, u8>(&[], 8);
        assert!(p.is_empty());
        assert!(C::decode::<u8>(&[0], 8, &mut []).is_err());
        let p = round_trip::<C, _>(&[5u8; 1000], 3);
        assert_eq!(p.len(), 1);
        let p = round_trip::<C, _>(&[65535u16; 77], 16);
        assert!(p.len() <= 5, "{}", p.len());
        let mut out = [0u16; 3];
        assert!(matches!(
            C::decode(&p, 16, &mut out[..0]),
            Err(FormatError::TrailingBytes { .. })
        ));
        let mut long = p.clone();
        long.push(0);
        assert!(matches!(
            C::decode(&long, 16, &mut out),
            Err(FormatError::TrailingBytes { .. })
        ));
        assert!(matches!(
            C::decode::<u8>(&[], 8, &mut [0]),
            Err(FormatError::Truncated { .. })
        ));
        // Two symbols, one of them once.
        let mut v = std::vec![0u8; 10_000];
        v[1234] = 1;
        let p = round_trip::<C, _>(&v, 1);
        assert!(p.len() < C::RARE_SYMBOL_BYTES, "{}", p.len());
    }

    pub(crate) fn all_65536_symbols<C: Coder>() {
        let mut v: Vec<u16> = (0..=u16::MAX).collect();
        v.extend(geometric(200_000, 16, 0.9999, 3));
        let p = round_trip::<C, _>(&v, 16);
        std::println!("65536 symbols: {} B vs entropy {:.0} B", p.len(), entropy_bytes(&v));
        assert!((p.len() as f64) < entropy_bytes(&v) * 1.08);
        // Sparse 16-bit alphabet.
        let mut rng = Rng(99);
        let sparse: Vec<u16> = (0..5000).map(|_| (rng.next() % 300) as u16 * 211).collect();
        round_trip::<C, _>(&sparse, 16);
    }

    pub(crate) fn table_is_compact<C: Coder>() {
        // 8-bit, all 256 present, skewed.
        let v = geometric(1 << 16, 8, 0.97, 1);
        let t = C::table_len(&C::encode(&v, 8).unwrap(), 8);
        assert!(t < C::TABLE_BYTES[0], "table {t} bytes");
        // 10-bit near-uniform (FP16 mantissas).
        let mut rng = Rng(5);
        let m: Vec<u16> = (0..1 << 16).map(|_| (rng.next() & 1023) as u16).collect();
        let t = C::table_len(&C::encode(&m, 10).unwrap(), 10);
        assert!(t < C::TABLE_BYTES[1], "table {t} bytes");
    }

    pub(crate) fn size_close_to_entropy<C: Coder>() {
        let v = geometric(1 << 20, 8, 0.97, 42);
        let v8: Vec<u8> = v.iter().map(|&x| x as u8).collect();
        let p = round_trip::<C, _>(&v8, 8);
        let table = C::table_len(&p, 8);
        let h = entropy_bytes(&v);
        let data = (p.len() - table) as f64;
        std::println!(
            "{}: table {table} B, data {data} B, entropy {h:.1} B, overhead {:.4}%",
            C::NAME,
            (data / h - 1.0) * 100.0
        );
        assert!(data <= h * C::DATA_SLACK, "data {data} vs entropy {h}");
    }

    pub(crate) fn small_streams_have_small_overhead<C: Coder>() {
        let v = geometric(300, 8, 0.8, 11);
        let p = round_trip::<C, _>(&v, 8);
        let h = entropy_bytes(&v);
        std::println!("{} 300 words: {} B vs entropy {h:.1} B", C::NAME, p.len());
        let (a, b) = C::SMALL_STREAM;
        assert!((p.len() as f64) < h * a + b, "{} vs {h}", p.len());
    }

    pub(crate) fn every_truncation_fails<C: Coder>() {
        let v = geometric(500, 8, 0.9, 8);
        let p = round_trip::<C, _>(&v, 8);
        let mut out = std::vec![0u16; v.len()];
        for k in 0..p.len() {
            assert!(C::decode(&p[..k], 8, &mut out).is_err(), "truncated to {k}");
        }
        let mut out = std::vec![0u16; v.len() + 1];
        assert!(C::decode(&p, 8, &mut out).is_err());
        let mut out = std::vec![0u16; v.len() - 1];
        assert!(C::decode(&p, 8, &mut out).is_err());
    }

    pub(crate) fn bad_widths<C: Coder>() {
        assert!(C::encode(&[0u8], 0).is_none());
        assert!(C::encode(&[0u16], 17).is_none());
        assert!(C::encode(&[8u8], 3).is_none());
        assert!(matches!(
            C::decode::<u8>(&[0], 9, &mut [0]),
            Err(FormatError::BadWidth { .. })
        ));
        assert!(matches!(
            C::decode::<u16>(&[0], 0, &mut [0]),
            Err(FormatError::BadWidth { .. })
        ));
    }

    pub(crate) fn arbitrary_bytes_never_panic<C: Coder>(
        bytes: &[u8],
        n: usize,
        width: u8,
    ) -> core::result::Result<(), TestCaseError> {
        let mut out = std::vec![0u16; n];
        if C::decode(bytes, width, &mut out).is_ok() {
            prop_assert!(out.iter().all(|&s| u64::from(s) <= mask(width)));
        }
        let mut out8 = std::vec![0u8; n];
        let _ = C::decode(bytes, width.min(8), &mut out8);
        Ok(())
    }

    pub(crate) fn flipped_payloads_never_panic<C: Coder>(
        seed: u64,
        flips: &[(usize, u8)],
        n: usize,
        width: u8,
    ) -> core::result::Result<(), TestCaseError> {
        let v = to_width(&geometric(n, width, 0.8, seed), width);
        let mut p = C::encode(&v, width).unwrap();
        for &(at, x) in flips {
            let k = at % p.len();
            p[k] ^= x;
        }
        let mut out = std::vec![0u16; n];
        if C::decode(&p, width, &mut out).is_ok() {
            prop_assert!(out.iter().all(|&s| u64::from(s) <= mask(width)));
        }
        Ok(())
    }

    pub(crate) fn throughput<C: Coder>() {
        let v = geometric(4 << 20, 8, 0.97, 42);
        let v8: Vec<u8> = v.iter().map(|&x| x as u8).collect();
        let t = std::time::Instant::now();
        let p = C::encode(&v8, 8).unwrap();
        let enc = t.elapsed();
        let mut out = std::vec![0u8; v8.len()];
        // Best of several runs: the machine may be shared.
        let mut dec = std::time::Duration::MAX;
        for _ in 0..30 {
            let t = std::time::Instant::now();
            C::decode(&p, 8, &mut out).unwrap();
            dec = dec.min(t.elapsed());
        }
        assert_eq!(out, v8);
        let mb = v8.len() as f64 / 1e6;
        std::println!(
            "{}: {} -> {} bytes ({:.4} bits/sym, {:+.4}% vs order-0 entropy), encode {:.0} MB/s, decode {:.0} MB/s",
            C::NAME,
            v8.len(),
            p.len(),
            p.len() as f64 * 8.0 / v8.len() as f64,
            (p.len() as f64 / entropy_bytes(&v) - 1.0) * 100.0,
            mb / enc.as_secs_f64(),
            mb / dec.as_secs_f64()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_golomb_and_deltas_round_trip() {
        let vals = [0u64, 1, 2, 3, 6, 7, 255, 65_535, (1 << 32) - 2, (1 << 32) - 1];
        let deltas = [0i64, 1, -1, 2, -2, 15, -16, 32, -32];
        let mut w = BitWriter::default();
        for &v in &vals {
            w.put_eg(v);
        }
        for &d in &deltas {
            w.put_delta(d);
        }
        w.put(0b1011, 4);
        let bits = w.bit_len();
        let p = w.finish();
        assert_eq!(p.len(), bits.div_ceil(8));
        let mut br = BitReader::new(&p);
        for &v in &vals {
            assert_eq!(br.eg().unwrap(), v);
        }
        for &d in &deltas {
            assert_eq!(br.delta("delta").unwrap(), d);
        }
        assert_eq!(br.bits(4).unwrap(), 0b1011);
        assert_eq!(br.finish().unwrap(), p.len());
        // EG(0) = "1": a lone 1 bit, then zero padding, or one padding for streams.
        let mut w = BitWriter::default();
        w.put_eg(0);
        assert_eq!(w.finish(), [0x80]);
        let mut w = BitWriter::with_capacity(1);
        w.put_eg(0);
        assert_eq!(w.finish_ones(), [0xff]);
    }

    #[test]
    fn reader_rejects_bad_tables() {
        // 33 leading zeros.
        let long = [0u8, 0, 0, 0, 0, 0xff];
        assert!(matches!(BitReader::new(&long).eg(), Err(FormatError::Invalid { .. })));
        assert!(matches!(BitReader::new(&[0]).eg(), Err(FormatError::Truncated { .. })));
        // EG(65): a zigzag value over 64.
        let mut w = BitWriter::default();
        w.put_eg(65);
        let p = w.finish();
        assert!(matches!(
            BitReader::new(&p).delta("d"),
            Err(FormatError::Invalid { what: "d" })
        ));
        // "1" then nonzero padding.
        let mut br = BitReader::new(&[0xc0]);
        br.eg().unwrap();
        assert!(matches!(br.finish(), Err(FormatError::Corrupt { .. })));
    }

    #[test]
    fn symbol_sets_round_trip_and_stay_in_width() {
        let sets: [&[u32]; 5] = [&[0], &[65_535], &[0, 1, 2, 3], &[1, 3, 4, 9, 10, 11, 200], &[0, 255]];
        for syms in sets {
            let mut w = BitWriter::default();
            write_symbol_set(&mut w, syms);
            let p = w.finish();
            let width = if syms[syms.len() - 1] > 255 { 16 } else { 8 };
            let mut br = BitReader::new(&p);
            assert_eq!(read_symbol_set(&mut br, width).unwrap(), syms);
            assert_eq!(br.finish().unwrap(), p.len());
        }
        // Symbol 2 does not fit one bit.
        let mut w = BitWriter::default();
        write_symbol_set(&mut w, &[2]);
        assert!(read_symbol_set(&mut BitReader::new(&w.finish()), 1).is_err());
    }

    /// The counts are the plain ones on both paths (short streams, and long
    /// ones counted four tables at a time, runs and a remainder included), and
    /// a word too wide for the width is refused on both.
    #[test]
    fn symbol_counts_count_and_refuse_wide_words() {
        let mut rng = testing::Rng(3);
        for width in [1u8, 4, 8, 11, 16] {
            let m = 1u64 << width;
            for n in [0usize, 5, 4 * (1 << width) - 1, 4 * (1 << width) + 3, 300_001] {
                let words: Vec<u16> = (0..n)
                    .map(|i| if i % 1000 < 300 { 1 } else { (rng.next() % m) as u16 })
                    .collect();
                let mut want = vec![0u64; 1 << width];
                for &w in &words {
                    want[usize::from(w)] += 1;
                }
                assert_eq!(symbol_counts(&words, width), Some(want), "w{width} n{n}");
                if width < 16 && n > 0 {
                    let mut wide = words.clone();
                    wide[n - 1] = 1 << width;
                    assert_eq!(symbol_counts(&wide, width), None, "w{width} n{n}");
                    wide[n - 1] = words[n - 1];
                    wide[n / 2] = u16::MAX;
                    assert_eq!(symbol_counts(&wide, width), None, "w{width} n{n}");
                }
            }
        }
    }

    #[test]
    fn ceil_log2_matches_definition() {
        for (v, l) in [(0u64, 0u32), (1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (256, 8), (257, 9)] {
            assert_eq!(ceil_log2(v), l, "{v}");
        }
    }
}
