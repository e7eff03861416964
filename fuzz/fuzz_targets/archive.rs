//! Arbitrary bytes as an archive: `decode_all`, `Archive::open` + `read_file`
//! of every file, `Archive::scan` + `read_chunk` of every chunk. See
//! `brevis_fuzz::check_archive` for what must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| brevis_fuzz::check_archive(data));
