//! Transparent huge pages for the decoder's heap.
//!
//! Decoding allocates a few buffers of MiBs per chunk (the chunk body's copy, each
//! literal's words, the chunk's bytes, the hashing thread's copy), and glibc serves
//! them from its heap (`keep_freed_memory` in main.rs). The first time a heap page is
//! touched the kernel faults it in and zeroes it, so a process's first pass over its
//! peak memory is all page faults: `perf stat -e page-faults brevis verify --threads 2`
//! counted 13.1k on the BF16 corpus archive (peak RSS 53 MB), and the faults were most
//! of what two threads spent beyond one thread's work. Where the kernel leaves huge
//! pages to `madvise` (`/sys/kernel/mm/transparent_hugepage/enabled` = `madvise`,
//! Debian's default), advising the heap makes a fault map 2 MiB instead of 4 KiB, as
//! glibc's `glibc.malloc.hugetlb=1` tunable would (it can only be set in the
//! environment before the process starts): 0.5k faults. `bench/threads.py --runs 15`
//! on the BF16 / FP16 (derived) / FP32 all-MiniLM corpus archives, the build before
//! (48a288d) against the one with this (and `StreamDecoder::fill`): 2 threads 0.103 /
//! 0.110 / 0.139 s against 0.094 / 0.093 / 0.127 s, one thread 0.171 / 0.176 / 0.222 s
//! against 0.164 / 0.166 / 0.211 s; 2 ÷ 1 went from 1.65 / 1.60 / 1.60x to 1.75 / 1.79 /
//! 1.66x. Huge pages alone raised the 2-thread peak RSS by up to 6 MB (67.5 MB on a
//! synthetic 4 GiB archive, over the 64 MiB target); with the decoder's input buffer
//! kept tighter since (`StreamDecoder::fill`'s compaction) the peaks in
//! `bench/RESULTS.md` are no higher than before either.
//!
//! [`advise_heap`] grows the heap once by [`HEAP_RESERVE`] (untouched, so it costs
//! no memory until used) and advises it; every thread allocates from that one heap
//! when decoding (`one_heap_for_all_threads`), and the decoder's peak stays below it.
//! The advice is a hint: where it fails (huge pages disabled, an old kernel, the heap
//! not where `sbrk` says) nothing changes but the speed.

/// Huge page size on x86-64 (4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;
/// Heap grown and advised up front: more than the streaming decoder's peak
/// (under 64 MiB, `bench/RESULTS.md`).
const HEAP_RESERVE: usize = 96 << 20;
/// glibc's `M_TOP_PAD` default (`mallopt(3)`).
const DEFAULT_TOP_PAD: libc::c_int = 128 << 10;

/// Grows glibc's main heap by [`HEAP_RESERVE`] and advises it `MADV_HUGEPAGE`.
/// Call before any other thread exists (it sets malloc's parameters).
pub fn advise_heap() {
    // SAFETY: `sbrk(0)` only reads the program break. `mallopt`, `malloc` and
    // `free` are used as documented, before other threads exist; the block is
    // freed at once and never touched. Below, `madvise` covers `[start, end)`,
    // which lies between two program breaks read before and after the heap grew,
    // so it is mapped heap memory; MADV_HUGEPAGE never changes memory contents,
    // and its failure (returned, ignored) changes nothing.
    #[allow(unsafe_code)]
    let (before, after) = unsafe {
        let before = libc::sbrk(0) as usize;
        // Keep the grown part when the block is freed: trim only past this much.
        libc::mallopt(libc::M_TRIM_THRESHOLD, (2 * HEAP_RESERVE) as libc::c_int);
        libc::mallopt(libc::M_TOP_PAD, HEAP_RESERVE as libc::c_int);
        // Below the mmap threshold (32 MiB, `keep_freed_memory`): from the heap,
        // which grows by this plus the top pad. (`black_box`: an unused block's
        // malloc and free may otherwise be optimized away.)
        let block = std::hint::black_box(libc::malloc(1 << 20));
        let after = libc::sbrk(0) as usize;
        libc::free(block);
        libc::mallopt(libc::M_TOP_PAD, DEFAULT_TOP_PAD);
        (before, after)
    };
    // `sbrk` fails with -1.
    if before == usize::MAX || after == usize::MAX {
        return;
    }
    let start = before.next_multiple_of(HUGE_PAGE);
    let end = after / HUGE_PAGE * HUGE_PAGE;
    if end > start {
        // SAFETY: see above: `[start, end)` is heap memory between two breaks.
        #[allow(unsafe_code)]
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}
