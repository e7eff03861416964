//! Across tensors and files: identical segments stored once (copies of a
//! retained segment) and fine-tunes stored against their base (XOR deltas).

use brevis_decoder::format::archive::{ChunkRecord, FileRecord, RecordKind, SegmentKind, SegmentRecord, SegmentSource};
use brevis_decoder::format::program::{serialize, Node};
use brevis_decoder::format::FormatError;
use brevis_decoder::{decode_all, decode_all_with_base, Archive, DecodeLimits, ErrorKind, Event, StreamDecoder};
use brevis_encoder::synth::CandidateSearch;
use brevis_encoder::{compress_files_with_base, BaseTensors, CompressOptions, InputFile};
use brevis_tests::{build_archive as build, compress, round_trip, safetensors_file, tensor_bytes, Rng};
use safetensors::tensor::Dtype;
use sha2::{Digest, Sha256};

/// A model with tied weights: `lm_head.weight` is `embed.weight`.
fn tied_model(seed: u64) -> Vec<u8> {
    let embed = tensor_bytes(Dtype::F32, 64 * 256, seed);
    let mlp = tensor_bytes(Dtype::BF16, 128 * 128, seed + 1);
    safetensors_file(&[
        ("embed.weight", Dtype::F32, vec![64, 256], embed.clone()),
        ("mlp.weight", Dtype::BF16, vec![128, 128], mlp),
        ("lm_head.weight", Dtype::F32, vec![64, 256], embed),
    ])
}

/// Every event of `archive`, decoded with one-byte pushes at the start (so
/// copies are emitted across many calls) and the whole rest after.
fn events(mut dec: StreamDecoder, archive: &[u8]) -> Result<Vec<Event>, brevis_decoder::DecodeError> {
    let mut out = Vec::new();
    let mut fed = 0;
    loop {
        match dec.next_event()? {
            Some(e) => out.push(e),
            None if fed == archive.len() => {
                dec.finish()?;
                assert_eq!(
                    dec.retained_bytes(),
                    0,
                    "retained bytes are released after the last copy"
                );
                return Ok(out);
            }
            None => {
                let n = if fed < 1000 { 1 } else { archive.len() - fed };
                dec.push(&archive[fed..fed + n]);
                fed += n;
            }
        }
    }
}

#[test]
fn tied_weights_and_identical_files_are_stored_once() {
    let model = tied_model(1);
    let (single, _) = compress(&[("a.safetensors", &model)]);
    let folder = round_trip(&[
        ("a.safetensors", &model),
        ("b/copy.safetensors", &model),
        ("c.safetensors", &tied_model(2)),
    ]);
    let (alone, _) = compress(&[("c.safetensors", &tied_model(2))]);
    // The identical file costs its FILE and SEGMENT records, nothing more.
    assert!(
        folder.len() < single.len() + alone.len() + 300,
        "{} vs {} + {}",
        folder.len(),
        single.len(),
        alone.len()
    );
    // Tied weights inside one file: lm_head is a copy, so the file costs about
    // one embedding, not two.
    let untied = safetensors_file(&[
        (
            "embed.weight",
            Dtype::F32,
            vec![64, 256],
            tensor_bytes(Dtype::F32, 64 * 256, 1),
        ),
        (
            "mlp.weight",
            Dtype::BF16,
            vec![128, 128],
            tensor_bytes(Dtype::BF16, 128 * 128, 2),
        ),
    ]);
    let (untied_archive, _) = compress(&[("a.safetensors", &untied)]);
    assert!(
        single.len() < untied_archive.len() + 200,
        "{} vs {}",
        single.len(),
        untied_archive.len()
    );

    // Random access: every file, every segment, copies read through their source.
    let archive = Archive::open(&folder, DecodeLimits::default()).unwrap();
    let copies: Vec<_> = archive
        .files()
        .iter()
        .flat_map(|f| &f.segments)
        .filter(|s| s.copy_of.is_some())
        .collect();
    assert!(copies.iter().any(|s| s.name == "lm_head.weight"));
    assert!(copies.iter().any(|s| s.name == "safetensors header"));
    for f in archive.files() {
        let bytes = archive.read_file(f).unwrap();
        for s in &f.segments {
            let seg = archive.read_segment(f, s).unwrap();
            assert_eq!(seg, bytes[s.file_offset as usize..(s.file_offset + s.len) as usize]);
            for i in 0..s.chunks.len() {
                archive.read_chunk(f, s, i).unwrap();
            }
        }
    }
    // Streaming: copies come out as Data events like any segment.
    let evs = events(StreamDecoder::new(DecodeLimits::default()), &folder).unwrap();
    let mut name = String::new();
    let mut lm_head = Vec::new();
    for e in &evs {
        match e {
            Event::SegmentStart { name: n, .. } => name = n.clone(),
            Event::Data(d) if name == "lm_head.weight" => lm_head.extend_from_slice(d),
            _ => {}
        }
    }
    assert_eq!(lm_head.len(), 3 * 64 * 256 * 4);
}

#[test]
fn dedup_can_be_turned_off_and_small_segments_are_not_copied() {
    let model = tied_model(3);
    let files = [
        InputFile {
            archive_path: "a".into(),
            data: &model,
        },
        InputFile {
            archive_path: "b".into(),
            data: &model,
        },
    ];
    let opts = CompressOptions {
        dedup: false,
        ..CompressOptions::default()
    };
    let (a, _, _) =
        compress_files_with_base(Vec::new(), &files, None, &CandidateSearch::default(), &opts, &|_| {}).unwrap();
    let archive = Archive::open(&a, DecodeLimits::default()).unwrap();
    assert!(archive
        .files()
        .iter()
        .flat_map(|f| &f.segments)
        .all(|s| s.copy_of.is_none() && s.retain == 0));
    // Two 8-byte tensors: too small to be worth a copy.
    let tiny = safetensors_file(&[
        ("a", Dtype::F32, vec![2], vec![1, 2, 3, 4, 5, 6, 7, 8]),
        ("b", Dtype::F32, vec![2], vec![1, 2, 3, 4, 5, 6, 7, 8]),
    ]);
    let t = round_trip(&[("t.safetensors", &tiny)]);
    let archive = Archive::open(&t, DecodeLimits::default()).unwrap();
    assert!(archive.files()[0].segments.iter().all(|s| s.copy_of.is_none()));
}

#[test]
fn every_flipped_bit_of_a_dedup_archive_is_caught() {
    // Small: a 1 KiB tensor twice, as opaque bytes of two files.
    let mut r = Rng(5);
    let data: Vec<u8> = (0..1024).map(|_| r.next_u64() as u8).collect();
    let a = round_trip(&[("x.bin", &data), ("y.bin", &data)]);
    assert!(a.len() < 1024 + 400, "{}", a.len());
    for bit in 0..a.len() * 8 {
        let mut bad = a.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        if let Ok(files) = decode_all(&bad, &DecodeLimits::default()) {
            panic!("bit {bit}: decoded {} files", files.len());
        }
        if let Ok(archive) = Archive::open(&bad, DecodeLimits::default()) {
            for f in archive.files() {
                assert!(
                    archive.read_file(f).is_err() || archive.read_file(f).unwrap() == data,
                    "bit {bit}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------- hostile copies

fn file_rec(data: &[u8], segments: u64) -> (RecordKind, Vec<u8>) {
    let f = FileRecord {
        path: "f".into(),
        size: data.len() as u64,
        digest: Sha256::digest(data).into(),
        segments,
    };
    (RecordKind::File, f.body())
}

fn seg(len: u64, chunks: u64, retain: u64, source: SegmentSource) -> (RecordKind, Vec<u8>) {
    let s = SegmentRecord {
        retain,
        source,
        ..SegmentRecord::new(SegmentKind::Opaque, "x", len, chunks)
    };
    (RecordKind::Segment, s.body())
}

fn const_chunk(len: u64, value: u64) -> (RecordKind, Vec<u8>) {
    let bytes = vec![value as u8; len as usize];
    let node: Node = Node::Const {
        width: 8,
        count: len,
        value,
    };
    let sum = brevis_decoder::format::archive::chunk_checksum(&bytes);
    (RecordKind::Chunk, ChunkRecord::body(len, sum, 8, &serialize(&node)))
}

fn both_fail(a: &[u8], limits: DecodeLimits) -> (brevis_decoder::DecodeError, Option<brevis_decoder::DecodeError>) {
    let stream = decode_all(a, &limits).unwrap_err();
    let random = Archive::open(a, limits).err();
    (stream, random)
}

#[test]
fn a_handmade_copy_decodes_and_hostile_copies_are_refused() {
    let copy = |segment| SegmentSource::Copy { segment };
    let data = [vec![7u8; 100], vec![7u8; 100]].concat();
    let good = build(&[
        file_rec(&data, 2),
        seg(100, 1, 1, SegmentSource::Chunks),
        const_chunk(100, 7),
        seg(100, 0, 0, copy(0)),
    ]);
    assert_eq!(decode_all(&good, &DecodeLimits::default()).unwrap()[0].data, data);
    let archive = Archive::open(&good, DecodeLimits::default()).unwrap();
    assert_eq!(archive.read_file(&archive.files()[0]).unwrap(), data);

    // A copy of a segment that is not retained, of itself, of a later one, of a
    // segment of another length; more copies than declared, fewer.
    let not_retained = build(&[
        file_rec(&data, 2),
        seg(100, 1, 0, SegmentSource::Chunks),
        const_chunk(100, 7),
        seg(100, 0, 0, copy(0)),
    ]);
    let of_itself = build(&[file_rec(&data[..100], 1), seg(100, 0, 0, copy(0))]);
    let forward = build(&[
        file_rec(&data, 2),
        seg(100, 0, 0, copy(1)),
        seg(100, 1, 1, SegmentSource::Chunks),
        const_chunk(100, 7),
    ]);
    let short = [vec![7u8; 100], vec![7u8; 50]].concat();
    let other_len = build(&[
        file_rec(&short, 2),
        seg(100, 1, 1, SegmentSource::Chunks),
        const_chunk(100, 7),
        seg(50, 0, 0, copy(0)),
    ]);
    let three = [data.clone(), vec![7u8; 100]].concat();
    let too_many = build(&[
        file_rec(&three, 3),
        seg(100, 1, 1, SegmentSource::Chunks),
        const_chunk(100, 7),
        seg(100, 0, 0, copy(0)),
        seg(100, 0, 0, copy(0)),
    ]);
    let too_few = build(&[
        file_rec(&data, 2),
        seg(100, 1, 2, SegmentSource::Chunks),
        const_chunk(100, 7),
        seg(100, 0, 0, copy(0)),
    ]);
    for (name, a) in [
        ("not retained", &not_retained),
        ("of itself", &of_itself),
        ("forward", &forward),
        ("other length", &other_len),
        ("too many", &too_many),
        ("too few", &too_few),
    ] {
        let (stream, random) = both_fail(a, DecodeLimits::default());
        assert_eq!(stream.kind(), ErrorKind::Corruption, "{name}: {stream}");
        let random = random.unwrap_or_else(|| panic!("{name}: Archive::open accepted it"));
        assert_eq!(random.kind(), ErrorKind::Corruption, "{name}: {random}");
    }
    let (stream, _) = both_fail(&not_retained, DecodeLimits::default());
    assert_eq!(
        stream.error,
        FormatError::Invalid {
            what: "copy source (not a retained earlier segment)"
        }
    );
    assert_eq!(stream.location.segment.as_deref(), Some("x"));
}

#[test]
fn retained_bytes_are_limited_and_copies_count_against_the_ratio() {
    let data = [vec![7u8; 100], vec![7u8; 100]].concat();
    let a = build(&[
        file_rec(&data, 2),
        seg(100, 1, 1, SegmentSource::Chunks),
        const_chunk(100, 7),
        seg(100, 0, 0, SegmentSource::Copy { segment: 0 }),
    ]);
    let tight = DecodeLimits {
        max_retained_bytes: 99,
        ..DecodeLimits::default()
    };
    let e = decode_all(&a, &tight).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
    assert!(e.to_string().contains("retained bytes"), "{e}");
    // 100 MiB of copies from a 1 MiB Const source: refused by max_ratio before
    // the bytes are made, like a chunk bomb.
    let mib = 1u64 << 20;
    let mut records = vec![
        (
            RecordKind::File,
            FileRecord {
                path: "f".into(),
                size: 101 * mib,
                digest: [0; 32],
                segments: 101,
            }
            .body(),
        ),
        seg(mib, 1, 100, SegmentSource::Chunks),
        const_chunk(mib, 0),
    ];
    for _ in 0..100 {
        records.push(seg(mib, 0, 0, SegmentSource::Copy { segment: 0 }));
    }
    let bomb = build(&records);
    let e = decode_all(&bomb, &DecodeLimits::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
    assert!(e.to_string().contains("max_ratio"), "{e}");
}

// ---------------------------------------------------------------- fine-tune deltas

/// A base model and a fine-tune of it: 10% of the weights of every float
/// tensor nudged by a relative 1e-3, one tensor left as is.
fn base_and_finetune() -> (Vec<u8>, Vec<u8>) {
    let w1 = tensor_bytes(Dtype::F32, 256 * 256, 11);
    let w2 = tensor_bytes(Dtype::F32, 256 * 128, 12);
    let emb = tensor_bytes(Dtype::BF16, 512 * 64, 13);
    let ids = tensor_bytes(Dtype::I64, 300, 14);
    let base = safetensors_file(&[
        ("layer.0.weight", Dtype::F32, vec![256, 256], w1.clone()),
        ("layer.1.weight", Dtype::F32, vec![256, 128], w2.clone()),
        ("embed", Dtype::BF16, vec![512, 64], emb.clone()),
        ("position_ids", Dtype::I64, vec![300], ids.clone()),
    ]);
    let mut r = Rng(99);
    let mut nudge = |b: &[u8]| -> Vec<u8> {
        let mut out = b.to_vec();
        for w in out.chunks_exact_mut(4) {
            if r.next_u64().is_multiple_of(10) {
                let x = f32::from_le_bytes(w.try_into().unwrap());
                let e = ((r.next_u64() % 2001) as f32 - 1000.0) * 1e-6;
                w.copy_from_slice(&(x * (1.0 + e)).to_le_bytes());
            }
        }
        out
    };
    let tuned = safetensors_file(&[
        ("layer.0.weight", Dtype::F32, vec![256, 256], nudge(&w1)),
        ("layer.1.weight", Dtype::F32, vec![256, 128], nudge(&w2)),
        ("embed", Dtype::BF16, vec![512, 64], emb),
        ("position_ids", Dtype::I64, vec![300], ids),
    ]);
    (base, tuned)
}

fn base_of(files: &[(&str, &[u8])]) -> BaseTensors {
    BaseTensors::new(
        files
            .iter()
            .map(|(p, d)| (p.to_string(), Box::new(d.to_vec()) as brevis_encoder::base::BaseBytes))
            .collect(),
    )
}

fn compress_against(tuned: &[u8], base: &BaseTensors) -> Vec<u8> {
    let files = [InputFile {
        archive_path: "model.safetensors".into(),
        data: tuned,
    }];
    let (a, _, reports) = compress_files_with_base(
        Vec::new(),
        &files,
        Some(base),
        &CandidateSearch::default(),
        &CompressOptions::default(),
        &|_| {},
    )
    .unwrap();
    assert_eq!(reports[0].verify_fallbacks, 0);
    a
}

#[test]
fn a_finetune_against_its_base_is_small_exact_and_refused_without_it() {
    let (base, tuned) = base_and_finetune();
    let provider = base_of(&[("model.safetensors", &base)]);
    let delta = compress_against(&tuned, &provider);
    let (alone, _) = compress(&[("model.safetensors", &tuned)]);
    println!("fine-tune: {} B alone, {} B against its base", alone.len(), delta.len());
    assert!(delta.len() * 3 < alone.len(), "{} vs {}", delta.len(), alone.len());

    // Exact, streaming and random access, with the base.
    let files = decode_all_with_base(&delta, &DecodeLimits::default(), Box::new(base_of(&[("m", &base)]))).unwrap();
    assert!(files[0].data == tuned);
    let archive = Archive::open(&delta, DecodeLimits::default())
        .unwrap()
        .with_base(&provider);
    let f = &archive.files()[0];
    assert!(f.segments.iter().any(|s| s.base.is_some()));
    assert!(archive.read_file(f).unwrap() == tuned);
    assert!(archive.read_file_threads(f, 3).unwrap() == tuned);
    for s in f.segments.iter().filter(|s| s.base.is_some()) {
        let whole = archive.read_segment(f, s).unwrap();
        let by_chunk: Vec<u8> = (0..s.chunks.len())
            .flat_map(|i| archive.read_chunk(f, s, i).unwrap())
            .collect();
        assert_eq!(whole, by_chunk);
    }

    // Without a base: a typed error naming the tensor and the base's hash.
    let e = decode_all(&delta, &DecodeLimits::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Base, "{e}");
    assert!(matches!(e.error, FormatError::BaseMissing { .. }), "{e}");
    let tensors = ["layer.0.weight", "layer.1.weight", "embed", "position_ids"];
    assert!(
        e.location.segment.as_deref().is_some_and(|s| tensors.contains(&s)),
        "{e}"
    );
    assert!(e.to_string().contains("base tensor missing"), "{e}");
    let bare = Archive::open(&delta, DecodeLimits::default()).unwrap();
    let e = bare.read_file(&bare.files()[0]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Base, "{e}");
    assert_eq!(bare.read_file_threads(&bare.files()[0], 2).unwrap_err(), e);

    // A wrong base: same names, other bytes. The encoder's provider gives the
    // tensor of that name, which the decoder refuses by its hash...
    let (other_base, _) = {
        let w = tensor_bytes(Dtype::F32, 256 * 256, 77);
        (
            safetensors_file(&[("layer.0.weight", Dtype::F32, vec![256, 256], w)]),
            (),
        )
    };
    let e = decode_all_with_base(
        &delta,
        &DecodeLimits::default(),
        Box::new(base_of(&[("m", &other_base)])),
    )
    .unwrap_err();
    assert!(
        matches!(
            e.error,
            FormatError::BaseMissing { .. } | FormatError::BaseMismatch { .. }
        ),
        "{e}"
    );
    // ...and so is any provider's wrong answer.
    let careless = move |name: &str, _: &[u8; 32]| -> Option<Vec<u8>> {
        let mut t = match name {
            "layer.0.weight" => tensor_bytes(Dtype::F32, 256 * 256, 11),
            "layer.1.weight" => tensor_bytes(Dtype::F32, 256 * 128, 12),
            "embed" => tensor_bytes(Dtype::BF16, 512 * 64, 13),
            "position_ids" => tensor_bytes(Dtype::I64, 300, 14),
            _ => return None,
        };
        t[0] ^= 1; // a base one bit away from the right one
        Some(t)
    };
    let e = decode_all_with_base(&delta, &DecodeLimits::default(), Box::new(careless)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Base, "{e}");
    assert!(matches!(e.error, FormatError::BaseMismatch { .. }), "{e}");
    assert!(e.to_string().contains("wrong base tensor"), "{e}");
    let archive = Archive::open(&delta, DecodeLimits::default())
        .unwrap()
        .with_base(&careless);
    let e = archive.read_file(&archive.files()[0]).unwrap_err();
    assert!(matches!(e.error, FormatError::BaseMismatch { .. }), "{e}");
    assert_eq!(archive.read_file_threads(&archive.files()[0], 4).unwrap_err(), e);

    // Tensors the base does not have, or has with another shape, are stored alone.
    let reshaped = safetensors_file(&[(
        "layer.0.weight",
        Dtype::F32,
        vec![128, 512],
        tensor_bytes(Dtype::F32, 256 * 256, 11),
    )]);
    let a = compress_against(&reshaped, &provider);
    let archive = Archive::open(&a, DecodeLimits::default()).unwrap();
    assert!(archive.files()[0].segments.iter().all(|s| s.base.is_none()));
    assert_eq!(decode_all(&a, &DecodeLimits::default()).unwrap()[0].data, reshaped);
}

#[test]
fn a_copy_of_a_delta_segment_is_rebuilt_with_the_base() {
    // Tied weights in a fine-tune: the second is a copy of a delta segment.
    let (base, tuned) = base_and_finetune();
    let provider = base_of(&[("model.safetensors", &base)]);
    let files = [
        InputFile {
            archive_path: "model.safetensors".into(),
            data: &tuned,
        },
        InputFile {
            archive_path: "again/model.safetensors".into(),
            data: &tuned,
        },
    ];
    let (a, _, _) = compress_files_with_base(
        Vec::new(),
        &files,
        Some(&provider),
        &CandidateSearch::default(),
        &CompressOptions::default(),
        &|_| {},
    )
    .unwrap();
    let decoded = decode_all_with_base(&a, &DecodeLimits::default(), Box::new(base_of(&[("m", &base)]))).unwrap();
    assert!(decoded.iter().all(|f| f.data == tuned));
    let archive = Archive::open(&a, DecodeLimits::default()).unwrap().with_base(&provider);
    let second = &archive.files()[1];
    assert!(second.segments.iter().any(|s| s.copy_of.is_some() && s.base.is_some()));
    assert!(archive.read_file(second).unwrap() == tuned);
    let sha: [u8; 32] = Sha256::digest(&tuned).into();
    assert_eq!(second.digest, sha);
}
