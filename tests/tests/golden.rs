//! Golden archives: files written by earlier versions of the encoder, which
//! every later decoder must still rebuild bit for bit (`tests/golden/`).
//! `cargo test -p brevis-tests --test golden -- --ignored bless` rewrites them;
//! do that only when the format version changes, and keep the old ones.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use brevis_decoder::{decode_all, digest, Archive, DecodeLimits, DigestKind};
use brevis_encoder::synth::{CandidateSearch, Synthesizer};
use brevis_encoder::CompressOptions;
use brevis_format::archive::ChunkRecord;
use brevis_format::program::{parse, Limits, Node, OPERATOR_NAMES};
use brevis_format::wire::LitEncoding;
use brevis_tests::{compress, compress_using, safetensors_file, tensor_bytes, Rng};
use safetensors::tensor::Dtype;
use sha2::{Digest, Sha256};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The inputs of `v1-mixed.brv`: tensors of several dtypes, a file of
/// fixed-size records (block-quantized style), and text.
fn v1_inputs() -> Vec<(String, Vec<u8>)> {
    // A signed random walk (differences, then zigzag) and a tile repeated 4 times.
    let mut rng = Rng(5);
    let mut x = 0i16;
    let walk: Vec<u8> = (0..4000)
        .flat_map(|_| {
            x = x.wrapping_add((rng.next_u64() % 7) as i16 - 3);
            x.to_le_bytes()
        })
        .collect();
    let tiled = tensor_bytes(Dtype::F32, 500, 9).repeat(4);
    let weights = safetensors_file(&[
        ("bf16", Dtype::BF16, vec![64, 64], tensor_bytes(Dtype::BF16, 4096, 1)),
        ("f16", Dtype::F16, vec![2048], tensor_bytes(Dtype::F16, 2048, 2)),
        ("f32", Dtype::F32, vec![1024], tensor_bytes(Dtype::F32, 1024, 3)),
        ("f8", Dtype::F8_E4M3, vec![4096], tensor_bytes(Dtype::F8_E4M3, 4096, 4)),
        ("i64", Dtype::I64, vec![512], tensor_bytes(Dtype::I64, 512, 5)),
        ("u8", Dtype::U8, vec![3000], tensor_bytes(Dtype::U8, 3000, 6)),
        ("zeros", Dtype::F32, vec![256], vec![0; 1024]),
        ("scalar", Dtype::F64, vec![], tensor_bytes(Dtype::F64, 1, 7)),
        ("walk", Dtype::I16, vec![4000], walk),
        ("tiled", Dtype::F32, vec![4, 500], tiled),
    ]);
    let mut records = Vec::new();
    let mut rng = Rng(11);
    for i in 0..5000u32 {
        records.extend_from_slice(&(0x3c00_1000u32 + (i / 64)).to_le_bytes());
        for _ in 0..16 {
            records.push((rng.next_u64() % 16 * 16 + rng.next_u64() % 16) as u8);
        }
    }
    records.extend_from_slice(b"tail!!!");
    let text = "tokenizer vocabulary entry, ".repeat(300).into_bytes();
    vec![
        ("model.safetensors".into(), weights),
        ("blocks.bin".into(), records),
        ("vocab.txt".into(), text),
    ]
}

#[test]
#[ignore = "rewrites tests/golden; run by hand when the format version changes"]
fn bless() {
    let inputs = v1_inputs();
    let refs: Vec<(&str, &[u8])> = inputs.iter().map(|(p, d)| (p.as_str(), d.as_slice())).collect();
    let (archive, _) = compress(&refs);
    fs::create_dir_all(golden_dir()).unwrap();
    fs::write(golden_dir().join("v1-mixed.brv"), &archive).unwrap();
    let sums: String = inputs
        .iter()
        .map(|(p, d)| format!("{}  {p}\n", hex(&Sha256::digest(d))))
        .collect();
    fs::write(golden_dir().join("v1-mixed.sha256"), sums).unwrap();
}

#[test]
fn golden_archives_still_decode() {
    let mut checked = 0;
    for entry in fs::read_dir(golden_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("brv") {
            continue;
        }
        let archive = fs::read(&path).unwrap();
        let sums = fs::read_to_string(path.with_extension("sha256")).unwrap();
        let want: Vec<(String, String)> = sums
            .lines()
            .map(|l| {
                let (h, p) = l.split_once("  ").unwrap();
                (p.to_string(), h.to_string())
            })
            .collect();
        let files = decode_all(&archive, &DecodeLimits::default()).unwrap();
        let got: Vec<(String, String)> = files
            .iter()
            .map(|f| (f.path.clone(), hex(&Sha256::digest(&f.data))))
            .collect();
        assert_eq!(got, want, "{}", path.display());
        checked += 1;
    }
    assert!(checked >= 1, "no golden archive found");
}

/// Every literal of every chunk of `archive`: its encoding, its width, and
/// whether its parent is a `Merge`.
fn literals(archive: &[u8]) -> Vec<(LitEncoding, u8, bool)> {
    let a = Archive::open(archive, DecodeLimits::default()).unwrap();
    let mut lits = Vec::new();
    fn walk(n: &Node, parent_merge: bool, out: &mut Vec<(LitEncoding, u8, bool)>) {
        if let Node::Lit { encoding, width, .. } = n {
            out.push((*encoding, *width, parent_merge));
        }
        let merge = matches!(n, Node::Merge { .. });
        n.children().iter().for_each(|c| walk(c, merge, out));
    }
    for f in a.files() {
        for s in &f.segments {
            for c in &s.chunks {
                let chunk = ChunkRecord::parse(a.chunk_body(c).unwrap()).unwrap();
                walk(&parse(chunk.program, &Limits::default()).unwrap(), false, &mut lits);
            }
        }
    }
    lits
}

/// The golden archive `name` was made from `inputs`: its `.sha256` file lists them.
fn assert_made_from(name: &str, inputs: &[(String, Vec<u8>)]) {
    let sums = fs::read_to_string(golden_dir().join(format!("{name}.sha256"))).unwrap();
    let want: String = inputs
        .iter()
        .map(|(p, d)| format!("{}  {p}\n", hex(&Sha256::digest(d))))
        .collect();
    assert_eq!(sums, want);
}

/// The inputs of `v1-ctx.brv`: float tensors large enough for context-coded
/// literals (`Lit.ctx`, encoding 5) to win: BF16 and FP32 as
/// `Merge.fields[1+e+t, m-t]` with a ctx first field, FP8 E4M3 as whole bytes.
fn v1_ctx_inputs() -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng(31);
    let f8: Vec<u8> = (0..1 << 15)
        .map(|_| {
            let b = (rng.normal(1.0) as f32).to_bits();
            let e = ((b >> 23) & 0xff) as i32 - 127 + 7;
            let sign = (b >> 24) as u8 & 0x80;
            match e {
                ..=0 => sign,
                15.. => sign | 0x7e,
                e => sign | (e as u8) << 3 | ((b >> 20) & 7) as u8,
            }
        })
        .collect();
    let weights = safetensors_file(&[
        (
            "bf16",
            Dtype::BF16,
            vec![256, 256],
            tensor_bytes(Dtype::BF16, 1 << 16, 21),
        ),
        ("f32", Dtype::F32, vec![128, 256], tensor_bytes(Dtype::F32, 1 << 15, 22)),
        ("f8", Dtype::F8_E4M3, vec![1 << 15], f8),
    ]);
    vec![("ctx.safetensors".into(), weights)]
}

fn bless_archive(name: &str, inputs: &[(String, Vec<u8>)]) {
    bless_archive_with(name, inputs, &CompressOptions::default());
}

fn bless_archive_with(name: &str, inputs: &[(String, Vec<u8>)], options: &CompressOptions) {
    bless_archive_using(name, inputs, &CandidateSearch::default(), options);
}

fn bless_archive_using(name: &str, inputs: &[(String, Vec<u8>)], search: &dyn Synthesizer, options: &CompressOptions) {
    let refs: Vec<(&str, &[u8])> = inputs.iter().map(|(p, d)| (p.as_str(), d.as_slice())).collect();
    let (archive, _) = compress_using(&refs, search, options);
    fs::create_dir_all(golden_dir()).unwrap();
    fs::write(golden_dir().join(format!("{name}.brv")), &archive).unwrap();
    let sums: String = inputs
        .iter()
        .map(|(p, d)| format!("{}  {p}\n", hex(&Sha256::digest(d))))
        .collect();
    fs::write(golden_dir().join(format!("{name}.sha256")), sums).unwrap();
}

/// Writes `v1-blake3.brv` only: the inputs of `v1-mixed.brv` with BLAKE3 file
/// digests (header flag bit 0).
#[test]
#[ignore = "rewrites tests/golden/v1-blake3.*; run by hand only if that archive must change"]
fn bless_blake3() {
    bless_digest("v1-blake3", DigestKind::Blake3);
}

/// Writes `v1-xxh3.brv` only: the inputs of `v1-mixed.brv` with XXH3-128 file
/// digests (header flag bit 1).
#[test]
#[ignore = "rewrites tests/golden/v1-xxh3.*; run by hand only if that archive must change"]
fn bless_xxh3() {
    bless_digest("v1-xxh3", DigestKind::Xxh3);
}

fn bless_digest(name: &str, digest: DigestKind) {
    let options = CompressOptions {
        digest,
        ..CompressOptions::default()
    };
    bless_archive_with(name, &v1_inputs(), &options);
}

/// `v1-blake3.brv` and `v1-xxh3.brv` say their hash in their headers, and their
/// FILE records hold that hash of the files (`golden_archives_still_decode`
/// checks their bytes).
#[test]
fn golden_digest_archives_have_their_digests() {
    for (name, kind, flags) in [("v1-blake3", DigestKind::Blake3, 1), ("v1-xxh3", DigestKind::Xxh3, 2)] {
        let archive = fs::read(golden_dir().join(format!("{name}.brv"))).unwrap();
        assert_eq!(archive[10..12], [flags, 0], "{name}");
        let a = Archive::open(&archive, DecodeLimits::default()).unwrap();
        let inputs = v1_inputs();
        assert_eq!(a.files().len(), inputs.len());
        for (f, (path, data)) in a.files().iter().zip(&inputs) {
            assert_eq!(&f.path, path);
            assert_eq!(f.digest_kind, kind);
            assert_eq!(f.digest, digest(kind, data), "{name}: {path}");
        }
    }
}

/// Writes `v1-ctx.brv` only (the older golden archives stay as they are).
#[test]
#[ignore = "rewrites tests/golden/v1-ctx.*; run by hand only if that archive must change"]
fn bless_ctx() {
    bless_archive("v1-ctx", &v1_ctx_inputs());
}

/// `v1-ctx.brv` holds context-coded literals, both as a float's top field and as
/// whole words, and the encoder still rebuilds it from its inputs.
#[test]
fn ctx_golden_archive_has_context_coded_literals() {
    let archive = fs::read(golden_dir().join("v1-ctx.brv")).unwrap();
    let ctx_lits: Vec<(u8, bool)> = literals(&archive)
        .into_iter()
        .filter(|&(e, _, _)| e == LitEncoding::Ctx)
        .map(|(_, w, m)| (w, m))
        .collect();
    assert!(ctx_lits.iter().any(|&(_, m)| m), "no ctx field: {ctx_lits:?}");
    assert!(
        ctx_lits.iter().any(|&(w, m)| w == 8 && !m),
        "no whole-byte ctx: {ctx_lits:?}"
    );
    assert_made_from("v1-ctx", &v1_ctx_inputs());
}

/// The golden archive exercises every operator and every literal encoding, so
/// a decoder that passes it implements all of them.
#[test]
fn golden_archive_covers_the_whole_dsl() {
    let archive = fs::read(golden_dir().join("v1-mixed.brv")).unwrap();
    let a = Archive::open(&archive, DecodeLimits::default()).unwrap();
    let mut ops = BTreeSet::new();
    let mut encodings = BTreeSet::new();
    fn walk(n: &Node, ops: &mut BTreeSet<&'static str>, encodings: &mut BTreeSet<&'static str>) {
        ops.insert(OPERATOR_NAMES[n.operator()]);
        if let Node::Lit { encoding, .. } = n {
            encodings.insert(encoding.name());
        }
        n.children().iter().for_each(|c| walk(c, ops, encodings));
    }
    for f in a.files() {
        for s in &f.segments {
            for c in &s.chunks {
                let chunk = ChunkRecord::parse(a.chunk_body(c).unwrap()).unwrap();
                walk(
                    &parse(chunk.program, &Limits::default()).unwrap(),
                    &mut ops,
                    &mut encodings,
                );
            }
        }
    }
    println!("operators: {ops:?}\nencodings: {encodings:?}");
    for op in OPERATOR_NAMES {
        assert!(ops.contains(op), "golden archive lacks {op}: {ops:?}");
    }
    for e in ["raw", "packed", "huffman", "rans", "zstd"] {
        assert!(encodings.contains(e), "golden archive lacks {e}: {encodings:?}");
    }
}

/// The inputs of `v1-nbr.brv`: uint8 "convolution kernels" of 9 words around a
/// zero point, whose spread is drawn per kernel (one in 16 dead), large
/// enough for neighbour-context literals (`Lit.nbr`, encoding 6) to win.
fn v1_nbr_inputs() -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng(41);
    let mut kernels = Vec::with_capacity(9 << 13);
    for _ in 0..1 << 13 {
        let r = rng.next_u64();
        let spread = if r.is_multiple_of(16) {
            0.0
        } else {
            1.0 + (r >> 8) as f64 % 8.0 * 1.5
        };
        for _ in 0..9 {
            kernels.push((128.0 + rng.normal(spread)).round().clamp(0.0, 255.0) as u8);
        }
    }
    let weights = safetensors_file(&[("conv", Dtype::U8, vec![64, 128, 3, 3], kernels)]);
    vec![("nbr.safetensors".into(), weights)]
}

/// Writes `v1-nbr.brv` only (the older golden archives stay as they are).
#[test]
#[ignore = "rewrites tests/golden/v1-nbr.*; run by hand only if that archive must change"]
fn bless_nbr() {
    bless_archive("v1-nbr", &v1_nbr_inputs());
}

/// `v1-nbr.brv` holds a neighbour-context literal, and the inputs it was made
/// from are the ones in this file.
#[test]
fn nbr_golden_archive_has_neighbour_context_literals() {
    let archive = fs::read(golden_dir().join("v1-nbr.brv")).unwrap();
    let lits = literals(&archive);
    assert!(
        lits.iter().any(|&(e, _, _)| e == LitEncoding::Nbr),
        "no nbr literal in v1-nbr.brv"
    );
    assert_made_from("v1-nbr", &v1_nbr_inputs());
}

/// The inputs of `v1-hsplit.brv`: BF16 and FP16 tensors large enough for
/// `--fast-decode` to give them split Huffman literals (`Lit.hsplit`, encoding 8),
/// and int8 bytes beside them (other literals).
fn v1_hsplit_inputs() -> Vec<(String, Vec<u8>)> {
    let weights = safetensors_file(&[
        (
            "bf16",
            Dtype::BF16,
            vec![128, 256],
            tensor_bytes(Dtype::BF16, 1 << 15, 51),
        ),
        ("f16", Dtype::F16, vec![1 << 15], tensor_bytes(Dtype::F16, 1 << 15, 52)),
        ("i8", Dtype::I8, vec![1 << 14], tensor_bytes(Dtype::I8, 1 << 14, 53)),
    ]);
    vec![("hsplit.safetensors".into(), weights)]
}

/// Writes `v1-hsplit.brv` only (the older golden archives stay as they are).
#[test]
#[ignore = "rewrites tests/golden/v1-hsplit.*; run by hand only if that archive must change"]
fn bless_hsplit() {
    let search = CandidateSearch::default().fast_decode();
    bless_archive_using("v1-hsplit", &v1_hsplit_inputs(), &search, &CompressOptions::default());
}

/// The golden archive `name` holds a split Huffman literal of `width`-bit words,
/// and the inputs it was made from are `inputs`.
fn assert_hsplit_golden(name: &str, width: u8, inputs: &[(String, Vec<u8>)]) {
    let archive = fs::read(golden_dir().join(format!("{name}.brv"))).unwrap();
    let lits = literals(&archive);
    assert!(
        lits.iter().any(|&(e, w, _)| e == LitEncoding::HSplit && w == width),
        "{name}: no {width}-bit hsplit literal: {lits:?}"
    );
    assert_made_from(name, inputs);
}

/// `v1-hsplit.brv` holds split Huffman literals of whole 16-bit words (low bits
/// packed), and the inputs it was made from are the ones in this file.
#[test]
fn hsplit_golden_archive_has_split_huffman_literals() {
    assert_hsplit_golden("v1-hsplit", 16, &v1_hsplit_inputs());
}

/// The inputs of `v1-hsplit-wide.brv`: FP32 weights that `--fast-decode` stores as
/// one split Huffman literal of 32-bit words (sign and exponent coded, the rest of
/// the mantissa packed).
fn v1_hsplit_wide_inputs() -> Vec<(String, Vec<u8>)> {
    let weights = safetensors_file(&[("f32", Dtype::F32, vec![64, 512], tensor_bytes(Dtype::F32, 1 << 15, 54))]);
    vec![("hsplit-wide.safetensors".into(), weights)]
}

/// Writes `v1-hsplit-wide.brv` only (the older golden archives stay as they are).
#[test]
#[ignore = "rewrites tests/golden/v1-hsplit-wide.*; run by hand only if that archive must change"]
fn bless_hsplit_wide() {
    let search = CandidateSearch::default().fast_decode();
    bless_archive_using(
        "v1-hsplit-wide",
        &v1_hsplit_wide_inputs(),
        &search,
        &CompressOptions::default(),
    );
}

/// `v1-hsplit-wide.brv` holds a split Huffman literal of 32-bit words, and the
/// inputs it was made from are the ones in this file.
#[test]
fn hsplit_wide_golden_archive_has_32_bit_split_huffman_literals() {
    assert_hsplit_golden("v1-hsplit-wide", 32, &v1_hsplit_wide_inputs());
}
