//! Transparent huge pages for large output buffers (feature `huge-pages`).
//!
//! A freshly allocated buffer of many megabytes (a whole file rebuilt in
//! memory) is mapped by the kernel page by page as it is first written: with
//! 4 KiB pages a 45 MB file takes about 11,000 page faults, each charged to
//! the process's memory cgroup and zeroed on its own. `perf record` of the
//! in-memory decode of the `--fast-decode` BF16 corpus archive put 35-40% of
//! its samples in the kernel's fault path. Marking the buffer for transparent
//! huge pages lets the kernel map 2 MiB at a time on systems whose policy is
//! `madvise` (the common default). See `docs/UNSAFE.md`.

/// The huge page size advised for (x86-64 and 4 KiB-page AArch64). Aligning
/// the advised range to it keeps the advice off the parts of the allocation's
/// first and last 2 MiB that the buffer does not cover.
const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel to back `buf` with transparent huge pages where its memory
/// is not touched yet: a hint (`madvise(MADV_HUGEPAGE)`) that changes no byte
/// of it, whose failure is ignored. Only the 2 MiB-aligned part of `buf` is
/// advised, so buffers under 4 MiB are left alone. Does nothing off Linux.
pub fn advise_huge_pages(buf: &mut [u8]) {
    let Some((start, len)) = aligned_interior(buf.as_ptr() as usize, buf.len(), HUGE_PAGE) else {
        return;
    };
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    // SAFETY: `[start, start + len)` lies inside `buf`, which this function
    // borrows mutably, so no other code uses that memory meanwhile; `start` is
    // 2 MiB-aligned, hence page-aligned as `madvise` requires. `MADV_HUGEPAGE`
    // neither unmaps nor changes memory: it flags the mapping so that later
    // faults may be served with huge pages (zeroed, as small ones are), and
    // pages already present keep their contents when the kernel later
    // collapses them. The call reads and writes no memory of this process.
    unsafe {
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, len);
}

/// The largest `align`-aligned range inside `[addr, addr + len)`, as (start,
/// length), if it is not empty.
fn aligned_interior(addr: usize, len: usize, align: usize) -> Option<(usize, usize)> {
    let start = addr.checked_next_multiple_of(align)?;
    let end = addr.checked_add(len)? / align * align;
    (end > start).then(|| (start, end - start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn interior_is_aligned_and_inside() {
        const A: usize = HUGE_PAGE;
        assert_eq!(aligned_interior(0, 3 * A, A), Some((0, 3 * A)));
        assert_eq!(aligned_interior(16, 3 * A, A), Some((A, 2 * A)));
        assert_eq!(aligned_interior(16, 2 * A, A), Some((A, A)));
        assert_eq!(aligned_interior(16, A, A), None);
        assert_eq!(aligned_interior(A - 1, A + 1, A), Some((A, A)));
        assert_eq!(aligned_interior(usize::MAX - 5, 5, A), None);
    }

    #[test]
    fn advice_keeps_every_byte() {
        // Large enough for an aligned 2 MiB range wherever the allocator puts
        // it; written before and after the advice, and read back.
        let len = 3 * HUGE_PAGE + 12_345;
        let mut buf = vec![0u8; len];
        for (i, b) in buf.iter_mut().enumerate().step_by(4093) {
            *b = (i % 251) as u8 + 1;
        }
        advise_huge_pages(&mut buf);
        for (i, b) in buf.iter().enumerate() {
            let want = if i % 4093 == 0 { (i % 251) as u8 + 1 } else { 0 };
            assert_eq!(*b, want, "byte {i}");
        }
        let n = buf.len();
        buf[n - 1] = 7;
        advise_huge_pages(&mut buf[..0]);
        advise_huge_pages(&mut buf[1..4096]);
        assert_eq!(buf[n - 1], 7);
    }
}
