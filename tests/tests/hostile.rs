//! Truncated, damaged and handcrafted hostile archives: each gets a clear,
//! typed error — never a panic, a hang, wrong bytes, or an allocation it did not earn.

use brevis_decoder::{decode_all, decode_chunk_record, Archive, DecodeLimits, ErrorKind, StreamDecoder};
use brevis_format::archive::{
    end_body, header, index_body, put_record, ChunkRecord, DigestKind, FileRecord, IndexEntry, RecordHead, RecordKind,
    SegmentKind, SegmentRecord, HEADER_LEN,
};
use brevis_format::program::serialize;
use brevis_format::{FormatError, Node};
use brevis_tests::{build_archive as build, compress, safetensors_file, tensor_bytes};
use safetensors::tensor::Dtype;
use sha2::{Digest, Sha256};

fn small_archive() -> (Vec<u8>, Vec<u8>) {
    let file = safetensors_file(&[
        ("w", Dtype::BF16, vec![16, 8], tensor_bytes(Dtype::BF16, 128, 1)),
        ("ids", Dtype::I64, vec![20], tensor_bytes(Dtype::I64, 20, 2)),
    ]);
    let (archive, _) = compress(&[("m.safetensors", &file)]);
    (archive, file)
}

fn stream_decode(archive: &[u8], piece: usize) -> Result<Vec<u8>, brevis_decoder::DecodeError> {
    let mut dec = StreamDecoder::new(DecodeLimits::default());
    let mut out = Vec::new();
    for p in archive.chunks(piece.max(1)) {
        dec.push(p);
        while let Some(ev) = dec.next_event()? {
            if let brevis_decoder::Event::Data(d) = ev {
                out.extend_from_slice(&d);
            }
        }
    }
    dec.finish()?;
    Ok(out)
}

#[test]
fn every_prefix_is_rejected_as_truncated() {
    let (archive, _) = small_archive();
    for n in 0..archive.len() {
        let prefix = &archive[..n];
        let e = decode_all(prefix, &DecodeLimits::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InsufficientData, "prefix {n}: {e}");
        assert!(stream_decode(prefix, 13).is_err(), "prefix {n}");
        assert!(Archive::open(prefix, DecodeLimits::default()).is_err(), "prefix {n}");
    }
}

#[test]
fn every_flipped_bit_is_detected() {
    let (archive, original) = small_archive();
    for bit in 0..archive.len() * 8 {
        let mut bad = archive.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        match decode_all(&bad, &DecodeLimits::default()) {
            Err(_) => {}
            Ok(files) => panic!(
                "bit {bit} flipped and decoding succeeded (same bytes: {})",
                files[0].data == original
            ),
        }
        // Random access through the index must not hand out damaged bytes either.
        if let Ok(a) = Archive::open(&bad, DecodeLimits::default()) {
            for f in a.files() {
                if let Ok(bytes) = a.read_file(f) {
                    assert_eq!(bytes, original, "bit {bit}: read_file returned wrong bytes");
                    panic!("bit {bit}: flipped and read_file succeeded");
                }
            }
        }
    }
}

/// Decoders decode a chunk before checking its record's checksum (while the
/// record is in cache), yet a damaged chunk record must be reported as a bad
/// checksum, as if it had been checked first, by every way of decoding it; and
/// the streaming decoder must hand out none of its bytes.
#[test]
fn a_damaged_chunk_record_is_a_bad_checksum_whatever_its_body_says() {
    let (archive, _) = small_archive();
    let is_record_checksum = |e: &FormatError| matches!(e, FormatError::Checksum { what: "record", .. });
    // The first CHUNK record.
    let mut at = HEADER_LEN;
    let (start, len) = loop {
        let head = RecordHead::parse(&archive[at..]).unwrap();
        if head.kind == RecordKind::Chunk {
            break (at, head.total_len());
        }
        at += head.total_len();
    };
    let record = &archive[start..start + len];
    let data_before: usize = {
        // Bytes the stream hands out before this chunk: the chunks before it.
        let mut dec = StreamDecoder::new(DecodeLimits::default());
        dec.push(&archive[..start]);
        let mut n = 0;
        while let Some(ev) = dec.next_event().unwrap() {
            if let brevis_decoder::Event::Data(d) = ev {
                n += d.len();
            }
        }
        n
    };
    assert!(decode_chunk_record(record, &Default::default()).is_ok());
    // Every bit past the framing: the body (chunk header, program, payloads)
    // and the stored checksum.
    for bit in 5 * 8..len * 8 {
        let mut bad = archive.clone();
        bad[start + bit / 8] ^= 1 << (bit % 8);
        let bad_record = &bad[start..start + len];
        let e = decode_chunk_record(bad_record, &Default::default()).unwrap_err();
        assert!(is_record_checksum(&e), "bit {bit}: decode_chunk_record: {e}");
        // Located at the record, as its segment's first chunk.
        let at_record = |e: &brevis_decoder::DecodeError| {
            e.location.offset == Some(start as u64) && e.location.chunk == Some(0) && e.location.segment.is_some()
        };
        let e = decode_all(&bad, &DecodeLimits::default()).unwrap_err();
        assert!(
            is_record_checksum(&e.error) && at_record(&e),
            "bit {bit}: decode_all: {e}"
        );
        let a = Archive::open(&bad, DecodeLimits::default()).unwrap();
        let e = a.read_file(&a.files()[0]).unwrap_err();
        assert!(
            is_record_checksum(&e.error) && at_record(&e),
            "bit {bit}: read_file: {e}"
        );
        let mut dec = StreamDecoder::new(DecodeLimits::default());
        dec.push(&bad);
        let mut handed_out = 0;
        let e = loop {
            match dec.next_event() {
                Ok(Some(brevis_decoder::Event::Data(d))) => handed_out += d.len(),
                Ok(Some(_)) => {}
                Ok(None) => panic!("bit {bit}: the stream decoded a damaged record"),
                Err(e) => break e,
            }
        };
        assert!(is_record_checksum(&e.error) && at_record(&e), "bit {bit}: stream: {e}");
        assert_eq!(
            handed_out, data_before,
            "bit {bit}: the stream handed out the damaged chunk's bytes"
        );
    }
}

#[test]
fn trailing_garbage_and_wrong_magic_are_rejected() {
    let (mut archive, _) = small_archive();
    let mut other = archive.clone();
    other[1] = b'X';
    let e = decode_all(&other, &DecodeLimits::default()).unwrap_err();
    assert!(
        matches!(e.error, FormatError::Invalid { what } if what.contains("magic")),
        "{e}"
    );
    archive.push(0);
    let e = decode_all(&archive, &DecodeLimits::default()).unwrap_err();
    assert!(matches!(e.error, FormatError::TrailingBytes { .. }), "{e}");
}

/// Whether `e` is a file digest that does not match, of the hash `what` names
/// (`"file SHA-256"`, `"file BLAKE3"`).
fn digest_mismatch(e: &brevis_decoder::DecodeError, what: &str) -> bool {
    matches!(e.error, FormatError::Checksum { what: w, .. } if w == what)
}

fn file_rec(path: &str, data: &[u8], segments: u64) -> (RecordKind, Vec<u8>) {
    let sha256: [u8; 32] = Sha256::digest(data).into();
    (
        RecordKind::File,
        FileRecord {
            path: path.into(),
            size: data.len() as u64,
            digest: sha256,
            segments,
        }
        .body(),
    )
}

fn opaque_seg(len: u64, chunks: u64) -> (RecordKind, Vec<u8>) {
    (
        RecordKind::Segment,
        SegmentRecord::new(SegmentKind::Opaque, "x", len, chunks).body(),
    )
}

fn chunk_rec(data: &[u8], program: &Node) -> (RecordKind, Vec<u8>) {
    let sum = brevis_format::archive::chunk_checksum(data);
    (
        RecordKind::Chunk,
        ChunkRecord::body(data.len() as u64, sum, 8, &serialize(program)),
    )
}

/// An archive of one file `f`, 100 bytes of 7 (one `Const` chunk), whose FILE
/// record states the SHA-256 of `hashed` (100 bytes).
fn sevens_archive(hashed: &[u8]) -> Vec<u8> {
    let data = [7u8; 100];
    build(&[
        file_rec("f", hashed, 1),
        opaque_seg(100, 1),
        chunk_rec(
            &data,
            &Node::Const {
                width: 8,
                count: 100,
                value: 7,
            },
        ),
    ])
}

#[test]
fn a_handcrafted_archive_decodes() {
    // Sanity check of the builder, so the hostile variants below fail for their own reason.
    let a = sevens_archive(&[7u8; 100]);
    assert_eq!(decode_all(&a, &DecodeLimits::default()).unwrap()[0].data, [7u8; 100]);
}

#[test]
fn huge_counts_are_refused_before_allocating() {
    // A Const claiming 2^40 words inside a 100-byte chunk: a type error, not a 1 TB allocation.
    let data = vec![7u8; 100];
    let bomb = Node::Const {
        width: 8,
        count: 1 << 40,
        value: 7,
    };
    let a = build(&[file_rec("f", &data, 1), opaque_seg(100, 1), chunk_rec(&data, &bomb)]);
    let e = decode_all(&a, &DecodeLimits::default()).unwrap_err();
    assert!(
        matches!(
            e.error,
            FormatError::LengthMismatch {
                what: "program output words",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.location.file.as_deref(), Some("f"));
    assert_eq!(e.location.chunk, Some(0));

    // A chunk declaring more than the 16 MiB chunk limit.
    let mut body = Vec::new();
    brevis_format::bytes::put_varint(&mut body, 1 << 30);
    body.extend_from_slice(&[0; 9]);
    let a = build(&[
        file_rec("f", &[], 1),
        (
            RecordKind::Segment,
            SegmentRecord::new(SegmentKind::Opaque, "x", 0, 0).body(),
        ),
        (RecordKind::Chunk, body),
    ]);
    let e = decode_all(&a, &DecodeLimits::default()).unwrap_err();
    assert!(matches!(e.error, FormatError::Invalid { .. }), "{e}");
    let e = ChunkRecord::parse(&{
        let mut b = Vec::new();
        brevis_format::bytes::put_varint(&mut b, 1 << 30);
        b.extend_from_slice(&[0; 9]);
        b
    })
    .unwrap_err();
    assert!(
        matches!(
            e,
            FormatError::LimitExceeded {
                limit: "chunk decoded bytes",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn output_cap_stops_a_decompression_bomb() {
    // 4 MiB of zeros from a few bytes: fine by default, refused under a 1 MiB cap.
    let data = vec![0u8; 4 << 20];
    let a = build(&[
        file_rec("zeros", &data, 1),
        opaque_seg(data.len() as u64, 1),
        chunk_rec(
            &data,
            &Node::Const {
                width: 8,
                count: data.len() as u64,
                value: 0,
            },
        ),
    ]);
    assert!(a.len() < 300);
    assert_eq!(decode_all(&a, &DecodeLimits::default()).unwrap()[0].data.len(), 4 << 20);
    let capped = DecodeLimits {
        max_output_bytes: 1 << 20,
        ..DecodeLimits::default()
    };
    let e = decode_all(&a, &capped).unwrap_err();
    assert!(
        matches!(
            e.error,
            FormatError::LimitExceeded {
                limit: "output bytes",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.kind(), ErrorKind::Limit);
    assert!(
        e.to_string().contains("raise it"),
        "the message says how to raise the limit: {e}"
    );
}

/// 80 MiB of zeros from five `Const` chunks of 16 MiB: about 200 bytes of archive.
fn zero_bomb() -> (Vec<u8>, usize) {
    const CHUNK: usize = 16 << 20;
    let data = vec![0u8; 5 * CHUNK];
    let mut records = vec![file_rec("zeros", &data, 1), opaque_seg(data.len() as u64, 5)];
    for _ in 0..5 {
        let zeros = Node::Const {
            width: 8,
            count: CHUNK as u64,
            value: 0,
        };
        records.push(chunk_rec(&data[..CHUNK], &zeros));
    }
    (build(&records), data.len())
}

#[test]
fn the_default_ratio_limit_stops_a_bomb_before_decoding_it() {
    let (a, len) = zero_bomb();
    assert!(a.len() < 400, "{} bytes", a.len());
    let is_ratio_limit = |e: &brevis_decoder::DecodeError| {
        matches!(
            e.error,
            FormatError::LimitExceeded {
                limit: "output per archive byte (max_ratio)",
                ..
            }
        ) && e.kind() == ErrorKind::Limit
            && e.to_string().contains("raise it")
    };
    // Streaming: the first 64 MiB (four chunks) are allowed whatever the ratio;
    // the fifth chunk is refused before it is decoded.
    let e = stream_decode(&a, 64).unwrap_err();
    assert!(is_ratio_limit(&e), "{e}");
    assert_eq!(e.location.chunk, Some(4), "{e}");
    let e = decode_all(&a, &DecodeLimits::default()).unwrap_err();
    assert!(is_ratio_limit(&e), "{e}");
    // Random access refuses the declared sizes before decoding anything.
    let e = Archive::open(&a, DecodeLimits::default()).err().expect("refused");
    assert!(is_ratio_limit(&e), "{e}");
    // A caller who trusts the archive lifts the limit.
    let trusting = DecodeLimits {
        max_ratio: 0,
        ..DecodeLimits::default()
    };
    assert_eq!(decode_all(&a, &trusting).unwrap()[0].data.len(), len);
    let archive = Archive::open(&a, trusting).unwrap();
    assert_eq!(archive.read_file(&archive.files()[0]).unwrap().len(), len);
    // The allowance: exactly what 64 MiB or `max_ratio` bytes per archive byte give.
    let limits = DecodeLimits::default();
    assert_eq!(limits.ratio_allowance(10), brevis_decoder::RATIO_ALLOWANCE);
    assert_eq!(limits.ratio_allowance(1 << 20), brevis_decoder::DEFAULT_MAX_RATIO << 20);
    assert_eq!(trusting.ratio_allowance(10), u64::MAX);
}

#[test]
fn deep_nesting_is_refused() {
    let data = vec![5u8; 10];
    let mut p = Node::Lit {
        width: 8,
        count: 10,
        encoding: brevis_format::wire::LitEncoding::Raw,
        payload: data.clone(),
    };
    for _ in 0..40 {
        p = Node::Map {
            op: brevis_format::ops::MapOp::XorConst(1),
            child: Box::new(p),
        };
    }
    let a = build(&[file_rec("f", &data, 1), opaque_seg(10, 1), chunk_rec(&data, &p)]);
    let e = decode_all(&a, &DecodeLimits::default()).unwrap_err();
    assert!(
        matches!(
            e.error,
            FormatError::LimitExceeded {
                limit: "program depth",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn lengths_that_do_not_add_up_are_refused() {
    let data = vec![1u8; 10];
    let c = Node::Const {
        width: 8,
        count: 10,
        value: 1,
    };
    // Segment longer than its file.
    let a = build(&[file_rec("f", &data, 1), opaque_seg(20, 1), chunk_rec(&data, &c)]);
    assert!(matches!(
        decode_all(&a, &DecodeLimits::default()).unwrap_err().error,
        FormatError::LengthMismatch { .. }
    ));
    // Chunk shorter than its segment.
    let a = build(&[file_rec("f", &[1u8; 20], 1), opaque_seg(20, 1), chunk_rec(&data, &c)]);
    assert!(matches!(
        decode_all(&a, &DecodeLimits::default()).unwrap_err().error,
        FormatError::LengthMismatch { .. }
    ));
    // A chunk whose bytes differ from the file's hash.
    let a = build(&[file_rec("f", &[2u8; 10], 1), opaque_seg(10, 1), chunk_rec(&data, &c)]);
    let e = decode_all(&a, &DecodeLimits::default()).unwrap_err();
    assert!(digest_mismatch(&e, "file SHA-256"), "{e}");
}

#[test]
fn overlapping_or_reordered_index_entries_are_refused() {
    let data = vec![3u8; 10];
    let recs = [
        file_rec("f", &data, 1),
        opaque_seg(10, 1),
        chunk_rec(
            &data,
            &Node::Const {
                width: 8,
                count: 10,
                value: 3,
            },
        ),
    ];
    let good = build(&recs);
    // Rebuild the index with the segment pointing at the file record (overlap).
    let mut a = header(DigestKind::Sha256).to_vec();
    let mut offsets = Vec::new();
    for (k, b) in &recs {
        offsets.push((*k, a.len() as u64));
        put_record(&mut a, *k, b);
    }
    let index = vec![
        IndexEntry {
            kind: RecordKind::File,
            offset: offsets[0].1,
            decoded_len: 0,
        },
        IndexEntry {
            kind: RecordKind::Segment,
            offset: offsets[0].1 + 1,
            decoded_len: 0,
        },
        IndexEntry {
            kind: RecordKind::Chunk,
            offset: offsets[2].1,
            decoded_len: 10,
        },
    ];
    let io = a.len() as u64;
    put_record(&mut a, RecordKind::Index, &index_body(&index));
    let total = a.len() as u64 + brevis_format::archive::END_LEN as u64;
    put_record(&mut a, RecordKind::End, &end_body(io, total));
    assert_eq!(a.len(), good.len());
    assert!(Archive::open(&a, DecodeLimits::default()).is_err());
    let e = decode_all(&a, &DecodeLimits::default()).unwrap_err();
    assert!(
        matches!(e.error, FormatError::Corrupt { what } if what.starts_with("index")),
        "{e}"
    );
}

#[test]
fn paths_that_escape_the_output_folder_are_refused() {
    let data = vec![1u8; 4];
    for path in ["../evil", "/etc/passwd", "a/../../b"] {
        let a = build(&[
            file_rec(path, &data, 1),
            opaque_seg(4, 1),
            chunk_rec(
                &data,
                &Node::Const {
                    width: 8,
                    count: 4,
                    value: 1,
                },
            ),
        ]);
        let e = decode_all(&a, &DecodeLimits::default()).unwrap_err();
        assert!(
            matches!(e.error, FormatError::Invalid { what } if what.starts_with("file path")),
            "{path}: {e}"
        );
    }
}

#[test]
fn record_larger_than_the_limit_is_refused_from_its_header() {
    let mut a = header(DigestKind::Sha256).to_vec();
    a.push(RecordKind::File as u8);
    a.extend_from_slice(&u32::MAX.to_le_bytes());
    let mut dec = StreamDecoder::new(DecodeLimits::default());
    dec.push(&a);
    let e = dec.next_event().unwrap_err();
    assert!(
        matches!(
            e.error,
            FormatError::LimitExceeded {
                limit: "record body bytes",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.location.offset, Some(HEADER_LEN as u64));
}

/// Found by `cargo fuzz` (target `structured`): a FILE record whose size
/// disagrees with its segments. The stream and `Archive::open` refuse it, but
/// an archive opened for salvage (`Archive::scan`) handed out the file from
/// `read_file` as intact: its SHA-256 matched, its size did not.
#[test]
fn salvage_checks_file_sizes_as_well_as_hashes() {
    let data = [1u8; 4];
    let lying = FileRecord {
        path: "f".into(),
        size: 8,
        digest: Sha256::digest(data).into(),
        segments: 1,
    };
    let a = build(&[
        (RecordKind::File, lying.body()),
        opaque_seg(4, 1),
        chunk_rec(
            &data,
            &Node::Const {
                width: 8,
                count: 4,
                value: 1,
            },
        ),
    ]);
    let e = decode_all(&a, &DecodeLimits::default()).unwrap_err();
    assert!(matches!(e.error, FormatError::LengthMismatch { .. }), "{e}");
    assert!(Archive::open(&a, DecodeLimits::default()).is_err());
    let (ar, damage) = Archive::scan(&a, DecodeLimits::default()).unwrap();
    assert!(damage.is_empty(), "{damage:?}");
    let e = ar.read_file(&ar.files()[0]).unwrap_err();
    assert!(
        matches!(
            e.error,
            FormatError::LengthMismatch {
                what: "file size (segments do not add up)",
                expected: 8,
                found: 4
            }
        ),
        "{e}"
    );
    assert_eq!(e.kind(), ErrorKind::Corruption);
    // Each chunk still decodes alone, for salvage to place it.
    let f = &ar.files()[0];
    assert_eq!(ar.read_chunk(f, &f.segments[0], 0).unwrap(), data);
}

/// Found by `cargo fuzz` (target `structured`, mutating the INDEX): an index
/// entry giving a chunk 2^64 - 1 decoded bytes made `Archive::open` overflow
/// while summing the segment's chunk lengths (a panic where overflow is checked,
/// a wrapped sum elsewhere).
#[test]
fn index_chunk_lengths_beyond_a_chunk_are_refused() {
    let data = [4u8; 20];
    let half = Node::Const {
        width: 8,
        count: 10,
        value: 4,
    };
    let recs = [
        file_rec("f", &data, 1),
        opaque_seg(20, 2),
        chunk_rec(&data[..10], &half),
        chunk_rec(&data[10..], &half),
    ];
    let mut a = header(DigestKind::Sha256).to_vec();
    let mut index = Vec::new();
    for (k, b) in &recs {
        let decoded_len = if *k == RecordKind::Chunk { 10 } else { 0 };
        index.push(IndexEntry {
            kind: *k,
            offset: a.len() as u64,
            decoded_len,
        });
        put_record(&mut a, *k, b);
    }
    index[2].decoded_len = u64::MAX;
    let io = a.len() as u64;
    put_record(&mut a, RecordKind::Index, &index_body(&index));
    let total = a.len() as u64 + brevis_format::archive::END_LEN as u64;
    put_record(&mut a, RecordKind::End, &end_body(io, total));
    let refused = |e: brevis_decoder::DecodeError| {
        assert!(
            matches!(e.error, FormatError::Invalid { what } if what.starts_with("index chunk length")),
            "{e}"
        );
        assert_eq!(e.kind(), ErrorKind::Corruption);
    };
    refused(
        Archive::open(&a, DecodeLimits::default())
            .err()
            .expect("open must fail"),
    );
    refused(decode_all(&a, &DecodeLimits::default()).unwrap_err());
}

/// Found by `cargo fuzz` (target `structured`): salvage (`Archive::scan`)
/// listed every chunk record that followed a segment, even past the segment's
/// length, and every segment, even past its file's size, so `read_chunk` rebuilt
/// more bytes than the files declare (42 from a 40-byte file). Such records
/// are now reported as damage and never decoded.
#[test]
fn salvage_never_decodes_past_what_the_files_declare() {
    let data = [6u8; 10];
    let c = Node::Const {
        width: 8,
        count: 10,
        value: 6,
    };
    // A segment of 10 bytes in 2 chunks of 10.
    let a = build(&[
        file_rec("f", &data, 1),
        opaque_seg(10, 2),
        chunk_rec(&data, &c),
        chunk_rec(&data, &c),
    ]);
    assert!(decode_all(&a, &DecodeLimits::default()).is_err());
    let (ar, damage) = Archive::scan(&a, DecodeLimits::default()).unwrap();
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert!(
        matches!(
            damage[0].error,
            FormatError::LengthMismatch {
                what: "chunk lengths (do not add up to the segment's)",
                expected: 0,
                found: 10
            }
        ),
        "{}",
        damage[0]
    );
    assert_eq!(damage[0].location.chunk, Some(1));
    let f = &ar.files()[0];
    assert_eq!(ar.read_chunk(f, &f.segments[0], 0).unwrap(), data);
    let e = ar.read_chunk(f, &f.segments[0], 1).unwrap_err();
    assert!(
        matches!(
            e.error,
            FormatError::LengthMismatch {
                what: "chunk length (against the index)",
                expected: 0,
                found: 10
            }
        ),
        "{e}"
    );
    assert_eq!(e.kind(), ErrorKind::Corruption);

    // A file of 10 bytes in 2 segments of 10.
    let a = build(&[
        file_rec("f", &data, 2),
        opaque_seg(10, 1),
        chunk_rec(&data, &c),
        opaque_seg(10, 1),
        chunk_rec(&data, &c),
    ]);
    let (ar, damage) = Archive::scan(&a, DecodeLimits::default()).unwrap();
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert!(
        matches!(
            damage[0].error,
            FormatError::Invalid {
                what: "segment length (beyond its file)"
            }
        ),
        "{}",
        damage[0]
    );
    let f = &ar.files()[0];
    assert_eq!(f.segments.len(), 1);
    assert_eq!(ar.read_file(f).unwrap(), data);

    // Under an output cap, salvage refuses files past it, as `open` does.
    let capped = DecodeLimits {
        max_output_bytes: 5,
        ..DecodeLimits::default()
    };
    let e = Archive::scan(&a, capped).err().expect("scan must refuse");
    assert!(
        matches!(
            e.error,
            FormatError::LimitExceeded {
                limit: "output bytes",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.kind(), ErrorKind::Limit);
}

/// [`StreamDecoder::leave_sha256_to_caller`]: SHA-256 file digests are neither
/// computed nor checked (the file ends with the digest the archive states, for
/// the caller to compare), while a header of another hash is still checked.
#[test]
fn sha256_left_to_the_caller_is_reported_unchecked_and_other_digests_still_checked() {
    // The FILE record states the SHA-256 of other bytes of the same size.
    let stated: [u8; 32] = Sha256::digest([8u8; 100]).into();
    let archive = sevens_archive(&[8u8; 100]);
    let decode = |archive: &[u8], leave: bool| {
        let mut dec = StreamDecoder::new(DecodeLimits::default());
        if leave {
            dec.leave_sha256_to_caller();
        }
        dec.push(archive);
        let (mut out, mut digest) = (Vec::new(), None);
        while let Some(ev) = dec.next_event()? {
            match ev {
                brevis_decoder::Event::Data(d) => out.extend_from_slice(&d),
                brevis_decoder::Event::FileEnd { digest: d, .. } => digest = Some(d),
                _ => {}
            }
        }
        dec.finish().map(|()| (out, digest))
    };
    let e = decode(&archive, false).unwrap_err();
    assert!(digest_mismatch(&e, "file SHA-256"), "{e}");
    assert_eq!(decode(&archive, true).unwrap(), (vec![7u8; 100], Some(stated)));
    // The header has no checksum: flags bit 0 makes the same records BLAKE3's.
    let mut blake3 = archive.clone();
    blake3[10] = 1;
    let e = decode(&blake3, true).unwrap_err();
    assert!(digest_mismatch(&e, "file BLAKE3"), "{e}");
}
