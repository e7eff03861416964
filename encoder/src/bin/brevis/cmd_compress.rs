//! `brevis compress IN... [-o OUT]`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use brevis_decoder::DigestKind;
use brevis_encoder::atomic::AtomicFile;
use brevis_encoder::synth::{AStarSearch, CandidateSearch, Prior, Synthesizer};
use brevis_encoder::{compress_files_with_base, CompressOptions, DEFAULT_CHUNK_BYTES, FAST_DECODE_CHUNK_BYTES};

use crate::common::{collect_inputs, human, input_files, load_base, map_sources, progress, ratio, stdout_file, Source};

#[derive(clap::Args)]
pub struct Args {
    /// Files or one model directory.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Archive to write (default: the first input's name + `.brv`).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Write the archive to standard output instead of a file, as it is made
    /// (a failure stops it with an error and a non-zero exit code after what
    /// was written). Refused when standard output is a terminal, unless with
    /// `--force`, or one of the inputs.
    #[arg(short = 'c', long, conflicts_with_all = ["output", "report"])]
    stdout: bool,
    /// Overwrite the output if it exists (with `--stdout`: write to a terminal).
    #[arg(short, long)]
    force: bool,
    /// Search effort: 0 fastest, 1 default, 2 tries more.
    #[arg(long, default_value_t = 1)]
    effort: u32,
    /// The synthesizer: `astar` (best-first over the grammar, ordered by the
    /// prior, bounded by the effort; at efforts 0 and 1 large tensor chunks searched on
    /// a sample, and like chunks built from an earlier one's program; the
    /// default) or
    /// `menu` (a fixed menu of decompositions per dtype, every candidate built).
    #[arg(long, value_enum, default_value_t = SearchKind::Astar)]
    search: SearchKind,
    /// The production prior for `--search astar`: a file written by `brevis
    /// train-prior`, or `none` (uniform). Default: the prior shipped with brevis.
    #[arg(long, value_name = "FILE|none")]
    prior: Option<PathBuf>,
    /// Never use context-coded literals (`Lit.ctx`), for ablations.
    #[arg(long)]
    no_ctx: bool,
    /// Search every chunk whole, for ablations. By default `--search astar` at
    /// efforts 0 and 1 searches a tensor chunk of 128 Ki words or more on a sample of
    /// it (one word in eight, at least 64 Ki words, in eight blocks of whole
    /// rows) and builds the winning program on the whole chunk.
    #[arg(long)]
    no_sample: bool,
    /// Search every chunk, for ablations. By default `--search astar` at efforts
    /// 0 and 1 builds a tensor chunk with the program shape found for an earlier
    /// chunk like it (the same tensor name but for its numbers, as the same
    /// tensor of another layer, or an earlier chunk of the same tensor; the same
    /// dtype, row length and size) in an earlier round of at most 16 chunks,
    /// and searches only where that shape does not apply or takes over 1% more
    /// bytes per word than it did there.
    #[arg(long)]
    no_reuse: bool,
    /// Favour decode speed over size: no context-coded literals (`Lit.ctx`,
    /// `Lit.nbr`), a slower-decoding literal encoding only where it is 3%
    /// smaller, Huffman codes kept short where that costs under 0.15%, 1 MiB
    /// chunks instead of 4 MiB, and XXH3-128 file digests unless
    /// `--digest` says otherwise (what it costs and buys per file:
    /// `bench/decode.sh`, in `bench/RESULTS.md`).
    #[arg(long)]
    fast_decode: bool,
    /// The hash of each file's digest in the archive: `sha256` (what model hubs
    /// publish, so the archive proves it rebuilds that file), `blake3` (verified
    /// several times faster) or `xxh3-128` (faster again, and as sure to catch
    /// damage, but not a cryptographic hash): `cargo bench -p brevis-decoder
    /// --bench digests`. Default: `sha256`, or `xxh3-128` with `--fast-decode`.
    #[arg(long, value_enum)]
    digest: Option<DigestArg>,
    /// Write a JSON report of the search: per tensor its programs, bytes,
    /// candidates compared (menu) or productions expanded (astar) and search time; per run how often each operator
    /// and literal encoding was used, and the fallback rates.
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,
    /// A fine-tune's base (an archive, a model folder or a file): tensors with
    /// a same-name, same-dtype, same-shape tensor in it are stored as their
    /// difference from it; decoding then needs the same base (`--base`).
    #[arg(long, value_name = "BASE")]
    base: Option<PathBuf>,
    /// Store identical tensors and files as many times as they occur (by
    /// default each is stored once and copied).
    #[arg(long)]
    no_dedup: bool,
}

/// Where `compress` writes the archive.
enum Destination {
    /// A file, written atomically (`--output`, or the default name).
    File(PathBuf),
    /// Standard output (`--stdout`), checked and opened before any work.
    Stdout(std::fs::File),
}

/// Bytes gathered before a write to standard output (a chunk's record is
/// about a MiB or a few).
const STDOUT_BUFFER: usize = 1 << 20;

/// The archive's path: `--output`, or the first input's name + `.brv`.
fn output_path(args: &Args) -> Result<PathBuf> {
    if let Some(o) = &args.output {
        return Ok(o.clone());
    }
    let first = &args.inputs[0];
    let name = first
        .file_name()
        .context("input has no name")?
        .to_string_lossy()
        .into_owned();
    Ok(first.with_file_name(format!("{}.brv", name.trim_end_matches('/'))))
}

/// Standard output as the archive ([`stdout_file`]), refused where it is one
/// of the inputs (`>>` appending to it, say: `>` has emptied it already, and
/// the archive would hold nothing of it).
fn stdout_for(sources: &[Source], force: bool) -> Result<std::fs::File> {
    let stdout = stdout_file(force)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let out = stdout.metadata().context("cannot write to standard output")?;
        for s in sources {
            let same = std::fs::metadata(&s.disk).is_ok_and(|m| m.dev() == out.dev() && m.ino() == out.ino());
            if out.is_file() && same {
                bail!("standard output is one of the inputs (`{}`)", s.disk.display());
            }
        }
    }
    Ok(stdout)
}

/// The hashes `--digest` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DigestArg {
    /// SHA-256.
    Sha256,
    /// BLAKE3.
    Blake3,
    /// XXH3-128 (not cryptographic).
    #[value(name = "xxh3-128", alias = "xxh3")]
    Xxh3,
}

/// Which synthesizer `--search` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SearchKind {
    /// `CandidateSearch`: the fixed menu.
    Menu,
    /// `AStarSearch`: bounded A* with the prior.
    Astar,
}

/// The synthesizer the flags ask for.
fn synthesizer(args: &Args) -> Result<Box<dyn Synthesizer>> {
    if args.prior.is_some() && args.search != SearchKind::Astar {
        bail!("--prior only applies to --search astar");
    }
    if args.no_reuse && args.search != SearchKind::Astar {
        bail!("--no-reuse only applies to --search astar");
    }
    if args.no_sample && args.search != SearchKind::Astar {
        bail!("--no-sample only applies to --search astar");
    }
    Ok(match args.search {
        SearchKind::Menu => {
            let search = CandidateSearch {
                ctx: !args.no_ctx,
                ..CandidateSearch::with_effort(args.effort)
            };
            Box::new(if args.fast_decode { search.fast_decode() } else { search })
        }
        SearchKind::Astar => {
            let prior = match args.prior.as_deref() {
                None => Some(std::sync::Arc::new(Prior::default_prior())),
                Some(p) if p.as_os_str() == "none" => None,
                Some(p) => {
                    let text = std::fs::read_to_string(p).with_context(|| format!("cannot read `{}`", p.display()))?;
                    let prior = Prior::parse(&text).with_context(|| format!("`{}`", p.display()))?;
                    Some(std::sync::Arc::new(prior))
                }
            };
            let search = AStarSearch {
                ctx: !args.no_ctx,
                prior,
                sample: !args.no_sample,
                reuse: !args.no_reuse,
                ..AStarSearch::with_effort(args.effort)
            };
            Box::new(if args.fast_decode { search.fast_decode() } else { search })
        }
    })
}

pub fn run(args: Args, quiet: bool) -> Result<()> {
    let synth = synthesizer(&args)?;
    let sources = collect_inputs(&args.inputs)?;
    let dest = if args.stdout {
        Destination::Stdout(stdout_for(&sources, args.force)?)
    } else {
        Destination::File(output_path(&args)?)
    };
    // Never write over an input, even with -f.
    if let Destination::File(out) = &dest {
        if let Ok(out_canon) = out.canonicalize() {
            for s in &sources {
                if s.disk.canonicalize().is_ok_and(|c| c == out_canon) {
                    bail!("output `{}` is one of the inputs", out.display());
                }
            }
        }
    }
    let maps = map_sources(&sources)?;
    let files = input_files(&sources, &maps);
    let total: u64 = files.iter().map(|f| f.data.len() as u64).sum();
    let base = args.base.as_deref().map(load_base).transpose()?;

    let pb = progress(total, quiet, "compress");
    let recorder = crate::report::Recorder::new(&*synth);
    let search: &dyn Synthesizer = if args.report.is_some() { &recorder } else { &*synth };
    let started = std::time::Instant::now();
    let digest = match (args.digest, args.fast_decode) {
        (Some(DigestArg::Sha256), _) | (None, false) => DigestKind::Sha256,
        (Some(DigestArg::Blake3), _) => DigestKind::Blake3,
        (Some(DigestArg::Xxh3), _) | (None, true) => DigestKind::Xxh3,
    };
    let opts = CompressOptions {
        dedup: !args.no_dedup,
        digest,
        chunk_bytes: if args.fast_decode {
            FAST_DECODE_CHUNK_BYTES
        } else {
            DEFAULT_CHUNK_BYTES
        },
        ..CompressOptions::default()
    };
    let progress = |n| pb.inc(n);
    let to = match &dest {
        Destination::File(path) => path.display().to_string(),
        Destination::Stdout(_) => "standard output".into(),
    };
    let (len, reports) = match dest {
        Destination::File(path) => {
            let out =
                AtomicFile::create(&path, args.force).with_context(|| format!("cannot write `{}`", path.display()))?;
            let (out, len, reports) = compress_files_with_base(out, &files, base.as_ref(), search, &opts, &progress)?;
            out.commit()
                .with_context(|| format!("cannot write `{}`", path.display()))?;
            // `--report` reads the archive written (it conflicts with `--stdout`).
            if let Some(report) = &args.report {
                let data = crate::common::map_file(&path)?;
                let json = crate::report::report_json(&data, &recorder, &reports, started.elapsed())?;
                std::fs::write(report, json).with_context(|| format!("cannot write `{}`", report.display()))?;
            }
            (len, reports)
        }
        Destination::Stdout(stdout) => {
            let out = std::io::BufWriter::with_capacity(STDOUT_BUFFER, stdout);
            let (mut out, len, reports) =
                compress_files_with_base(out, &files, base.as_ref(), search, &opts, &progress)?;
            out.flush().context("cannot write to standard output")?;
            (len, reports)
        }
    };
    pb.finish_and_clear();
    let fallbacks: u64 = reports.iter().map(|r| r.verify_fallbacks).sum();
    if fallbacks > 0 {
        eprintln!("brevis: warning: {fallbacks} chunk(s) failed program verification and were stored raw (please report this)");
    }
    if !quiet {
        let segs = reports.iter().flat_map(|r| &r.segments);
        let copies = segs
            .clone()
            .filter(|s| s.programs.first().is_some_and(|p| p.starts_with("copy of")))
            .count();
        let deltas = segs
            .filter(|s| s.programs.first().is_some_and(|p| p.starts_with("base ^")))
            .count();
        if copies > 0 || deltas > 0 {
            eprintln!("{copies} segment(s) stored as copies of identical ones, {deltas} tensor(s) as differences from the base");
        }
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "{} -> {}: {} -> {} ({:.4}x) in {:.2}s, {:.1} MB/s",
            args.inputs[0].display(),
            to,
            human(total),
            human(len),
            ratio(total, len),
            secs,
            total as f64 / 1e6 / secs.max(1e-9)
        );
    }
    Ok(())
}
