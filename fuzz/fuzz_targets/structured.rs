//! Structure-aware: the inputs are archives (the seeds are real ones); the
//! mutator changes record bodies (or the record list) and re-frames every
//! record with a correct checksum and a consistent INDEX and END, so mutations
//! get past the checksums into the parsers. The target re-frames whatever it is
//! given the same way, then runs every archive check; whenever decoding
//! succeeds, each file's bytes must hash to its FILE record's SHA-256.
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target};

fuzz_target!(|data: &[u8]| brevis_fuzz::check_archive(&brevis_fuzz::normalize(data)));

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    brevis_fuzz::mutate(data, size, max_size, seed)
});
