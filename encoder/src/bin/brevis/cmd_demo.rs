//! The default job: compress the bundled checkpoint, decompress it, verify it
//! bit for bit, and print its sizes beside zstd's.

use anyhow::{ensure, Result};
use brevis_decoder::{decode_all, DecodeLimits};
use brevis_encoder::synth::CandidateSearch;
use brevis_encoder::{compress_files, CompressOptions, InputFile};
use sha2::{Digest, Sha256};

use crate::common::{human, ratio};

/// Silero VAD v6, 16 kHz weights (MIT licence; see `encoder/assets/README.md`).
const BUNDLED: &[u8] = include_bytes!("../../../assets/silero_vad_16k.safetensors");
const BUNDLED_NAME: &str = "silero_vad_16k.safetensors";

pub fn run() -> Result<()> {
    println!("Brevis round trip on the bundled checkpoint `{BUNDLED_NAME}` (Silero VAD v6, FP32, MIT)\n");
    let files = [InputFile {
        archive_path: BUNDLED_NAME.into(),
        data: BUNDLED,
    }];
    let t = std::time::Instant::now();
    let (archive, len, reports) = compress_files(
        Vec::new(),
        &files,
        &CandidateSearch::default(),
        &CompressOptions::default(),
        &|_| {},
    )?;
    let compress_s = t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    let decoded = decode_all(&archive, &DecodeLimits::default())?;
    let decompress_s = t.elapsed().as_secs_f64();
    ensure!(decoded.len() == 1 && decoded[0].data == BUNDLED, "round trip differs");
    let want: [u8; 32] = Sha256::digest(BUNDLED).into();
    ensure!(decoded[0].digest == want, "SHA-256 differs");
    println!("sha256 {}  round trip: bit-exact", hex(&want));
    println!("compress {compress_s:.3}s, decompress {decompress_s:.3}s\n");

    let zstd19 = zstd::bulk::compress(BUNDLED, 19)?.len() as u64;
    let zstd3 = zstd::bulk::compress(BUNDLED, 3)?.len() as u64;
    let orig = BUNDLED.len() as u64;
    println!("{:<14} {:>12} {:>9}", "", "bytes", "ratio");
    println!("{:<14} {:>12} {:>9}", "original", orig, "1.0000");
    println!("{:<14} {:>12} {:>9.4}", "zstd -3", zstd3, ratio(orig, zstd3));
    println!("{:<14} {:>12} {:>9.4}", "zstd -19", zstd19, ratio(orig, zstd19));
    println!("{:<14} {:>12} {:>9.4}", "brevis", len, ratio(orig, len));
    println!(
        "\nbrevis is {:.2}% smaller than zstd -19\n",
        100.0 * (1.0 - len as f64 / zstd19 as f64)
    );

    println!(
        "{:<28} {:>10} {:>10} {:>8}  program (first chunk)",
        "segment", "original", "stored", "ratio"
    );
    for seg in &reports[0].segments {
        println!(
            "{:<28} {:>10} {:>10} {:>8.4}  {}",
            seg.name,
            human(seg.len),
            human(seg.compressed),
            ratio(seg.len, seg.compressed),
            seg.programs.first().map(String::as_str).unwrap_or("(empty)")
        );
    }
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
