//! x86-64 fast paths (feature `simd`): AVX2 and AVX-512 unpacking and a BMI2 build of
//! `hsplit`'s lane loop, each the twin of a safe loop that stays the reference:
//! the same inputs give the same words (tests below, and every other test of the
//! crate), and the safe loop runs wherever the CPU lacks the feature and for
//! what a fast path leaves over.
//!
//! The only `unsafe` is each call into a `#[target_feature(enable = ...)]`
//! function, made after `is_x86_feature_detected!` said the CPU has the feature
//! (the one condition such a call needs to be sound). Inside, loads and stores
//! go through checked slices and `bytemuck` casts of fixed-size arrays, and the
//! intrinsics used take no pointers (safe to call where their feature is
//! enabled). `docs/UNSAFE.md` lists each fast path with the measurement that
//! earned it.

use core::arch::x86_64::{
    __m128i, __m256i, __m512i, _mm256_and_si256, _mm256_broadcastsi128_si256, _mm256_or_si256, _mm256_packus_epi32,
    _mm256_permute4x64_epi64, _mm256_set1_epi32, _mm256_set_m128i, _mm256_shuffle_epi8, _mm256_sll_epi16,
    _mm256_sll_epi32, _mm256_srlv_epi32, _mm512_and_si512, _mm512_cvtepi32_epi16, _mm512_inserti64x4, _mm512_or_si512,
    _mm512_permutexvar_epi8, _mm512_set1_epi16, _mm512_set1_epi32, _mm512_sll_epi16, _mm512_sll_epi32,
    _mm512_srlv_epi16, _mm512_srlv_epi32, _mm_cvtsi32_si128,
};

use super::hsplit;
use super::huffman::Lane;
use crate::stream::Word;

/// Whether the CPU has AVX2 (cached by `std` after the first question).
fn has_avx2() -> bool {
    std::is_x86_feature_detected!("avx2")
}

/// Whether the CPU has what the AVX-512 unpacking uses: 512-bit registers
/// (AVX-512F), 16-bit lane shifts (BW) and a byte shuffle across all 64 bytes
/// (VBMI). Always with AVX2, which takes what a 64-byte load would pass.
fn has_avx512() -> bool {
    std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vbmi")
}

/// Bytes an AVX-512 block loads from its first byte.
const WIDE_LOAD: usize = 64;

/// The byte shuffle (across 64 bytes) and the shifts that put each of the
/// `LANES` words of a block in a lane of `LANE` bytes of its own: lane `i` gets
/// the bytes from the one holding bit `i * k` (the word's first) on, as many as
/// the lane holds, and the shift of that first bit. Bytes past the load are
/// never asked for: the callers keep a block's bits within [`WIDE_LOAD`] bytes.
fn wide_layout<const LANES: usize, const LANE: usize>(k: usize) -> ([u8; 64], [u32; LANES]) {
    let mut order = [0u8; 64];
    let mut shifts = [0u32; LANES];
    for (i, shift) in shifts.iter_mut().enumerate() {
        let first = i * k;
        for j in 0..LANE {
            order[i * LANE + j] = ((first / 8 + j) % WIDE_LOAD) as u8;
        }
        *shift = (first % 8) as u32;
    }
    (order, shifts)
}

/// The [`WIDE_LOAD`] bytes of `body` from `at`, if it has them.
fn wide_load(body: &[u8], at: usize) -> Option<__m512i> {
    Some(bytemuck::cast(*body.get(at..)?.first_chunk::<WIDE_LOAD>()?))
}

/// The byte shuffle and the shifts that put each word of a group of 8 in a 32-bit
/// lane of its own (lanes 0-3 in the low 128-bit half, 4-7 in the high one, each
/// half shuffling its own 16 bytes): lane `i` gets the bytes from the one holding
/// the word's first bit, `first_bit(i)` in its half's bytes, to the one holding
/// its last (the rest zeroed: an index with the top bit set), and the shift of
/// that first bit. The caller keeps every word within 4 bytes of its first one.
fn lane_layout(k: usize, first_bit: impl Fn(usize) -> usize) -> ([u8; 32], [u32; 8]) {
    let mut order = [0x80u8; 32];
    let mut shifts = [0u32; 8];
    for (i, shift) in shifts.iter_mut().enumerate() {
        let first = first_bit(i);
        for (j, byte) in (first / 8..=(first + k - 1) / 8).enumerate().take(4) {
            order[(i / 4) * 16 + (i % 4) * 4 + j] = byte as u8;
        }
        *shift = (first % 8) as u32;
    }
    (order, shifts)
}

/// Stores `words` (32 bytes) over `o`, with `SHIFT_IN` or-ed with the old ones
/// as `shift_old` shifts them.
#[target_feature(enable = "avx2")]
fn put<const SHIFT_IN: bool, T: bytemuck::Pod>(o: &mut T, words: __m256i, shift_old: impl Fn(__m256i) -> __m256i) {
    let words = if SHIFT_IN {
        _mm256_or_si256(shift_old(bytemuck::cast(*o)), words)
    } else {
        words
    };
    *o = bytemuck::cast(words);
}

/// Unpacks whole blocks of 16 words of `k` (1..=15) bits from `body` (packed
/// least significant bit first, as `bitpack` packs them) into `out`'s 16-bit
/// words, each word becoming the value or, with `SHIFT_IN`, `old << k | value`
/// (its bits past 16 dropped). Stops at the first block whose loads would
/// pass the end of `body` (each of its two groups of 8 words reads 16 bytes
/// from its first byte) or of `out`. Returns the words written: 0 without AVX2
/// or for another `k`, and always a multiple of 16, so the caller goes on from
/// a group boundary (`16 * k / 8` bytes a block).
pub(crate) fn unpack_u16<const SHIFT_IN: bool>(body: &[u8], k: u8, out: &mut [u16]) -> usize {
    if !(1..=15).contains(&k) || !has_avx2() {
        return 0;
    }
    let k = u32::from(k);
    // AVX-512 first, AVX2 for the blocks it leaves: it stops where a 64-byte
    // load would pass the end of `body`, before AVX2 has to, and on a block
    // boundary, so together they do the blocks AVX2 alone would.
    let done = if has_avx512() {
        // SAFETY: the CPU has AVX-512F, BW and VBMI (checked just above), all a
        // `target_feature` function needs.
        #[allow(unsafe_code)]
        unsafe {
            unpack_u16_avx512::<SHIFT_IN>(body, k, out)
        }
    } else {
        0
    };
    // SAFETY: the only requirement of a `target_feature` function is that the CPU
    // has the feature, which the run-time check above established.
    #[allow(unsafe_code)]
    let rest = unsafe { unpack_u16_avx2::<SHIFT_IN>(&body[done / 8 * k as usize..], k, &mut out[done..]) };
    done + rest
}

/// [`unpack_u16`]'s AVX-512 part: blocks of 32 words (`4k` bytes), each from one
/// 64-byte load. For `k <= 9` a word's bits lie within the 2 bytes from its
/// first one (`7 + 9 <= 16`): a byte shuffle gives each word's 16-bit lane those
/// 2 bytes, a per-lane shift and a mask leave its value. Wider words take a
/// 32-bit lane (3 bytes) each, two shuffles of the load a block, narrowed to 16
/// bits. Stops at the first block whose load would pass the end of `body` or
/// which `out` does not hold whole; returns the words written (a multiple of 32).
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
fn unpack_u16_avx512<const SHIFT_IN: bool>(body: &[u8], k: u32, out: &mut [u16]) -> usize {
    let kb = k as usize;
    let count = _mm_cvtsi32_si128(k as i32);
    let mut done = 0;
    if kb <= 9 {
        let (order, shifts) = wide_layout::<32, 2>(kb);
        let order: __m512i = bytemuck::cast(order);
        let shifts: __m512i = bytemuck::cast(shifts.map(|s| s as u16));
        let values = _mm512_set1_epi16(((1u32 << k) - 1) as i16);
        for (b, o) in out.chunks_exact_mut(32).enumerate() {
            let Some(bytes) = wide_load(body, b * 4 * kb) else {
                break;
            };
            let lanes = _mm512_permutexvar_epi8(order, bytes);
            let words = _mm512_and_si512(_mm512_srlv_epi16(lanes, shifts), values);
            let Some(o) = o.first_chunk_mut::<32>() else { break };
            put_wide::<SHIFT_IN, _>(o, words, |old| _mm512_sll_epi16(old, count));
            done += 32;
        }
    } else {
        // Words 0-15 from the load's start, 16-31 from its byte `2k` (bit
        // `16k`): the same layout for both halves, 16 words of at most 15 bits
        // ending by byte `2k + 30 < 64`.
        let (order, shifts) = wide_layout::<16, 4>(kb);
        let order_low: __m512i = bytemuck::cast(order);
        let order_high: __m512i = bytemuck::cast(order.map(|i| i + 2 * kb as u8));
        let shifts: __m512i = bytemuck::cast(shifts);
        let values = _mm512_set1_epi32((1 << k) - 1);
        let half = |bytes: __m512i, order: __m512i| {
            let lanes = _mm512_permutexvar_epi8(order, bytes);
            _mm512_cvtepi32_epi16(_mm512_and_si512(_mm512_srlv_epi32(lanes, shifts), values))
        };
        for (b, o) in out.chunks_exact_mut(32).enumerate() {
            let Some(bytes) = wide_load(body, b * 4 * kb) else {
                break;
            };
            let low: __m512i = bytemuck::cast([half(bytes, order_low), _mm256_set1_epi32(0)]);
            let words = _mm512_inserti64x4::<1>(low, half(bytes, order_high));
            let Some(o) = o.first_chunk_mut::<32>() else { break };
            put_wide::<SHIFT_IN, _>(o, words, |old| _mm512_sll_epi16(old, count));
            done += 32;
        }
    }
    done
}

/// Stores `words` (64 bytes) over `o`, with `SHIFT_IN` or-ed with the old ones
/// as `shift_old` shifts them.
#[target_feature(enable = "avx512f")]
fn put_wide<const SHIFT_IN: bool, T: bytemuck::Pod>(o: &mut T, words: __m512i, shift_old: impl Fn(__m512i) -> __m512i) {
    let words = if SHIFT_IN {
        _mm512_or_si512(shift_old(bytemuck::cast(*o)), words)
    } else {
        words
    };
    *o = bytemuck::cast(words);
}

/// [`unpack_u16`] once AVX2 is known to be there. A group of 8 words (`k`
/// bytes) is loaded as 16 bytes into both 128-bit halves; a byte shuffle gives
/// each word's 32-bit lane the (at most 3) bytes holding its bits, a variable
/// shift and a mask leave its value; two groups' lanes pack to 16 words.
#[target_feature(enable = "avx2")]
fn unpack_u16_avx2<const SHIFT_IN: bool>(body: &[u8], k: u32, out: &mut [u16]) -> usize {
    let kb = k as usize;
    // A word's bytes: `(8k - 1) / 8 < 15` at most, 3 of them.
    let (order, shifts) = lane_layout(kb, |i| i * kb);
    let order: __m256i = bytemuck::cast(order);
    let shifts: __m256i = bytemuck::cast(shifts);
    let values = _mm256_set1_epi32((1 << k) - 1);
    let count = _mm_cvtsi32_si128(k as i32);
    let group = |at: usize| -> Option<__m256i> {
        let bytes: __m128i = bytemuck::cast(*body.get(at..)?.first_chunk::<16>()?);
        let lanes = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(bytes), order);
        Some(_mm256_and_si256(_mm256_srlv_epi32(lanes, shifts), values))
    };
    let mut done = 0;
    for (b, o) in out.chunks_exact_mut(16).enumerate() {
        let (Some(low), Some(high)) = (group(2 * b * kb), group((2 * b + 1) * kb)) else {
            break;
        };
        // Values below 2^15: the signed-to-unsigned pack keeps them. It leaves the
        // 64-bit quarters as words 0-3, 8-11, 4-7, 12-15: put back in order.
        let words = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(low, high));
        let Some(o) = o.first_chunk_mut::<16>() else { break };
        put::<SHIFT_IN, _>(o, words, |old| _mm256_sll_epi16(old, count));
        done += 16;
    }
    done
}

/// [`unpack_u16`] for 32-bit words and `k` of 1 to 25 bits (FP32 mantissas:
/// 23), in blocks of 8 words (one group, `k` bytes); each block reads 16 bytes
/// from its first byte and 16 from byte `4k / 8` (words 4-7), and the first
/// block whose second load would pass the end of `body` stops it. With
/// `SHIFT_IN` a word's bits past 32 are dropped.
pub(crate) fn unpack_u32<const SHIFT_IN: bool>(body: &[u8], k: u8, out: &mut [u32]) -> usize {
    if !(1..=25).contains(&k) || !has_avx2() {
        return 0;
    }
    let k = u32::from(k);
    // As in `unpack_u16`: AVX-512 stops before AVX2 has to, on a group boundary.
    let done = if has_avx512() {
        // SAFETY: the CPU has AVX-512F, BW and VBMI (checked just above).
        #[allow(unsafe_code)]
        unsafe {
            unpack_u32_avx512::<SHIFT_IN>(body, k, out)
        }
    } else {
        0
    };
    // SAFETY: as in `unpack_u16`, the CPU has AVX2 (checked above).
    #[allow(unsafe_code)]
    let rest = unsafe { unpack_u32_avx2::<SHIFT_IN>(&body[done / 8 * k as usize..], k, &mut out[done..]) };
    done + rest
}

/// [`unpack_u32`]'s AVX-512 part: blocks of 16 words (`2k` bytes), each from one
/// 64-byte load (16 words of at most 25 bits end by byte 50); a byte shuffle
/// gives each word's 32-bit lane the 4 bytes from its first one (`7 + 25 <=
/// 32`), a per-lane shift and a mask leave its value. Stops as
/// [`unpack_u16_avx512`] does; returns the words written (a multiple of 16).
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
fn unpack_u32_avx512<const SHIFT_IN: bool>(body: &[u8], k: u32, out: &mut [u32]) -> usize {
    let kb = k as usize;
    let (order, shifts) = wide_layout::<16, 4>(kb);
    let order: __m512i = bytemuck::cast(order);
    let shifts: __m512i = bytemuck::cast(shifts);
    let values = _mm512_set1_epi32(((1u64 << k) - 1) as i32);
    let count = _mm_cvtsi32_si128(k as i32);
    let mut done = 0;
    for (b, o) in out.chunks_exact_mut(16).enumerate() {
        let Some(bytes) = wide_load(body, b * 2 * kb) else {
            break;
        };
        let lanes = _mm512_permutexvar_epi8(order, bytes);
        let words = _mm512_and_si512(_mm512_srlv_epi32(lanes, shifts), values);
        let Some(o) = o.first_chunk_mut::<16>() else { break };
        put_wide::<SHIFT_IN, _>(o, words, |old| _mm512_sll_epi32(old, count));
        done += 16;
    }
    done
}

/// [`unpack_u32`] once AVX2 is known to be there: words 0-3 of a group from
/// the 16 bytes at its first byte (they end by bit `4k <= 100`), words 4-7 from
/// the 16 bytes at byte `4k / 8` (from bit `4k % 8`, 0 or 4); a byte shuffle
/// gives each word's lane the (at most 4: `7 + 25 <= 32` bits) bytes holding it,
/// a variable shift and a mask leave its value.
#[target_feature(enable = "avx2")]
fn unpack_u32_avx2<const SHIFT_IN: bool>(body: &[u8], k: u32, out: &mut [u32]) -> usize {
    let kb = k as usize;
    let second = 4 * kb / 8;
    // A word's first bit in its half's 16 bytes; its bytes: `(4 + 4k - 1) / 8 <= 12`
    // at most, 4 of them.
    let (order, shifts) = lane_layout(kb, |i| if i < 4 { i * kb } else { 4 * kb % 8 + (i - 4) * kb });
    let order: __m256i = bytemuck::cast(order);
    let shifts: __m256i = bytemuck::cast(shifts);
    let values = _mm256_set1_epi32(((1u64 << k) - 1) as i32);
    let count = _mm_cvtsi32_si128(k as i32);
    let load = |at: usize| -> Option<__m128i> { Some(bytemuck::cast(*body.get(at..)?.first_chunk::<16>()?)) };
    let mut done = 0;
    for (g, o) in out.chunks_exact_mut(8).enumerate() {
        let (Some(low), Some(high)) = (load(g * kb), load(g * kb + second)) else {
            break;
        };
        let lanes = _mm256_shuffle_epi8(_mm256_set_m128i(high, low), order);
        let words = _mm256_and_si256(_mm256_srlv_epi32(lanes, shifts), values);
        let Some(o) = o.first_chunk_mut::<8>() else { break };
        put::<SHIFT_IN, _>(o, words, |old| _mm256_sll_epi32(old, count));
        done += 8;
    }
    done
}

/// `hsplit`'s lane loop ([`hsplit::decode_runs`]), compiled with BMI2 where the
/// CPU has it: every table lookup shifts by the bits used so far, and BMI2's
/// `shlx`/`shrx` do that in one micro-op, where `shl`/`shr` by `cl` take two or
/// three.
pub(crate) fn hsplit_runs<W: Word>(
    streams: &[u8],
    table: &[u64; hsplit::SLOTS],
    lanes: &mut [Lane; hsplit::LANES],
    out: &mut [W],
) {
    if !std::is_x86_feature_detected!("bmi2") {
        return hsplit::decode_runs(streams, table, lanes, out);
    }
    // SAFETY: the CPU has BMI2 (checked above), all a `target_feature` function needs.
    #[allow(unsafe_code)]
    unsafe {
        hsplit_runs_bmi2(streams, table, lanes, out)
    }
}

/// [`hsplit_runs`] once BMI2 is known to be there.
#[target_feature(enable = "bmi2")]
fn hsplit_runs_bmi2<W: Word>(
    streams: &[u8],
    table: &[u64; hsplit::SLOTS],
    lanes: &mut [Lane; hsplit::LANES],
    out: &mut [W],
) {
    hsplit::decode_runs(streams, table, lanes, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::tables::testing::Rng;
    use std::vec::Vec;

    /// Word `i` of `body` (`k` bits a word, least significant bit first).
    fn value(body: &[u8], k: usize, i: usize) -> u32 {
        (0..k).fold(0u32, |v, b| {
            let bit = i * k + b;
            v | u32::from(body[bit / 8] >> (bit % 8) & 1) << b
        })
    }

    /// A fast path for words `W`: `unpack(shift_in, body, k, out)`, and whether
    /// the block from word `from` has its loads within `len` bytes of `k`-bit words.
    struct Kernel<W> {
        max_k: usize,
        block: usize,
        unpack: fn(bool, &[u8], u8, &mut [W]) -> usize,
        loads_fit: fn(from: usize, k: usize, len: usize) -> bool,
    }

    /// Every `k`, lengths around whole blocks and the last loads, both kinds of
    /// store, against the words read one bit at a time: what was written matches,
    /// what was not is untouched, and the count is what the loads allow.
    fn matches_words_read_bit_by_bit<W: Word>(kernel: Kernel<W>, seed: u64) {
        if !has_avx2() {
            std::eprintln!("no AVX2 here: the fast paths are not tested");
            return;
        }
        let mut rng = Rng(seed);
        let b = kernel.block;
        for k in 1..=kernel.max_k {
            for n in [0, 1, b - 1, b, b + 1, 2 * b - 1, 2 * b, 2 * b + 1, 3 * b, 100, 1000] {
                let body: Vec<u8> = (0..(n * k).div_ceil(8)).map(|_| rng.next() as u8).collect();
                let old: Vec<W> = (0..n).map(|_| W::from_u64(rng.next())).collect();
                for shift_in in [false, true] {
                    let mut out = old.clone();
                    let done = (kernel.unpack)(shift_in, &body, k as u8, &mut out);
                    let mut want_done = 0;
                    while want_done + b <= n && (kernel.loads_fit)(want_done, k, body.len()) {
                        want_done += b;
                    }
                    assert_eq!(done, want_done, "k {k}, n {n}");
                    for i in 0..n {
                        let v = u64::from(value(&body, k, i));
                        let want = match (i < done, shift_in) {
                            (false, _) => old[i],
                            (true, false) => W::from_u64(v),
                            (true, true) => W::from_u64(old[i].to_u64() << k | v),
                        };
                        assert_eq!(out[i], want, "k {k}, n {n}, word {i}, shift in {shift_in}");
                    }
                }
            }
        }
    }

    #[test]
    fn blocks_match_words_read_bit_by_bit() {
        // A block of 16 is done when its second group's 16 bytes are there.
        matches_words_read_bit_by_bit(
            Kernel::<u16> {
                max_k: 15,
                block: 16,
                unpack: |shift_in, body, k, out| match shift_in {
                    true => unpack_u16::<true>(body, k, out),
                    false => unpack_u16::<false>(body, k, out),
                },
                loads_fit: |from, k, len| (from / 8 + 1) * k + 16 <= len,
            },
            7,
        );
    }

    #[test]
    fn wide_blocks_match_words_read_bit_by_bit() {
        // A group of 8 is done when the 16 bytes from its byte `4k / 8` are there.
        matches_words_read_bit_by_bit(
            Kernel::<u32> {
                max_k: 25,
                block: 8,
                unpack: |shift_in, body, k, out| match shift_in {
                    true => unpack_u32::<true>(body, k, out),
                    false => unpack_u32::<false>(body, k, out),
                },
                loads_fit: |from, k, len| from / 8 * k + 4 * k / 8 + 16 <= len,
            },
            11,
        );
    }

    /// The AVX-512 parts alone (the tests above run them through the dispatch,
    /// where AVX2 takes what they leave): each block whose 64-byte load fits.
    #[test]
    fn avx512_blocks_match_words_read_bit_by_bit() {
        if !has_avx512() {
            std::eprintln!("no AVX-512 (F, BW, VBMI) here: its unpacking is not tested");
            return;
        }
        // SAFETY (both closures): the CPU has AVX-512F, BW and VBMI (checked above).
        #[allow(unsafe_code)]
        matches_words_read_bit_by_bit(
            Kernel::<u16> {
                max_k: 15,
                block: 32,
                unpack: |shift_in, body, k, out| unsafe {
                    match shift_in {
                        true => unpack_u16_avx512::<true>(body, k.into(), out),
                        false => unpack_u16_avx512::<false>(body, k.into(), out),
                    }
                },
                loads_fit: |from, k, len| from * k / 8 + WIDE_LOAD <= len,
            },
            13,
        );
        #[allow(unsafe_code)]
        matches_words_read_bit_by_bit(
            Kernel::<u32> {
                max_k: 25,
                block: 16,
                unpack: |shift_in, body, k, out| unsafe {
                    match shift_in {
                        true => unpack_u32_avx512::<true>(body, k.into(), out),
                        false => unpack_u32_avx512::<false>(body, k.into(), out),
                    }
                },
                loads_fit: |from, k, len| from * k / 8 + WIDE_LOAD <= len,
            },
            17,
        );
    }

    #[test]
    fn other_bit_counts_are_left_to_the_safe_loop() {
        let body = [0xffu8; 64];
        for k in [0u8, 16, 17] {
            let mut out = [3u16; 32];
            assert_eq!(unpack_u16::<false>(&body, k, &mut out), 0);
            assert_eq!(out, [3u16; 32]);
        }
        for k in [0u8, 26, 32] {
            let mut out = [3u32; 32];
            assert_eq!(unpack_u32::<true>(&body, k, &mut out), 0);
            assert_eq!(out, [3u32; 32]);
        }
    }
}
