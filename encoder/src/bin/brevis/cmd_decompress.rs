//! `brevis decompress ARCHIVE [-o DIR]` and `brevis verify ARCHIVE`.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use brevis_decoder::{DecodeLimits, Event, StreamDecoder};
use brevis_encoder::atomic::AtomicFile;

use crate::common::{human, progress, CorruptArchive};
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    /// The archive.
    archive: PathBuf,
    /// Directory to rebuild the files in (default: the current directory).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Overwrite files that exist.
    #[arg(short, long)]
    force: bool,
}

#[derive(clap::Args)]
pub struct VerifyArgs {
    /// The archive.
    archive: PathBuf,
}

/// Streams the archive through the decoder with bounded memory, calling
/// `on_event` for each event. Decoder errors become [`CorruptArchive`].
fn stream_archive(path: &Path, quiet: bool, mut on_event: impl FnMut(Event) -> Result<()>) -> Result<()> {
    let mut f = File::open(path).with_context(|| format!("cannot open `{}`", path.display()))?;
    let total = f.metadata()?.len();
    let pb = progress(total, quiet, "decode");
    let mut dec = StreamDecoder::new(DecodeLimits::default());
    let mut buf = vec![0u8; 1 << 20];
    loop {
        while let Some(ev) = dec.next_event().map_err(CorruptArchive)? {
            on_event(ev)?;
        }
        let n = f
            .read(&mut buf)
            .with_context(|| format!("cannot read `{}`", path.display()))?;
        if n == 0 {
            break;
        }
        pb.inc(n as u64);
        dec.push(&buf[..n]);
    }
    pb.finish_and_clear();
    dec.finish().map_err(CorruptArchive)?;
    Ok(())
}

pub fn run(args: Args, quiet: bool) -> Result<()> {
    let dir = args.output.unwrap_or_else(|| PathBuf::from("."));
    let mut current: Option<AtomicFile> = None;
    let mut written = Vec::new();
    let mut total = 0u64;
    stream_archive(&args.archive, quiet, |ev| {
        match ev {
            Event::FileStart { path, .. } => {
                // `path` was checked by the decoder: relative, no `..`.
                let target = dir.join(&path);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).with_context(|| format!("cannot create `{}`", parent.display()))?;
                }
                current = Some(
                    AtomicFile::create(&target, args.force)
                        .with_context(|| format!("cannot write `{}`", target.display()))?,
                );
            }
            Event::Data(d) => {
                if let Some(f) = current.as_mut() {
                    f.write_all(&d).context("write failed")?;
                    total += d.len() as u64;
                }
            }
            Event::FileEnd { .. } => {
                // The decoder verified the SHA-256 before reporting the end: only
                // then does the file appear under its name.
                if let Some(f) = current.take() {
                    let p = f.path().to_path_buf();
                    f.commit().with_context(|| format!("cannot write `{}`", p.display()))?;
                    written.push(p);
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    if !quiet {
        for p in &written {
            eprintln!("{}", p.display());
        }
        eprintln!("{} file(s), {} rebuilt and verified", written.len(), human(total));
    }
    Ok(())
}

pub fn verify(args: VerifyArgs, quiet: bool) -> Result<()> {
    let mut files = 0;
    let mut total = 0u64;
    stream_archive(&args.archive, quiet, |ev| {
        match ev {
            Event::FileEnd { .. } => files += 1,
            Event::Data(d) => total += d.len() as u64,
            _ => {}
        }
        Ok(())
    })?;
    if !quiet {
        println!(
            "{}: OK ({} file(s), {} verified)",
            args.archive.display(),
            files,
            human(total)
        );
    }
    Ok(())
}
