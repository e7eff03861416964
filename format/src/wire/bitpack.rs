//! `packed`: `[u8] k` (0..=b), then `count` words of `k` bits each, packed
//! least-significant bit first into bytes; the last byte is zero-padded.
//! `k = 0` means every word is zero and nothing follows.

use alloc::vec::Vec;

use crate::error::{FormatError, Result};
use crate::stream::{mask, Word};

/// Packs words in the fewest bits that hold the largest one.
pub fn encode<W: Word>(words: &[W], _width: u8) -> Vec<u8> {
    // The bits of every word OR-ed together have the largest word's bit length
    // (and an OR vectorizes where a 64-bit maximum does not).
    let any_bits = words.iter().fold(0u64, |acc, w| acc | w.to_u64());
    let k = (64 - any_bits.leading_zeros()) as u8;
    let mut out = Vec::with_capacity(1 + (words.len() * usize::from(k)).div_ceil(8) + 16);
    out.push(k);
    pack(words, k, &mut out);
    out
}

/// Appends the low `k` bits of each of `words` packed in `k` bits each, least
/// significant bit first, the last byte zero-padded: the body of a `packed`
/// payload.
pub(crate) fn pack<W: Word>(words: &[W], k: u8, out: &mut Vec<u8>) {
    let m = mask(k);
    if k > 16 {
        pack_bits(words.iter().map(|w| w.to_u64() & m), k, out);
        return;
    }
    // Eight words fill `k` bytes exactly: each group is built in a register
    // without a branch, and all 16 of its bytes stored (the ones past `k`
    // dropped at once), where word by word a branch per word decided when to
    // store. With `encode`'s OR, bitpack went from 4.9% to 2.8% of the samples
    // of a one-thread compress of the BF16 corpus file.
    let kb = usize::from(k);
    let groups = words.chunks_exact(8);
    let rest = groups.remainder();
    out.reserve(words.len() / 8 * kb + 16);
    for g in groups {
        let mut acc = 0u128;
        for (j, w) in g.iter().enumerate() {
            acc |= u128::from(w.to_u64() & m) << (j * kb);
        }
        let len = out.len();
        out.extend_from_slice(&acc.to_le_bytes());
        out.truncate(len + kb);
    }
    pack_bits(rest.iter().map(|w| w.to_u64() & m), k, out);
}

/// [`pack`] a word at a time, for any `k` up to 64.
fn pack_bits(values: impl Iterator<Item = u64>, k: u8, out: &mut Vec<u8>) {
    // Fewer than 64 bits wait in `acc` between words; 8 bytes leave at once.
    let mut acc: u128 = 0;
    let mut nbits = 0u32;
    for v in values {
        acc |= u128::from(v) << nbits;
        nbits += u32::from(k);
        if nbits >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            nbits -= 64;
        }
    }
    let rest = nbits.div_ceil(8) as usize;
    out.extend_from_slice(&(acc as u64).to_le_bytes()[..rest]);
}

/// Unpacks `out.len()` words of at most `width` bits.
pub fn decode<W: Word>(payload: &[u8], width: u8, out: &mut [W]) -> Result<()> {
    let (&k, body) = payload.split_first().ok_or(FormatError::Truncated {
        what: "packed literal bit count",
    })?;
    if k > width {
        return Err(FormatError::Invalid {
            what: "packed literal bit count (wider than the stream)",
        });
    }
    unpack(body, k, out)
}

/// Unpacks `out.len()` words of `k` (0..=64) bits from `body`, which must be
/// exactly `ceil(out.len() * k / 8)` bytes with zero padding bits: a `packed`
/// payload after its `k` byte.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn unpack<W: Word>(body: &[u8], k: u8, out: &mut [W]) -> Result<()> {
    unpack_into::<W, false>(body, k, out)
}

/// See the native `unpack`. WebAssembly shifts the words into zeros
/// ([`unpack_shift_in`]), so that the module holds one instance of the
/// unpacking loops, and `hsplit` puts its low bits below its high parts in the
/// same pass as natively.
#[cfg(target_arch = "wasm32")]
pub(crate) fn unpack<W: Word>(body: &[u8], k: u8, out: &mut [W]) -> Result<()> {
    out.fill(W::default());
    unpack_into::<W, true>(body, k, out)
}

/// [`unpack`], each word of `out` becoming `word << k | unpacked` instead: the
/// low bits of `hsplit` put below its high parts in the same pass.
pub(crate) fn unpack_shift_in<W: Word>(body: &[u8], k: u8, out: &mut [W]) -> Result<()> {
    unpack_into::<W, true>(body, k, out)
}

/// [`unpack_shift_in`] with the old words taken from `highs` (as long as `out`):
/// word `i` of `out` becomes `highs[i] << k | unpacked`. WebAssembly decodes the
/// high parts of `hsplit` words over 16 bits (FP32's) into 16-bit words (one
/// instance of the lane loop there); its SIMD loop reads them from there, where
/// they were first widened into `out` in a pass of their own: FP32 words and
/// 23-bit mantissas decoded 1.06x as fast (`TARGET=wasi bench/coders-ab.sh c2529b7
/// hsplit fp32,man23`, the commit before; `bench/wasm/AB.md`).
#[cfg(target_arch = "wasm32")]
pub(crate) fn unpack_below<W: Word>(body: &[u8], k: u8, highs: &[u16], out: &mut [W]) -> Result<()> {
    if highs.len() != out.len() {
        return Err(FormatError::LengthMismatch {
            what: "high parts",
            expected: out.len() as u64,
            found: highs.len() as u64,
        });
    }
    // Whole groups of 8 while the payload has them (a payload of the wrong
    // length fails below, in `unpack_into`'s check of what is left).
    #[cfg(target_feature = "simd128")]
    let done = match bytemuck::try_cast_slice_mut::<W, u32>(out) {
        Ok(words) if W::BITS == 32 => unpack_u32_simd128::<true>(body, k, words, Some(highs)),
        _ => 0,
    };
    #[cfg(not(target_feature = "simd128"))]
    let done = 0;
    for (o, &h) in out[done..].iter_mut().zip(&highs[done..]) {
        *o = W::from_u64(u64::from(h));
    }
    let rest = body.get(done / 8 * usize::from(k)..).unwrap_or_default();
    unpack_into::<W, true>(rest, k, &mut out[done..])
}

/// The word that `unpacked` (`k` bits) makes of `old`: `unpacked`, or with
/// `SHIFT_IN`, `old << k | unpacked` (`unpacked` alone for `k = 64`, which
/// WebAssembly's `unpack` shifts into zeros).
#[inline(always)]
fn put<W: Word, const SHIFT_IN: bool>(old: W, k: usize, unpacked: u64) -> W {
    if SHIFT_IN {
        W::from_u64(old.to_u64().checked_shl(k as u32).unwrap_or(0) | unpacked)
    } else {
        W::from_u64(unpacked)
    }
}

fn unpack_into<W: Word, const SHIFT_IN: bool>(body: &[u8], k: u8, out: &mut [W]) -> Result<()> {
    let bits = (out.len() as u128) * u128::from(k);
    let need = bits.div_ceil(8);
    if body.len() as u128 != need {
        return Err(FormatError::LengthMismatch {
            what: "packed literal payload",
            expected: need as u64,
            found: body.len() as u64,
        });
    }
    if k == 0 {
        if !SHIFT_IN {
            out.iter_mut().for_each(|d| *d = W::default());
        }
        return Ok(());
    }
    // Whole groups of 8 words (`k` bytes each) in bulk; the rest word by word.
    // The bulk path is instantiated for 8- and 16-bit words only (float fields,
    // bytes): 32/64-bit words packed into 16 bits or fewer are rare, and 32 more
    // unrolled copies would cost the WebAssembly module ~4 KB gzipped.
    // Other fields of up to 56 bits (float mantissas of 17 to 52 bits in 32/64-bit
    // words) take one generic path: an unaligned 8-byte load and a shift a word,
    // for the groups whose loads stay inside the payload. So do 16-bit words in
    // WebAssembly with SIMD, after its SIMD loop (`unpack_u16_simd128`) has taken
    // the groups it can: the lane loop's 16-bit half is not in the module. There,
    // 32-bit words of up to 25 bits go to `unpack_u32_simd128` first.
    let simd_words = cfg!(all(target_arch = "wasm32", target_feature = "simd128")) && W::BITS == 16;
    let narrow = k <= 16 && W::BITS <= 16 && !simd_words;
    let groups = if narrow {
        out.len() / 8
    } else if k <= 56 {
        (out.len() / 8).min(body.len().saturating_sub(8) / usize::from(k))
    } else {
        0
    };
    let (head, out) = out.split_at_mut(groups * 8);
    // The AVX2 twin of the wide loops takes the whole groups it can; they take
    // the rest.
    #[cfg(all(feature = "simd", target_arch = "x86_64"))]
    let (wide_body, wide) = {
        let done = match bytemuck::try_cast_slice_mut::<W, u32>(head) {
            Ok(words) if !narrow && W::BITS == 32 => super::simd::unpack_u32::<SHIFT_IN>(body, k, words),
            _ => 0,
        };
        (&body[done / 8 * usize::from(k)..], &mut head[done..])
    };
    #[cfg(not(all(feature = "simd", target_arch = "x86_64")))]
    let (wide_body, wide) = (body, &mut *head);
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    let (wide_body, wide) = {
        let done = match W::BITS {
            16 => bytemuck::try_cast_slice_mut::<W, u16>(wide)
                .map_or(0, |w| unpack_u16_simd128::<SHIFT_IN>(wide_body, k, w)),
            32 => bytemuck::try_cast_slice_mut::<W, u32>(wide)
                .map_or(0, |w| unpack_u32_simd128::<SHIFT_IN>(wide_body, k, w, None)),
            _ => 0,
        };
        (&wide_body[done / 8 * usize::from(k)..], &mut wide[done..])
    };
    if !narrow && !unpack_wide_groups::<W, SHIFT_IN>(wide_body, wide, k) {
        unpack_wide::<W, SHIFT_IN>(wide_body, wide, k);
    }
    // WebAssembly: one loop for every width (16 unrolled copies cost ~3 KB
    // gzipped there).
    if narrow && cfg!(target_arch = "wasm32") {
        unpack_groups_any::<W, SHIFT_IN>(body, head, k);
    }
    let (head_body, body) = body.split_at(groups * usize::from(k));
    // The AVX2 twin takes the whole blocks of 16 words it can; the loops below
    // the groups it left (it stops on a group boundary).
    #[cfg(all(feature = "simd", target_arch = "x86_64"))]
    let (head_body, head) = {
        let done = match bytemuck::try_cast_slice_mut::<W, u16>(head) {
            Ok(words) if narrow && W::BITS == 16 => super::simd::unpack_u16::<SHIFT_IN>(head_body, k, words),
            _ => 0,
        };
        (&head_body[done / 8 * usize::from(k)..], &mut head[done..])
    };
    macro_rules! bulk {
        ($($k:literal)*) => {
            match k {
                $($k => unpack_groups::<W, $k, SHIFT_IN>(head_body, head),)*
                _ => {}
            }
        };
    }
    if narrow && !cfg!(target_arch = "wasm32") {
        bulk!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
    }
    let m = mask(k);
    let mut acc: u128 = 0;
    let mut nbits = 0u32;
    let mut bytes = body.iter();
    for d in out.iter_mut() {
        while nbits < u32::from(k) {
            // Cannot run dry: the payload length was checked above.
            acc |= u128::from(*bytes.next().unwrap_or(&0)) << nbits;
            nbits += 8;
        }
        *d = put::<W, SHIFT_IN>(*d, usize::from(k), (acc as u64) & m);
        acc >>= k;
        nbits -= u32::from(k);
    }
    if acc != 0 {
        return Err(FormatError::Corrupt {
            what: "packed literal (nonzero padding bits)",
        });
    }
    Ok(())
}

/// Unpacks `out.len()` words of `k` (1..=56) bits from the start of `body`, which
/// must hold 8 bytes from the byte of every word's first bit (the caller sizes `out`
/// so; a short read would give zeros, never a panic).
fn unpack_wide<W: Word, const SHIFT_IN: bool>(body: &[u8], out: &mut [W], k: u8) {
    let m = mask(k);
    let k = usize::from(k);
    for (i, d) in out.iter_mut().enumerate() {
        let bit = i * k;
        let v = body
            .get(bit / 8..)
            .and_then(|b| b.first_chunk::<8>())
            .map_or(0, |b| u64::from_le_bytes(*b));
        // `bit % 8 + k <= 63`: the word lies inside the 8 bytes.
        *d = put::<W, SHIFT_IN>(*d, k, (v >> (bit % 8)) & m);
    }
}

/// Natively, 32-bit words of 17 to 32 bits (FP32 mantissas: 23) in groups of 8
/// words from `K` bytes each, with `K` a constant: fixed shifts and offsets, no
/// bounds checks but one a group; FP32 all-MiniLM's `--fast-decode` archive spent
/// 20% of `brevis verify --threads 1` in the generic path, 8% in this one (perf).
/// Not in WebAssembly (a smaller module): there `unpack_u32_simd128` takes the
/// fields of up to 25 bits and of 32, and [`unpack_wide`] the others. False where this does
/// not apply; `out` then is untouched.
fn unpack_wide_groups<W: Word, const SHIFT_IN: bool>(body: &[u8], out: &mut [W], k: u8) -> bool {
    if W::BITS != 32 || !(17..=32).contains(&k) || cfg!(target_arch = "wasm32") {
        return false;
    }
    macro_rules! wide {
        ($($k:literal)*) => {
            match k {
                $($k => unpack_groups_32::<W, $k, SHIFT_IN>(body, out),)*
                _ => return false,
            }
        };
    }
    wide!(17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32);
    true
}

/// Unpacks groups of 8 words of `K` (17..=32) bits from `K` bytes each, as many as
/// `out` holds: each word by an 8-byte load from the payload (the caller sizes `out`
/// so that every group's bytes are followed by 8 more). The loads read the payload
/// itself: copying each group to a buffer first made them overlap the copy's stores,
/// and a load that straddles a pending store waits for it (three times slower).
#[inline]
fn unpack_groups_32<W: Word, const K: usize, const SHIFT_IN: bool>(body: &[u8], out: &mut [W]) {
    let m = mask(K as u8);
    for (g, o) in out.chunks_exact_mut(8).enumerate() {
        // A window of constant length: the loads below need no bounds checks.
        let Some(window) = body.get(g * K..g * K + K + 8) else {
            unpack_wide::<W, SHIFT_IN>(body.get(g * K..).unwrap_or(&[]), o, K as u8);
            continue;
        };
        for (j, d) in o.iter_mut().enumerate() {
            let bit = j * K;
            let mut v = [0u8; 8];
            v.copy_from_slice(&window[bit / 8..bit / 8 + 8]);
            *d = put::<W, SHIFT_IN>(*d, K, (u64::from_le_bytes(v) >> (bit % 8)) & m);
        }
    }
}

/// WebAssembly's SIMD unpacking of 32-bit words of `k` (1..=25) bits: the widths
/// where every field lies in the four bytes from its first (`bit % 8 + k <= 32`),
/// FP32 mantissas (`hsplit`'s low bits, `packed` 23-bit fields) among them; for
/// `k = 32` it copies the payload.
///
/// A group of 8 words is two 16-byte loads, from its first byte (words 0-3) and
/// from byte `4k / 8` (words 4-7). In each, a swizzle puts each word's four bytes
/// in its lane, a multiplication by `2^(32 - s - k)` (`s` the field's first bit in
/// its first byte) drops the bits above the field (the per-lane shift SIMD128
/// lacks), and a shift right by `32 - k` those below; with `SHIFT_IN` the old
/// words (`out`'s, or with `highs` its 16-bit words: [`unpack_below`]), shifted
/// left by `k`, are or-ed in. Returns how many words it unpacked:
/// whole groups from the first, while the second load's 16 bytes are in `body`
/// (for `k = 32`, all), or none for other widths (26-31 bits); [`unpack_wide`]
/// takes the rest.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn unpack_u32_simd128<const SHIFT_IN: bool>(body: &[u8], k: u8, out: &mut [u32], highs: Option<&[u16]>) -> usize {
    use core::arch::wasm32::*;
    if k == 32 {
        // The payload's bytes are the words (SHIFT_IN shifts the old ones out).
        copy_whole_words(body, bytemuck::cast_slice_mut(out));
        return out.len();
    }
    if !(1..=25).contains(&k) {
        return 0;
    }
    let k = usize::from(k);
    let second = 4 * k / 8;
    // Per half: each lane's four byte indices, and its multiplier.
    let mut gather = [[0u8; 16]; 2];
    let mut scale = [[0u32; 4]; 2];
    for j in 0..8 {
        let (half, lane) = (j / 4, j % 4);
        let bit = j * k - half * 8 * second;
        for b in 0..4 {
            gather[half][4 * lane + b] = (bit / 8 + b) as u8;
        }
        scale[half][lane] = 1 << (32 - bit % 8 - k);
    }
    // Through `black_box`, so that V8 loads the vectors once instead of building
    // them in the loop (see `unpack_u16_simd128`).
    let gather: [v128; 2] = core::hint::black_box(gather.map(bytemuck::cast));
    let scale: [v128; 2] = core::hint::black_box(scale.map(bytemuck::cast));
    let shift = 32 - k as u32;
    let mut done = 0;
    for (g, o) in out.chunks_exact_mut(8).enumerate() {
        let Some(window) = body.get(g * k..g * k + second + 16) else {
            break;
        };
        // The group's 8 high parts, widened: words 0-3 and 4-7.
        let high = match highs.map(|h| h.get(8 * g..8 * g + 8)) {
            Some(Some(h)) => {
                let h = bytemuck::pod_read_unaligned::<v128>(bytemuck::cast_slice(h));
                Some([u32x4_extend_low_u16x8(h), u32x4_extend_high_u16x8(h)])
            }
            Some(None) => break,
            None => None,
        };
        let o: &mut [u8] = bytemuck::cast_slice_mut(o);
        for (half, (from, o)) in [&window[..16], &window[second..]]
            .into_iter()
            .zip(o.chunks_exact_mut(16))
            .enumerate()
        {
            let fields = i8x16_swizzle(bytemuck::pod_read_unaligned::<v128>(from), gather[half]);
            let mut v = u32x4_shr(i32x4_mul(fields, scale[half]), shift);
            if SHIFT_IN {
                let old = match high {
                    Some(high) => high[half],
                    None => bytemuck::pod_read_unaligned::<v128>(o),
                };
                v = v128_or(i32x4_shl(old, k as u32), v);
            }
            o.copy_from_slice(bytemuck::bytes_of(&v));
        }
        done += 8;
    }
    done
}

/// WebAssembly's SIMD unpacking of 16-bit words of `k` bits, for the widths where
/// every field of a group of 8 lies in the two bytes from its first (`bit % 8 + k
/// <= 16` for `bit = j * k`, `j < 8`): `k <= 10` (fields of even `k` start on
/// even bits) and 12 (on bits 0 and 4); for `k = 16` it copies the payload.
///
/// A group is one 16-byte load from its first byte: a swizzle puts each word's
/// two bytes in its lane, a multiplication by `2^(16 - bit % 8 - k)` drops the
/// bits above the field (the per-lane shift SIMD128 lacks), a shift right by
/// `16 - k` those below; with `SHIFT_IN` the old words, shifted left by `k`, are
/// or-ed in. Returns how many words it unpacked: whole groups from the first,
/// while 16 bytes are left from the group's start, or none for other widths;
/// [`unpack_wide`] takes the rest.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn unpack_u16_simd128<const SHIFT_IN: bool>(body: &[u8], k: u8, out: &mut [u16]) -> usize {
    use core::arch::wasm32::*;
    let k = u32::from(k);
    if k == 16 {
        // The payload's bytes are the words (SHIFT_IN shifts the old ones out).
        copy_whole_words(body, bytemuck::cast_slice_mut(out));
        return out.len();
    }
    if k == 0 || (k > 10 && k != 12) {
        return 0;
    }
    // Lane `j`: its word's first bit, `j * k`; the two bytes from the one
    // holding it; and `2^(16 - bit % 8 - k)` as `2^(7 - bit % 8)` (looked up)
    // times `2^(9 - k)`, for `k = 10` and `12` a division that loses nothing
    // (their fields start on even bits, and on bits 0 and 4).
    let bit = i16x8_mul(u16x8(0, 1, 2, 3, 4, 5, 6, 7), u16x8_splat(k as u16));
    let first = u16x8_shr(bit, 3);
    let gather = v128_or(first, i16x8_shl(i16x8_add(first, u16x8_splat(1)), 8));
    let in_byte = v128_or(v128_and(bit, u16x8_splat(7)), u16x8_splat(0xff00));
    let pow = i8x16_swizzle(u8x16(128, 64, 32, 16, 8, 4, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0), in_byte);
    let scale = if k <= 9 {
        i16x8_shl(pow, 9 - k)
    } else {
        u16x8_shr(pow, k - 9)
    };
    // Through `black_box`, so that the vectors are loaded from memory once: built
    // in the loop's sight, V8 built them again in every iteration (16 `vpinsrb`
    // and 8 `vpinsrw` in the loop, `node --print-wasm-code`), which made the
    // loop slower than the scalar one.
    let gather = core::hint::black_box(gather);
    let scale = core::hint::black_box(scale);
    let step = k as usize;
    let mut done = 0;
    for (g, o) in out.chunks_exact_mut(8).enumerate() {
        let Some(bytes) = body.get(g * step..g * step + 16) else {
            break;
        };
        let words = i8x16_swizzle(bytemuck::pod_read_unaligned::<v128>(bytes), gather);
        let mut v = u16x8_shr(i16x8_mul(words, scale), 16 - k);
        let o: &mut [u8] = bytemuck::cast_slice_mut(o);
        if SHIFT_IN {
            v = v128_or(i16x8_shl(bytemuck::pod_read_unaligned::<v128>(o), k), v);
        }
        o.copy_from_slice(bytemuck::bytes_of(&v));
        done += 8;
    }
    done
}

/// [`unpack_groups`] for a `k` (1..=16) known at run time (WebAssembly, little-endian),
/// from the start of `body`, as many groups as `out` holds (`body` has their
/// bytes), in lanes as [`unpack_groups_in_lanes`]: two 8-byte loads a group (words
/// 0-3 from the group's first byte, words 4-7 from byte `4k/8` shifted by `4k % 8`;
/// 8-bit words take the first only), so 16 bytes from each group's start; the last
/// groups, without them, read a zero-padded copy. (These loads and
/// a run-time-width twin of [`unpack_groups_32`], since replaced by
/// `unpack_u32_simd128`, replaced a bounds-checked load a word: `--fast-decode`
/// archives of BF16, FP16 and FP32 decoded 1-6% faster in Node, `bench/wasm/AB.md`.)
fn unpack_groups_any<W: Word, const SHIFT_IN: bool>(body: &[u8], out: &mut [W], k: u8) {
    let word_bytes = W::BITS as usize / 8;
    let k = usize::from(k.clamp(1, 16));
    if word_bytes > 2 || k > 8 * word_bytes {
        return;
    }
    let out: &mut [u8] = bytemuck::cast_slice_mut(out);
    if k == 8 * word_bytes {
        return copy_whole_words(body, out);
    }
    let kept = kept_in_lanes(word_bytes, k);
    let half = 4 * k;
    for (g, o) in out.chunks_exact_mut(8 * word_bytes).enumerate() {
        let mut copy = [0u8; 16];
        let window = match body.get(g * k..g * k + 16) {
            Some(w) => w,
            None => {
                let tail = body.get(g * k..).unwrap_or(&[]);
                let n = tail.len().min(16);
                copy[..n].copy_from_slice(&tail[..n]);
                &copy[..]
            }
        };
        let load = |at: usize| {
            // `at <= 8` (`half <= 64`): the `min` only says so to the compiler.
            let at = at.min(8);
            window
                .get(at..at + 8)
                .and_then(|w| w.first_chunk::<8>())
                .map_or(0, |w| u64::from_le_bytes(*w))
        };
        let (low_half, high_half) = o.split_at_mut(8);
        if word_bytes == 1 {
            put_lanes::<SHIFT_IN>(low_half, spread_to_bytes(load(0), k), k, kept);
        } else {
            // `4k % 8` is 4 only for odd `k <= 15`: words 4-7 end by bit `4 + 60`.
            let hi = load(half / 8) >> (half % 8);
            put_lanes::<SHIFT_IN>(low_half, spread_to_u16_lanes(load(0), k), k, kept);
            put_lanes::<SHIFT_IN>(high_half, spread_to_u16_lanes(hi, k), k, kept);
        }
    }
}

/// Unpacks groups of 8 words of `K` (1..=16) bits from `K` bytes each: on
/// little-endian targets a group's words spread into the lanes of `u64`s and
/// stored as the words' bytes ([`unpack_groups_in_lanes`]), else word by word.
#[inline]
fn unpack_groups<W: Word, const K: usize, const SHIFT_IN: bool>(body: &[u8], out: &mut [W]) {
    // Compile-time: no code for pairs `decode` never calls (words of more than
    // 16 bits, or `K` wider than the word).
    if W::BITS > 16 || K > W::BITS as usize {
        return;
    }
    if cfg!(target_endian = "little") {
        unpack_groups_in_lanes::<K, SHIFT_IN>(body, bytemuck::cast_slice_mut(out), W::BITS as usize / 8);
    } else {
        unpack_groups_by_word::<W, K, SHIFT_IN>(body, out);
    }
}

/// Four `k`-bit values, the low `4k` bits of `x` (`k <= 16`), one in each 16-bit
/// lane of a `u64`, value 0 lowest: the `4k` bits split into halves (one in each
/// 32-bit lane), then each half into its two values. Eight values of `k <= 8`
/// bits take one more split first ([`spread_to_bytes`]). Inlined, a constant `k`
/// makes every mask a constant.
#[inline(always)]
fn spread_to_u16_lanes(x: u64, k: usize) -> u64 {
    let halves = (1u64 << (2 * k)) - 1;
    let values = ((1u64 << k) - 1) * 0x0000_0001_0000_0001;
    let a = (x & halves) | ((x >> (2 * k)) & halves) << 32;
    (a & values) | ((a >> k) & values) << 16
}

/// Eight `k`-bit values, the low `8k` bits of `x` (`k <= 8`), one in each byte
/// lane of a `u64`, value 0 lowest (see [`spread_to_u16_lanes`]).
#[inline(always)]
fn spread_to_bytes(x: u64, k: usize) -> u64 {
    let halves = (1u64 << (4 * k)) - 1;
    let quarters = ((1u64 << (2 * k)) - 1) * 0x0000_0001_0000_0001;
    let values = ((1u64 << k) - 1) * 0x0001_0001_0001_0001;
    let a = (x & halves) | ((x >> (4 * k)) & halves) << 32;
    let b = (a & quarters) | ((a >> (2 * k)) & quarters) << 16;
    (b & values) | ((b >> k) & values) << 8
}

/// The bits of a `u64` of lanes of `word_bytes` (1 or 2) bytes that stay in their
/// lane when it is shifted left by `k` (`k` below the lane's bits).
#[inline(always)]
fn kept_in_lanes(word_bytes: usize, k: usize) -> u64 {
    let (lane, ones) = if word_bytes == 1 {
        (0xff, 0x0101_0101_0101_0101)
    } else {
        (0xffff, 0x0001_0001_0001_0001)
    };
    ((lane << k) & lane) * ones
}

/// Values as wide as their words, nothing of the old words kept (shifted in or
/// not): the payload's bytes as they are, on little-endian targets.
fn copy_whole_words(body: &[u8], out: &mut [u8]) {
    if let Some(b) = body.get(..out.len()) {
        out.copy_from_slice(b);
    }
}

/// Stores the 8 bytes of lanes `v` at the start of `o`; with `SHIFT_IN`, each lane
/// of the 8 bytes there shifted left by `k` first (`kept`: [`kept_in_lanes`]).
#[inline(always)]
fn put_lanes<const SHIFT_IN: bool>(o: &mut [u8], v: u64, k: usize, kept: u64) {
    if let Some(o) = o.first_chunk_mut::<8>() {
        let v = if SHIFT_IN {
            (u64::from_le_bytes(*o) << k) & kept | v
        } else {
            v
        };
        *o = v.to_le_bytes();
    }
}

/// [`unpack_groups`] on little-endian targets, over the bytes of words of
/// `word_bytes` (1 or 2) bytes: each group's values spread into lanes of the
/// width of a word ([`spread_to_bytes`], [`spread_to_u16_lanes`]) and stored
/// 8 bytes at a time; with `SHIFT_IN`, every lane of the 8 bytes already there
/// shifted left by `K` first (its bits shifted past the lane masked off, as a
/// word's would be). One store where there were four to eight, no shift a word:
/// against the word-by-word loop, packed 7- and 8-bit fields in bytes decode about
/// 4x as fast, `hsplit` BF16 and FP16 words (7 and more low bits shifted in) 1.2x,
/// whole 16-bit words (now a copy) 1.3-1.4x (`bench/coders-ab.sh ded0df7
/// hsplit,packed`, 512 Ki words; `bench/coders-ab/AB.md`).
fn unpack_groups_in_lanes<const K: usize, const SHIFT_IN: bool>(body: &[u8], out: &mut [u8], word_bytes: usize) {
    if K == 8 * word_bytes {
        return copy_whole_words(body, out);
    }
    let kept = kept_in_lanes(word_bytes, K);
    if word_bytes == 1 {
        // `K <= 8`: a group is one `u64` of bytes.
        for (o, b) in out.chunks_exact_mut(8).zip(body.chunks_exact(K)) {
            let mut buf = [0u8; 8];
            buf[..K.min(8)].copy_from_slice(&b[..K.min(8)]);
            put_lanes::<SHIFT_IN>(o, spread_to_bytes(u64::from_le_bytes(buf), K), K, kept);
        }
        return;
    }
    // 16-bit words: words 0-3 and 4-7 of a group each one `u64` of lanes, from the
    // group's `K` bytes, loaded as in [`unpack_groups_by_word`].
    let put_group = |o: &mut [u8], lo: u64, hi: u64| {
        let (low_half, high_half) = o.split_at_mut(8);
        put_lanes::<SHIFT_IN>(low_half, spread_to_u16_lanes(lo, K), K, kept);
        put_lanes::<SHIFT_IN>(high_half, spread_to_u16_lanes(hi, K), K, kept);
    };
    if K <= 8 {
        for (o, b) in out.chunks_exact_mut(16).zip(body.chunks_exact(K)) {
            let mut buf = [0u8; 8];
            buf[..K.min(8)].copy_from_slice(&b[..K.min(8)]);
            let v = u64::from_le_bytes(buf);
            put_group(o, v, v >> (4 * K).min(63));
        }
        return;
    }
    for (g, o) in out.chunks_exact_mut(16).enumerate() {
        let (lo, hi) = group_halves::<K>(body, g);
        put_group(o, lo, hi);
    }
}

/// Words 0-3 and 4-7 of group `g` of 8 words of `K` (9..=16) bits, the low bits of
/// two `u64`s: two 8-byte loads straight from the payload, words 0-3 from the
/// group's first byte, words 4-7 from byte `4K/8` shifted by `4K % 8` (0 or 4; with
/// 4 `K` is odd, so at most 15, and `4 + 4K <= 64`). The last groups, whose second
/// load would run past the payload, read a zero-padded copy. (Each group copied
/// into a 16-byte buffer for one `u128` made the load wait on the copy's stores:
/// `cargo bench -p brevis-format --bench coders -- decode/packed/` on 16-bit words,
/// 3.08 then 7.32 Gelem/s.)
#[inline(always)]
fn group_halves<const K: usize>(body: &[u8], g: usize) -> (u64, u64) {
    let second = 4 * K / 8;
    let load = |b: &[u8], at: usize| {
        b.get(at..)
            .and_then(|b| b.first_chunk::<8>())
            .map(|w| u64::from_le_bytes(*w))
    };
    let at = g * K;
    let (lo, hi) = match (load(body, at), load(body, at + second)) {
        (Some(lo), Some(hi)) => (lo, hi),
        _ => {
            let mut copy = [0u8; 24];
            let group = body.get(at..at + K).unwrap_or(&[]);
            copy[..group.len()].copy_from_slice(group);
            (load(&copy, 0).unwrap_or(0), load(&copy, second).unwrap_or(0))
        }
    };
    (lo, hi >> ((4 * K) % 8))
}

/// [`unpack_groups`] word by word (big-endian targets).
fn unpack_groups_by_word<W: Word, const K: usize, const SHIFT_IN: bool>(body: &[u8], out: &mut [W]) {
    if K <= 8 {
        let m = (1u64 << K) - 1;
        for (o, b) in out.chunks_exact_mut(8).zip(body.chunks_exact(K)) {
            let mut buf = [0u8; 8];
            buf[..K].copy_from_slice(b);
            let v = u64::from_le_bytes(buf);
            for (j, d) in o.iter_mut().enumerate() {
                *d = put::<W, SHIFT_IN>(*d, K, (v >> (j * K)) & m);
            }
        }
    } else {
        // (Word by word, `hsplit`'s shifting in, a read-modify-write of every word,
        // gained nothing from these loads: FP16 words 1.18 and 1.14 Gelem/s.)
        let m = (1u64 << K) - 1;
        for (g, o) in out.chunks_exact_mut(8).enumerate() {
            let (lo, hi) = group_halves::<K>(body, g);
            let (low_half, high_half) = o.split_at_mut(4);
            for (j, d) in low_half.iter_mut().enumerate() {
                *d = put::<W, SHIFT_IN>(*d, K, (lo >> (j * K)) & m);
            }
            for (j, d) in high_half.iter_mut().enumerate() {
                *d = put::<W, SHIFT_IN>(*d, K, (hi >> (j * K)) & m);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The little-endian loops (values spread into lanes, 8 bytes a store; native and
    /// WebAssembly's run-time `k`) give what the word-by-word one gives, for every
    /// width of 8- and 16-bit words, shifted in or not (the old words' bits shifted
    /// past their lane dropped), for every group count up to a few, the last groups
    /// included.
    #[test]
    fn lanes_match_words() {
        /// Each loop on `old`, shifting in or not: all equal; returns the result.
        fn each_loop<W: Word, const K: usize, const SHIFT_IN: bool>(body: &[u8], old: &[W], what: &str) -> Vec<W> {
            let mut words = old.to_vec();
            unpack_groups_by_word::<W, K, SHIFT_IN>(body, &mut words);
            if cfg!(target_endian = "little") {
                let mut lanes = old.to_vec();
                unpack_groups_in_lanes::<K, SHIFT_IN>(body, bytemuck::cast_slice_mut(&mut lanes), W::BITS as usize / 8);
                assert_eq!(lanes, words, "{what}, shifted in: {SHIFT_IN}");
                let mut any = old.to_vec();
                unpack_groups_any::<W, SHIFT_IN>(body, &mut any, K as u8);
                assert_eq!(any, words, "run-time k, {what}, shifted in: {SHIFT_IN}");
            }
            words
        }
        fn check<W: Word, const K: usize>() {
            for groups in [1usize, 2, 3, 5, 17] {
                let n = groups * 8;
                let vals: Vec<u64> = (0..n as u64)
                    .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) & mask(K as u8))
                    .collect();
                let mut body = Vec::new();
                pack(&vals, K as u8, &mut body);
                // Old words of every bit pattern, so bits shifted out of a lane show.
                let old: Vec<W> = (0..n as u64)
                    .map(|i| W::from_u64(i.wrapping_mul(0xD1B5_4A32_D192_ED03) >> 7))
                    .collect();
                let what = std::format!("{} bits, k {K}, {groups} groups", W::BITS);
                let shifted = each_loop::<W, K, true>(&body, &old, &what);
                let expected: Vec<W> = old
                    .iter()
                    .zip(&vals)
                    .map(|(o, &v)| W::from_u64(o.to_u64() << K | v))
                    .collect();
                assert_eq!(shifted, expected, "{what}, shifted in");
                let got: Vec<u64> = each_loop::<W, K, false>(&body, &old, &what)
                    .iter()
                    .map(|w| w.to_u64())
                    .collect();
                assert_eq!(got, vals, "{what}");
            }
        }
        macro_rules! widths {
            ($w:ty: $($k:literal)*) => { $(check::<$w, $k>();)* };
        }
        widths!(u8: 1 2 3 4 5 6 7 8);
        widths!(u16: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
    }

    /// WebAssembly's run-time-width group loop gives what the native constant-width
    /// ones give, for every width and group count, the last groups included.
    #[test]
    #[cfg(target_endian = "little")]
    fn run_time_width_groups_match_the_constant_width_ones() {
        for k in 1u8..=16 {
            for n in [8usize, 16, 24, 64, 1000] {
                let mut vals: Vec<u16> = (0..n as u32)
                    .map(|i| (i.wrapping_mul(0x9E37_79B9).rotate_left(5) & ((1u32 << k) - 1)) as u16)
                    .collect();
                vals[0] = ((1u32 << k) - 1) as u16;
                let p = encode(&vals, 16);
                assert_eq!(p[0], k);
                let mut out = alloc::vec![0u16; n / 8 * 8];
                unpack_groups_any::<u16, false>(&p[1..], &mut out, k);
                assert_eq!(out, vals[..out.len()], "k {k} n {n}");
            }
        }
    }

    /// WebAssembly's SIMD loop for 32-bit words gives what the word-by-word path
    /// gives, shifted in or not, for every width it takes, on every whole group
    /// whose second load fits (and no other), the last ones included.
    #[test]
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    fn simd128_u32_groups_match_word_by_word() {
        for k in 1u8..=25 {
            for n in [8usize, 16, 24, 64, 1000] {
                let mut vals: Vec<u32> = (0..n as u32)
                    .map(|i| (u64::from(i.wrapping_mul(0x9E37_79B9).rotate_left(11)) & mask(k)) as u32)
                    .collect();
                vals[0] = mask(k) as u32;
                let mut body = Vec::new();
                pack(&vals, k, &mut body);
                let whole = (0..n / 8).filter(|g| g * usize::from(k) + 4 * usize::from(k) / 8 + 16 <= body.len());
                let groups = whole.count();
                let mut out = alloc::vec![0u32; n];
                assert_eq!(
                    unpack_u32_simd128::<false>(&body, k, &mut out, None),
                    groups * 8,
                    "k {k} n {n}"
                );
                assert_eq!(out[..groups * 8], vals[..groups * 8], "k {k} n {n}");
                let old: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(0xD1B5_4A33)).collect();
                let mut shifted = old.clone();
                assert_eq!(unpack_u32_simd128::<true>(&body, k, &mut shifted, None), groups * 8);
                let expected: Vec<u32> = old.iter().zip(&vals).map(|(&o, &v)| o << k | v).collect();
                assert_eq!(shifted[..groups * 8], expected[..groups * 8], "shift-in k {k} n {n}");
            }
        }
        let mut out = [0u32; 8];
        assert_eq!(unpack_u32_simd128::<false>(&[0u8; 64], 26, &mut out, None), 0);
        let words: Vec<u32> = (0..24u32).map(|i| i.wrapping_mul(0x9E37_79B9)).collect();
        let mut body = Vec::new();
        pack(&words, 32, &mut body);
        let mut out = alloc::vec![7u32; 24];
        assert_eq!(unpack_u32_simd128::<true>(&body, 32, &mut out, None), 24);
        assert_eq!(out, words);
    }

    /// Packing eight words at a time writes the bytes packing one at a time does,
    /// for every bit count, lengths around whole groups, and words with bits above
    /// `k` (which `hsplit` leaves for its high parts).
    #[test]
    fn groups_pack_as_single_words_do() {
        for k in 0u8..=20 {
            for n in [0usize, 1, 7, 8, 9, 16, 23, 24, 25, 1001] {
                let words: Vec<u32> = (0..n as u32)
                    .map(|i| i.wrapping_mul(0x9E37_79B9).rotate_left(11))
                    .collect();
                let mut grouped = std::vec![0xAB];
                pack(&words, k, &mut grouped);
                let mut single = std::vec![0xAB];
                pack_bits(words.iter().map(|&w| u64::from(w) & mask(k)), k, &mut single);
                assert_eq!(grouped, single, "k {k} n {n}");
            }
        }
    }

    /// Every bit count of 32-bit words and lengths around the bulk paths' groups of
    /// 8 words (narrow fields, and natively the constant-width wide ones).
    #[test]
    fn round_trips_every_bit_count_and_tail() {
        for k in 0u32..=32 {
            for n in [0usize, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000] {
                let vals: Vec<u32> = (0..n as u32)
                    .map(|i| i.wrapping_mul(0x9E37_79B9).rotate_left(7) & ((1u64 << k) - 1) as u32)
                    .collect();
                let p = encode(&vals, 32);
                let mut out = alloc::vec![0u32; n];
                decode(&p, 32, &mut out).unwrap();
                assert_eq!(out, vals, "k {k} n {n}");
                if k <= 8 {
                    let v8: Vec<u8> = vals.iter().map(|&v| v as u8).collect();
                    let p = encode(&v8, 8);
                    let mut out = alloc::vec![0u8; n];
                    decode(&p, 8, &mut out).unwrap();
                    assert_eq!(out, v8, "u8 k {k} n {n}");
                }
            }
        }
    }

    /// Wide fields in 64-bit words: the generic path (up to 56 bits, groups whose
    /// 8-byte loads fit) and the word-by-word tail and widths above it.
    #[test]
    fn round_trips_wide_fields() {
        for k in [17u32, 23, 31, 32, 33, 52, 55, 56, 57, 63, 64] {
            for n in [1usize, 8, 9, 16, 17, 24, 25, 100] {
                let vals: Vec<u64> = (0..n as u64)
                    .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(13) & mask(k as u8))
                    .collect();
                let p = encode(&vals, 64);
                let mut out = alloc::vec![0u64; n];
                decode(&p, 64, &mut out).unwrap();
                assert_eq!(out, vals, "k {k} n {n}");
            }
        }
    }

    /// Shifting in (`hsplit`'s low bits below its high parts) in every path: narrow
    /// groups, the wide groups of 32-bit words, the generic wide loads and the
    /// word-by-word tail: each word becomes `old << k | unpacked`. Into zeros, for
    /// every `k` up to 64, it is `unpack` (what WebAssembly's `unpack` does).
    #[test]
    fn shifting_in_puts_the_low_bits_below_the_words() {
        fn check<W: Word>(k: u8, n: usize) {
            let low: Vec<u64> = (0..n as u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) & mask(k))
                .collect();
            let high: Vec<u64> = (0..n as u64).map(|i| (i * 7 + 3) & mask(W::BITS as u8 - k)).collect();
            let mut body = Vec::new();
            pack(&low, k, &mut body);
            let mut out: Vec<W> = high.iter().map(|&h| W::from_u64(h)).collect();
            unpack_shift_in(&body, k, &mut out).unwrap();
            let want: Vec<W> = high.iter().zip(&low).map(|(&h, &l)| W::from_u64(h << k | l)).collect();
            assert_eq!(out, want, "{} bits, k {k}, n {n}", W::BITS);
        }
        for n in [0usize, 1, 7, 8, 9, 16, 17, 24, 25, 64, 100] {
            for k in 1..16 {
                check::<u16>(k, n);
            }
            for k in 1..32 {
                check::<u32>(k, n);
            }
            for k in [1u8, 16, 17, 23, 31, 32, 33, 52, 56, 57, 63] {
                check::<u64>(k, n);
            }
        }
        for k in [1u8, 8, 16, 33, 63, 64] {
            let words: Vec<u64> = (0..100u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & mask(k))
                .collect();
            let mut body = Vec::new();
            pack(&words, k, &mut body);
            let mut shifted = std::vec![0u64; words.len()];
            unpack_shift_in(&body, k, &mut shifted).unwrap();
            assert_eq!(shifted, words, "into zeros, k {k}");
        }
        // No low bits: the words stay as they are.
        let mut out = [5u32, 6];
        unpack_shift_in(&[], 0, &mut out).unwrap();
        assert_eq!(out, [5, 6]);
    }

    /// Unpacking below 16-bit high parts (WebAssembly's FP32 `hsplit`) is shifting
    /// into those parts widened: in the SIMD groups and in the rest, for every `k`
    /// of 32-bit words; a payload of the wrong length is refused.
    #[cfg(target_arch = "wasm32")]
    #[test]
    fn unpacking_below_16_bit_high_parts_is_shifting_into_them() {
        for n in [0usize, 1, 7, 8, 9, 16, 17, 24, 25, 64, 100] {
            for k in 0..32u8 {
                let low: Vec<u64> = (0..n as u64)
                    .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) & mask(k))
                    .collect();
                let highs: Vec<u16> = (0..n as u64).map(|i| (i * 7919 + 3) as u16).collect();
                let mut body = Vec::new();
                pack(&low, k, &mut body);
                let mut want: Vec<u32> = highs.iter().map(|&h| u32::from(h)).collect();
                unpack_shift_in(&body, k, &mut want).unwrap();
                let mut out = std::vec![0u32; n];
                unpack_below(&body, k, &highs, &mut out).unwrap();
                assert_eq!(out, want, "k {k}, n {n}");
                if n * usize::from(k) > 0 {
                    let mut longer = body.clone();
                    longer.push(0);
                    assert!(
                        unpack_below(&longer, k, &highs, &mut out).is_err(),
                        "k {k}, n {n}: longer"
                    );
                    assert!(
                        unpack_below(&body[..body.len() - 1], k, &highs, &mut out).is_err(),
                        "k {k}, n {n}: shorter"
                    );
                }
            }
        }
        assert!(unpack_below(&[], 0, &[1, 2], &mut [0u32; 3]).is_err());
    }

    #[test]
    fn nonzero_padding_is_refused() {
        // Three 1-bit words: the last byte's top five bits are padding.
        let mut p = encode(&[1u8, 0, 1], 1);
        p[1] |= 0x80;
        assert!(decode(&p, 1, &mut [0u8; 3]).is_err());
    }
}
