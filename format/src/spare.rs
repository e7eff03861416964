//! Word buffers kept for reuse (feature `recycle`): a chunk's decoded words, once
//! dropped, become the buffer the next literal of the same container size decodes
//! into, without zeroing it first.
//!
//! Why: a `--fast-decode` chunk's literal is decoded into a fresh 1 MiB buffer, and
//! `calloc` zeroes it (`memset` was 4.6% of a one-thread `brevis verify` of the
//! BF16 corpus archive, `perf record`) only for the decoder to write every word
//! again. A kept buffer was also written last by this process, so it is resident,
//! often still in cache. Only decoders that write every word of their output, or
//! fail, take a kept buffer ([`crate::stream::Stream::for_overwrite`]); even so a
//! word left unwritten could not pass as decoded: the chunk's checksum of its
//! decoded bytes would not match.
//!
//! One pool for the process (decoding threads give and take alike), holding at most
//! [`MAX_KEPT_BYTES`], and only buffers of a word size some literal has asked for:
//! a default archive's chunks (context-coded literals, which take none) leave
//! nothing kept. Opt-in because a library should not keep memory behind its
//! caller's back unasked; the `brevis` CLI enables it.

use alloc::vec::Vec;
use std::sync::Mutex;

use crate::stream::Words;

/// The most bytes (of capacity) the pool keeps at once: one default (4 MiB) chunk,
/// or four `--fast-decode` (1 MiB) ones, enough for two threads' chunks in
/// flight. (At 8 MiB, the FP32 `--fast-decode` corpus archive kept 3-4 buffers
/// where one thread needs one: its `Merge` roots are given back too.)
pub const MAX_KEPT_BYTES: usize = 4 << 20;

/// Buffers of fewer bytes are not kept: zeroing them costs little, and malloc
/// reuses small blocks well.
pub const MIN_KEPT_BYTES: usize = 64 << 10;

/// Buffers kept, the most recently given last (taken first: the likeliest to be
/// in cache), the bytes of capacity they hold, and the word sizes asked for.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    kept: Vec<Words>,
    bytes: usize,
    /// Bit `b` set: a buffer of `b`-byte words was asked for ([`Pool::take`]).
    wanted: u16,
}

/// Bytes of capacity of a buffer.
fn capacity_bytes(words: &Words) -> usize {
    crate::with_words!(words, v => v.capacity()) * word_bytes(words)
}

/// How many bytes each of `words`' words takes.
fn word_bytes(words: &Words) -> usize {
    match words {
        Words::U8(_) => 1,
        Words::U16(_) => 2,
        Words::U32(_) => 4,
        Words::U64(_) => 8,
    }
}

impl Pool {
    /// An empty pool.
    pub(crate) const fn new() -> Self {
        Pool {
            kept: Vec::new(),
            bytes: 0,
            wanted: 0,
        }
    }

    /// Keeps `words`' buffer if it is large enough to be worth it, buffers of its
    /// word size have been asked for, and the pool has room for it; drops it
    /// otherwise.
    pub(crate) fn give(&mut self, words: Words) {
        let bytes = capacity_bytes(&words);
        let wanted = self.wanted & 1 << word_bytes(&words) != 0;
        if !wanted || bytes < MIN_KEPT_BYTES || self.bytes + bytes > MAX_KEPT_BYTES {
            return;
        }
        self.bytes += bytes;
        self.kept.push(words);
    }

    /// A kept buffer of `len` words of `word_bytes` bytes each, holding whatever it
    /// held (zeros where it grew), if one is kept that holds them without growing.
    ///
    /// Which one: the shortest that already holds `len` words, so nothing is
    /// zeroed, unless it holds more than twice as many: then none (the caller
    /// zeroes a fresh buffer of `len` words), and the long one stays whole for a
    /// long chunk. Else, with none that holds `len` words, the longest (the
    /// fewest zeroed). A buffer is as long as the literal that had it last, and a
    /// vector cannot be lengthened without writing, so taking the one buffer kept
    /// for each chunk, whatever its length, zeroed most of 1 MiB after every
    /// tensor's short last chunk: 2% of a one-thread `verify` of the
    /// `--fast-decode` BF16 corpus archive (`perf record`: `Vec::resize`; its 384 x
    /// 1536 tensors end in a chunk of an eighth).
    pub(crate) fn take(&mut self, word_bytes_wanted: usize, len: usize) -> Option<Words> {
        self.wanted |= 1 << word_bytes_wanted;
        let fits = |w: &Words| word_bytes(w) == word_bytes_wanted && crate::with_words!(w, v => v.capacity() >= len);
        let held = |w: &Words| crate::with_words!(w, v => v.len());
        // Latest first, and `min_by_key` keeps the first of equals: on a tie, the
        // likeliest to be in cache.
        let fitting = || self.kept.iter().enumerate().rev().filter(|(_, w)| fits(w));
        let at = match fitting().filter(|(_, w)| held(w) >= len).min_by_key(|(_, w)| held(w)) {
            Some((at, w)) if held(w) / 2 <= len => at,
            Some(_) => return None,
            None => fitting().min_by_key(|(_, w)| core::cmp::Reverse(held(w)))?.0,
        };
        let mut words = self.kept.swap_remove(at);
        self.bytes -= capacity_bytes(&words);
        // Within the capacity: no reallocation; only a grown tail is zeroed.
        crate::with_words_mut!(&mut words, v => {
            v.truncate(len);
            v.resize(len, Default::default());
        });
        Some(words)
    }
}

/// The process's pool.
static POOL: Mutex<Pool> = Mutex::new(Pool::new());

/// Keeps `words`' buffer for a later [`take`] (see [`Pool::give`]).
pub(crate) fn give(words: Words) {
    if capacity_bytes(&words) < MIN_KEPT_BYTES {
        return;
    }
    // A poisoned lock (a thread panicked holding it) only stops the reuse.
    if let Ok(mut pool) = POOL.lock() {
        pool.give(words);
    }
}

/// A kept buffer of `len` words of `word_bytes` bytes, its contents unspecified
/// (see [`Pool::take`]).
pub(crate) fn take(word_bytes: usize, len: usize) -> Option<Words> {
    if len.saturating_mul(word_bytes) < MIN_KEPT_BYTES {
        return None;
    }
    POOL.lock().ok()?.take(word_bytes, len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    const BIG: usize = MIN_KEPT_BYTES / 2; // u16 words: exactly the smallest kept

    #[test]
    fn a_given_buffer_comes_back_with_its_words_and_no_reallocation() {
        let mut pool = Pool::new();
        assert!(pool.take(2, BIG).is_none(), "nothing kept yet");
        let v: Vec<u16> = (0..BIG as u16).collect();
        let ptr = v.as_ptr();
        pool.give(Words::U16(v));
        assert_eq!(pool.bytes, MIN_KEPT_BYTES);
        // Another container size finds nothing.
        assert!(pool.take(1, 10).is_none());
        assert!(pool.take(4, 10).is_none());
        // More words than it holds: nothing either.
        assert!(pool.take(2, BIG + 1).is_none());
        let Some(Words::U16(back)) = pool.take(2, BIG - 3) else {
            panic!("the u16 buffer is kept")
        };
        assert_eq!(back.as_ptr(), ptr, "the same buffer");
        assert_eq!(back.len(), BIG - 3);
        assert_eq!(back[..5], [0, 1, 2, 3, 4], "its words, not zeroed");
        assert_eq!(pool.bytes, 0);
        assert!(pool.take(2, 10).is_none(), "taken once");
    }

    #[test]
    fn a_buffer_that_holds_the_words_is_taken_before_one_that_must_grow() {
        let mut pool = Pool::new();
        pool.wanted = u16::MAX;
        let full = vec![5u16; BIG];
        let full_ptr = full.as_ptr();
        let mut short = vec![6u16; 10];
        short.reserve_exact(BIG);
        let short_ptr = short.as_ptr();
        pool.give(Words::U16(full));
        pool.give(Words::U16(short));
        // The short one was given last, but would need zeroing.
        let Some(Words::U16(back)) = pool.take(2, BIG) else {
            panic!("a u16 buffer is kept")
        };
        assert_eq!(back.as_ptr(), full_ptr);
        assert!(back.iter().all(|&w| w == 5), "not zeroed");
        // Only the short one is left: taken all the same, grown with zeros.
        let Some(Words::U16(back)) = pool.take(2, 20) else {
            panic!("the short buffer is kept")
        };
        assert_eq!(back.as_ptr(), short_ptr);
        assert_eq!(back[..10], [6; 10]);
        assert_eq!(back[10..], [0; 10]);
    }

    #[test]
    fn a_long_buffer_is_kept_whole_for_a_long_chunk() {
        let mut pool = Pool::new();
        pool.wanted = u16::MAX;
        let long = vec![1u16; 4 * BIG];
        let long_ptr = long.as_ptr();
        pool.give(Words::U16(long));
        // A quarter of it: not taken (it would come back a quarter long).
        assert!(pool.take(2, BIG).is_none());
        let quarter = vec![2u16; BIG];
        let quarter_ptr = quarter.as_ptr();
        pool.give(Words::U16(quarter));
        let Some(Words::U16(back)) = pool.take(2, BIG) else {
            panic!("the quarter is kept")
        };
        assert_eq!(back.as_ptr(), quarter_ptr);
        // Half or more of it: taken.
        let Some(Words::U16(back)) = pool.take(2, 2 * BIG) else {
            panic!("the long buffer is kept")
        };
        assert_eq!((back.as_ptr(), back.len()), (long_ptr, 2 * BIG));
    }

    #[test]
    fn a_buffer_grown_within_its_capacity_is_zeroed_past_its_old_words() {
        let mut pool = Pool::new();
        pool.wanted = u16::MAX;
        let mut v = vec![7u32; 100];
        v.reserve_exact(MIN_KEPT_BYTES / 4);
        pool.give(Words::U32(v));
        let Some(Words::U32(back)) = pool.take(4, 200) else {
            panic!("kept: its capacity is large enough")
        };
        assert_eq!(back[..100], [7; 100]);
        assert_eq!(back[100..], [0; 100]);
    }

    #[test]
    fn small_buffers_are_not_kept_and_the_pool_stays_under_its_bound() {
        let mut pool = Pool::new();
        pool.wanted = u16::MAX;
        pool.give(Words::U8(vec![1; MIN_KEPT_BYTES - 1]));
        assert!(pool.kept.is_empty());
        let each = MAX_KEPT_BYTES / 3;
        for _ in 0..5 {
            pool.give(Words::U8(vec![1; each]));
        }
        assert_eq!(pool.kept.len(), 3);
        assert!(pool.bytes <= MAX_KEPT_BYTES);
        // Of equals, the most recently given is taken first.
        let last = pool
            .kept
            .last()
            .map(|w| crate::with_words!(w, v => v.as_ptr() as usize));
        let taken = pool
            .take(1, each)
            .map(|w| crate::with_words!(&w, v => v.as_ptr() as usize));
        assert_eq!(taken, last);
    }

    #[test]
    fn only_word_sizes_asked_for_are_kept() {
        let mut pool = Pool::new();
        pool.give(Words::U16(vec![1; BIG]));
        assert!(pool.kept.is_empty(), "no literal asked for 16-bit words yet");
        assert!(pool.take(2, BIG).is_none());
        pool.give(Words::U32(vec![1; BIG]));
        assert!(pool.kept.is_empty(), "32-bit words were not asked for");
        pool.give(Words::U16(vec![1; BIG]));
        assert_eq!(pool.kept.len(), 1);
        assert!(pool.take(2, BIG).is_some());
    }
}
