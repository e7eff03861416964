//! `StreamDecoder::next_event_ahead` (chunks started ahead, as `brevis
//! decompress --threads N` does) must give exactly the events and the errors of
//! `next_event`, on whole, truncated and damaged archives, however the input is
//! pushed and whenever the chunks finish; and reading input in place
//! (`StreamDecoder::fill`, as the CLI does) is pushing it. The library's
//! in-memory decode on several threads (`decode_all_threads`,
//! `Archive::read_file_threads`) must give what one thread gives, files or
//! error.

use std::cell::RefCell;
use std::fs;
use std::path::Path;
use std::rc::Rc;

use brevis_decoder::format::archive::{open_record, ChunkRecord, RecordHead, HEADER_LEN};
use brevis_decoder::format::program::Limits;
use brevis_decoder::format::stream::LeBytes;
use brevis_decoder::format::FormatError;
use brevis_decoder::{
    decode_all, decode_all_threads, decode_chunk_record, Ahead, Archive, Blake3Tree, ChunkPlace, DecodeError,
    DecodeLimits, DecodedChunk, DigestKind, ErrorKind, Event, FileHasher, PendingChunk, Piece, StreamDecoder, Subtrees,
    WrittenOutput,
};
use brevis_encoder::synth::CandidateSearch;
use brevis_encoder::{compress_files, CompressOptions, InputFile};
use brevis_tests::{safetensors_file, tensor_bytes};
use safetensors::tensor::Dtype;

/// An archive whose segments have many small chunks.
fn many_chunks() -> Vec<u8> {
    many_chunks_hashed(DigestKind::Sha256)
}

/// [`many_chunks`] with file digests of `digest`.
fn many_chunks_hashed(digest: DigestKind) -> Vec<u8> {
    let file = safetensors_file(&[
        ("w", Dtype::BF16, vec![64, 64], tensor_bytes(Dtype::BF16, 4096, 1)),
        ("v", Dtype::F32, vec![1024], tensor_bytes(Dtype::F32, 1024, 2)),
        ("u", Dtype::U8, vec![3000], tensor_bytes(Dtype::U8, 3000, 3)),
    ]);
    let inputs = [
        InputFile {
            archive_path: "m.safetensors".into(),
            data: &file,
        },
        InputFile {
            archive_path: "notes.txt".into(),
            data: &b"some text, repeated; ".repeat(200),
        },
    ];
    let options = CompressOptions {
        chunk_bytes: 1024,
        digest,
        ..CompressOptions::default()
    };
    let (archive, _, _) =
        compress_files(Vec::new(), &inputs, &CandidateSearch::default(), &options, &|_| {}).expect("compress");
    archive
}

/// At most `max` chunks pending, whatever they declare.
fn chunks(max: usize) -> Ahead {
    Ahead {
        max_chunks: max,
        workers: 1,
        min_bytes_per_worker: u64::MAX,
    }
}

/// Decodes at once (a pending chunk that is always ready).
fn sequential(record: &[u8], limits: &Limits, _: Option<ChunkPlace>) -> Box<dyn PendingChunk> {
    Box::new(decode_chunk_record(record, limits))
}

/// The decoded length a chunk record declares.
fn declared(record: &[u8]) -> u64 {
    let (_, body) = open_record(record).unwrap();
    ChunkRecord::parse(body).unwrap().decoded_len
}

/// Every event (and the final error, if any) pushing `piece` bytes at a time.
fn events(archive: &[u8], piece: usize, ahead: Option<usize>) -> (Vec<Event>, Option<DecodeError>) {
    let mut dec = StreamDecoder::new(DecodeLimits::default());
    let mut out = Vec::new();
    for p in archive.chunks(piece.max(1)) {
        dec.push(p);
        loop {
            let ev = match ahead {
                None => dec.next_event(),
                Some(max) => dec.next_event_ahead(chunks(max), &mut sequential, true),
            };
            match ev {
                Ok(Some(ev)) => out.push(ev),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    let end = dec.finish().err();
    (out, end)
}

/// Every event (and the final error, if any) reading the archive with
/// `StreamDecoder::fill`: at most `max` bytes a call, the reader giving `short`
/// bytes at most, and failing (once) every third call.
fn filled_events(archive: &[u8], max: usize, short: usize) -> (Vec<Event>, Option<DecodeError>) {
    let mut dec = StreamDecoder::new(DecodeLimits::default());
    let mut out = Vec::new();
    let (mut at, mut calls) = (0, 0);
    loop {
        calls += 1;
        let read = dec.fill(max, |b| {
            assert_eq!(b.len(), max, "the space asked for");
            if calls % 3 == 0 {
                // Scribbled on, then failed: none of it may count as input.
                b.fill(0xee);
                return Err("a failed read");
            }
            let n = b.len().min(short).min(archive.len() - at);
            b[..n].copy_from_slice(&archive[at..at + n]);
            Ok(n)
        });
        match read {
            Err(_) => continue,
            Ok(0) => break,
            Ok(n) => at += n,
        }
        loop {
            match dec.next_event() {
                Ok(Some(ev)) => out.push(ev),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    let end = dec.finish().err();
    (out, end)
}

#[test]
fn filling_in_place_is_pushing() {
    let archive = many_chunks();
    let want = events(&archive, archive.len(), None);
    assert!(want.1.is_none(), "{:?}", want.1);
    for (max, short) in [(1 << 20, usize::MAX), (4096, 4096), (1000, 333), (7, 7)] {
        assert_eq!(filled_events(&archive, max, short), want, "max {max}, reads of {short}");
    }
    // A truncated archive fails as it does when pushed.
    let cut = &archive[..archive.len() - 40];
    assert_eq!(filled_events(cut, 1000, 333), events(cut, cut.len(), None));
}

/// Every event (and the final error, if any) with `archive[..split]` pushed and
/// the rest shared (`StreamDecoder::share_input`); chunks are started ahead (at
/// most `ahead`), and with all of it shared, their bodies must lie in it (the
/// copies' sources' too, started again: one piece of a copy may take several).
fn shared_events(archive: &[u8], split: usize, ahead: usize) -> (Vec<Event>, Option<DecodeError>) {
    let shared: std::sync::Arc<Vec<u8>> = std::sync::Arc::new(archive[split..].to_vec());
    let (lo, hi) = (shared.as_ptr() as usize, shared.as_ptr() as usize + shared.len());
    let (mut in_shared, mut starts) = (0, 0);
    let mut start = |record: &[u8], limits: &Limits, place: Option<ChunkPlace>| {
        starts += 1;
        let at = record.as_ptr() as usize;
        if at >= lo && at + record.len() <= hi {
            in_shared += 1;
        }
        sequential(record, limits, place)
    };
    let mut dec = StreamDecoder::new(DecodeLimits::default());
    let mut out = Vec::new();
    let mut drain = |dec: &mut StreamDecoder, out: &mut Vec<Event>| loop {
        match dec.next_event_ahead(chunks(ahead), &mut start, true) {
            Ok(Some(ev)) => out.push(ev),
            Ok(None) => return None,
            Err(e) => return Some(e),
        }
    };
    dec.push(&archive[..split]);
    if let Some(e) = drain(&mut dec, &mut out) {
        return (out, Some(e));
    }
    dec.share_input(shared.clone());
    if let Some(e) = drain(&mut dec, &mut out) {
        return (out, Some(e));
    }
    let end = dec.finish().err();
    let data = out.iter().filter(|e| matches!(e, Event::Data(_))).count();
    if split == 0 && end.is_none() {
        assert_eq!(in_shared, starts, "every chunk record a slice of the shared input");
        assert!(starts >= data, "every chunk started ahead: {starts} of {data}");
    }
    (out, end)
}

#[test]
fn shared_input_is_pushing() {
    let archive = many_chunks();
    let want = events(&archive, archive.len(), None);
    assert!(want.1.is_none(), "{:?}", want.1);
    for ahead in [1, 4] {
        assert_eq!(shared_events(&archive, 0, ahead), want, "all shared");
        // Shared after pushed bytes that are not consumed: copied after them.
        assert_eq!(shared_events(&archive, 3, ahead), want, "a header's part pushed");
        let mid = archive.len() / 2;
        assert_eq!(shared_events(&archive, mid, ahead), want, "half pushed");
    }
    // Pushed after shared input: what is left of it is copied, then appended to.
    let mid = archive.len() / 2;
    let mut dec = StreamDecoder::new(DecodeLimits::default());
    dec.share_input(std::sync::Arc::new(archive[..mid].to_vec()));
    let mut got = Vec::new();
    while let Some(ev) = dec.next_event().unwrap() {
        got.push(ev);
    }
    assert!(!got.is_empty() && dec.buffered() > 0, "stops within a record");
    dec.push(&archive[mid..]);
    while let Some(ev) = dec.next_event().unwrap() {
        got.push(ev);
    }
    assert_eq!((got, dec.finish().err()), want);
    // Damaged and truncated shared input fails as it does pushed.
    let step = (archive.len() / 60).max(1);
    for at in (0..archive.len()).step_by(step) {
        let mut bad = archive.clone();
        bad[at] ^= 0x5a;
        assert_eq!(shared_events(&bad, 0, 4), events(&bad, bad.len(), None), "byte {at}");
        let cut = &archive[..at];
        assert_eq!(shared_events(cut, 0, 4), events(cut, cut.len(), None), "prefix {at}");
    }
}

/// Two identical files of many small chunks and a tied tensor: segments
/// retained for later copies, each of many chunk records.
fn dedup_many_chunks() -> Vec<u8> {
    let w = tensor_bytes(Dtype::BF16, 4096, 1);
    let file = safetensors_file(&[
        ("w", Dtype::BF16, vec![64, 64], w.clone()),
        ("v", Dtype::F32, vec![1024], tensor_bytes(Dtype::F32, 1024, 2)),
        ("tied", Dtype::BF16, vec![64, 64], w),
    ]);
    twice(&file, 1024, &CandidateSearch::default())
}

/// `file` as `a/m.safetensors` and `b/m.safetensors` in one archive of
/// `chunk_bytes` chunks: the second all copies of the first.
fn twice(file: &[u8], chunk_bytes: usize, search: &CandidateSearch) -> Vec<u8> {
    let inputs = ["a", "b"].map(|dir| InputFile {
        archive_path: format!("{dir}/m.safetensors"),
        data: file,
    });
    let options = CompressOptions {
        chunk_bytes,
        ..CompressOptions::default()
    };
    compress_files(Vec::new(), &inputs, search, &options, &|_| {})
        .expect("compress")
        .0
}

#[test]
fn shared_input_keeps_retained_segments_as_records_and_decodes_copies_again() {
    let archive = dedup_many_chunks();
    let want = events(&archive, archive.len(), None);
    assert!(want.1.is_none(), "{:?}", want.1);
    // Pushed, the copies' sources are held as bytes.
    let mut pushed = StreamDecoder::new(DecodeLimits::default());
    pushed.push(&archive);
    let mut held = 0;
    while pushed.next_event().unwrap().is_some() {
        held = held.max(pushed.retained_bytes());
    }
    assert!(held > 8192, "the archive retains segments of several chunks: {held}");

    // Shared, they are held as their records' places and decoded again: the
    // same events, with chunks started ahead or not, and no bytes held.
    for ahead in [0, 1, 4] {
        if ahead > 0 {
            assert_eq!(shared_events(&archive, 0, ahead), want, "ahead {ahead}");
        }
        let mut dec = StreamDecoder::new(DecodeLimits::default());
        dec.share_input(std::sync::Arc::new(archive.clone()));
        let mut got = Vec::new();
        while let Some(ev) = dec.next_event_ahead(chunks(ahead), &mut sequential, true).unwrap() {
            assert_eq!(dec.retained_bytes(), 0, "ahead {ahead}");
            got.push(ev);
        }
        dec.finish().unwrap();
        assert_eq!((got, None), want);
        assert!(
            dec.reread_bytes() > 4096,
            "copies read their sources again: {}",
            dec.reread_bytes()
        );
    }

    // What is kept as records holds no bytes, so it does not count against
    // the limit on bytes held: an archive refused pushed under a small limit
    // decodes shared.
    let small = DecodeLimits {
        max_retained_bytes: 99,
        ..DecodeLimits::default()
    };
    let mut pushed = StreamDecoder::new(small);
    pushed.push(&archive);
    let refused = loop {
        match pushed.next_event() {
            Ok(Some(_)) => {}
            Ok(None) => break pushed.finish().expect_err("refused"),
            Err(e) => break e,
        }
    };
    assert!(refused.to_string().contains("retained bytes"), "{refused}");
    let mut dec = StreamDecoder::new(small);
    dec.share_input(std::sync::Arc::new(archive.clone()));
    let mut got = Vec::new();
    while let Some(ev) = dec.next_event().unwrap() {
        got.push(ev);
    }
    assert_eq!((got, dec.finish().err()), want);

    // Input pushed after the shared part, within a retained segment or
    // anywhere else: the segment's bytes are kept after all, the same events.
    for cut in (1..16).map(|i| archive.len() * i / 16) {
        let mut dec = StreamDecoder::new(DecodeLimits::default());
        dec.share_input(std::sync::Arc::new(archive[..cut].to_vec()));
        let mut got = Vec::new();
        while let Some(ev) = dec.next_event().unwrap() {
            got.push(ev);
        }
        dec.push(&archive[cut..]);
        while let Some(ev) = dec.next_event().unwrap() {
            got.push(ev);
        }
        assert_eq!((got, dec.finish().err()), want, "shared up to {cut}");
    }

    // Damaged and truncated, it fails as pushed.
    for at in (HEADER_LEN..archive.len()).step_by(97) {
        let mut bad = archive.clone();
        bad[at] ^= 0x5a;
        assert_eq!(shared_events(&bad, 0, 4), events(&bad, bad.len(), None), "byte {at}");
        let cut = &archive[..at];
        assert_eq!(shared_events(cut, 0, 4), events(cut, cut.len(), None), "prefix {at}");
    }
}

/// What a caller wrote from the events, by file, for the decoder to read copies
/// back from ([`WrittenOutput`]).
#[derive(Default)]
struct Written {
    files: Vec<Vec<u8>>,
    /// Reads asked for.
    reads: usize,
    /// A read asked for bytes not written yet.
    beyond: bool,
}

/// A [`WrittenOutput`] over [`Written`]: keeps every file or none, answers the
/// first `succeed` reads (then fails each), bytes flipped if `corrupt`.
struct WrittenFiles {
    written: Rc<RefCell<Written>>,
    keep: bool,
    succeed: usize,
    corrupt: bool,
}

impl WrittenFiles {
    fn new(keep: bool, succeed: usize, corrupt: bool) -> Self {
        WrittenFiles {
            written: Rc::default(),
            keep,
            succeed,
            corrupt,
        }
    }
}

impl WrittenOutput for WrittenFiles {
    fn keep(&mut self, file: u64) -> bool {
        // Asked of the file being written, whose start was reported.
        assert_eq!(file as usize + 1, self.written.borrow().files.len());
        self.keep
    }

    fn read_at(&mut self, file: u64, offset: u64, buf: &mut [u8]) -> bool {
        let mut w = self.written.borrow_mut();
        w.reads += 1;
        if w.reads > self.succeed {
            return false;
        }
        let at = offset as usize..offset as usize + buf.len();
        let Some(bytes) = w.files.get(file as usize).and_then(|f| f.get(at)) else {
            w.beyond = true;
            return false;
        };
        buf.copy_from_slice(bytes);
        if self.corrupt {
            buf[buf.len() / 2] ^= 1;
        }
        true
    }
}

/// What [`read_back_events`] saw: the events, the error if any, the archive
/// bytes read again, the reads asked for and the most bytes held at once.
struct ReadBack {
    events: Vec<Event>,
    end: Option<DecodeError>,
    reread: u64,
    reads: usize,
    held: u64,
}

/// Decodes `archive` (shared, or pushed whole) under `limits` with chunks
/// started `ahead`, its copies read back through `output` from the events
/// written as they come.
fn read_back_events(
    archive: &[u8],
    shared: bool,
    ahead: usize,
    limits: DecodeLimits,
    output: WrittenFiles,
) -> ReadBack {
    let written = output.written.clone();
    let mut dec = StreamDecoder::new(limits);
    if shared {
        dec.share_input(std::sync::Arc::new(archive.to_vec()));
    } else {
        dec.push(archive);
    }
    dec.read_copies_back(Box::new(output));
    let mut out = Vec::new();
    let mut held = 0;
    let end = loop {
        match dec.next_event_ahead(chunks(ahead), &mut sequential, true) {
            Ok(Some(ev)) => {
                held = held.max(dec.retained_bytes());
                let mut w = written.borrow_mut();
                match &ev {
                    Event::FileStart { .. } => w.files.push(Vec::new()),
                    Event::Data(d) => w.files.last_mut().unwrap().extend_from_slice(d),
                    _ => {}
                }
                out.push(ev);
            }
            Ok(None) => break dec.finish().err(),
            Err(e) => break Some(e),
        }
    };
    let w = written.borrow();
    assert!(!w.beyond, "a read asked for bytes not written yet");
    ReadBack {
        events: out,
        end,
        reread: dec.reread_bytes(),
        reads: w.reads,
        held,
    }
}

/// Two files, each a 5 MiB tensor and a copy of it: copies of more than one
/// 4 MiB piece, whose 3 MiB chunks do not end where the pieces do.
fn dedup_large_copies() -> Vec<u8> {
    let w = tensor_bytes(Dtype::I32, 5 << 18, 1);
    let file = safetensors_file(&[
        ("w", Dtype::I32, vec![1280, 1024], w.clone()),
        ("tied", Dtype::I32, vec![1280, 1024], w),
    ]);
    twice(&file, 3 << 20, &CandidateSearch::with_effort(0))
}

#[test]
fn copies_read_back_from_the_written_output_give_the_same_events() {
    let limits = DecodeLimits::default();
    let ends = |out: &[Event]| out.iter().filter(|e| matches!(e, Event::FileEnd { .. })).count();
    for archive in [dedup_many_chunks(), dedup_large_copies()] {
        let want = events(&archive, archive.len(), None);
        assert!(want.1.is_none(), "{:?}", want.1);
        // Read back: the same events, no bytes held, no source decoded again,
        // the input shared or pushed.
        for (shared, ahead) in [(true, 0), (true, 1), (true, 4), (false, 0), (false, 4)] {
            let got = read_back_events(
                &archive,
                shared,
                ahead,
                limits,
                WrittenFiles::new(true, usize::MAX, false),
            );
            assert_eq!((got.events, got.end), want, "shared {shared}, ahead {ahead}");
            assert_eq!((got.reread, got.held), (0, 0), "shared {shared}, ahead {ahead}");
            assert!(got.reads >= 2, "every copy read back: {} reads", got.reads);
        }
        // Shared input, files not kept, or reads failing from the first or a
        // later one: the rest of each copy is decoded again, the same events.
        for (keep, succeed) in [(false, usize::MAX), (true, 0), (true, 1), (true, 2)] {
            for ahead in [0, 4] {
                let output = WrittenFiles::new(keep, succeed, false);
                let got = read_back_events(&archive, true, ahead, limits, output);
                let case = format!("keep {keep}, reads answered {succeed}, ahead {ahead}");
                assert_eq!((got.events, got.end), want, "{case}");
                assert!(got.reread > 0 && got.held == 0, "{case}");
            }
        }
        // Pushed input: files not kept, their sources are held; a read that
        // fails leaves nothing to make the copy from, a clear error.
        let got = read_back_events(&archive, false, 4, limits, WrittenFiles::new(false, usize::MAX, false));
        assert_eq!((got.events, got.end), want);
        assert!(got.held > 0);
        let got = read_back_events(&archive, false, 4, limits, WrittenFiles::new(true, 1, false));
        let err = got.end.expect("a copy not read back fails");
        assert!(err.to_string().contains("could not be read back"), "{err}");
        assert_eq!(got.events[..], want.0[..got.events.len()], "the events before it");
        // Nothing held, so a limit on bytes held does not bind.
        let small = DecodeLimits {
            max_retained_bytes: 99,
            ..limits
        };
        let got = read_back_events(&archive, false, 0, small, WrittenFiles::new(true, usize::MAX, false));
        assert_eq!((got.events, got.end), want);
        // Bytes read back wrong fail the copy's file (the first file holds a
        // copy), never pass as the copy.
        for shared in [true, false] {
            let got = read_back_events(&archive, shared, 4, limits, WrittenFiles::new(true, usize::MAX, true));
            let err = got.end.expect("a bad read back fails");
            assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
            assert!(err.to_string().contains("mismatch"), "{err}");
            assert_eq!(ends(&got.events), 0, "shared {shared}");
        }
    }
}

#[test]
fn decoding_ahead_changes_nothing() {
    let archive = many_chunks();
    let (want, err) = events(&archive, archive.len(), None);
    assert!(err.is_none(), "{err:?}");
    let data = want.iter().filter(|e| matches!(e, Event::Data(_))).count();
    assert!(data > 20, "only {data} chunks");
    for piece in [archive.len(), 100_000, 5000, 777] {
        for ahead in [2, 3, 8, 1000] {
            assert_eq!(
                events(&archive, piece, Some(ahead)),
                (want.clone(), None),
                "{piece} {ahead}"
            );
        }
    }
    // A byte budget bounds what is pending too.
    for min_bytes_per_worker in [0, 1, 1500, 5000] {
        for workers in [0, 1, 3] {
            let ahead = Ahead {
                max_chunks: 100,
                workers,
                min_bytes_per_worker,
            };
            let mut dec = StreamDecoder::new(DecodeLimits::default());
            dec.push(&archive);
            let mut got = Vec::new();
            while let Some(ev) = dec.next_event_ahead(ahead, &mut sequential, true).unwrap() {
                got.push(ev);
            }
            assert_eq!(got, want, "{ahead:?}");
        }
    }
    let golden = fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/v1-mixed.brv")).unwrap();
    let want = events(&golden, golden.len(), None);
    assert!(want.1.is_none());
    assert_eq!(events(&golden, golden.len(), Some(4)), want);
}

#[test]
fn damaged_and_truncated_archives_fail_the_same_way() {
    let archive = many_chunks();
    let step = (archive.len() / 300).max(1);
    for at in (0..archive.len()).step_by(step) {
        let mut bad = archive.clone();
        bad[at] ^= 0x5a;
        assert_eq!(
            events(&bad, bad.len(), Some(4)),
            events(&bad, bad.len(), None),
            "byte {at}"
        );
        let cut = &archive[..at];
        assert_eq!(events(cut, 4096, Some(4)), events(cut, 4096, None), "prefix {at}");
    }
}

/// A chunk that says it is not ready the first `polls` times it is asked, and
/// counts itself out of `pending` when waited for.
struct Slow {
    result: Result<LeBytes, FormatError>,
    polls: usize,
    pending: std::rc::Rc<std::cell::Cell<usize>>,
}

impl PendingChunk for Slow {
    fn is_ready(&mut self) -> bool {
        self.polls = self.polls.saturating_sub(1);
        self.polls == 0
    }

    fn wait(self: Box<Self>) -> Result<DecodedChunk, FormatError> {
        self.pending.set(self.pending.get() - 1);
        self.result.map(DecodedChunk::from)
    }
}

/// Without waiting, a chunk that is not ready yet gives `Ok(None)` and the
/// caller pushes more input (or asks again); the events stay the same, and no
/// more than `max_chunks` are ever pending.
#[test]
fn chunks_not_ready_let_the_caller_read_on_and_stay_bounded() {
    let archive = many_chunks();
    let want = events(&archive, archive.len(), None);
    for (piece, max, polls) in [(archive.len(), 3, 2), (999, 2, 3), (5000, 5, 1), (64, 1, 4)] {
        let pending = std::rc::Rc::new(std::cell::Cell::new(0usize));
        let most = std::rc::Rc::new(std::cell::Cell::new(0usize));
        let mut start = |record: &[u8], limits: &Limits, _: Option<ChunkPlace>| -> Box<dyn PendingChunk> {
            pending.set(pending.get() + 1);
            most.set(most.get().max(pending.get()));
            Box::new(Slow {
                result: decode_chunk_record(record, limits),
                polls,
                pending: pending.clone(),
            })
        };
        let mut dec = StreamDecoder::new(DecodeLimits::default());
        let mut input = archive.chunks(piece);
        let (mut got, mut nones) = (Vec::new(), 0);
        loop {
            let eof = input.len() == 0;
            match dec.next_event_ahead(chunks(max), &mut start, eof).unwrap() {
                Some(ev) => got.push(ev),
                None if eof => break,
                None => {
                    nones += 1;
                    if let Some(p) = input.next() {
                        dec.push(p);
                    }
                }
            }
        }
        dec.finish().unwrap();
        assert_eq!((got, None), want, "{piece} {max} {polls}");
        assert!(most.get() <= max, "{} pending with max {max}", most.get());
        assert!(most.get() >= 1);
        assert!(nones > 0);
    }
}

/// Chunks start while no more than `workers` are pending (one each and a
/// spare), or the pending ones declare less than `workers` × the larger of
/// `min_bytes_per_worker` and the largest chunk started or this one, and never
/// beyond `max_chunks`; the events stay the same.
#[test]
fn what_starts_ahead_follows_the_largest_chunk() {
    let archive = many_chunks();
    let want = events(&archive, archive.len(), None);
    // Every chunk's declared size, in archive order.
    let all = {
        let mut sizes = Vec::new();
        let mut dec = StreamDecoder::new(DecodeLimits::default());
        dec.push(&archive);
        let mut count = |record: &[u8], limits: &Limits, place: Option<ChunkPlace>| {
            sizes.push(declared(record));
            sequential(record, limits, place)
        };
        while dec
            .next_event_ahead(chunks(usize::MAX), &mut count, true)
            .unwrap()
            .is_some()
        {}
        sizes
    };
    assert!(all.iter().any(|&n| n != all[0]), "chunks of one size: {all:?}");
    for (workers, min_bytes_per_worker, max_chunks) in [
        (0, 0, 5),
        (1, 0, 5),
        (2, 0, 5),
        (3, 1, 50),
        (2, 5000, 50),
        (1, u64::MAX, 5),
    ] {
        let ahead = Ahead {
            max_chunks,
            workers,
            min_bytes_per_worker,
        };
        // Whether a chunk of `next` bytes starts beside those `started`.
        let rule = |started: &[u64], next: u64| {
            let largest = started.iter().copied().fold(next, u64::max);
            started.len() < max_chunks
                && (started.len() <= workers
                    || started.iter().sum::<u64>() < workers as u64 * min_bytes_per_worker.max(largest))
        };
        let pending = std::rc::Rc::new(std::cell::Cell::new(0usize));
        let sizes = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut start = |record: &[u8], limits: &Limits, _: Option<ChunkPlace>| -> Box<dyn PendingChunk> {
            pending.set(pending.get() + 1);
            sizes.borrow_mut().push(declared(record));
            Box::new(Slow {
                result: decode_chunk_record(record, limits),
                polls: usize::MAX,
                pending: pending.clone(),
            })
        };
        let mut dec = StreamDecoder::new(DecodeLimits::default());
        dec.push(&archive);
        let mut got = Vec::new();
        // Not waiting: the first chunk is never ready, so only what `ahead` allows starts.
        while let Some(ev) = dec.next_event_ahead(ahead, &mut start, false).unwrap() {
            got.push(ev);
        }
        let started = sizes.borrow().clone();
        assert_eq!(started[..], all[..started.len()], "{ahead:?}");
        for k in 0..started.len() {
            assert!(rule(&started[..k], started[k]), "{ahead:?}: chunk {k} of {started:?}");
        }
        if let Some(&next) = all.get(started.len()) {
            assert!(!rule(&started, next), "{ahead:?}: {started:?} and not {next}");
        }
        let largest = started.iter().copied().max().unwrap_or(0);
        assert_eq!(
            dec.ahead_budget(&ahead),
            (workers as u64).saturating_mul(min_bytes_per_worker.max(largest)),
            "{ahead:?}"
        );
        while let Some(ev) = dec.next_event_ahead(ahead, &mut start, true).unwrap() {
            got.push(ev);
        }
        dec.finish().unwrap();
        assert_eq!((got, None), want, "{ahead:?}");
        let n = started.len();
        // One chunk per worker and a spare at least, however large.
        assert!(n >= (workers + 1).min(max_chunks), "{ahead:?}: {started:?}");
    }
}

/// Each file's digest kind and bytes, as a [`Recorder`] was given them.
type Recorded = std::rc::Rc<std::cell::RefCell<Vec<(DigestKind, Vec<u8>)>>>;

/// A [`FileHasher`] that keeps what it is given and answers with canned digests.
struct Recorder {
    files: Recorded,
    digests: std::vec::IntoIter<[u8; 32]>,
}

impl FileHasher for Recorder {
    fn start(&mut self, kind: DigestKind, _size: u64) {
        self.files.borrow_mut().push((kind, Vec::new()));
    }

    fn update(&mut self, data: &Piece) {
        // Bytes before any `start` land nowhere and fail the comparison below.
        if let Some((_, file)) = self.files.borrow_mut().last_mut() {
            file.extend_from_slice(data);
        }
    }

    fn finish(&mut self) -> [u8; 32] {
        self.digests.next().unwrap_or([0; 32])
    }
}

/// A caller's hasher (`brevis` hashes on a thread of its own) gets every file's
/// bytes, in order, and its digest is what the archive is checked against.
#[test]
fn a_file_hasher_sees_every_byte_and_decides_the_check() {
    let archive = many_chunks();
    let (events, err) = events(&archive, archive.len(), None);
    assert!(err.is_none());
    let mut want: Vec<(DigestKind, Vec<u8>)> = Vec::new();
    let mut digests = Vec::new();
    for ev in &events {
        match ev {
            Event::FileStart { .. } => want.push((DigestKind::Sha256, Vec::new())),
            Event::Data(d) => want.last_mut().unwrap().1.extend_from_slice(d),
            Event::FileEnd { digest, .. } => digests.push(*digest),
            _ => {}
        }
    }
    assert!(want.len() >= 2);
    for wrong in [false, true] {
        let files = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut canned = digests.clone();
        if wrong {
            canned[1][0] ^= 1;
        }
        let mut dec = StreamDecoder::new(DecodeLimits::default());
        dec.set_file_hasher(Box::new(Recorder {
            files: files.clone(),
            digests: canned.into_iter(),
        }));
        dec.push(&archive);
        let mut got = Vec::new();
        let err = loop {
            match dec.next_event_ahead(chunks(8), &mut sequential, true) {
                Ok(Some(ev)) => got.push(ev),
                Ok(None) => break None,
                Err(e) => break Some(e),
            }
        };
        if wrong {
            // The first file passes; the second fails its check, with no FileEnd.
            let e = err.expect("a wrong digest is an error");
            assert!(e.to_string().contains("SHA-256"), "{e}");
            let ends = got.iter().filter(|e| matches!(e, Event::FileEnd { .. })).count();
            assert_eq!(ends, 1);
        } else {
            assert!(err.is_none());
            assert_eq!(got, events);
            assert_eq!(*files.borrow(), want);
        }
    }
}

/// What the hashing thread holds is the event's buffer itself: a clone shares
/// it, and taking the bytes back copies only while a clone is still held.
#[test]
fn pieces_are_shared_not_copied() {
    let bytes = vec![7u8; 1000];
    let at = bytes.as_ptr();
    let piece = Piece::new(bytes);
    let held = piece.clone();
    assert_eq!(held.as_ptr(), at, "a clone shares the bytes");
    let copied = piece.into_vec();
    assert_ne!(copied.as_ptr(), at, "still held elsewhere: copied");
    assert_eq!(copied, vec![7u8; 1000]);
    let taken = held.into_vec();
    assert_eq!(taken.as_ptr(), at, "the last holder takes the buffer itself");
}

/// Each chunk started ahead: the place it was given and its bytes.
type Started = std::cell::RefCell<Vec<(Option<ChunkPlace>, Vec<u8>)>>;

/// Decodes at once and, given a place, hashes the chunk's BLAKE3 subtrees
/// there (as `brevis`'s workers do); `places` records what it was given.
fn hashing(places: &Started) -> impl FnMut(&[u8], &Limits, Option<ChunkPlace>) -> Box<dyn PendingChunk> + '_ {
    move |record, limits, place| {
        let decoded = decode_chunk_record(record, limits).map(|bytes| DecodedChunk {
            subtrees: place
                .filter(|p| p.digest == DigestKind::Blake3)
                .map(|p| Subtrees::hash(&bytes, p)),
            bytes,
        });
        let bytes = decoded.as_ref().map_or(Vec::new(), |d| d.bytes.to_vec());
        places.borrow_mut().push((place, bytes));
        Box::new(decoded)
    }
}

/// The digests a [`Blake3Tree`] hasher computes, and the bytes its subtrees covered.
struct TreeHasher {
    tree: Blake3Tree,
    covered: std::rc::Rc<std::cell::Cell<u64>>,
}

impl FileHasher for TreeHasher {
    fn start(&mut self, kind: DigestKind, size: u64) {
        assert_eq!(kind, DigestKind::Blake3);
        self.tree = Blake3Tree::new(size);
    }

    fn update(&mut self, data: &Piece) {
        self.tree.update(data);
    }

    fn update_with_subtrees(&mut self, data: &Piece, subtrees: Subtrees) {
        self.covered.set(self.covered.get() + subtrees.covered());
        self.tree.update_with_subtrees(data, &subtrees);
    }

    fn finish(&mut self) -> [u8; 32] {
        self.tree.finalize()
    }
}

/// In BLAKE3 and XXH3-128 archives each chunk started ahead gets where its
/// bytes go: its file's number, its offset there, and the digest (none in
/// SHA-256 archives); in a BLAKE3 archive the subtrees hashed there, merged by
/// a [`Blake3Tree`], give every file's digest (the decoder checks it), and the
/// events are those of the one-thread decoder, however the input comes.
#[test]
fn chunks_hashed_where_decoded_give_the_files_digests() {
    for kind in DigestKind::ALL {
        let archive = many_chunks_hashed(kind);
        let want = events(&archive, archive.len(), None);
        assert!(want.1.is_none(), "{:?}", want.1);
        // Where each chunk's bytes go, from the events.
        let mut truth = Vec::new();
        let (mut file, mut at, mut size) = (None, 0u64, 0u64);
        for ev in &want.0 {
            match ev {
                Event::FileStart { size: s, .. } => {
                    file = Some(file.map_or(0, |f: u64| f + 1));
                    (at, size) = (0, *s);
                }
                Event::Data(d) => {
                    let place = ChunkPlace {
                        file: file.expect("a file started"),
                        file_offset: at,
                        file_size: size,
                        digest: kind,
                    };
                    truth.push((place, d.to_vec()));
                    at += d.len() as u64;
                }
                _ => {}
            }
        }
        for piece in [archive.len(), 3000, 777] {
            let places = std::cell::RefCell::new(Vec::new());
            let covered = std::rc::Rc::new(std::cell::Cell::new(0));
            let mut dec = StreamDecoder::new(DecodeLimits::default());
            if kind == DigestKind::Blake3 {
                dec.set_file_hasher(Box::new(TreeHasher {
                    tree: Blake3Tree::new(0),
                    covered: covered.clone(),
                }));
            }
            let mut got = Vec::new();
            {
                let mut start = hashing(&places);
                for p in archive.chunks(piece) {
                    dec.push(p);
                    while let Some(ev) = dec.next_event_ahead(chunks(3), &mut start, true).unwrap() {
                        got.push(ev);
                    }
                }
            }
            dec.finish().unwrap();
            assert_eq!((got, None), want, "{kind:?}, pieces of {piece}");
            let started = places.into_inner();
            assert!(started.len() > 20, "{} chunks started ahead", started.len());
            match kind {
                DigestKind::Sha256 => assert!(started.iter().all(|(place, _)| place.is_none())),
                DigestKind::Blake3 | DigestKind::Xxh3 => {
                    // The chunks started ahead are some of the archive's, in
                    // order (the others decode in place), each with its place:
                    // its file's number, where it goes there, and the digest.
                    let mut rest = truth.iter();
                    for (place, bytes) in &started {
                        let place = place.expect("a place in a BLAKE3 or XXH3-128 archive");
                        assert!(
                            rest.any(|(p, b)| *p == place && b == bytes),
                            "{place:?} is not the place of the next chunks"
                        );
                    }
                    // Both files have chunks started ahead.
                    let files: std::collections::BTreeSet<u64> =
                        started.iter().filter_map(|(p, _)| p.map(|p| p.file)).collect();
                    assert_eq!(files.len(), 2, "{kind:?}, pieces of {piece}: files {files:?}");
                    if kind == DigestKind::Blake3 {
                        assert!(covered.get() > 0, "no subtree used");
                    }
                }
            }
        }
    }
}

/// `record_remaining` gives the bytes that complete the first record not wholly
/// buffered, once its length is: reads of that many (at least `min`) end where
/// records end, leave nothing buffered once the decoder has caught up, and give
/// the events of any other reads.
#[test]
fn reads_can_stop_where_records_end() {
    let archive = many_chunks();
    let want = events(&archive, archive.len(), None);
    // Where records end, walking their heads.
    let mut ends = std::collections::BTreeSet::new();
    let mut at = HEADER_LEN;
    while at < archive.len() {
        at += RecordHead::parse(&archive[at..]).unwrap().total_len();
        ends.insert(at);
    }
    assert_eq!(at, archive.len());
    assert!(ends.len() > 20, "{} records", ends.len());
    for min in [1, 6, 100, 4096] {
        let mut dec = StreamDecoder::new(DecodeLimits::default());
        let (mut at, mut got, mut exact) = (0, Vec::new(), 0);
        while at < archive.len() {
            let remaining = dec.record_remaining();
            if let Some(r) = remaining {
                assert!(ends.contains(&(at + r)), "min {min}: {at} + {r} is not a record's end");
                exact += 1;
            } else {
                // Not even the next record's length is buffered.
                let head = ends.range(..=at).next_back().copied().unwrap_or(0).max(HEADER_LEN);
                assert!(at < head + 5, "min {min}: a head is buffered at {at}");
            }
            let n = remaining.map_or(min, |r| r.max(min)).min(archive.len() - at);
            dec.push(&archive[at..at + n]);
            at += n;
            while let Some(ev) = dec.next_event().unwrap() {
                got.push(ev);
            }
            if min == 1 && remaining.is_some() {
                assert_eq!(dec.buffered(), 0, "a whole record read and consumed");
            }
        }
        assert_eq!(dec.record_remaining(), None, "nothing after the END record");
        dec.finish().unwrap();
        assert_eq!((got, None), want, "min {min}");
        // (With 4 KiB reads at least, these small records are mostly read whole.)
        if min <= 100 {
            assert!(exact > 10, "min {min}: {exact} reads to a record's end");
        }
    }
}

#[test]
fn decoding_in_memory_on_threads_changes_nothing() {
    let golden = fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/v1-mixed.brv")).unwrap();
    let mut archives = vec![golden];
    for digest in [DigestKind::Sha256, DigestKind::Blake3, DigestKind::Xxh3] {
        archives.push(many_chunks_hashed(digest));
    }
    let limits = DecodeLimits::default();
    for archive in &archives {
        let want = decode_all(archive, &limits).unwrap();
        for threads in [0, 1, 2, 3, 8] {
            assert_eq!(
                decode_all_threads(archive, &limits, threads).unwrap(),
                want,
                "{threads} threads"
            );
        }
        // File by file, through the index.
        let a = Archive::open(archive, limits).unwrap();
        for (f, w) in a.files().iter().zip(&want) {
            assert!(a.read_file_threads(f, 4).unwrap() == w.data, "{}", f.path);
        }
    }
    // The threads really share the work: more chunks than threads.
    let a = Archive::open(&archives[1], limits).unwrap();
    let chunks: usize = a.files()[0].segments.iter().map(|s| s.chunks.len()).sum();
    assert!(chunks > 8, "{chunks} chunks");
}

#[test]
fn damaged_archives_fail_on_threads_as_on_one() {
    let limits = DecodeLimits::default();
    for digest in [DigestKind::Sha256, DigestKind::Xxh3] {
        let archive = many_chunks_hashed(digest);
        let step = (archive.len() / 300).max(1);
        for at in (0..archive.len()).step_by(step) {
            let mut bad = archive.clone();
            bad[at] ^= 0x5a;
            assert_eq!(
                decode_all_threads(&bad, &limits, 3),
                decode_all(&bad, &limits),
                "byte {at}"
            );
            let cut = &archive[..at];
            assert_eq!(
                decode_all_threads(cut, &limits, 2),
                decode_all(cut, &limits),
                "prefix {at}"
            );
        }
    }
}
