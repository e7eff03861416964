//! Helpers shared by the subcommands: input discovery, progress, formatting,
//! exit codes.

use std::fs::File;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The archive is corrupt or fails verification (exit code 3).
#[derive(Debug)]
pub struct CorruptArchive(pub brevis_decoder::DecodeError);

impl std::fmt::Display for CorruptArchive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.kind() == brevis_decoder::ErrorKind::Limit {
            let hint = match self.0.error {
                brevis_decoder::format::FormatError::LimitExceeded { limit, .. } if limit.contains("max_ratio") => {
                    " (pass --max-ratio 0 to lift it if you trust this archive)"
                }
                _ => "",
            };
            return write!(f, "archive exceeds a decoding limit: {}{hint}", self.0);
        }
        if self.0.kind() == brevis_decoder::ErrorKind::Base {
            return write!(f, "archive needs its base: {}", self.0);
        }
        write!(f, "archive is invalid: {}", self.0)
    }
}

impl std::error::Error for CorruptArchive {}

/// The process exit code for an error: 1 for a missing or wrong base (an
/// input the user must supply), 3 for a corrupt archive.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| {
        c.downcast_ref::<CorruptArchive>()
            .is_some_and(|c| c.0.kind() == brevis_decoder::ErrorKind::Base)
    }) {
        return 1;
    }
    if e.chain().any(|c| {
        c.downcast_ref::<CorruptArchive>().is_some()
            || c.downcast_ref::<crate::cmd_decompress::SalvageIncomplete>().is_some()
    }) {
        3
    } else {
        1
    }
}

/// A file to compress: where it is and its path inside the archive.
pub struct Source {
    pub disk: PathBuf,
    pub archive_path: String,
}

/// Expands the command line's inputs: files keep their base name, a directory
/// contributes every regular file below it (sorted) under its relative path.
pub fn collect_inputs(inputs: &[PathBuf]) -> Result<Vec<Source>> {
    let mut out = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input).with_context(|| format!("cannot read `{}`", input.display()))?;
        if meta.is_dir() {
            let mut files = Vec::new();
            walk(input, &mut files)?;
            files.sort();
            for f in files {
                let rel = f.strip_prefix(input).unwrap_or(&f);
                let parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                out.push(Source {
                    disk: f.clone(),
                    archive_path: parts.join("/"),
                });
            }
        } else if meta.is_file() {
            let name = input
                .file_name()
                .context("input has no file name")?
                .to_string_lossy()
                .into_owned();
            out.push(Source {
                disk: input.clone(),
                archive_path: name,
            });
        } else {
            bail!("`{}` is neither a file nor a directory", input.display());
        }
    }
    let mut seen = std::collections::HashSet::new();
    for s in &out {
        brevis_format::archive::check_path(&s.archive_path)
            .map_err(|e| anyhow::anyhow!("cannot archive `{}`: {e}", s.disk.display()))?;
        if !seen.insert(s.archive_path.clone()) {
            bail!("two inputs would both be stored as `{}`", s.archive_path);
        }
    }
    if out.is_empty() {
        bail!("no files to compress");
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list `{}`", dir.display()))? {
        let entry = entry?;
        let ty = entry.file_type()?;
        let path = entry.path();
        if ty.is_dir() {
            walk(&path, out)?;
        } else if ty.is_file() {
            out.push(path);
        } else {
            eprintln!("brevis: skipping `{}` (not a regular file)", path.display());
        }
    }
    Ok(())
}

/// A fine-tune's base for `--base`: an archive (decoded and verified in
/// memory), a model folder or a file.
pub fn load_base(path: &Path) -> Result<brevis_encoder::BaseTensors> {
    let is_archive = path.is_file() && {
        let mut magic = [0u8; 8];
        let n = std::io::Read::read(&mut File::open(path)?, &mut magic)?;
        n == 8 && magic == brevis_format::archive::MAGIC
    };
    let mut files: Vec<(String, brevis_encoder::base::BaseBytes)> = Vec::new();
    if is_archive {
        let data = map_file(path)?;
        let decoded = brevis_decoder::decode_all(&data, &brevis_decoder::DecodeLimits::default())
            .map_err(CorruptArchive)
            .with_context(|| format!("cannot read the base archive `{}`", path.display()))?;
        for f in decoded {
            files.push((f.path, Box::new(f.data)));
        }
    } else {
        for s in collect_inputs(&[path.to_path_buf()])
            .with_context(|| format!("cannot read the base `{}`", path.display()))?
        {
            files.push((s.archive_path, Box::new(map_file(&s.disk)?)));
        }
    }
    Ok(brevis_encoder::BaseTensors::new(files))
}

/// Maps every source read-only: the maps, to be viewed by [`input_files`].
pub fn map_sources(sources: &[Source]) -> Result<Vec<Mapped>> {
    sources.iter().map(|s| map_file(&s.disk)).collect()
}

/// The compressor's view of mapped sources: each file's bytes under its path in
/// the archive.
pub fn input_files<'a>(sources: &[Source], maps: &'a [Mapped]) -> Vec<brevis_encoder::InputFile<'a>> {
    sources
        .iter()
        .zip(maps)
        .map(|(s, m)| brevis_encoder::InputFile {
            archive_path: s.archive_path.clone(),
            data: m.as_ref(),
        })
        .collect()
}

/// Maps a file read-only. Empty files map to an empty slice.
pub fn map_file(path: &Path) -> Result<Mapped> {
    let f = File::open(path).with_context(|| format!("cannot open `{}`", path.display()))?;
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(Mapped::Empty);
    }
    // SAFETY: the map is read-only; Brevis never writes its inputs. Another process
    // truncating the file while it is mapped could fault, as with any mmap-based
    // tool; every byte read is hashed before and verified after compression, so a
    // file changed under us is caught rather than archived wrongly.
    #[allow(unsafe_code)]
    let m = unsafe { memmap2::Mmap::map(&f) }.with_context(|| format!("cannot map `{}`", path.display()))?;
    Ok(Mapped::Map(m))
}

/// A read-only view of a file.
pub enum Mapped {
    Empty,
    Map(memmap2::Mmap),
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::ops::Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Mapped::Empty => &[],
            Mapped::Map(m) => m,
        }
    }
}

/// A progress bar on stderr when it is a terminal and not `quiet`; hidden otherwise.
pub fn progress(total: u64, quiet: bool, what: &str) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

/// `12.3 MB` style sizes (decimal units).
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{bytes} B")
    }
}

/// `original / compressed`, or 0 for an empty archive.
pub fn ratio(original: u64, compressed: u64) -> f64 {
    if compressed == 0 {
        0.0
    } else {
        original as f64 / compressed as f64
    }
}

/// A file of one of the process's standard streams (a duplicate of its
/// descriptor): read and written directly, without std's buffers (standard
/// output's flushes at every newline, for instance).
#[cfg(unix)]
pub fn std_stream(stream: impl std::os::fd::AsFd) -> std::io::Result<File> {
    Ok(File::from(stream.as_fd().try_clone_to_owned()?))
}

/// A file of one of the process's standard streams (a duplicate of its handle).
#[cfg(windows)]
pub fn std_stream(stream: impl std::os::windows::io::AsHandle) -> std::io::Result<File> {
    Ok(File::from(stream.as_handle().try_clone_to_owned()?))
}

/// Standard output, for an archive's or files' bytes (`--stdout`): refused
/// where it is a terminal, unless `force`; widened where it is a pipe.
pub fn stdout_file(force: bool) -> Result<File> {
    if std::io::stdout().is_terminal() && !force {
        bail!("standard output is a terminal: redirect it to a file or a pipe (or add --force)");
    }
    let stdout = std_stream(std::io::stdout()).context("cannot write to standard output")?;
    widen_pipe(&stdout);
    Ok(stdout)
}

/// What [`widen_pipe`] asks for: Linux's most for an unprivileged process by
/// default (`/proc/sys/fs/pipe-max-size`).
#[cfg(target_os = "linux")]
const PIPE_BYTES: libc::c_int = 1 << 20;

/// Where `file` is a pipe (Linux), asks the kernel to let it hold 1 MiB
/// instead of 64 KiB: a writer of MiBs and its reader then take turns 16
/// times less often. `brevis decompress -c --threads 1` of the `--fast-decode`
/// BF16 and FP32 corpus archives into a pipe emptied as `bench/wasm/timer.py`
/// empties it (1 MiB reads on the other core) took 39 and 80 ms instead of 58
/// and 147 (best of 15, builds with and without it; 26 and 56 ms to
/// `/dev/null`).
fn widen_pipe(file: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::FileTypeExt;
        if file.metadata().is_ok_and(|m| m.file_type().is_fifo()) {
            // SAFETY: F_SETPIPE_SZ on a descriptor this process owns (the
            // duplicate in `file`, open for the call) takes an int and changes
            // only the pipe's capacity; a refusal (returned, ignored) changes
            // nothing.
            #[allow(unsafe_code)]
            unsafe {
                libc::fcntl(file.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}
