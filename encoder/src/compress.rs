//! The compression pipeline: plan segments, cut chunks, synthesize a program
//! per chunk in parallel, verify each with the real decoder, write in order.
//!
//! Across files: every segment of every file is planned first, and a segment
//! whose bytes equal an earlier one's (tied weights, repeated shards, the same
//! tensor in several ONNX variants, identical files) becomes a copy of it; the
//! first is marked retained with its number of copies. With a base
//! ([`compress_files_with_base`]), a tensor that has a same-name, same-dtype,
//! same-shape tensor in the base is stored as the XOR with it when a sample
//! says that compresses better.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::ops::Range;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use brevis_decoder::decode_chunk_bytes;
use brevis_format::archive::{
    chunk_checksum, ChunkRecord, DigestKind, FileRecord, SegmentKind, SegmentRecord, SegmentSource,
};
use brevis_format::program::{serialize, Limits, Node};
use brevis_format::stream::Stream;
use brevis_format::wire::LitEncoding;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::base::BaseTensors;
use crate::containers::{self, plain, Container, ExternalData, Layout, SegmentPlan};
use crate::synth::{Hint, Synthesizer, Template};
use crate::writer::ArchiveWriter;

/// Input bytes of the chunks in flight per compressing thread, at most
/// ([`in_order`]): two default chunks, as many as the batches of `2 × threads`
/// chunks this replaced held at most.
const IN_FLIGHT_PER_THREAD: usize = 2 * DEFAULT_CHUNK_BYTES;

/// Default bytes per chunk: large enough that tables cost nothing, small enough
/// to stream and to spread over cores.
pub const DEFAULT_CHUNK_BYTES: usize = 4 << 20;

/// Bytes per chunk of `brevis compress --fast-decode` archives: a chunk's output
/// and its literals' words then stay in the caches between decoding, the chunk
/// checksum and the file digest, and each chunk in flight holds a quarter of the
/// memory. Against 4 MiB (`python3 bench/threads.py --runs 15` on the BF16 / FP16
/// (derived) / FP32 all-MiniLM corpus files): one thread 7% / 6% / 12% faster, two
/// threads 12% / 8% / 15%, and the archives 0.12% / 0.13% / 0.05% smaller (each
/// chunk gets its own tables). 2 MiB was as fast on one thread, slower on two.
/// 512 KiB against 1 MiB (archives of a throwaway build, `bench/threads.py --runs
/// 31` on both): one thread 1.4% / 3% faster on BF16 / FP16, 3.5% slower on FP32,
/// whose archive grew 0.08%; two threads within 1%. Not worth it.
pub const FAST_DECODE_CHUNK_BYTES: usize = 1 << 20;

/// Segments shorter than this are never deduplicated (a copy record would
/// save next to nothing and the decoder would keep them for nothing).
pub const MIN_DEDUP_BYTES: usize = 64;

/// Settings of a compression run.
#[derive(Clone, Copy, Debug)]
pub struct CompressOptions {
    /// Target bytes per chunk (at most `MAX_CHUNK_DECODED`).
    pub chunk_bytes: usize,
    /// Limits the verifying decoder applies (the same a reader will).
    pub limits: Limits,
    /// Store identical segments once (default true).
    pub dedup: bool,
    /// The hash of the files' digests (default SHA-256, what model hubs publish;
    /// BLAKE3 verifies several times faster).
    pub digest: DigestKind,
}

impl Default for CompressOptions {
    fn default() -> Self {
        CompressOptions {
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            limits: Limits::default(),
            dedup: true,
            digest: DigestKind::Sha256,
        }
    }
}

/// Where a planned segment's bytes will come from.
#[derive(Clone, Debug)]
enum Source<'b> {
    /// Its own chunks.
    Chunks,
    /// A copy of the segment with this archive-wide index.
    Copy(u64),
    /// Chunks of its XOR with this base tensor.
    Delta { base: &'b [u8], sha256: [u8; 32] },
}

/// A file's plan: its segments, where each one's bytes come from, and how
/// many copies later segments make of each.
struct FilePlan<'b> {
    container: Container,
    plans: Vec<SegmentPlan>,
    sources: Vec<Source<'b>>,
    retain: Vec<u64>,
}

/// A file to archive.
pub struct InputFile<'a> {
    /// Its path inside the archive (relative, `/`-separated).
    pub archive_path: String,
    /// Its bytes.
    pub data: &'a [u8],
}

/// What happened to one segment.
#[derive(Clone, Debug)]
pub struct SegmentReport {
    /// Tensor name or opaque label.
    pub name: String,
    /// Opaque or tensor.
    pub kind: SegmentKind,
    /// Original bytes.
    pub len: u64,
    /// Archive bytes (its records, framing included).
    pub compressed: u64,
    /// The program of each chunk, in text form.
    pub programs: Vec<String>,
}

/// What happened to one file.
#[derive(Clone, Debug)]
pub struct FileReport {
    /// Path in the archive.
    pub path: String,
    /// The container reader used.
    pub container: Container,
    /// Original bytes.
    pub size: u64,
    /// Archive bytes for this file (its records, framing included).
    pub compressed: u64,
    /// Per segment.
    pub segments: Vec<SegmentReport>,
    /// Chunks whose synthesized program failed verification and were stored raw
    /// instead (always 0 unless the encoder has a bug).
    pub verify_fallbacks: u64,
    /// Time spent decoding chunks to verify them, summed over threads
    /// (`--report`'s phase split).
    pub verify_time: Duration,
    /// Wall time.
    pub elapsed: Duration,
}

struct ChunkJob<'b> {
    segment: usize,
    range: Range<usize>,
    root_width: u8,
    hint: Hint,
    /// For a delta segment: the base bytes under `range`.
    base: Option<&'b [u8]>,
}

/// Which chunks are alike for reusing a program's template: the tensor's name
/// with its numbers masked (`layer.#.attention.self.query.weight`: the same
/// role in another layer), the container's hint (dtype and row length, or
/// record size), the root width and the length. (Without the name, FP32
/// MiniLM's query, key, value and output weights shared a template and its
/// archive grew 0.33%.)
type TemplateKey = (String, Hint, u8, usize);

/// The template a chunk of `key` in `segment` is built from: its key's, else,
/// for record and nibble chunks (GGUF's quantized blocks, int4), the last one a
/// chunk of its segment offered. The second is for a tensor's last chunk,
/// shorter than the others (so of a key of its own), which such chunks' search,
/// always of the whole chunk, makes costly: the SmolLM2 GGUF token embedding's
/// last 650 KB took 445 ms of the file's 8 s (`brevis compress --threads 1
/// --report`), its other seven chunks, built from the first one's template, 50
/// ms each. Not for tensor chunks: searched on a sample where large, they cost
/// little, and a template passes a chunk whose words it fits worse than its own
/// search would by as much as it likes so long as its bytes per word stay
/// those of the chunk it came from: the last chunk of the FP32 all-MiniLM's
/// word embeddings (the vocabulary's rarest tokens) grew from 455 to 616 KB.
fn template_for<'t>(
    by_key: &'t HashMap<TemplateKey, Template>,
    by_segment: &'t HashMap<usize, Template>,
    key: &TemplateKey,
    segment: usize,
) -> Option<&'t Template> {
    let by_segment = || match key.1 {
        Hint::Records(_) | Hint::Nibbles => by_segment.get(&segment),
        Hint::Tensor(..) | Hint::Opaque => None,
    };
    by_key.get(key).or_else(by_segment)
}

/// `name` with every run of digits replaced by `#`.
fn mask_numbers(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if !c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('#') {
            out.push('#');
        }
    }
    out
}

/// Most chunk jobs per round of template reuse: a chunk can reuse the template
/// of a chunk like it from an earlier round only (see [`reuse_round`]). Rounds
/// depend on the jobs, not on the threads, so the archive is the same whatever
/// `--threads` is.
const REUSE_ROUND: usize = 16;

/// The next round of `jobs`: at most [`REUSE_ROUND`] jobs, ending before the
/// first job that `awaits` a template (it would take one and its key has none
/// yet) of a segment an earlier job of the round is of. That job then waits
/// for the earlier chunk's template instead of being searched beside it: a
/// large tensor searched whole chunk by chunk (GGUF's token embedding, eight
/// chunks) is searched once, its other chunks built from that program's
/// template. (Across tensors rounds stay whole: the next layer's tensor waiting
/// for the first layer's template measured no faster on the corpus and changed
/// four archives by -168 to +347 B.)
fn reuse_round<'j, 'b>(jobs: &'j [ChunkJob<'b>], awaits: impl Fn(&ChunkJob<'b>) -> bool) -> &'j [ChunkJob<'b>] {
    let mut seen = HashSet::new();
    let end = jobs
        .iter()
        .take(REUSE_ROUND)
        .position(|j| awaits(j) && !seen.insert(j.segment))
        .unwrap_or(jobs.len().min(REUSE_ROUND));
    &jobs[..end]
}

/// Cuts a segment into chunk jobs.
fn chunk_jobs(segment: usize, plan: &SegmentPlan, data: &[u8], chunk_bytes: usize, jobs: &mut Vec<ChunkJob<'_>>) {
    let range = plan.range.clone();
    // Opaque bytes whose structure the container knows: chunks hold whole
    // records (or words), the tail (if any) goes in a chunk of its own.
    let structured = match plan.layout {
        // Even records (all GGUF blocks but MXFP4's) as 16-bit words, so a
        // column can be an FP16 scale.
        Layout::Records(r) if r >= 2 => Some((r, if r.is_multiple_of(2) { 16 } else { 8 }, Hint::Records(r))),
        Layout::Words(w) if matches!(w, 16 | 32 | 64) => Some((usize::from(w / 8), w, Hint::Opaque)),
        Layout::Nibbles => Some((1, 8, Hint::Nibbles)),
        _ => None,
    };
    if let (SegmentKind::Opaque, Some((unit, root_width, hint))) = (&plan.kind, structured) {
        let step = (chunk_bytes / unit).max(1) * unit;
        let whole = range.start + range.len() / unit * unit;
        let mut at = range.start;
        while at < whole {
            let end = (at + step).min(whole);
            jobs.push(ChunkJob {
                segment,
                range: at..end,
                root_width,
                hint,
                base: None,
            });
            at = end;
        }
        if whole < range.end {
            jobs.push(ChunkJob {
                segment,
                range: whole..range.end,
                root_width: 8,
                hint: Hint::Opaque,
                base: None,
            });
        }
        return;
    }
    match &plan.kind {
        SegmentKind::Tensor { dtype, shape } => {
            let step = (chunk_bytes / dtype.size()).max(1) * dtype.size();
            // The row length (last dimension) of a tensor of two or more dimensions.
            let row = match shape[..] {
                [.., _, last] => last,
                _ => 0,
            };
            let mut at = range.start;
            while at < range.end {
                let end = (at + step).min(range.end);
                jobs.push(ChunkJob {
                    segment,
                    range: at..end,
                    root_width: dtype.bits(),
                    hint: Hint::Tensor(*dtype, row),
                    base: None,
                });
                at = end;
            }
        }
        SegmentKind::Opaque => {
            let mut at = range.start;
            while at < range.end {
                let window = at..(at + chunk_bytes).min(range.end);
                let view = plain::choose_view(&data[window.clone()]);
                let window = at..at + plain::view_extent(&data[window.clone()], view);
                let wb = usize::from(view.width / 8);
                if view.phase > 0 {
                    let end = at + view.phase;
                    jobs.push(ChunkJob {
                        segment,
                        range: at..end,
                        root_width: 8,
                        hint: Hint::Opaque,
                        base: None,
                    });
                    at = end;
                }
                let len = ((window.end - at) / wb) * wb;
                if len == 0 {
                    jobs.push(ChunkJob {
                        segment,
                        range: at..window.end,
                        root_width: 8,
                        hint: Hint::Opaque,
                        base: None,
                    });
                    at = window.end;
                    continue;
                }
                jobs.push(ChunkJob {
                    segment,
                    range: at..at + len,
                    root_width: view.width,
                    hint: Hint::Opaque,
                    base: None,
                });
                at += len;
                if window.end == range.end && at < range.end {
                    jobs.push(ChunkJob {
                        segment,
                        range: at..range.end,
                        root_width: 8,
                        hint: Hint::Opaque,
                        base: None,
                    });
                    at = range.end;
                }
            }
        }
    }
}

/// How many items [`in_order`] has in flight (started, result not yet handed
/// on) at most.
#[derive(Clone, Copy, Debug)]
struct Window {
    /// Items at most.
    items: usize,
    /// Their sizes' sum at most (an item larger than this alone still runs).
    bytes: usize,
}

/// Runs `work` on every item on rayon's pool, at most `window` of them at once
/// (items and bytes, as `size` says), and hands each result to `sink` in the
/// items' order, on this thread.
///
/// A window that slides, not batches: an item starts as soon as the oldest
/// results are handed on and leave room. A slow chunk holds back only what
/// fits in the window after it, and a window counted in bytes holds many small
/// chunks: `brevis compress --threads 2` of isnet_fp16.onnx (789 tensors, from
/// bytes to 9 MB) was 1.08x one thread with at most 4 chunks in flight, the
/// old batch size (`bench/compress_threads.py`). Once `sink` fails, items not
/// yet started are skipped and the error returned after the started ones end;
/// a panic in `work` is raised again here.
fn in_order<T: Sync, R: Send>(
    items: &[T],
    window: Window,
    size: impl Fn(&T) -> usize,
    work: impl Fn(&T) -> R + Sync,
    mut sink: impl FnMut(&T, R) -> Result<()>,
) -> Result<()> {
    use std::sync::atomic::{AtomicBool, Ordering};
    type Outcome<R> = Option<std::thread::Result<R>>;
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Outcome<R>)>();
    let (work, stop) = (&work, &stop);
    // In place: this thread waits for results without taking a pool thread.
    rayon::in_place_scope(|scope| {
        let mut started = 0;
        let mut in_flight_bytes = 0usize;
        let mut waiting: HashMap<usize, Outcome<R>> = HashMap::new();
        for (next, item) in items.iter().enumerate() {
            while let Some(candidate) = items.get(started) {
                let in_flight = started - next;
                let bytes = size(candidate);
                let fits = in_flight == 0
                    || (in_flight < window.items && in_flight_bytes.saturating_add(bytes) <= window.bytes);
                if !fits {
                    break;
                }
                in_flight_bytes += bytes;
                let (tx, at) = (tx.clone(), started);
                scope.spawn(move |_| {
                    // Caught and sent, so that this thread never waits for a
                    // result that will not come.
                    let outcome = (!stop.load(Ordering::Relaxed))
                        .then(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(candidate))));
                    let _ = tx.send((at, outcome));
                });
                started += 1;
            }
            let outcome = loop {
                if let Some(o) = waiting.remove(&next) {
                    break o;
                }
                let (at, o) = rx.recv().expect("a started item always sends its outcome");
                waiting.insert(at, o);
            };
            in_flight_bytes -= size(item);
            match outcome {
                Some(Ok(r)) => {
                    if let Err(e) = sink(item, r) {
                        stop.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                }
                Some(Err(panic)) => {
                    stop.store(true, Ordering::Relaxed);
                    std::panic::resume_unwind(panic)
                }
                None => unreachable!("items are skipped only after a failure"),
            }
        }
        Ok(())
    })
}

/// A chunk encoded by [`encode_chunk`].
struct Encoded {
    body: Vec<u8>,
    program: String,
    /// The program did not verify and a raw literal took its place.
    fell_back: bool,
    /// The program's template, where the synthesizer offers one.
    offer: Option<Template>,
    /// Time taken by the verifying decodes.
    verify_time: Duration,
}

/// Synthesizes (building `template` first, where the synthesizer reuses
/// templates), serializes and verifies one chunk. A program that does not
/// decode to exactly `bytes` is replaced by a raw literal (also verified).
fn encode_chunk(
    bytes: &[u8],
    root_width: u8,
    hint: Hint,
    synth: &dyn Synthesizer,
    template: Option<&Template>,
    limits: &Limits,
) -> Result<Encoded> {
    let root = Stream::from_le_bytes(root_width, bytes)?;
    let (node, offer) = synth.synthesize_reusing(&root, hint, template);
    let sum = chunk_checksum(bytes);
    let body = ChunkRecord::body(bytes.len() as u64, sum, root_width, &serialize(&node));
    let verifying = Instant::now();
    // Compared as decoded, without a copy into bytes (`LeBytes`).
    if decode_chunk_bytes(&body, limits).ok().as_deref() == Some(bytes) {
        return Ok(Encoded {
            body,
            program: node.to_string(),
            fell_back: false,
            offer,
            verify_time: verifying.elapsed(),
        });
    }
    let raw = crate::synth::lit::lit(&root, LitEncoding::Raw, 0).context("raw literal")?;
    let body = ChunkRecord::body(bytes.len() as u64, sum, root_width, &serialize(&raw));
    let back = decode_chunk_bytes(&body, limits).context("raw fallback failed to decode")?;
    anyhow::ensure!(*back == *bytes, "raw fallback did not verify");
    Ok(Encoded {
        body,
        program: raw.to_string(),
        fell_back: true,
        offer: None,
        verify_time: verifying.elapsed(),
    })
}

/// Compresses one file into `w`. `progress` is called with input bytes done.
pub fn compress_file<W: Write>(
    w: &mut ArchiveWriter<W>,
    file: &InputFile<'_>,
    synth: &dyn Synthesizer,
    opts: &CompressOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<FileReport> {
    let plan = plan_file(file, &ExternalData::new())?;
    compress_planned(
        w,
        &PlannedFile {
            file,
            plan: &plan,
            synth,
            opts,
            progress,
        },
    )
}

/// Plans a file's segments (what the other files' containers say about it
/// included: ONNX external data); every byte comes from its own chunks.
fn plan_file<'b>(file: &InputFile<'_>, external: &ExternalData) -> Result<FilePlan<'b>> {
    let (container, plans) = containers::plan_with(&file.archive_path, file.data, external)?;
    let plans: Vec<_> = plans
        .into_iter()
        .filter(|p| !p.range.is_empty() || matches!(p.kind, SegmentKind::Tensor { .. }))
        .collect();
    Ok(FilePlan {
        container,
        sources: vec![Source::Chunks; plans.len()],
        retain: vec![0; plans.len()],
        plans,
    })
}

/// Marks every segment whose bytes equal an earlier segment's (in archive
/// order, across files) as a copy of the first, and counts each first's copies.
fn dedup(files: &[InputFile<'_>], plans: &mut [FilePlan<'_>]) {
    // (file, segment) of each archive-wide segment index.
    let places: Vec<(usize, usize)> = plans
        .iter()
        .enumerate()
        .flat_map(|(f, p)| (0..p.plans.len()).map(move |s| (f, s)))
        .collect();
    let bytes = |(f, s): (usize, usize)| &files[f].data[plans[f].plans[s].range.clone()];
    // XXH3-128, not SHA-256: equal hashes are compared byte for byte below, so
    // the hash only has to spread the segments, and it runs ~8x faster (this
    // pass read the whole input once more at SHA-256's ~2 GB/s).
    let hashes: Vec<Option<[u8; 32]>> = places
        .par_iter()
        .map(|&at| {
            let b = bytes(at);
            (b.len() >= MIN_DEDUP_BYTES).then(|| brevis_decoder::digest(DigestKind::Xxh3, b))
        })
        .collect();
    let mut firsts: HashMap<[u8; 32], Vec<usize>> = HashMap::new();
    let mut copies: Vec<(usize, usize)> = Vec::new();
    for (g, h) in hashes.iter().enumerate() {
        let Some(h) = h else { continue };
        let seen = firsts.entry(*h).or_default();
        // Equal hashes are checked byte for byte: a copy is never a guess.
        match seen.iter().find(|&&first| bytes(places[first]) == bytes(places[g])) {
            Some(&first) => copies.push((g, first)),
            None => seen.push(g),
        }
    }
    for (g, first) in copies {
        let (f, s) = places[g];
        plans[f].sources[s] = Source::Copy(first as u64);
        let (ff, fs) = places[first];
        plans[ff].retain[fs] += 1;
    }
}

/// Bytes per sample and samples per tensor when deciding whether a delta pays.
const DELTA_SAMPLE: usize = 64 << 10;
const DELTA_SAMPLES: usize = 16;

/// True when the XOR of `target` with `base` compresses better than `target`
/// alone, judged by zstd -3 on up to 16 spread slices of 64 KiB.
fn delta_pays(target: &[u8], base: &[u8]) -> bool {
    let n = target.len();
    let step = (n / DELTA_SAMPLES).max(DELTA_SAMPLE);
    let (mut plain, mut xor) = (Vec::new(), Vec::new());
    let mut at = 0;
    while at < n {
        let end = (at + DELTA_SAMPLE).min(n);
        plain.extend_from_slice(&target[at..end]);
        xor.extend(target[at..end].iter().zip(&base[at..end]).map(|(a, b)| a ^ b));
        at += step;
    }
    let size = |b: &[u8]| zstd::bulk::compress(b, 3).map(|v| v.len()).unwrap_or(usize::MAX);
    size(&xor) < size(&plain)
}

/// Stores each tensor that is not a copy and has a matching base tensor
/// (same name, dtype and shape) as a delta against it, when that pays.
fn use_base<'b>(files: &[InputFile<'_>], plans: &mut [FilePlan<'b>], base: &'b BaseTensors) {
    for (file, plan) in files.iter().zip(plans.iter_mut()) {
        let found: Vec<Option<Source<'b>>> = plan
            .plans
            .par_iter()
            .zip(&plan.sources)
            .map(|(p, src)| {
                let SegmentKind::Tensor { dtype, shape } = &p.kind else {
                    return None;
                };
                if !matches!(src, Source::Chunks) || p.range.is_empty() {
                    return None;
                }
                let b = base.find(&file.archive_path, &p.name, *dtype, shape)?;
                let target = &file.data[p.range.clone()];
                delta_pays(target, b).then(|| Source::Delta {
                    base: b,
                    sha256: Sha256::digest(b).into(),
                })
            })
            .collect();
        for (src, f) in plan.sources.iter_mut().zip(found) {
            if let Some(f) = f {
                *src = f;
            }
        }
    }
}

/// What compressing one planned file takes, besides the writer.
struct PlannedFile<'a> {
    file: &'a InputFile<'a>,
    plan: &'a FilePlan<'a>,
    synth: &'a dyn Synthesizer,
    opts: &'a CompressOptions,
    progress: &'a (dyn Fn(u64) + Sync),
}

/// Writes a planned file.
fn compress_planned<W: Write>(w: &mut ArchiveWriter<W>, task: &PlannedFile<'_>) -> Result<FileReport> {
    let started = Instant::now();
    let PlannedFile { file, plan, opts, .. } = *task;
    let data = file.data;
    let plans = &plan.plans;
    let start_offset = w.offset();
    let file_record = |digest| FileRecord {
        path: file.archive_path.clone(),
        size: data.len() as u64,
        digest,
        segments: plans.len() as u64,
    };
    std::thread::scope(|scope| {
        // The FILE record holds the file's digest and comes first. On one
        // thread the digest is computed here, before the chunks; on several it
        // is computed on a thread of its own while the first chunks encode, and
        // the record is written when the first segment header is due (SHA-256
        // runs at about 2 GB/s: on many cores, done first, it would be a good
        // part of a compression's wall time that no other core can share).
        let mut pending_digest = None;
        if rayon::current_num_threads() > 1 {
            pending_digest = Some(scope.spawn(|| brevis_decoder::digest(opts.digest, data)));
        } else {
            w.file(&file_record(brevis_decoder::digest(opts.digest, data)))?;
        }
        let mut write_file_record = |w: &mut ArchiveWriter<W>| -> Result<()> {
            if let Some(thread) = pending_digest.take() {
                let digest = thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                w.file(&file_record(digest))?;
            }
            Ok(())
        };
        compress_chunks(w, task, &mut write_file_record, started, start_offset)
    })
}

/// [`compress_planned`] after its FILE record is under way:
/// `write_file_record` writes it (once) before the first segment header.
fn compress_chunks<W: Write>(
    w: &mut ArchiveWriter<W>,
    task: &PlannedFile<'_>,
    write_file_record: &mut dyn FnMut(&mut ArchiveWriter<W>) -> Result<()>,
    started: Instant,
    start_offset: u64,
) -> Result<FileReport> {
    let PlannedFile {
        file,
        plan,
        synth,
        opts,
        progress,
    } = *task;
    let data = file.data;
    let plans = &plan.plans;
    let mut jobs = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        match &plan.sources[i] {
            Source::Chunks => chunk_jobs(i, p, data, opts.chunk_bytes, &mut jobs),
            Source::Copy(_) => progress(p.range.len() as u64),
            Source::Delta { base, .. } => {
                let first = jobs.len();
                chunk_jobs(i, p, data, opts.chunk_bytes, &mut jobs);
                for j in &mut jobs[first..] {
                    let at = j.range.start - p.range.start;
                    j.base = Some(&base[at..at + j.range.len()]);
                }
            }
        }
    }
    let mut segments: Vec<SegmentReport> = plans
        .iter()
        .zip(&plan.sources)
        .map(|(p, src)| SegmentReport {
            name: p.name.clone(),
            kind: p.kind.clone(),
            len: p.range.len() as u64,
            compressed: 0,
            programs: match src {
                Source::Copy(g) => vec![format!("copy of segment {g}")],
                _ => Vec::new(),
            },
        })
        .collect();
    let mut chunk_counts = vec![0u64; plans.len()];
    for j in &jobs {
        chunk_counts[j.segment] += 1;
    }

    // Bounded memory: chunks in flight (encoding, or encoded and waiting for
    // an older one to be written) hold at most IN_FLIGHT_PER_THREAD bytes of
    // input per thread.
    let threads = rayon::current_num_threads();
    let window = Window {
        items: threads * 64,
        bytes: threads * IN_FLIGHT_PER_THREAD,
    };
    let mut next_segment = 0usize;
    let mut verify_fallbacks = 0;
    let mut verify_time = Duration::ZERO;
    let write_segment_header = |w: &mut ArchiveWriter<W>, i: usize, segments: &mut [SegmentReport]| -> Result<()> {
        let before = w.offset();
        w.segment(&SegmentRecord {
            kind: plans[i].kind.clone(),
            name: plans[i].name.clone(),
            len: plans[i].range.len() as u64,
            chunks: chunk_counts[i],
            retain: plan.retain[i],
            source: match &plan.sources[i] {
                Source::Chunks => SegmentSource::Chunks,
                Source::Copy(g) => SegmentSource::Copy { segment: *g },
                Source::Delta { sha256, .. } => SegmentSource::BaseDelta { sha256: *sha256 },
            },
        })?;
        segments[i].compressed += w.offset() - before;
        Ok(())
    };
    // Templates of earlier rounds' programs, by the key of the chunks they fit
    // (the last searched chunk's of each key): a chunk like one before it is
    // built from its template where that fits (delta chunks, whose words are
    // XORs, excepted), else searched, and its program becomes the template.
    let mut templates: HashMap<TemplateKey, Template> = HashMap::new();
    // And by segment, the last one its chunks offered: a tensor's last chunk,
    // shorter than the others and so of another key, is built from its
    // earlier chunks' program too ([`template_for`]).
    let mut segment_templates: HashMap<usize, Template> = HashMap::new();
    let masked: Vec<String> = plans.iter().map(|p| mask_numbers(&p.name)).collect();
    let key = |j: &ChunkJob<'_>| (masked[j.segment].clone(), j.hint, j.root_width, j.range.len());
    let mut next_job = 0;
    while next_job < jobs.len() {
        let round = reuse_round(&jobs[next_job..], |j| {
            let words = j.range.len() * 8 / usize::from(j.root_width);
            let reusable = j.base.is_none() && synth.waits_for_template(j.hint, words);
            reusable && template_for(&templates, &segment_templates, &key(j), j.segment).is_none()
        });
        next_job += round.len();
        let mut offers: Vec<(TemplateKey, usize, Template)> = Vec::new();
        let (known, by_segment) = (&templates, &segment_templates);
        let encode = |j: &ChunkJob<'_>| -> Result<Encoded> {
            let xored: Vec<u8>;
            let (bytes, template) = match j.base {
                Some(b) => {
                    xored = data[j.range.clone()].iter().zip(b).map(|(a, b)| a ^ b).collect();
                    (&xored[..], None)
                }
                None => (
                    &data[j.range.clone()],
                    template_for(known, by_segment, &key(j), j.segment),
                ),
            };
            let mut e = encode_chunk(bytes, j.root_width, j.hint, synth, template, &opts.limits)?;
            progress(bytes.len() as u64);
            if j.base.is_some() {
                e.program = format!("base ^ {}", e.program);
                e.offer = None;
            }
            Ok(e)
        };
        in_order(
            round,
            window,
            |j| j.range.len(),
            encode,
            |j, e| {
                let e = e?;
                if let Some(t) = e.offer {
                    offers.push((key(j), j.segment, t));
                }
                write_file_record(w)?;
                // Segments with no chunks (empty tensors, copies) between the last written one and this one.
                while next_segment <= j.segment {
                    write_segment_header(w, next_segment, &mut segments)?;
                    next_segment += 1;
                }
                let before = w.offset();
                w.chunk(&e.body, j.range.len() as u64)?;
                let s = &mut segments[j.segment];
                s.compressed += w.offset() - before;
                s.programs.push(e.program);
                verify_fallbacks += u64::from(e.fell_back);
                verify_time += e.verify_time;
                Ok(())
            },
        )?;
        // The last chunk searched of a key (and of a segment) gives its template.
        for (key, segment, template) in offers {
            segment_templates.insert(segment, template.clone());
            templates.insert(key, template);
        }
    }
    write_file_record(w)?;
    while next_segment < plans.len() {
        write_segment_header(w, next_segment, &mut segments)?;
        next_segment += 1;
    }
    Ok(FileReport {
        path: file.archive_path.clone(),
        container: plan.container,
        size: data.len() as u64,
        compressed: w.offset() - start_offset,
        segments,
        verify_fallbacks,
        verify_time,
        elapsed: started.elapsed(),
    })
}

/// Compresses files into one archive on `out`; returns the sink, the archive
/// length and a report per file.
pub fn compress_files<W: Write>(
    out: W,
    files: &[InputFile<'_>],
    synth: &dyn Synthesizer,
    opts: &CompressOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(W, u64, Vec<FileReport>)> {
    compress_files_with_base(out, files, None, synth, opts, progress)
}

/// [`compress_files`] against a fine-tune's base: tensors with a same-name,
/// same-dtype, same-shape tensor in `base` are stored as their XOR with it
/// (when a sample says that is smaller), and decoding needs the same base.
pub fn compress_files_with_base<W: Write>(
    out: W,
    files: &[InputFile<'_>],
    base: Option<&BaseTensors>,
    synth: &dyn Synthesizer,
    opts: &CompressOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(W, u64, Vec<FileReport>)> {
    // A pre-pass over the models: which files hold their external data.
    let all: Vec<(&str, &[u8])> = files.iter().map(|f| (f.archive_path.as_str(), f.data)).collect();
    let external = containers::external_data(&all);
    let mut plans = files
        .iter()
        .map(|f| plan_file(f, &external).with_context(|| format!("compressing `{}`", f.archive_path)))
        .collect::<Result<Vec<_>>>()?;
    if opts.dedup {
        dedup(files, &mut plans);
    }
    if let Some(base) = base {
        use_base(files, &mut plans, base);
    }
    let mut w = ArchiveWriter::new(out, opts.digest)?;
    let mut reports = Vec::with_capacity(files.len());
    for (f, plan) in files.iter().zip(&plans) {
        reports.push(
            compress_planned(
                &mut w,
                &PlannedFile {
                    file: f,
                    plan,
                    synth,
                    opts,
                    progress,
                },
            )
            .with_context(|| format!("compressing `{}`", f.archive_path))?,
        );
    }
    let (out, len) = w.finish()?;
    Ok((out, len, reports))
}

/// Operator usage over programs, for reports: `(operator, count)`.
pub fn operator_counts(node: &Node, counts: &mut [u64; 7]) {
    counts[node.operator()] += 1;
    node.children().iter().for_each(|c| operator_counts(c, counts));
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::{in_order, Window};

    /// Results come in the items' order whatever order they finish in, and
    /// what is in flight (started, result not yet handed on) never exceeds the
    /// window, in items nor in bytes (but for one item larger than the window).
    #[test]
    fn in_order_keeps_order_and_window() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let items: Vec<usize> = (0..60).collect();
        // Sizes 1 to 5, and item 30 larger than any window below.
        let size = |&i: &usize| if i == 30 { 100 } else { 1 + i % 5 };
        for (max_items, max_bytes) in [(1, 100), (2, 100), (5, 100), (40, 7), (40, 12)] {
            let window = Window {
                items: max_items,
                bytes: max_bytes,
            };
            let flight = std::sync::Mutex::new((0usize, 0usize));
            let (most_items, most_bytes) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let mut seen = Vec::new();
            pool.install(|| {
                in_order(
                    &items,
                    window,
                    size,
                    |i| {
                        {
                            let mut f = flight.lock().unwrap();
                            f.0 += 1;
                            f.1 += size(i);
                            most_items.fetch_max(f.0, Ordering::SeqCst);
                            if *i != 30 {
                                most_bytes.fetch_max(f.1, Ordering::SeqCst);
                            }
                        }
                        // Early items slowest, so later ones finish first.
                        std::thread::sleep(Duration::from_micros(200 * (*i as u64 % 7)));
                        i * i
                    },
                    |&i, r| {
                        let mut f = flight.lock().unwrap();
                        f.0 -= 1;
                        f.1 -= size(&i);
                        assert_eq!(r, i * i);
                        seen.push(i);
                        Ok(())
                    },
                )
            })
            .unwrap();
            assert_eq!(seen, items, "{window:?}");
            assert!(most_items.load(Ordering::SeqCst) <= max_items, "{window:?}");
            assert!(most_bytes.load(Ordering::SeqCst) <= max_bytes, "{window:?}");
        }
    }

    /// A failing sink ends the run with its error; items after the window
    /// are never started.
    #[test]
    fn in_order_stops_at_the_first_error() {
        let items: Vec<u32> = (0..100).collect();
        let started = AtomicUsize::new(0);
        let window = Window { items: 4, bytes: 100 };
        let err = in_order(
            &items,
            window,
            |_| 1,
            |&i| {
                started.fetch_add(1, Ordering::SeqCst);
                i
            },
            |&i, _| if i == 10 { anyhow::bail!("item {i}") } else { Ok(()) },
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "item 10");
        assert!(started.load(Ordering::SeqCst) <= 14);
    }

    /// A panic in `work` reaches the caller instead of leaving it waiting.
    #[test]
    fn in_order_raises_a_panic_in_work() {
        let items: Vec<u32> = (0..8).collect();
        let caught = std::panic::catch_unwind(|| {
            let window = Window { items: 3, bytes: 100 };
            in_order(
                &items,
                window,
                |_| 1,
                |&i| if i == 5 { panic!("boom") } else { i },
                |_, _| Ok(()),
            )
        });
        assert!(caught.is_err());
    }
}
