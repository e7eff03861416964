//! `brevis`: lossless compression of neural-network weights as programs.
//!
//! Exit codes: 0 success; 1 an error with the inputs or the file system;
//! 2 bad usage; 3 the archive is corrupt or fails verification.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd_compress;
mod cmd_decompress;
mod cmd_demo;
mod cmd_inspect;
mod cmd_train_prior;
mod common;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod huge_pages;
mod report;
mod shared_xxh3;

/// Lossless, bit-exact compression of neural-network weights as programs.
///
/// Run with no command to compress the bundled checkpoint, decompress it,
/// verify it bit for bit and print the sizes against zstd.
#[derive(Parser)]
#[command(name = "brevis", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Worker threads (default: all cores).
    #[arg(long, global = true)]
    threads: Option<usize>,
    /// No progress bar, no summary (errors are still printed).
    #[arg(short, long, global = true)]
    quiet: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Compress files or a model directory into one archive.
    Compress(cmd_compress::Args),
    /// Rebuild the files of an archive, verifying each by its digest (SHA-256, BLAKE3 or XXH3-128).
    Decompress(cmd_decompress::Args),
    /// Show each tensor's dtype, shape, program and ratio, and totals by dtype.
    Inspect(cmd_inspect::Args),
    /// Decode a whole archive in memory and check every checksum and hash.
    Verify(cmd_decompress::VerifyArgs),
    /// The bundled round trip (the default with no command).
    Demo,
    /// Learn the A* search's production prior from sample files.
    TrainPrior(cmd_train_prior::Args),
}

/// Makes glibc's malloc keep freed memory for reuse instead of handing it back
/// to the kernel at once.
///
/// Decoding allocates and frees a few MiB per chunk (the literal's words, the chunk's
/// bytes). With glibc's defaults the first such blocks are fresh mappings, and later
/// ones come from the top of the heap, which is trimmed back to the kernel whenever
/// more than twice the block size lies free there; either way every chunk touched
/// freshly zeroed pages. Page faults and unmapping took about 15% of `brevis verify`
/// (perf, BF16 corpus file, one thread): 16.7k minor faults, 4.3k with these
/// settings, and 15 to 25% less wall time, with the same peak RSS (the freed memory
/// is reused, not added to). Blocks up to 32 MiB (glibc's largest mmap threshold)
/// come from the heap, and up to 64 MiB of free heap top is kept (more when
/// decoding: [`huge_pages::advise_heap`]).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_memory() {
    // SAFETY: `mallopt` only sets the allocator's parameters, and is called at the
    // start of `main`, before any other thread exists; it takes and returns plain ints.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

/// Decoding on several threads: every thread allocates from the one heap.
/// Chunks are allocated on worker threads and freed on the main one, so with a
/// heap per thread each worker's heap kept its own peak of free chunks: 2
/// threads peaked at 67 MB against 54–59 MB with one heap (`/usr/bin/time -f
/// %M brevis verify --threads 2` on the BF16 and FP32 corpus archives, see
/// `bench/RESULTS.md`), at the same speed. Compression keeps a heap per thread.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn one_heap_for_all_threads() {
    // SAFETY: as in `keep_freed_memory`: called before any other thread exists.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

fn main() -> ExitCode {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    keep_freed_memory();
    let cli = Cli::parse();
    let decoding = matches!(cli.command, Some(Command::Decompress(_) | Command::Verify(_)));
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if decoding {
        one_heap_for_all_threads();
        huge_pages::advise_heap();
    }
    let threads = cli
        .threads
        .map(|n| n.max(1))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // Decoding starts threads of its own (`cmd_decompress::DecodePool`): rayon's
    // would only idle beside them.
    if !decoding && cli.threads.is_some() {
        if let Err(e) = rayon::ThreadPoolBuilder::new().num_threads(threads).build_global() {
            eprintln!("brevis: cannot start {threads} threads: {e}");
            return ExitCode::from(1);
        }
    }
    let result = match cli.command {
        Some(Command::Compress(a)) => cmd_compress::run(a, cli.quiet),
        Some(Command::Decompress(a)) => cmd_decompress::run(a, cli.quiet, threads),
        Some(Command::Inspect(a)) => cmd_inspect::run(a),
        Some(Command::Verify(a)) => cmd_decompress::verify(a, cli.quiet, threads),
        Some(Command::TrainPrior(a)) => cmd_train_prior::run(a, cli.quiet),
        Some(Command::Demo) | None => cmd_demo::run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("brevis: error: {e:#}");
            ExitCode::from(common::exit_code(&e))
        }
    }
}
