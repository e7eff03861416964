//! Times [`brevis_decoder::decode_all`], the library's in-memory decode: the
//! archive already in memory, every file rebuilt into a `Vec` of its own, every
//! record checksum, chunk checksum and file digest checked, on one thread. It is
//! what a Rust program embedding the decoder gets, and the same shape of call as
//! ZipNN's in-memory `decompress()` (bytes in, the whole file's bytes out), which
//! `brevis verify` (output hashed and dropped chunk by chunk) is not.
//!
//! With `--threads N` (N > 1) it times [`brevis_decoder::decode_all_threads`]
//! instead: each file's chunks decoded on N threads, the same checks.
//!
//! ```text
//! cargo run --release -p brevis-decoder --features simd,huge-pages --example decode_all -- [--runs N] [--threads N] ARCHIVE...
//! ```
//!
//! Prints one JSON object a line per archive: `archive`, `output_bytes`, and the
//! `best` and `median` seconds of `N` timed calls (default 9) after one warm-up call.

use std::time::Instant;

use brevis_decoder::{decode_all, decode_all_threads, DecodeError, DecodeLimits, DecodedFile};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).peekable();
    let (mut runs, mut threads) = (9usize, 1usize);
    loop {
        match args.peek().map(String::as_str) {
            Some("--runs") => {
                args.next();
                runs = args.next().ok_or("--runs needs a number")?.parse()?;
            }
            Some("--threads") => {
                args.next();
                threads = args.next().ok_or("--threads needs a number")?.parse()?;
            }
            _ => break,
        }
    }
    let archives: Vec<String> = args.collect();
    if archives.is_empty() || runs == 0 {
        return Err("usage: decode_all [--runs N] [--threads N] ARCHIVE... (N >= 1)".into());
    }
    let limits = DecodeLimits::default();
    let decode = |archive: &[u8]| -> Result<Vec<DecodedFile>, DecodeError> {
        if threads > 1 {
            decode_all_threads(archive, &limits, threads)
        } else {
            decode_all(archive, &limits)
        }
    };
    for path in archives {
        let archive = std::fs::read(&path)?;
        // The warm-up call: also the one whose output size is reported.
        let output_bytes: usize = decode(&archive)?.iter().map(|f| f.data.len()).sum();
        let mut secs = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            let files = decode(&archive)?;
            secs.push(t.elapsed().as_secs_f64());
            // Dropped outside the timing, as a caller would keep them.
            drop(std::hint::black_box(files));
        }
        secs.sort_by(f64::total_cmp);
        println!(
            "{{\"archive\": {path:?}, \"output_bytes\": {output_bytes}, \"best\": {:.6}, \"median\": {:.6}}}",
            secs[0],
            secs[runs / 2]
        );
    }
    Ok(())
}
