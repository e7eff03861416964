//! Decode throughput of the literal coders on BF16-like data, and encode throughput
//! of the rANS-family ones (`cargo bench -p brevis-format`).
//!
//! The data imitate a trained layer's BF16 weights (normal, sigma 0.04, from a fixed
//! seed): whole 16-bit words, the 8-bit exponent column and the 7-bit mantissa column
//! (the columns `Merge.fields[1,8,7]` splits a BF16 tensor into), and the top 13
//! bits (the `ctx` field of `Merge.fields[13,3]`); the same samples' FP32
//! 23-bit mantissas (the packed field of `Merge.fields[9,23]`), whole FP32 words
//! (one `hsplit` literal under `--fast-decode`) and whole FP16 words. Each coder decodes a
//! 1 Mi-word literal; throughput is in words (elements) per second. These numbers
//! back `DECODE_SLACK_*` in `encoder/src/synth/lit.rs`. The `encode` group codes the
//! same columns with `ctx` and `rans`: their encoders took 6% and 5% of the
//! samples in `perf record` of a one-thread compression of the corpus files.

use brevis_format::stream::{Stream, Words};
use brevis_format::wire::{self, LitEncoding};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const N: usize = 1 << 20;

#[path = "support/weights.rs"]
mod weights;
use weights::{bf16_of, f32_words};

/// The BF16 words of the same samples (rounded).
fn bf16_words(n: usize) -> Vec<u16> {
    f32_words(n).into_iter().map(bf16_of).collect()
}

fn streams() -> Vec<(&'static str, Stream)> {
    let w = bf16_words(N);
    let to = |f: &dyn Fn(u16) -> u64| w.iter().map(|&x| f(x)).collect::<Vec<u64>>();
    vec![
        ("bf16-b16", Stream::from_u64s(16, &to(&|x| u64::from(x))).unwrap()),
        (
            "exponent-b8",
            Stream::from_u64s(8, &to(&|x| u64::from((x >> 7) & 0xff))).unwrap(),
        ),
        // Sign, exponent and the top 4 mantissa bits: the `ctx` field of
        // `Merge.fields[13,3]`, the program most BF16 weight tensors get.
        ("top13-b13", Stream::from_u64s(13, &to(&|x| u64::from(x >> 3))).unwrap()),
        (
            "mantissa-b7",
            Stream::from_u64s(7, &to(&|x| u64::from(x & 0x7f))).unwrap(),
        ),
        (
            "fp32-mantissa-b23",
            Stream::from_u64s(
                23,
                &f32_words(N)
                    .iter()
                    .map(|&x| u64::from(x & 0x7f_ffff))
                    .collect::<Vec<_>>(),
            )
            .unwrap(),
        ),
        (
            "fp32-b32",
            Stream::from_u64s(32, &f32_words(N).iter().map(|&x| u64::from(x)).collect::<Vec<_>>()).unwrap(),
        ),
        (
            "fp16-b16",
            Stream::from_u64s(
                16,
                &f32_words(N)
                    .iter()
                    .map(|&x| u64::from(half::f16::from_f32(f32::from_bits(x)).to_bits()))
                    .collect::<Vec<_>>(),
            )
            .unwrap(),
        ),
    ]
}

fn decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(20);
    for (name, s) in streams() {
        for enc in [
            LitEncoding::Raw,
            LitEncoding::BitPacked,
            LitEncoding::Huffman,
            LitEncoding::Huffman8,
            LitEncoding::HSplit,
            LitEncoding::Rans,
            LitEncoding::Ctx,
        ] {
            let Some(payload) = wire::encode(enc, &s) else { continue };
            let id = BenchmarkId::new(enc.name(), format!("{name} ({} B)", payload.len()));
            let back = wire::decode(enc, s.width(), N, &payload).unwrap();
            assert_eq!(back.words(), s.words());
            g.bench_function(id, |b| b.iter(|| wire::decode(enc, s.width(), N, &payload).unwrap()));
        }
    }
    g.finish();
}

/// Encode throughput of the rANS-family coders, which every compression runs on
/// each literal it keeps (and on the candidates it prices exactly): `ctx` at the
/// split with the smallest estimate (chosen outside the timed loop; its tables
/// are planned inside it, as in the encoder), and `rans`.
fn encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(20);
    for (name, s) in streams() {
        let width = s.width();
        let split = match s.words() {
            Words::U8(w) => wire::ctx::best_split(w, width),
            Words::U16(w) => wire::ctx::best_split(w, width),
            _ => None,
        };
        if let Some((k, _)) = split {
            let id = BenchmarkId::new("ctx", format!("{name} k={k}"));
            g.bench_function(id, |b| {
                b.iter(|| match s.words() {
                    Words::U8(w) => wire::ctx::encode(w, width, k),
                    Words::U16(w) => wire::ctx::encode(w, width, k),
                    _ => None,
                })
            });
        }
        if wire::encode(LitEncoding::Rans, &s).is_some() {
            g.bench_function(BenchmarkId::new("rans", name), |b| {
                b.iter(|| wire::encode(LitEncoding::Rans, &s).unwrap())
            });
        }
    }
    g.finish();
}

criterion_group!(benches, decode, encode);
criterion_main!(benches);
