//! The fuzz seed corpus (`fuzz/corpus/<target>/`), made from small real
//! archives: a cut-down Silero VAD checkpoint (the bundled one, each tensor cut
//! to its first rows), small synthetic tensors of every kind the encoder has a
//! program for, a file of fixed-size records, text, and empty files. Rebuild it
//! with
//!
//! ```sh
//! cargo test --release -p brevis-tests --test fuzz_seeds -- --ignored
//! ```
//!
//! The non-ignored test checks that the committed seeds still decode, so a
//! format change cannot silently leave the fuzzers starting from rejected bytes.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use brevis_decoder::{decode_all, Archive, DecodeLimits, DigestKind};
use brevis_encoder::synth::lit::lit;
use brevis_encoder::synth::CandidateSearch;
use brevis_encoder::{compress_files, CompressOptions, InputFile};
use brevis_format::archive::{open_record, ChunkRecord, RecordHead, RecordKind, HEADER_LEN};
use brevis_format::program::{parse, serialize, Limits, Node};
use brevis_format::stream::Stream;
use brevis_format::wire::LitEncoding;
use brevis_tests::{safetensors_file, tensor_bytes, Rng};
use safetensors::tensor::Dtype;
use safetensors::SafeTensors;
use sha2::{Digest, Sha256};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target)
}

/// The bundled Silero VAD checkpoint, each tensor cut to its first rows (at
/// most `max_elems` elements), so its weights are real but the file is small.
fn silero_cut(max_elems: usize) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../encoder/assets/silero_vad_16k.safetensors");
    let bytes = fs::read(path).expect("read the bundled checkpoint");
    let st = SafeTensors::deserialize(&bytes).expect("valid safetensors");
    let mut tensors = Vec::new();
    let mut names = st.names();
    names.sort();
    for name in names {
        let t = st.tensor(name).unwrap();
        let mut shape = t.shape().to_vec();
        let row: usize = shape.iter().skip(1).product();
        if shape.first().is_some_and(|&rows| rows * row > max_elems) {
            shape[0] = (max_elems / row.max(1)).max(1);
        }
        let n: usize = shape.iter().product();
        let data = t.data()[..n * t.dtype().bitsize() / 8].to_vec();
        tensors.push((name.to_string(), t.dtype(), shape, data));
    }
    let refs: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.as_str(), *d, s.clone(), b.clone()))
        .collect();
    safetensors_file(&refs)
}

/// Small versions of the golden archive's inputs: tensors of several dtypes, a
/// random walk, a tiled tensor, fixed-size records and text.
fn mixed_files() -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng(5);
    let mut x = 0i16;
    let walk: Vec<u8> = (0..300)
        .flat_map(|_| {
            x = x.wrapping_add((rng.next_u64() % 7) as i16 - 3);
            x.to_le_bytes()
        })
        .collect();
    let weights = safetensors_file(&[
        ("bf16", Dtype::BF16, vec![16, 16], tensor_bytes(Dtype::BF16, 256, 1)),
        ("f16", Dtype::F16, vec![128], tensor_bytes(Dtype::F16, 128, 2)),
        ("f32", Dtype::F32, vec![96], tensor_bytes(Dtype::F32, 96, 3)),
        ("f8", Dtype::F8_E4M3, vec![256], tensor_bytes(Dtype::F8_E4M3, 256, 4)),
        ("i64", Dtype::I64, vec![32], tensor_bytes(Dtype::I64, 32, 5)),
        ("u8", Dtype::U8, vec![200], tensor_bytes(Dtype::U8, 200, 6)),
        ("bool", Dtype::BOOL, vec![64], tensor_bytes(Dtype::BOOL, 64, 7)),
        ("zeros", Dtype::F32, vec![64], vec![0; 256]),
        ("scalar", Dtype::F64, vec![], tensor_bytes(Dtype::F64, 1, 8)),
        ("empty", Dtype::F32, vec![0, 4], vec![]),
        ("walk", Dtype::I16, vec![300], walk),
        (
            "tiled",
            Dtype::F32,
            vec![4, 40],
            tensor_bytes(Dtype::F32, 40, 9).repeat(4),
        ),
    ]);
    let mut records = Vec::new();
    let mut rng = Rng(11);
    for i in 0..60u32 {
        records.extend_from_slice(&(0x3c00_1000u32 + (i / 16)).to_le_bytes());
        for _ in 0..16 {
            records.push((rng.next_u64() % 16 * 16 + rng.next_u64() % 16) as u8);
        }
    }
    records.extend_from_slice(b"tail!!!");
    vec![
        ("model.safetensors".into(), weights),
        ("blocks.bin".into(), records),
        (
            "vocab.txt".into(),
            "tokenizer vocabulary entry, ".repeat(12).into_bytes(),
        ),
        ("dir/empty.bin".into(), Vec::new()),
    ]
}

fn compress_with(files: &[(String, Vec<u8>)], chunk_bytes: usize) -> Vec<u8> {
    compress_digest(files, chunk_bytes, DigestKind::Sha256)
}

fn compress_digest(files: &[(String, Vec<u8>)], chunk_bytes: usize, digest: DigestKind) -> Vec<u8> {
    let inputs: Vec<InputFile<'_>> = files
        .iter()
        .map(|(p, d)| InputFile {
            archive_path: p.clone(),
            data: d,
        })
        .collect();
    let opts = CompressOptions {
        chunk_bytes,
        digest,
        ..CompressOptions::default()
    };
    let (archive, _, _) = compress_files(Vec::new(), &inputs, &CandidateSearch::default(), &opts, &|_| {}).unwrap();
    archive
}

/// A literal of `values` (`width` bits) in `encoding`.
fn lit_of(width: u8, values: &[u64], encoding: LitEncoding) -> Node {
    lit(&Stream::from_u64s(width, values).unwrap(), encoding, 3).unwrap()
}

/// An archive written record by record (one file, one opaque segment), whose
/// chunks use every operator, `Concat` and `Interleave` included, which the
/// encoder only picks for inputs larger than a seed should be.
fn handmade_archive() -> Vec<u8> {
    use brevis_format::archive::*;
    use brevis_format::ops::{MapOp, MergeOp, ScanOp};
    let bytes8 = |n: u64| (0..n).map(|i| i * 37 % 11).collect::<Vec<u64>>();
    let programs = [
        // 12 bytes: a raw literal, a constant and a repeated packed literal.
        Node::Concat(vec![
            lit_of(8, &[1, 2, 3], LitEncoding::Raw),
            Node::Const {
                width: 8,
                count: 5,
                value: 7,
            },
            Node::Repeat {
                times: 2,
                child: Box::new(lit_of(8, &[9, 4], LitEncoding::BitPacked)),
            },
        ]),
        // 12 bytes: three columns of 4 words.
        Node::Interleave(vec![
            lit_of(8, &bytes8(4), LitEncoding::Huffman),
            Node::Map {
                op: MapOp::XorConst(0x55),
                child: Box::new(Node::Const {
                    width: 8,
                    count: 4,
                    value: 1,
                }),
            },
            Node::Scan {
                op: ScanOp::Add,
                stride: 1,
                child: Box::new(lit_of(8, &bytes8(4), LitEncoding::Rans)),
            },
        ]),
        // 16 bytes: 8 words of 16 bits from two byte planes.
        Node::Merge {
            op: MergeOp::BytePlanes(2),
            children: vec![
                lit_of(8, &bytes8(8), LitEncoding::Zstd),
                Node::Map {
                    op: MapOp::ZigZag,
                    child: Box::new(lit_of(8, &bytes8(8), LitEncoding::Raw)),
                },
            ],
        },
    ];
    let mut chunks = Vec::new();
    let mut data = Vec::new();
    for p in &programs {
        let ty = p.ty().unwrap();
        let mut out = Vec::new();
        brevis_decoder::exec::eval(p).unwrap().write_le_bytes(&mut out).unwrap();
        chunks.push(ChunkRecord::body(
            out.len() as u64,
            chunk_checksum(&out),
            ty.width,
            &serialize(p),
        ));
        data.extend_from_slice(&out);
    }
    let file = FileRecord {
        path: "handmade.bin".into(),
        size: data.len() as u64,
        digest: Sha256::digest(&data).into(),
        segments: 1,
    };
    let seg = SegmentRecord::new(SegmentKind::Opaque, "ops", data.len() as u64, chunks.len() as u64);
    let mut a = header(DigestKind::Sha256).to_vec();
    let mut index = Vec::new();
    let mut record = |a: &mut Vec<u8>, kind: RecordKind, body: &[u8], decoded_len: u64| {
        index.push(IndexEntry {
            kind,
            offset: a.len() as u64,
            decoded_len,
        });
        put_record(a, kind, body);
    };
    record(&mut a, RecordKind::File, &file.body(), 0);
    record(&mut a, RecordKind::Segment, &seg.body(), 0);
    for c in &chunks {
        let len = ChunkRecord::parse(c).unwrap().decoded_len;
        record(&mut a, RecordKind::Chunk, c, len);
    }
    let index_offset = a.len() as u64;
    put_record(&mut a, RecordKind::Index, &index_body(&index));
    let total = a.len() as u64 + END_LEN as u64;
    put_record(&mut a, RecordKind::End, &end_body(index_offset, total));
    a
}

/// The seed archives, by name.
fn seed_archives() -> Vec<(&'static str, Vec<u8>)> {
    let silero = vec![("silero_vad_cut.safetensors".to_string(), silero_cut(128))];
    let mixed = mixed_files();
    vec![
        ("silero-cut.brv", compress_with(&silero, 4 << 20)),
        ("silero-cut-small-chunks.brv", compress_with(&silero, 512)),
        ("mixed.brv", compress_with(&mixed, 4 << 20)),
        ("mixed-blake3.brv", compress_digest(&mixed, 4 << 20, DigestKind::Blake3)),
        ("mixed-xxh3.brv", compress_digest(&mixed, 4 << 20, DigestKind::Xxh3)),
        ("handmade-every-operator.brv", handmade_archive()),
        ("mixed-small-chunks.brv", compress_with(&mixed[1..], 256)),
        ("one-empty-file.brv", compress_with(&mixed[3..], 4 << 20)),
        ("no-files.brv", compress_with(&[], 4 << 20)),
        ("dedup.brv", dedup_archive()),
    ]
}

/// Copies and retained segments: the cut-down checkpoint twice, and a file
/// with a tensor stored twice.
fn dedup_archive() -> Vec<u8> {
    let silero = silero_cut(128);
    let t = tensor_bytes(Dtype::F32, 100, 7);
    let tied = safetensors_file(&[
        ("embed", Dtype::F32, vec![100], t.clone()),
        ("lm_head", Dtype::F32, vec![100], t),
    ]);
    compress_with(
        &[
            ("a.safetensors".into(), silero.clone()),
            ("b/a.safetensors".into(), silero),
            ("tied.safetensors".into(), tied),
        ],
        4 << 20,
    )
}

/// Adds the dedup seed to the archive targets without rewriting the others.
#[test]
#[ignore = "writes fuzz/corpus/{archive,structured,stream}/dedup.brv*; run by hand"]
fn write_dedup_seed() {
    let a = dedup_archive();
    let files = decode_all(&a, &DecodeLimits::default()).unwrap();
    assert_eq!(files.len(), 3);
    let ar = Archive::open(&a, DecodeLimits::default()).unwrap();
    assert!(ar.files().iter().flat_map(|f| &f.segments).any(|s| s.copy_of.is_some()));
    for target in ["archive", "structured"] {
        fs::write(corpus_dir(target).join("dedup.brv"), &a).unwrap();
    }
    for (tag, prefix) in [("whole", vec![0x00]), ("bytes", vec![0x01, 0x00])] {
        let mut v = prefix;
        v.extend_from_slice(&a);
        fs::write(corpus_dir("stream").join(format!("dedup.brv.{tag}")), v).unwrap();
    }
}

/// The body of every CHUNK record of an archive.
fn chunk_bodies(a: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = HEADER_LEN;
    while pos < a.len() {
        let head = RecordHead::parse(&a[pos..]).unwrap();
        let (_, body) = open_record(&a[pos..]).unwrap();
        if head.kind == RecordKind::Chunk {
            out.push(body.to_vec());
        }
        pos += head.total_len();
    }
    out
}

/// Every `Lit` of a program tree.
fn lits<'a>(node: &'a Node, out: &mut Vec<&'a Node>) {
    if let Node::Lit { .. } = node {
        out.push(node);
    }
    for c in node.children() {
        lits(c, out);
    }
}

/// A `literal` target input: `[encoding] [width - 1] [count: u24 LE] payload`.
fn literal_input(node: &Node) -> Option<Vec<u8>> {
    let Node::Lit {
        width,
        count,
        encoding,
        payload,
    } = node
    else {
        return None;
    };
    if *count > 1 << 16 {
        return None;
    }
    let mut v = vec![*encoding as u8, width - 1];
    v.extend_from_slice(&(*count as u32).to_le_bytes()[..3]);
    v.extend_from_slice(payload);
    Some(v)
}

/// Literals of every encoding at widths the archives do not use (odd bit
/// widths, 23 and 32 bits for `hsplit`'s wide words, 40 and 64 bits), so each
/// coder starts from a valid payload.
fn synthetic_literals() -> Vec<Node> {
    let mut out = Vec::new();
    let mut rng = Rng(21);
    for width in [1u8, 3, 7, 12, 16, 23, 32, 40, 64] {
        // Skewed values (small ones common), so every coder has something to gain.
        let values: Vec<u64> = (0..300)
            .map(|_| {
                let r = rng.next_u64();
                (r % 5 + (r >> 60) * ((r >> 20) % 97)) & brevis_format::stream::mask(width)
            })
            .collect();
        let s = Stream::from_u64s(width, &values).unwrap();
        for enc in LitEncoding::ALL {
            out.extend(lit(&s, enc, 3));
        }
    }
    out
}

fn write_seeds(target: &str, seeds: &[(String, Vec<u8>)]) {
    let dir = corpus_dir(target);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in seeds {
        fs::write(dir.join(name), bytes).unwrap();
    }
}

#[test]
#[ignore = "rewrites fuzz/corpus; run by hand when the format or the encoder changes"]
fn rebuild_fuzz_seeds() {
    let archives = seed_archives();
    let mut programs = BTreeSet::new();
    let mut literals = BTreeSet::new();
    let (mut ops, mut encodings) = (BTreeSet::new(), BTreeSet::new());
    for (name, a) in &archives {
        let files = decode_all(a, &DecodeLimits::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        eprintln!("{name}: {} bytes, {} files", a.len(), files.len());
        for body in chunk_bodies(a) {
            let chunk = ChunkRecord::parse(&body).unwrap();
            let node = parse(chunk.program, &Limits::default()).unwrap();
            let mut ls = Vec::new();
            lits(&node, &mut ls);
            literals.extend(ls.iter().filter_map(|l| literal_input(l)));
            walk_ops(&node, &mut ops, &mut encodings);
            programs.insert(chunk.program.to_vec());
        }
    }
    for l in synthetic_literals() {
        walk_ops(&l, &mut ops, &mut encodings);
        literals.extend(literal_input(&l));
    }
    eprintln!("operators: {ops:?}; literal encodings: {encodings:?}");
    let numbered = |set: BTreeSet<Vec<u8>>, prefix: &str| -> Vec<(String, Vec<u8>)> {
        set.into_iter()
            .enumerate()
            .map(|(i, b)| (format!("{prefix}-{i:03}"), b))
            .collect()
    };
    // Programs: every distinct one up to 4 KiB (the fuzzer's inputs stay small).
    let programs: BTreeSet<Vec<u8>> = programs.into_iter().filter(|p| p.len() <= 4096).collect();
    let literals: BTreeSet<Vec<u8>> = literals.into_iter().filter(|p| p.len() <= 4096).collect();

    let named: Vec<(String, Vec<u8>)> = archives.iter().map(|(n, a)| (n.to_string(), a.clone())).collect();
    write_seeds("archive", &named);
    write_seeds("structured", &named);
    // Stream inputs: a flags byte and a piece schedule before the archive.
    let mut stream = Vec::new();
    for (n, a) in named.iter().filter(|(n, _)| !n.starts_with("silero")) {
        for (tag, prefix) in [
            ("whole", vec![0x00]),
            ("bytes", vec![0x01, 0x00]),
            ("mixed", vec![0x04, 0x04, 0x0c, 0x85, 0x00]),
            ("reframed", vec![0x12, 0x1f, 0x81]),
        ] {
            let mut v = prefix;
            v.extend_from_slice(a);
            stream.push((format!("{n}.{tag}"), v));
        }
    }
    write_seeds("stream", &stream);
    write_seeds("program", &numbered(programs, "program"));
    write_seeds("literal", &numbered(literals, "literal"));
    // Every operator and every encoding starts from at least one valid seed.
    assert_eq!(ops.len(), brevis_format::program::OPERATOR_NAMES.len(), "{ops:?}");
    assert_eq!(encodings.len(), LitEncoding::ALL.len(), "{encodings:?}");
}

fn walk_ops(node: &Node, ops: &mut BTreeSet<usize>, encodings: &mut BTreeSet<u8>) {
    ops.insert(node.operator());
    if let Node::Lit { encoding, .. } = node {
        encodings.insert(*encoding as u8);
    }
    for c in node.children() {
        walk_ops(c, ops, encodings);
    }
}

#[test]
fn committed_fuzz_seeds_are_valid() {
    let dir = corpus_dir("structured");
    let mut n = 0;
    for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let a = fs::read(&path).unwrap();
        decode_all(&a, &DecodeLimits::default()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let ar = Archive::open(&a, DecodeLimits::default()).unwrap();
        for f in ar.files() {
            ar.read_file(f).unwrap();
        }
        n += 1;
    }
    assert!(n > 0, "no seed archives in {}", dir.display());
    for target in ["program", "literal"] {
        for entry in fs::read_dir(corpus_dir(target)).unwrap() {
            let bytes = fs::read(entry.unwrap().path()).unwrap();
            if target == "program" {
                let node = parse(&bytes, &Limits::default()).unwrap();
                assert_eq!(serialize(&node), bytes);
            } else {
                let enc = LitEncoding::from_tag(bytes[0]).unwrap();
                let count = u32::from_le_bytes([bytes[2], bytes[3], bytes[4], 0]) as usize;
                brevis_format::wire::decode(enc, bytes[1] + 1, count, &bytes[5..]).unwrap();
            }
        }
    }
}
