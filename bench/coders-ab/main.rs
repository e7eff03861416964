//! `bench/coders-ab.sh`'s timer: decodes the same payloads with the format crate at
//! a revision (`before`) and as the working tree has it (`after`), alternating call
//! by call in one process, and prints each one's best time as words per second.

use std::hint::black_box;
use std::time::Instant;

/// 512 Ki words: a `--fast-decode` chunk of BF16 (1 MiB).
const N: usize = 1 << 19;

// `format/benches/support/weights.rs`, copied beside this file by `coders-ab.sh`.
mod weights;
use weights::{bf16_of, f32_words};

/// (name, width, words) of each case.
fn cases() -> Vec<(&'static str, u8, Vec<u64>)> {
    let f = f32_words(N);
    let bf16 = |x: u32| u64::from(bf16_of(x));
    let fp16 = |x: u32| u64::from(half::f16::from_f32(f32::from_bits(x)).to_bits());
    vec![
        ("bf16", 16, f.iter().map(|&x| bf16(x)).collect()),
        ("fp16", 16, f.iter().map(|&x| fp16(x)).collect()),
        ("fp32", 32, f.iter().map(|&x| u64::from(x)).collect()),
        ("exp8", 8, f.iter().map(|&x| (bf16(x) >> 7) & 0xff).collect()),
        ("man7", 7, f.iter().map(|&x| bf16(x) & 0x7f).collect()),
        // BF16's sign, exponent and top 3 mantissa bits: the `ctx` field of default
        // BF16 archives (`Merge.fields[12,4]`).
        ("top12", 12, f.iter().map(|&x| bf16(x) >> 4).collect()),
        // FP32's mantissa: the low bits of `hsplit` and `Merge.fields[9,23]`.
        ("man23", 23, f.iter().map(|&x| u64::from(x & 0x7f_ffff)).collect()),
        // The weights quantized to bytes (symmetric, scale max / 127), as int8
        // ONNX checkpoints hold them.
        ("int8", 8, {
            let max = f.iter().map(|&x| f32::from_bits(x).abs()).fold(0f32, f32::max);
            f.iter()
                .map(|&x| u64::from((f32::from_bits(x) / max * 127.0).round() as i8 as u8))
                .collect()
        }),
    ]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (rev, encodings, wanted, seconds) = (&args[1], &args[2], &args[3], args[4].parse::<f64>().unwrap());
    println!("in-process A/B, best of as many calls as {seconds} s allow, {N} words a call");
    println!("| encoding | case | payload B | {rev} Mword/s | working tree Mword/s | after / before |");
    println!("|---|---|---:|---:|---:|---:|");
    for name in encodings.split(',') {
        let after_enc = after::wire::LitEncoding::ALL.into_iter().find(|e| e.name() == name);
        let before_enc = before::wire::LitEncoding::ALL.into_iter().find(|e| e.name() == name);
        let (Some(after_enc), Some(before_enc)) = (after_enc, before_enc) else {
            eprintln!("unknown encoding {name}");
            std::process::exit(2);
        };
        for (case, width, words) in cases() {
            if !wanted.split(',').any(|w| w == case) {
                continue;
            }
            let s = after::stream::Stream::from_u64s(width, &words).unwrap();
            let Some(payload) = after::wire::encode(after_enc, &s) else {
                continue;
            };
            let a = before::wire::decode(before_enc, width, N, &payload).expect("before decodes");
            let b = after::wire::decode(after_enc, width, N, &payload).expect("after decodes");
            let a: Vec<u64> = before::stream::Stream::to_u64s(&a);
            assert_eq!(after::stream::Stream::to_u64s(&b), words, "{name} {case}: after");
            assert_eq!(a, words, "{name} {case}: before");
            let mut best = [f64::MAX; 2];
            let start = Instant::now();
            while start.elapsed().as_secs_f64() < seconds {
                let t = Instant::now();
                black_box(before::wire::decode(before_enc, width, N, black_box(&payload)).unwrap());
                best[0] = best[0].min(t.elapsed().as_secs_f64());
                let t = Instant::now();
                black_box(after::wire::decode(after_enc, width, N, black_box(&payload)).unwrap());
                best[1] = best[1].min(t.elapsed().as_secs_f64());
            }
            let rate = |t: f64| N as f64 / t / 1e6;
            println!(
                "| {name} | {case} | {} | {:.0} | {:.0} | {:.3} |",
                payload.len(),
                rate(best[0]),
                rate(best[1]),
                best[0] / best[1]
            );
        }
    }
}
