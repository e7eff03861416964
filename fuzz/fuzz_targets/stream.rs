//! The streaming decoder, fed in pieces whose sizes the input chooses, must
//! agree with `decode_all` on the same bytes: the same files, or both fail.
//!
//! Input: `[flags] [schedule: flags & 15 bytes] archive…`. Each schedule byte
//! `s` is a piece of `(s & 0x7f) + 1` bytes, times 97 when `s & 0x80`; the
//! schedule repeats (an empty one feeds the archive whole). With `flags & 0x10`
//! the archive is re-framed first (fresh checksums, index and END), so damaged
//! bodies reach the parsers.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(flags & 15).min(rest.len());
    let (schedule, archive) = rest.split_at(n);
    let normalized;
    let archive = if flags & 0x10 != 0 {
        normalized = brevis_fuzz::normalize(archive);
        &normalized[..]
    } else {
        archive
    };
    let mut i = 0;
    let piece = || {
        let Some(&s) = schedule.get(i % schedule.len().max(1)) else {
            return usize::MAX;
        };
        i += 1;
        (usize::from(s & 0x7f) + 1) * if s & 0x80 != 0 { 97 } else { 1 }
    };
    let streamed = brevis_fuzz::stream_files(archive, piece);
    let whole = brevis_fuzz::decode_all_files(archive);
    match (&streamed, &whole) {
        (Ok(a), Ok(b)) => assert!(a == b, "streamed files differ from decode_all's"),
        (Err(_), Err(_)) => {}
        _ => panic!(
            "streaming and decode_all disagree: stream {:?}, decode_all {:?}",
            streamed.as_ref().map(|f| f.len()),
            whole.as_ref().map(|f| f.len())
        ),
    }
});
