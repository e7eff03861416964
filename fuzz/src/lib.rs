//! What the Brevis fuzz targets share: the limits they decode under, the
//! checks every decoded archive must pass, a loose record splitter and an
//! archive re-framer (fresh checksums, a consistent INDEX and END), and the
//! structure-aware mutator of the `structured` target.
//!
//! Targets (`fuzz_targets/`, run them with `scripts/fuzz.sh` or
//! `cargo +nightly fuzz run TARGET`):
//!
//! | target | input | what must hold |
//! |---|---|---|
//! | `archive` | any bytes | `decode_all`, `Archive::open` + `read_file` (and `read_file_threads`, which must give the same), `Archive::scan` + `read_chunk`: no panic, hang or unbounded allocation; successes agree |
//! | `program` | program bytes | `program::parse` (default limits) never panics; what parses is canonical and, when small, evaluates to its type |
//! | `literal` | encoding, width, count, payload | `wire::decode` never panics; decoded words fit their type; re-encoding round-trips |
//! | `stream` | piece schedule, archive | `StreamDecoder` fed in pieces agrees with `decode_all` (same files, or both fail) |
//! | `structured` | a valid archive | record bodies are mutated and re-framed so mutations reach the parsers; a success means every file matches its FILE record's SHA-256 |

use brevis_decoder::{decode_all, digest, Archive, DecodeError, DecodeLimits, Event, StreamDecoder};
use brevis_format::archive::{
    check_header, end_body, header, index_body, open_record, put_record, ChunkRecord, DigestKind, FileRecord,
    IndexEntry, RecordHead, RecordKind, END_LEN, HEADER_LEN, MAGIC, MAX_CHUNK_DECODED,
};
use brevis_format::bytes::{put_varint, ByteReader};
use brevis_format::program::{self, Limits};

/// The limits every archive target decodes under: the defaults, with the total
/// output capped at 64 MiB. A few bytes may legally declare gigabytes (a `Const`
/// bomb is a valid archive); the cap is the documented guard for untrusted input,
/// so the targets use it, and every path must respect it.
pub fn limits() -> DecodeLimits {
    DecodeLimits {
        max_output_bytes: 64 << 20,
        ..DecodeLimits::default()
    }
}

/// A record as split from bytes that may be damaged: its kind byte and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawRecord {
    /// The kind byte (not necessarily a known kind).
    pub kind: u8,
    /// The body.
    pub body: Vec<u8>,
}

/// Splits `data` into records without trusting it: the header is skipped when
/// present, checksums are ignored, and a body length past the end is cut short.
pub fn split_records(data: &[u8]) -> Vec<RawRecord> {
    let mut rest = if data.starts_with(&MAGIC) {
        &data[HEADER_LEN.min(data.len())..]
    } else {
        data
    };
    let mut out = Vec::new();
    while rest.len() >= 5 {
        let kind = rest[0];
        let len = u32::from_le_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        let len = len.min(rest.len() - 5);
        out.push(RawRecord {
            kind,
            body: rest[5..5 + len].to_vec(),
        });
        rest = &rest[(5 + len + 8).min(rest.len())..];
    }
    out
}

/// An archive of `records` with correct framing: the header, each FILE,
/// SEGMENT and CHUNK record with a fresh checksum (INDEX, END and unknown kinds
/// are dropped), then an INDEX listing them and the END record. The bodies are
/// kept as they are, so they reach the parsers behind the checksums.
pub fn build_archive(records: &[RawRecord]) -> Vec<u8> {
    build_archive_with(records, DigestKind::Sha256)
}

/// [`build_archive`] with a header naming `digest` for the FILE records' digests.
pub fn build_archive_with(records: &[RawRecord], digest: DigestKind) -> Vec<u8> {
    let mut a = header(digest).to_vec();
    let mut index = Vec::new();
    for r in records {
        let kind = match RecordKind::from_u8(r.kind) {
            Ok(k @ (RecordKind::File | RecordKind::Segment | RecordKind::Chunk)) => k,
            _ => continue,
        };
        let decoded_len = match kind {
            RecordKind::Chunk => ChunkRecord::parse(&r.body).map(|c| c.decoded_len).unwrap_or(0),
            _ => 0,
        };
        index.push(IndexEntry {
            kind,
            offset: a.len() as u64,
            decoded_len,
        });
        put_record(&mut a, kind, &r.body);
    }
    let index_offset = a.len() as u64;
    put_record(&mut a, RecordKind::Index, &index_body(&index));
    let total = a.len() as u64 + END_LEN as u64;
    put_record(&mut a, RecordKind::End, &end_body(index_offset, total));
    a
}

/// Header flags value the harness reads as "keep my INDEX and END": a real
/// archive's flags are 0, and [`normalize`] always writes 0.
const KEEP_INDEX: u8 = 0x5a;

/// Frames `records` as they are (INDEX and END included, in their order, with
/// fresh checksums), so mutated INDEX and END bodies reach their parsers.
fn frame_as_is(records: &[RawRecord]) -> Vec<u8> {
    let mut a = header(DigestKind::Sha256).to_vec();
    for r in records {
        if let Ok(kind) = RecordKind::from_u8(r.kind) {
            put_record(&mut a, kind, &r.body);
        }
    }
    a
}

/// Any bytes as a well-framed archive: [`build_archive`] of its records
/// (a fresh INDEX and END), or, when the header's flags byte is the harness's
/// `KEEP_INDEX` mark, every record as it is with a fresh checksum.
pub fn normalize(data: &[u8]) -> Vec<u8> {
    let records = split_records(data);
    if data.starts_with(&MAGIC) && data.get(10) == Some(&KEEP_INDEX) {
        frame_as_is(&records)
    } else {
        // Bits 0 and 1 of the input's flags pick the digest, so inputs reach BLAKE3
        // and XXH3-128 archives too.
        let digest = match data.get(10).map(|f| f & 3) {
            Some(1) => DigestKind::Blake3,
            Some(2) => DigestKind::Xxh3,
            _ => DigestKind::Sha256,
        };
        build_archive_with(&records, digest)
    }
}

/// The FILE records of an archive, in order, as far as the records can be read.
pub fn file_records(a: &[u8]) -> Vec<FileRecord> {
    let mut files = Vec::new();
    let mut pos = HEADER_LEN;
    while let Some(rest) = a.get(pos..) {
        let Ok(head) = RecordHead::parse(rest) else { break };
        let Ok((_, body)) = open_record(rest) else { break };
        if head.kind == RecordKind::File {
            match FileRecord::parse(body) {
                Ok(f) => files.push(f),
                Err(_) => break,
            }
        }
        pos += head.total_len();
    }
    files
}

/// Files rebuilt by a decoder: path and bytes.
pub type Files = Vec<(String, Vec<u8>)>;

/// Decodes `a` with [`decode_all`].
pub fn decode_all_files(a: &[u8]) -> Result<Files, DecodeError> {
    decode_all(a, &limits()).map(|files| files.into_iter().map(|f| (f.path, f.data)).collect())
}

/// Decodes `a` with a [`StreamDecoder`], pushing pieces of the sizes `piece`
/// returns (each at least 1), draining every event after each push, and checks
/// the order of the events as it goes.
pub fn stream_files(a: &[u8], mut piece: impl FnMut() -> usize) -> Result<Files, DecodeError> {
    let mut dec = StreamDecoder::new(limits());
    let mut files: Files = Vec::new();
    let (mut in_file, mut in_segment, mut ended) = (false, false, false);
    let mut fed = 0;
    loop {
        while let Some(ev) = dec.next_event()? {
            assert!(!ended, "event after End: {ev:?}");
            match ev {
                Event::FileStart { path, size } => {
                    assert!(!in_file, "FileStart inside a file");
                    assert!(
                        size <= limits().max_output_bytes,
                        "file of {size} bytes passed the output cap"
                    );
                    in_file = true;
                    files.push((path, Vec::new()));
                }
                Event::SegmentStart { .. } => {
                    assert!(in_file && !in_segment, "SegmentStart outside a file");
                    in_segment = true;
                }
                Event::Data(d) => {
                    assert!(in_segment, "Data outside a segment");
                    files.last_mut().expect("in a file").1.extend_from_slice(&d);
                }
                Event::SegmentEnd => {
                    assert!(in_segment, "SegmentEnd outside a segment");
                    in_segment = false;
                }
                Event::FileEnd {
                    path,
                    digest: found,
                    kind,
                } => {
                    assert!(in_file && !in_segment, "FileEnd outside a file");
                    in_file = false;
                    let (p, data) = files.last().expect("in a file");
                    assert_eq!(&path, p);
                    assert_eq!(found, digest(kind, data), "FileEnd's digest is not the bytes'");
                }
                Event::End => {
                    assert!(!in_file, "End inside a file");
                    ended = true;
                }
            }
        }
        if fed == a.len() {
            break;
        }
        let n = piece().clamp(1, a.len() - fed);
        dec.push(&a[fed..fed + n]);
        fed += n;
    }
    dec.finish()?;
    assert!(ended && dec.is_done(), "finish() succeeded before End");
    Ok(files)
}

/// Every check an archive must pass, whatever its bytes:
///
/// - nothing panics, hangs or allocates past the limits ([`limits`]);
/// - when `decode_all` succeeds, every file matches its FILE record (path, size,
///   SHA-256) and random access (`Archive::open` + `read_file`) returns the same
///   files; when random access reads every file, `decode_all` succeeds too;
/// - `decode_all` (which reads through the index, and streams only to report
///   an error) and a [`StreamDecoder`] given the whole archive accept the same
///   archives and rebuild the same files;
/// - salvage (`Archive::scan`) never hands out a file whose SHA-256 differs.
pub fn check_archive(a: &[u8]) {
    let all = decode_all_files(a);
    match (&all, stream_files(a, || a.len())) {
        (Ok(files), Ok(streamed)) => assert!(*files == streamed, "decode_all and streaming rebuilt different files"),
        (Err(_), Err(_)) => {}
        (Ok(_), Err(e)) => panic!("decode_all succeeded, streaming failed: {e}"),
        (Err(e), Ok(_)) => panic!("streaming succeeded, decode_all failed: {e}"),
    }
    if let Ok(files) = &all {
        let records = file_records(a);
        let kind = check_header(a).expect("decoded, so the header is valid");
        assert_eq!(files.len(), records.len(), "decoded files vs FILE records");
        for ((path, data), r) in files.iter().zip(&records) {
            assert_eq!(path, &r.path);
            assert_eq!(data.len() as u64, r.size, "{path}: size differs from its FILE record");
            assert_eq!(
                digest(kind, data),
                r.digest,
                "{path}: digest differs from its FILE record"
            );
        }
    }
    match (&all, Archive::open(a, limits())) {
        (Ok(files), Ok(ar)) => {
            assert_eq!(ar.files().len(), files.len(), "Archive::open vs decode_all: file count");
            for (info, (path, data)) in ar.files().iter().zip(files) {
                assert_eq!(&info.path, path);
                match ar.read_file(info) {
                    Ok(bytes) => assert!(bytes == *data, "{path}: read_file differs from decode_all"),
                    Err(e) => panic!("{path}: decode_all succeeded, read_file failed: {e}"),
                }
                match ar.read_file_threads(info, 2) {
                    Ok(bytes) => assert!(bytes == *data, "{path}: read_file_threads differs from decode_all"),
                    Err(e) => panic!("{path}: decode_all succeeded, read_file_threads failed: {e}"),
                }
            }
        }
        (Ok(_), Err(e)) => panic!("decode_all succeeded, Archive::open failed: {e}"),
        (Err(e), Ok(ar)) => {
            if ar.files().iter().all(|f| ar.read_file(f).is_ok()) {
                panic!("Archive::open and read_file of every file succeeded, decode_all failed: {e}");
            }
        }
        (Err(_), Err(_)) => {}
    }
    scan_checks(a);
}

/// Salvage: every file `read_file` returns matches its digest, and no chunk
/// read panics.
fn scan_checks(a: &[u8]) {
    let Ok((ar, _damage)) = Archive::scan(a, limits()) else {
        return;
    };
    let mut total = 0u64;
    let declared = ar.files().iter().fold(0u64, |acc, f| acc.saturating_add(f.size));
    for f in ar.files() {
        let one = ar.read_file(f);
        assert!(
            ar.read_file_threads(f, 2) == one,
            "{}: read_file_threads differs from read_file",
            f.path
        );
        if let Ok(bytes) = one {
            assert_eq!(
                digest(f.digest_kind, &bytes),
                f.digest,
                "{}: salvaged file differs from its digest",
                f.path
            );
            assert_eq!(
                bytes.len() as u64,
                f.size,
                "{}: salvaged file differs from its size",
                f.path
            );
        }
        for s in &f.segments {
            for i in 0..s.chunks.len() {
                if let Ok(c) = ar.read_chunk(f, s, i) {
                    total += c.len() as u64;
                }
            }
        }
    }
    // Salvage never rebuilds more than the files declare, nor past the cap.
    assert!(
        total <= declared,
        "salvage decoded {total} bytes of files declaring {declared}"
    );
    assert!(
        total <= limits().max_output_bytes,
        "salvage decoded {total} bytes, past the output cap"
    );
}

/// A tiny deterministic generator for the mutator (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Mutates `body` in place with libFuzzer's own byte mutator, letting it grow a little.
fn mutate_bytes(body: &mut Vec<u8>, rng: &mut Rng) {
    let n = body.len();
    body.resize(n + 16 + n / 8 + rng.below(64), 0);
    let cap = body.len();
    let m = libfuzzer_sys::fuzzer_mutate(body, n, cap);
    body.truncate(m);
}

/// Rewrites a CHUNK body's header so it declares what its program's type says
/// (root width and decoded length), and with `rehash` the xxh3 of what the
/// program evaluates to: then a mutated program passes the chunk checks and the
/// mutation reaches the segment and file accounting (and the file SHA-256).
fn fix_chunk_header(body: &[u8], rehash: bool) -> Option<Vec<u8>> {
    let chunk = ChunkRecord::parse(body).ok()?;
    let node = program::parse(chunk.program, &Limits::default()).ok()?;
    let ty = node.ty().ok()?;
    if ty.width % 8 != 0 || ty.count == 0 {
        return None;
    }
    let len = ty.count.checked_mul(u64::from(ty.width / 8))?;
    if len > MAX_CHUNK_DECODED.min(1 << 20) {
        return None;
    }
    let mut xxh3 = chunk.decoded_xxh3;
    if rehash {
        let mut out = Vec::new();
        brevis_decoder::exec::eval(&node).ok()?.write_le_bytes(&mut out).ok()?;
        xxh3 = brevis_format::archive::chunk_checksum(&out);
    }
    Some(ChunkRecord::body(len, xxh3, ty.width, chunk.program))
}

/// An INDEX body split loosely into `(kind, offset delta, decoded length)`
/// entries (the length only for chunks), as far as it reads.
fn split_index(body: &[u8]) -> Vec<(u8, u64, Option<u64>)> {
    let mut r = ByteReader::new(body);
    let mut out = Vec::new();
    let Ok(n) = r.varint("n") else { return out };
    for _ in 0..n.min(body.len() as u64) {
        let (Ok(kind), Ok(delta)) = (r.u8("kind"), r.varint("delta")) else {
            break;
        };
        let len = if kind == RecordKind::Chunk as u8 {
            match r.varint("len") {
                Ok(l) => Some(l),
                Err(_) => break,
            }
        } else {
            None
        };
        out.push((kind, delta, len));
    }
    out
}

fn join_index(entries: &[(u8, u64, Option<u64>)]) -> Vec<u8> {
    let mut b = Vec::new();
    put_varint(&mut b, entries.len() as u64);
    for &(kind, delta, len) in entries {
        b.push(kind);
        put_varint(&mut b, delta);
        if let Some(l) = len {
            put_varint(&mut b, l);
        }
    }
    b
}

/// A value that is likely to matter to a length or offset check.
fn interesting(rng: &mut Rng, near: u64) -> u64 {
    match rng.below(8) {
        0 => 0,
        1 => 1,
        2 => near.wrapping_add(1),
        3 => near.wrapping_sub(1),
        4 => MAX_CHUNK_DECODED + 1,
        5 => u64::MAX,
        6 => u64::MAX / 2 + 1,
        _ => rng.next() >> rng.below(64),
    }
}

/// Mutates the INDEX or END record of an archive (rebuilt fresh unless the
/// input already keeps its own), returning the records to frame as they are.
fn mutate_index(data: &[u8], rng: &mut Rng) -> Vec<RawRecord> {
    let mut recs = if data.starts_with(&MAGIC) && data.get(10) == Some(&KEEP_INDEX) {
        split_records(data)
    } else {
        split_records(&build_archive(&split_records(data)))
    };
    let targets: Vec<usize> = (0..recs.len())
        .filter(|&i| recs[i].kind == RecordKind::Index as u8 || recs[i].kind == RecordKind::End as u8)
        .collect();
    let Some(&i) = targets.get(rng.below(targets.len())) else {
        return recs;
    };
    let r = &mut recs[i];
    if r.kind == RecordKind::End as u8 && r.body.len() == 16 && rng.below(2) == 0 {
        // One of the two u64 fields, set to something near or extreme.
        let at = 8 * rng.below(2);
        let v = u64::from_le_bytes(r.body[at..at + 8].try_into().unwrap_or([0; 8]));
        let v = interesting(rng, v);
        r.body[at..at + 8].copy_from_slice(&v.to_le_bytes());
    } else if r.kind == RecordKind::Index as u8 && rng.below(4) != 0 {
        let mut e = split_index(&r.body);
        if !e.is_empty() {
            let j = rng.below(e.len());
            match rng.below(5) {
                0 => e[j].1 = interesting(rng, e[j].1),
                1 => e[j].2 = Some(interesting(rng, e[j].2.unwrap_or(0))),
                2 => e[j].0 = 1 + rng.below(5) as u8,
                3 => {
                    let x = e[j];
                    e.insert(rng.below(e.len() + 1), x);
                }
                _ => {
                    e.remove(j);
                }
            }
            // Keep the length field consistent with the kind, most of the time.
            if rng.below(8) != 0 {
                for x in &mut e {
                    if x.0 == RecordKind::Chunk as u8 {
                        x.2.get_or_insert(1);
                    } else {
                        x.2 = None;
                    }
                }
            }
        }
        r.body = join_index(&e);
    } else {
        mutate_bytes(&mut r.body, rng);
    }
    // A new INDEX length moves the END: point it at the INDEX again, most of the time.
    let n = recs.len();
    if recs[i].kind == RecordKind::Index as u8 && i + 2 == n && rng.below(8) != 0 {
        let index_offset = (HEADER_LEN + recs[..i].iter().map(|r| r.body.len() + 13).sum::<usize>()) as u64;
        let total = index_offset + recs[i].body.len() as u64 + 13 + END_LEN as u64;
        recs[n - 1] = RawRecord {
            kind: RecordKind::End as u8,
            body: end_body(index_offset, total).to_vec(),
        };
    }
    recs
}

/// The `structured` target's mutator: splits the input into records, mutates
/// one record body (or the record list), and writes back a well-framed archive
/// ([`build_archive`]). Falls back to libFuzzer's byte mutator when the input
/// holds no records or the result would be too long.
pub fn mutate(data: &mut [u8], size: usize, max_size: usize, seed: u32) -> usize {
    let mut rng = Rng(u64::from(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut recs: Vec<RawRecord> = split_records(&data[..size])
        .into_iter()
        .filter(|r| r.kind != RecordKind::Index as u8 && r.kind != RecordKind::End as u8)
        .collect();
    if recs.is_empty() || rng.below(20) == 0 {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    let i = rng.below(recs.len());
    match rng.below(18) {
        // Mutate a body; a CHUNK's program alone half the time (its header stays valid).
        0..=7 => {
            let r = &mut recs[i];
            let header_len = ChunkRecord::parse(&r.body)
                .ok()
                .filter(|_| r.kind == RecordKind::Chunk as u8 && rng.below(2) == 0)
                .map(|c| r.body.len() - c.program.len());
            match header_len {
                Some(h) => {
                    let mut program = r.body.split_off(h);
                    mutate_bytes(&mut program, &mut rng);
                    r.body.extend_from_slice(&program);
                    if rng.below(2) == 0 {
                        if let Some(b) = fix_chunk_header(&r.body, rng.below(4) == 0) {
                            r.body = b;
                        }
                    }
                }
                None => mutate_bytes(&mut r.body, &mut rng),
            }
        }
        // Make a CHUNK's header agree with its program.
        8 | 9 => {
            let rehash = rng.below(2) == 0;
            if let Some(b) = fix_chunk_header(&recs[i].body, rehash) {
                recs[i].body = b;
            }
        }
        // Change a record's kind.
        10 => recs[i].kind = 1 + rng.below(3) as u8,
        // Duplicate, delete or swap records.
        11 => {
            let r = recs[i].clone();
            let at = rng.below(recs.len() + 1);
            recs.insert(at, r);
        }
        12 if recs.len() > 1 => {
            recs.remove(i);
        }
        13 => {
            let j = rng.below(recs.len());
            recs.swap(i, j);
        }
        // Give a record the body of another of the same kind.
        14 => {
            let same: Vec<usize> = (0..recs.len()).filter(|&j| recs[j].kind == recs[i].kind).collect();
            let j = same[rng.below(same.len())];
            recs[i].body = recs[j].body.clone();
        }
        _ => {
            // The INDEX or END itself, framed as it is (marked to be kept).
            let mut out = frame_as_is(&mutate_index(&data[..size], &mut rng));
            out[10] = KEEP_INDEX;
            if out.len() > max_size {
                return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
            }
            data[..out.len()].copy_from_slice(&out);
            return out.len();
        }
    }
    let out = build_archive(&recs);
    if out.len() > max_size {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    data[..out.len()].copy_from_slice(&out);
    out.len()
}
