//! Throughput of the two file digests every decoder computes over its whole output
//! (`cargo bench -p brevis-decoder --bench digests`): SHA-256 (the default, what model
//! hubs publish) and BLAKE3 (`brevis compress --digest blake3`, implied by
//! `--fast-decode`). 16 MiB fed in 4 MiB pieces, as the decoder feeds its chunks.
//!
//! And the XXH3 checksum of each record and each decoded chunk, 1 MiB at a time
//! (a `--fast-decode` chunk, in cache as it is when checked): as the decoder
//! computes it (`chunk_checksum`: twox-hash, AVX2 chosen at run time on x86-64)
//! against xxhash-rust's (SIMD chosen at compile time: SSE2 in a portable build).

use brevis_decoder::{DigestKind, Digester};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const LEN: usize = 16 << 20;
const PIECE: usize = 4 << 20;

fn digests(c: &mut Criterion) {
    // Pseudo-random bytes: the hashes' speed does not depend on the data.
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let data: Vec<u8> = (0..LEN)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect();
    let mut g = c.benchmark_group("digest");
    g.throughput(Throughput::Bytes(LEN as u64));
    g.sample_size(20);
    for kind in DigestKind::ALL {
        g.bench_function(BenchmarkId::from_parameter(kind.name()), |b| {
            b.iter(|| {
                let mut d = Digester::new(kind);
                for piece in data.chunks(PIECE) {
                    d.update(piece);
                }
                d.finish()
            })
        });
    }
    g.finish();

    let piece = &data[..1 << 20];
    let mut g = c.benchmark_group("checksum");
    g.throughput(Throughput::Bytes(piece.len() as u64));
    g.bench_function("xxh3/decoder", |b| {
        b.iter(|| brevis_decoder::format::archive::chunk_checksum(std::hint::black_box(piece)))
    });
    g.bench_function("xxh3/xxhash-rust", |b| {
        b.iter(|| xxhash_rust::xxh3::xxh3_64(std::hint::black_box(piece)))
    });
    g.finish();
    assert_eq!(
        brevis_decoder::format::archive::chunk_checksum(piece),
        xxhash_rust::xxh3::xxh3_64(piece),
        "the same function"
    );
}

criterion_group!(benches, digests);
criterion_main!(benches);
