//! `brevis inspect ARCHIVE`: per-segment programs and ratios, totals by dtype.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use brevis_decoder::{Archive, DecodeLimits};
use brevis_format::archive::SegmentKind;
use brevis_format::program;

use crate::common::{human, map_file, ratio, CorruptArchive};

#[derive(clap::Args)]
pub struct Args {
    /// The archive.
    archive: PathBuf,
    /// Print every chunk's program, not only the first of each segment.
    #[arg(long)]
    chunks: bool,
}

pub fn run(args: Args) -> Result<()> {
    // `brevis inspect … | head` is normal use: a closed pipe ends the listing quietly.
    match print(args) {
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            Ok(())
        }
        other => other,
    }
}

fn print(args: Args) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let data = map_file(&args.archive)?;
    let limits = DecodeLimits::default();
    let archive = Archive::open(&data, limits).map_err(CorruptArchive)?;
    let mut by_dtype: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for file in archive.files() {
        writeln!(out, "{} ({})", file.path, human(file.size))?;
        let digest: String = file
            .digest_kind
            .hash_bytes(&file.digest)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        writeln!(out, "  {} {digest}", file.digest_kind.name())?;
        writeln!(
            out,
            "  {:<44} {:>8} {:>16} {:>11} {:>11} {:>8}  program",
            "segment", "dtype", "shape", "original", "stored", "ratio"
        )?;
        for seg in &file.segments {
            // A copy lists its source's chunks but stores none of its own.
            let stored: u64 = if seg.copy_of.is_some() {
                0
            } else {
                seg.chunks.iter().map(|c| c.record_len).sum()
            };
            let (dtype, shape) = match &seg.kind {
                SegmentKind::Opaque => ("opaque".to_string(), String::new()),
                SegmentKind::Tensor { dtype, shape } => (dtype.to_string(), format!("{shape:?}")),
            };
            let e = by_dtype.entry(dtype.clone()).or_default();
            e.0 += 1;
            e.1 += seg.len;
            e.2 += stored;
            let mut programs = Vec::new();
            if let Some(g) = seg.copy_of {
                programs.push(format!("copy of segment {g}"));
            }
            let delta = if seg.base.is_some() && seg.copy_of.is_none() {
                "base ^ "
            } else {
                ""
            };
            for (i, c) in seg.chunks.iter().enumerate().filter(|_| seg.copy_of.is_none()) {
                if i > 0 && !args.chunks {
                    programs.push(format!("… and {} more chunk(s)", seg.chunks.len() - 1));
                    break;
                }
                let body = archive.chunk_body(c).map_err(CorruptArchive)?;
                let chunk = brevis_format::archive::ChunkRecord::parse(body)
                    .map_err(|e| CorruptArchive(brevis_decoder::DecodeError::new(e)))?;
                let node = program::parse(chunk.program, &limits.program)
                    .map_err(|e| CorruptArchive(brevis_decoder::DecodeError::new(e)))?;
                programs.push(format!("{delta}{node}"));
            }
            writeln!(
                out,
                "  {:<44} {:>8} {:>16} {:>11} {:>11} {:>8.4}  {}",
                truncate(&seg.name, 44),
                dtype,
                truncate(&shape, 16),
                human(seg.len),
                human(stored),
                ratio(seg.len, stored),
                programs.join("\n        ")
            )?;
        }
    }
    writeln!(out, "\ntotals by dtype:")?;
    writeln!(
        out,
        "  {:<8} {:>8} {:>12} {:>12} {:>8}",
        "dtype", "segments", "original", "stored", "ratio"
    )?;
    for (d, (n, orig, stored)) in &by_dtype {
        writeln!(
            out,
            "  {:<8} {:>8} {:>12} {:>12} {:>8.4}",
            d,
            n,
            human(*orig),
            human(*stored),
            ratio(*orig, *stored)
        )?;
    }
    let total: u64 = archive.files().iter().map(|f| f.size).sum();
    writeln!(
        out,
        "  archive: {} -> {} ({:.4}x)",
        human(total),
        human(data.len() as u64),
        ratio(total, data.len() as u64)
    )?;
    let usage = crate::report::archive_usage(&archive, &limits)?;
    writeln!(out, "\nusage over {} stored chunk(s):", usage.chunks)?;
    for l in usage.lines() {
        writeln!(out, "  {l}")?;
    }
    Ok(())
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let t: String = s.chars().take(n - 1).collect();
        format!("{t}…")
    }
}
