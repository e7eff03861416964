//! The compression pipeline: plan segments, cut chunks, synthesize a program
//! per chunk in parallel, verify each with the real decoder, write in order.

use std::io::Write;
use std::ops::Range;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use brevis_decoder::decode_chunk;
use brevis_format::archive::{chunk_checksum, ChunkRecord, FileRecord, SegmentKind, SegmentRecord};
use brevis_format::program::{serialize, Limits, Node};
use brevis_format::stream::Stream;
use brevis_format::wire::LitEncoding;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::containers::{self, plain, Container, ExternalData, Layout, SegmentPlan};
use crate::synth::{Hint, Synthesizer};
use crate::writer::ArchiveWriter;

/// Default bytes per chunk: large enough that tables cost nothing, small enough
/// to stream and to spread over cores.
pub const DEFAULT_CHUNK_BYTES: usize = 4 << 20;

/// Settings of a compression run.
#[derive(Clone, Copy, Debug)]
pub struct CompressOptions {
    /// Target bytes per chunk (at most `MAX_CHUNK_DECODED`).
    pub chunk_bytes: usize,
    /// Limits the verifying decoder applies (the same a reader will).
    pub limits: Limits,
}

impl Default for CompressOptions {
    fn default() -> Self {
        CompressOptions {
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            limits: Limits::default(),
        }
    }
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
    /// Wall time.
    pub elapsed: Duration,
}

struct ChunkJob {
    segment: usize,
    range: Range<usize>,
    root_width: u8,
    hint: Hint,
}

struct ChunkDone {
    segment: usize,
    body: Vec<u8>,
    decoded_len: u64,
    program: String,
    fell_back: bool,
}

/// Cuts a segment into chunk jobs.
fn chunk_jobs(segment: usize, plan: &SegmentPlan, data: &[u8], chunk_bytes: usize, jobs: &mut Vec<ChunkJob>) {
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
            });
            at = end;
        }
        if whole < range.end {
            jobs.push(ChunkJob {
                segment,
                range: whole..range.end,
                root_width: 8,
                hint: Hint::Opaque,
            });
        }
        return;
    }
    match &plan.kind {
        SegmentKind::Tensor { dtype, .. } => {
            let step = (chunk_bytes / dtype.size()).max(1) * dtype.size();
            let mut at = range.start;
            while at < range.end {
                let end = (at + step).min(range.end);
                jobs.push(ChunkJob {
                    segment,
                    range: at..end,
                    root_width: dtype.bits(),
                    hint: Hint::Tensor(*dtype),
                });
                at = end;
            }
        }
        SegmentKind::Opaque => {
            let mut at = range.start;
            while at < range.end {
                let window = at..(at + chunk_bytes).min(range.end);
                let view = plain::choose_view(&data[window.clone()]);
                let wb = usize::from(view.width / 8);
                if view.phase > 0 {
                    let end = at + view.phase;
                    jobs.push(ChunkJob {
                        segment,
                        range: at..end,
                        root_width: 8,
                        hint: Hint::Opaque,
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
                    });
                    at = window.end;
                    continue;
                }
                jobs.push(ChunkJob {
                    segment,
                    range: at..at + len,
                    root_width: view.width,
                    hint: Hint::Opaque,
                });
                at += len;
                if window.end == range.end && at < range.end {
                    jobs.push(ChunkJob {
                        segment,
                        range: at..range.end,
                        root_width: 8,
                        hint: Hint::Opaque,
                    });
                    at = range.end;
                }
            }
        }
    }
}

/// Synthesizes, serializes and verifies one chunk. A program that does not
/// decode to exactly `bytes` is replaced by a raw literal (also verified).
fn encode_chunk(
    bytes: &[u8],
    root_width: u8,
    hint: Hint,
    synth: &dyn Synthesizer,
    limits: &Limits,
) -> Result<(Vec<u8>, String, bool)> {
    let root = Stream::from_le_bytes(root_width, bytes)?;
    let node = synth.synthesize(&root, hint);
    let sum = chunk_checksum(bytes);
    let body = ChunkRecord::body(bytes.len() as u64, sum, root_width, &serialize(&node));
    if decode_chunk(&body, limits).ok().as_deref() == Some(bytes) {
        return Ok((body, node.to_string(), false));
    }
    let raw = crate::synth::lit::lit(&root, LitEncoding::Raw, 0).context("raw literal")?;
    let body = ChunkRecord::body(bytes.len() as u64, sum, root_width, &serialize(&raw));
    let back = decode_chunk(&body, limits).context("raw fallback failed to decode")?;
    anyhow::ensure!(back == bytes, "raw fallback did not verify");
    Ok((body, raw.to_string(), true))
}

/// Compresses one file into `w`. `progress` is called with input bytes done.
pub fn compress_file<W: Write>(
    w: &mut ArchiveWriter<W>,
    file: &InputFile<'_>,
    synth: &dyn Synthesizer,
    opts: &CompressOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<FileReport> {
    compress_planned(w, file, &ExternalData::new(), synth, opts, progress)
}

/// [`compress_file`], with what the other files' containers say about this
/// one (ONNX external data).
fn compress_planned<W: Write>(
    w: &mut ArchiveWriter<W>,
    file: &InputFile<'_>,
    external: &ExternalData,
    synth: &dyn Synthesizer,
    opts: &CompressOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<FileReport> {
    let started = Instant::now();
    let data = file.data;
    let (container, plans) = containers::plan_with(&file.archive_path, data, external)?;
    let plans: Vec<_> = plans
        .into_iter()
        .filter(|p| !p.range.is_empty() || matches!(p.kind, SegmentKind::Tensor { .. }))
        .collect();
    let sha256: [u8; 32] = Sha256::digest(data).into();
    let start_offset = w.offset();
    w.file(&FileRecord {
        path: file.archive_path.clone(),
        size: data.len() as u64,
        sha256,
        segments: plans.len() as u64,
    })?;

    let mut jobs = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        chunk_jobs(i, p, data, opts.chunk_bytes, &mut jobs);
    }
    let mut segments: Vec<SegmentReport> = plans
        .iter()
        .map(|p| SegmentReport {
            name: p.name.clone(),
            kind: p.kind.clone(),
            len: p.range.len() as u64,
            compressed: 0,
            programs: Vec::new(),
        })
        .collect();
    let mut chunk_counts = vec![0u64; plans.len()];
    for j in &jobs {
        chunk_counts[j.segment] += 1;
    }

    // Bounded memory: at most `batch` chunks are in flight at once.
    let batch = rayon::current_num_threads() * 2;
    let mut next_segment = 0usize;
    let mut verify_fallbacks = 0;
    let write_segment_header = |w: &mut ArchiveWriter<W>, i: usize, segments: &mut [SegmentReport]| -> Result<()> {
        let before = w.offset();
        w.segment(&SegmentRecord {
            kind: plans[i].kind.clone(),
            name: plans[i].name.clone(),
            len: plans[i].range.len() as u64,
            chunks: chunk_counts[i],
        })?;
        segments[i].compressed += w.offset() - before;
        Ok(())
    };
    for group in jobs.chunks(batch) {
        let done: Vec<Result<ChunkDone>> = group
            .par_iter()
            .map(|j| {
                let bytes = &data[j.range.clone()];
                let (body, program, fell_back) = encode_chunk(bytes, j.root_width, j.hint, synth, &opts.limits)?;
                progress(bytes.len() as u64);
                Ok(ChunkDone {
                    segment: j.segment,
                    body,
                    decoded_len: bytes.len() as u64,
                    program,
                    fell_back,
                })
            })
            .collect();
        for d in done {
            let d = d?;
            // Segments with no chunks (empty tensors) between the last written one and this one.
            while next_segment <= d.segment {
                write_segment_header(w, next_segment, &mut segments)?;
                next_segment += 1;
            }
            let before = w.offset();
            w.chunk(&d.body, d.decoded_len)?;
            let s = &mut segments[d.segment];
            s.compressed += w.offset() - before;
            s.programs.push(d.program);
            verify_fallbacks += u64::from(d.fell_back);
        }
    }
    while next_segment < plans.len() {
        write_segment_header(w, next_segment, &mut segments)?;
        next_segment += 1;
    }
    Ok(FileReport {
        path: file.archive_path.clone(),
        container,
        size: data.len() as u64,
        compressed: w.offset() - start_offset,
        segments,
        verify_fallbacks,
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
    let mut w = ArchiveWriter::new(out)?;
    let mut reports = Vec::with_capacity(files.len());
    // A pre-pass over the models: which files hold their external data.
    let all: Vec<(&str, &[u8])> = files.iter().map(|f| (f.archive_path.as_str(), f.data)).collect();
    let external = containers::external_data(&all);
    for f in files {
        reports.push(
            compress_planned(&mut w, f, &external, synth, opts, progress)
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
