//! `brevis decompress ARCHIVE [-o DIR]` and `brevis verify ARCHIVE`.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use brevis_decoder::format::archive::{open_record, ChunkRecord, RecordHead};
use brevis_decoder::format::program::Limits;
use brevis_decoder::format::stream::LeBytes;
use brevis_decoder::format::FormatError;
use brevis_decoder::{
    decode_chunk_record, Ahead, Archive, Blake3Tree, ChunkPlace, DecodeError, DecodeLimits, DecodedChunk, DigestKind,
    Digester, Event, FileHasher, FileInfo, ParsedChunk, PendingChunk, Piece, StreamDecoder, Subtrees, WrittenOutput,
};
use brevis_encoder::atomic::AtomicFile;
use brevis_encoder::BaseTensors;

use crate::common::{human, load_base, map_file, progress, std_stream, stdout_file, CorruptArchive, Mapped};
use crate::shared_xxh3::SharedXxh3;
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    /// The archive (`-`: standard input).
    archive: PathBuf,
    /// Only these files, by their paths in the archive (`brevis inspect`
    /// lists them). From an archive file whose index is intact, when they
    /// hold under half its bytes, only their chunks are read (through the
    /// index, one thread); otherwise the whole archive is decoded and
    /// checked, on every thread, and the others are not written.
    files: Vec<String>,
    /// Directory to rebuild the files in (default: the current directory).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Write the files' bytes to standard output, one after another in archive
    /// order, instead of rebuilding them as files. Each file's digest is
    /// checked at its end: a mismatch stops with exit code 3, but what came
    /// before it is already written, so check the exit status. Refused when
    /// standard output is a terminal, unless with `--force`.
    #[arg(short = 'c', long, conflicts_with_all = ["output", "salvage"])]
    stdout: bool,
    /// Overwrite files that exist (with `--stdout`: write to a terminal).
    #[arg(short, long)]
    force: bool,
    /// Rebuild what can be rebuilt from a damaged archive: intact files under
    /// their names, damaged ones as `NAME.partial` with the lost ranges zeroed,
    /// and a list of what was lost (exit code 3 if anything was).
    #[arg(long)]
    salvage: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

#[derive(clap::Args)]
pub struct VerifyArgs {
    /// The archive (`-`: standard input).
    archive: PathBuf,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Limits against decompression bombs.
#[derive(clap::Args)]
pub struct LimitArgs {
    /// Refuse more than N bytes of output per byte of archive (beyond the first
    /// 64 MiB); 0 lifts the limit, for archives you trust that hold mostly zeros.
    #[arg(long, value_name = "N", default_value_t = brevis_decoder::DEFAULT_MAX_RATIO)]
    max_ratio: u64,
    /// Refuse to keep more than N bytes at once for later copies of
    /// deduplicated segments (default 4 GiB). `decompress` keeps none: it
    /// reads copies back from the files it wrote. `verify` (and `decompress
    /// --stdout`) keeps none of an archive read from a file: it decodes their
    /// sources' chunks again.
    #[arg(long, value_name = "N", default_value_t = brevis_decoder::DEFAULT_MAX_RETAINED)]
    max_retained: u64,
    /// The base the archive was compressed against (`compress --base`): an
    /// archive, a model folder or a file.
    #[arg(long, value_name = "BASE")]
    base: Option<PathBuf>,
}

impl LimitArgs {
    fn limits(&self) -> DecodeLimits {
        DecodeLimits {
            max_ratio: self.max_ratio,
            max_retained_bytes: self.max_retained,
            ..DecodeLimits::default()
        }
    }

    fn base(&self) -> Result<Option<BaseTensors>> {
        self.base.as_deref().map(load_base).transpose()
    }
}

/// Decoded bytes (as chunk records declare them) started ahead per worker
/// thread, at least ([`Ahead`]: or the largest chunk seen, if larger), and input
/// read ahead ([`StreamDecoder::ahead_budget`]): with the default 4 MiB chunks
/// one chunk per worker and a spare, as before, and 8 MiB of input for two;
/// with `--fast-decode`'s 1 MiB chunks two per worker and a spare, and 4 MiB of
/// input; with many small chunks (tensors smaller than a chunk are chunks of
/// their own) enough to keep each worker busy. A new one is started as soon as
/// one is used, so a worker finishing one finds the next.
///
/// Kept small because memory a process touches for the first time costs: the
/// kernel zeroes every fresh page, and where the machine is a virtual one the
/// host backs it too. `perf record` of `brevis verify --threads 2` on the
/// `--fast-decode` BF16 corpus archive put 7-26% of the samples (runs vary with
/// the host) in the kernel's `clear_page_erms` with 4 MiB ahead and read ahead
/// per thread (peak RSS 31 MB; one thread 10 MB), 2-3% with 1 MiB (15-20 MB).
/// But with 1 MiB (one `--fast-decode` chunk per worker and a spare), the
/// thread reading the archive, busy with a chunk of its own, often left the
/// other without one: two threads verified the `--fast-decode` BF16, FP16 and
/// FP32 corpus archives 2-6% faster with 2 MiB (best of 15, one build given
/// each through a throwaway environment variable, and `bench/threads.py` with
/// builds before and after), and no faster with 3 or 4.
const AHEAD_PER_THREAD: usize = 2 << 20;
/// Chunks pending per worker thread, at most.
const CHUNKS_PER_THREAD: usize = 64;

/// Pieces of file data queued for the hashing thread, at most (a chunk is 4 MiB
/// by default): enough to keep it busy, little against the input read ahead.
const HASH_QUEUE: usize = 2;

/// What the hashing thread gets.
enum HashMsg {
    Start(DigestKind, u64),
    Data(Piece),
    Hashed(Piece, Subtrees),
    Finish,
}

/// The hashing thread's hasher of the current file: a BLAKE3 one takes the
/// subtrees the decoding threads hashed.
enum FileDigest {
    Plain(Digester),
    Tree(Blake3Tree),
}

impl FileDigest {
    fn new(kind: DigestKind, size: u64) -> Self {
        match kind {
            DigestKind::Blake3 => FileDigest::Tree(Blake3Tree::new(size)),
            DigestKind::Sha256 | DigestKind::Xxh3 => FileDigest::Plain(Digester::new(kind)),
        }
    }

    fn update(&mut self, data: &[u8], subtrees: Option<&Subtrees>) {
        match (self, subtrees) {
            (FileDigest::Tree(t), Some(s)) => t.update_with_subtrees(data, s),
            (FileDigest::Tree(t), None) => t.update(data),
            (FileDigest::Plain(d), _) => d.update(data),
        }
    }

    fn finish(&mut self) -> [u8; 32] {
        match self {
            FileDigest::Tree(t) => t.finalize(),
            FileDigest::Plain(d) => d.finish(),
        }
    }
}

/// A [`FileHasher`] that computes each file's digest on a thread of its own, so
/// that with several threads hashing (SHA-256 runs at about 2 GB/s, a good part
/// of a decode's time) overlaps decoding instead of following each batch of chunks.
/// The thread shares each piece with its event ([`Piece`]): nothing is copied.
/// In BLAKE3 archives the decoding threads hash most of each chunk's bytes as
/// they make them ([`Subtrees`], see [`DecodePool::start`]) and this thread
/// merges their chaining values: it is one thread, so whatever it does itself
/// bounds a decode on many cores (with 2 threads on the `--fast-decode` BF16
/// corpus archive, `perf sched timehist -s`: 12-16 ms of its CPU before, 1.4-1.7
/// ms now, for the same total hashing).
///
/// XXH3-128 digests (`--fast-decode` archives) are not computed on that thread:
/// at over 10 GB/s they cost little, and handing each 1 MiB piece to the
/// hashing thread woke it twice a chunk (two threads on a synthetic 1 GiB
/// `--fast-decode` archive, best of 21, `bench/threads.py`: 0.384 s with the
/// hashing thread, 0.360 s without; the BF16 corpus archive 28.7 and 23.6 ms).
/// The decoding threads hash their chunks when their turn comes, and the
/// thread reading the archive the rest ([`SharedXxh3`]). So the thread starts
/// with the first file whose digest is not XXH3-128: a decode of XXH3-128
/// files no longer pays its start and its join, on the thread reading the
/// archive, for nothing (`perf stat -r 300 brevis --threads 2 verify -q` of a
/// 169-byte `--fast-decode` archive, two builds in turns: 1.83-2.09 ms with
/// the thread started up front, 1.63-1.77 ms without). Should it fail to start,
/// that file is hashed in place.
struct ThreadedHasher {
    /// The file digest the decoding threads share, used for the current file
    /// when it is XXH3-128.
    xxh3: std::sync::Arc<SharedXxh3>,
    /// Whether the current file's digest is XXH3-128 ([`Self::xxh3`]).
    xxh3_file: bool,
    /// The hashing thread, once a file needed it.
    thread: Option<HashThread>,
    /// The current file's digest, hashed here when the thread could not start.
    in_place: Option<FileDigest>,
}

/// The hashing thread of a [`ThreadedHasher`] and its two channels.
///
/// Dropping it closes its queue, which ends the thread; it is not joined
/// (see [`DecodePool`]'s `Drop`): every digest asked for was received.
struct HashThread {
    tx: std::sync::mpsc::SyncSender<HashMsg>,
    digests: std::sync::mpsc::Receiver<[u8; 32]>,
}

impl HashThread {
    /// Starts the thread.
    fn start() -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<HashMsg>(HASH_QUEUE);
        let (dtx, digests) = std::sync::mpsc::channel();
        std::thread::Builder::new().name("file-digest".into()).spawn(move || {
            let mut h = FileDigest::new(DigestKind::Sha256, 0);
            for msg in rx {
                match msg {
                    HashMsg::Start(kind, size) => h = FileDigest::new(kind, size),
                    HashMsg::Data(d) => h.update(&d, None),
                    HashMsg::Hashed(d, subtrees) => h.update(&d, Some(&subtrees)),
                    HashMsg::Finish => {
                        if dtx.send(h.finish()).is_err() {
                            return;
                        }
                    }
                }
            }
        })?;
        Ok(HashThread { tx, digests })
    }

    fn send(&self, msg: HashMsg) {
        // A send fails only if the thread is gone; `finish` then reports a
        // digest that cannot match, so the file fails its check.
        let _ = self.tx.send(msg);
    }

    fn finish(&self) -> [u8; 32] {
        self.send(HashMsg::Finish);
        // All zeros only if the thread died: never a file's real digest in practice,
        // and the decoder reports the mismatch.
        self.digests.recv().unwrap_or([0; 32])
    }
}

impl ThreadedHasher {
    fn new(xxh3: std::sync::Arc<SharedXxh3>) -> Self {
        ThreadedHasher {
            xxh3,
            xxh3_file: false,
            thread: None,
            in_place: None,
        }
    }

    /// Hashes the current (not XXH3-128) file's next piece where it goes.
    fn hash(&mut self, data: &Piece, subtrees: Option<Subtrees>) {
        if let Some(h) = &mut self.in_place {
            h.update(data, subtrees.as_ref());
        } else if let Some(t) = &self.thread {
            // Shared, not copied: the thread lets go of it once hashed.
            t.send(match subtrees {
                Some(s) => HashMsg::Hashed(data.clone(), s),
                None => HashMsg::Data(data.clone()),
            });
        }
    }
}

impl FileHasher for ThreadedHasher {
    fn start(&mut self, kind: DigestKind, size: u64) {
        // Every file is numbered, whatever its digest: the decoding threads
        // know a file by its number ([`ChunkPlace::file`]).
        self.xxh3.start();
        self.xxh3_file = kind == DigestKind::Xxh3;
        self.in_place = None;
        if self.xxh3_file {
            return;
        }
        if self.thread.is_none() {
            self.thread = HashThread::start().ok();
        }
        match &self.thread {
            Some(t) => t.send(HashMsg::Start(kind, size)),
            None => self.in_place = Some(FileDigest::new(kind, size)),
        }
    }

    fn update(&mut self, data: &Piece) {
        if self.xxh3_file {
            self.xxh3.update(data);
        } else {
            self.hash(data, None);
        }
    }

    fn update_with_subtrees(&mut self, data: &Piece, subtrees: Subtrees) {
        if self.xxh3_file {
            self.xxh3.update(data);
        } else {
            self.hash(data, Some(subtrees));
        }
    }

    fn finish(&mut self) -> [u8; 32] {
        if self.xxh3_file {
            return self.xxh3.finish();
        }
        if let Some(h) = &mut self.in_place {
            return h.finish();
        }
        // No thread and no digest in place: `start` gave one or the other.
        self.thread.as_ref().map_or([0; 32], HashThread::finish)
    }
}

/// Streams the archive through the decoder with bounded memory, calling
/// `on_event` for each event. Decoder errors become [`CorruptArchive`].
///
/// With more than one thread (`--threads`, default all cores) chunk records
/// start decoding on a [`DecodePool`] as soon as they are buffered (one per
/// thread and a spare, more while they declare less than `AHEAD_PER_THREAD`, or
/// the largest chunk, per thread), and files are hashed on a thread of their own
/// (but for XXH3-128 digests, see [`ThreadedHasher`]); memory stays bounded by
/// the input read ahead (about as much) plus the pending chunks, and the events,
/// their order and every check are those of the one-thread decoder.
fn stream_archive(
    path: &Path,
    limits: &LimitArgs,
    quiet: bool,
    threads: usize,
    read_back: Option<Box<dyn WrittenOutput>>,
    mut on_event: impl FnMut(Event) -> Result<()>,
) -> Result<()> {
    let (base, limits) = (limits.base()?, limits.limits());
    let f = open_archive(path)?;
    let meta = f.metadata()?;
    let total = meta.len();
    let pb = progress(total, quiet, "decode");
    let mut dec = match base {
        Some(b) => StreamDecoder::with_base(limits, Box::new(b)),
        None => StreamDecoder::new(limits),
    };
    // One thread: nothing is started ahead, and the decoder always waits.
    let (ahead, pool) = if threads > 1 {
        let xxh3 = std::sync::Arc::new(SharedXxh3::new());
        dec.set_file_hasher(Box::new(ThreadedHasher::new(xxh3.clone())));
        let ahead = Ahead {
            max_chunks: threads * CHUNKS_PER_THREAD,
            workers: threads,
            min_bytes_per_worker: AHEAD_PER_THREAD as u64,
        };
        // This thread helps (see `DecodePool`).
        (ahead, Some(DecodePool::new(threads, xxh3)?))
    } else {
        let ahead = Ahead {
            max_chunks: 0,
            workers: 0,
            min_bytes_per_worker: 0,
        };
        (ahead, None)
    };
    if let Some(output) = read_back {
        dec.read_copies_back(output);
    }
    match MappedArchive::map(&f, &meta) {
        Some(map) => decode_mapped(&mut dec, map, ahead, pool.as_ref(), &pb, &mut on_event)?,
        None => decode_stream(&mut dec, f, path, ahead, pool.as_ref(), &pb, &mut on_event)?,
    }
    pb.finish_and_clear();
    dec.finish().map_err(CorruptArchive)?;
    Ok(())
}

/// The archive named on the command line, opened: `-` is standard input.
fn open_archive(path: &Path) -> Result<File> {
    if path == Path::new("-") {
        use std::io::IsTerminal;
        // What a terminal would type is no archive: fail at once rather than wait.
        if std::io::stdin().is_terminal() {
            anyhow::bail!("standard input is a terminal: pipe the archive in, or name its file");
        }
        return std_stream(std::io::stdin()).context("cannot read the archive from standard input");
    }
    File::open(path).with_context(|| format!("cannot open `{}`", path.display()))
}

/// An archive mapped into memory, which the decoder reads where it lies
/// ([`StreamDecoder::share_input`]) and whose chunks the [`DecodePool`] decodes
/// there: no copy of the archive is made. Reading it in pieces instead, the
/// kernel's copy into the decoder's buffer was 13% of a two-thread `verify` of
/// a synthetic 1 GiB `--fast-decode` archive, and copying each chunk's payloads
/// for its decoding thread ([`ParsedChunk`]) 8%, both on the thread that
/// reads the archive, the one that bounds such a decode (`perf record`).
struct MappedArchive(std::sync::Arc<memmap2::Mmap>);

/// Bytes of the mapped archive consumed between two releases of their pages
/// ([`MappedArchive::release`]) by one thread.
const RELEASE_STEP: usize = 2 << 20;

/// [`RELEASE_STEP`] with other threads decoding an archive with XXH3-128 file
/// digests (`--fast-decode`). Each release costs more than its pages then: the
/// kernel must flush the other cores' TLBs, an interrupt per core, which a
/// virtual machine's host handles. Releasing every 8 MiB instead of every 2 MiB,
/// two threads verified the `--fast-decode` BF16 and FP32 corpus archives 2-4%
/// faster (best of 21 and 11, one build given each step by a throwaway
/// environment variable, and `bench/threads.py` with builds before and after;
/// FP16 within the noise); the peak RSS of two threads rose by 4-7 MB. Other
/// archives decode about ten times slower a byte, so a release weighs a tenth
/// as much there, and they keep [`RELEASE_STEP`]: on one archive of the corpus's
/// files (default settings) two threads peaked at 53-56 MB against 61-66 MB
/// with 8 MiB, as fast (best of 3 each, two builds in turn, `/usr/bin/time -f %M
/// brevis verify --threads 2`; the 64 MiB target of `bench/RESULTS.md` is 67.1 MB).
const RELEASE_STEP_THREADS: usize = 8 << 20;

/// Bytes consumed between two releases, for an archive of file digests `digest`
/// decoded with other threads or not (see [`RELEASE_STEP_THREADS`]).
fn release_step(threads: bool, digest: DigestKind) -> usize {
    if threads && digest == DigestKind::Xxh3 {
        RELEASE_STEP_THREADS
    } else {
        RELEASE_STEP
    }
}

/// How far behind the last release a release starts again. A page touched just
/// past a release (the rest of the record it ends in) is mapped with its
/// neighbours, behind it too: the kernel's fault-around (64 KiB) or the whole
/// large folio of the page cache (up to 2 MiB) at once. Releasing from where the
/// last release ended kept those: the process held about 3% of a synthetic
/// 1 GiB archive by its end (`/proc/PID/pagemap`: a few pages every 2 MiB).
const RELEASE_BEHIND: usize = 2 << 20;

impl MappedArchive {
    /// The archive in `f` mapped, if it is a regular file that can be (not a
    /// pipe, say, nor empty).
    fn map(f: &File, meta: &std::fs::Metadata) -> Option<Self> {
        // The map starts at the file's start: standard input may be a file
        // read partway already, whose archive starts where reading is.
        let at_start = matches!(std::io::Seek::stream_position(&mut &*f), Ok(0));
        if !meta.is_file() || meta.len() == 0 || !at_start {
            return None;
        }
        // SAFETY: the map is read-only and Brevis never writes its inputs. Another
        // process truncating the archive while it is mapped could fault, as with
        // any mmap-based tool (see `map_file`); changed bytes fail their checks.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::Mmap::map(f) }.ok()?;
        // Read ahead of the faults; a hint only, so a refusal changes nothing.
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::Sequential);
        // Where the archive is not in the page cache, have the kernel read it
        // into 2 MiB folios (pieces of cache) and map those whole; also a hint.
        //
        // What the mapping costs depends on how the cache holds the archive:
        // each fault maps up to 64 KiB of it and each release unmaps that again,
        // page by page, but for what one folio holds at a time. Written by
        // `brevis compress` or copied, an archive is cached in folios of 16-28
        // pages; read from disk through this mapping with `MADV_SEQUENTIAL`
        // alone, in folios of 4-31 pages on average, many of a single page
        // (`/proc/kpageflags`). Advised `MADV_HUGEPAGE`, the kernel reads it
        // ahead in 2 MiB folios (`do_sync_mmap_readahead`), 460-490 pages on
        // average, and every later decode from the cache gains: `bench/cold.py
        // --rounds 15` on the `--fast-decode` BF16 / FP16 / FP32 corpus
        // archives, paired ratios to the build before, warm one thread 0.909 /
        // 0.916 / 0.937 and two threads 0.914 / 0.932 / 0.929 (`bench/RESULTS.md`).
        // The cold read itself is as fast (`--rounds 30`: 0.946 and 1.031 on
        // BF16 and FP32; single cold runs vary 2x here). Where the archive
        // was already cached in larger folios the advice changes nothing
        // measurable (`bench/threads.py --runs 60` on fresh copies of the
        // three: paired 0.991-1.012).
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        Some(MappedArchive(std::sync::Arc::new(map)))
    }

    /// Unmaps the pages of `range` (consumed: no chunk decoding or to decode
    /// needs them, but for the sources of copies, which a thread decoding one
    /// again maps again from the page cache), so that what the process holds
    /// does not grow with the archive: its pages stay in the page cache, but no
    /// longer count in this process's resident memory.
    #[cfg_attr(not(unix), allow(unused_variables))]
    fn release(&self, range: std::ops::Range<usize>) {
        // SAFETY: `MADV_DONTNEED` on a shared, read-only file mapping only drops
        // page-table entries: were a page touched again it would be mapped again
        // from the page cache, with the same bytes (memmap2 calls the advice
        // unchecked because on private or anonymous maps it zeroes what was
        // written, and nothing is written here). It is a hint: an error (pages
        // kept) changes nothing.
        #[cfg(unix)]
        #[allow(unsafe_code)]
        let _ = unsafe {
            self.0
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, range.start, range.len())
        };
    }
}

/// A record's body, its checksum not checked.
fn chunk_body(record: &[u8]) -> Result<&[u8], FormatError> {
    let head = RecordHead::parse(record)?;
    record
        .get(5..5 + head.body_len as usize)
        .ok_or(FormatError::Truncated { what: "record" })
}

/// Where `part` lies in `whole`, if it is a slice of it.
fn range_in(whole: &[u8], part: &[u8]) -> Option<std::ops::Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then_some(start..end)
}

/// [`decode_stream`] for a mapped archive: the decoder reads it in place, chunk
/// records start decoding on the pool where they lie, and pages consumed are
/// released every [`release_step`] bytes.
fn decode_mapped(
    dec: &mut StreamDecoder,
    map: MappedArchive,
    ahead: Ahead,
    pool: Option<&DecodePool>,
    pb: &indicatif::ProgressBar,
    on_event: &mut impl FnMut(Event) -> Result<()>,
) -> Result<()> {
    dec.share_input(map.0.clone());
    let mut start = |record: &[u8], limits: &Limits, place: Option<ChunkPlace>| match pool {
        Some(p) => p.start(record, Some(&map.0), limits, place),
        None => Box::new(decode_chunk_record(record, limits)) as Box<dyn PendingChunk>,
    };
    let (mut released, mut reread) = (0, 0);
    while let Some(ev) = dec.next_event_ahead(ahead, &mut start, true).map_err(CorruptArchive)? {
        on_event(ev)?;
        let consumed = map.0.len() - dec.buffered();
        // Copies of retained segments decode their source's records again,
        // mapping pages released long ago, up to a 2 MiB folio for a record
        // of a few bytes: released again, from the archive's start, after any
        // such read (a folder of the corpus's files held 40 MB more of it,
        // where small copies follow each other, released every `release_step`
        // bytes read again instead).
        let reread_now = dec.reread_bytes();
        if consumed - released >= release_step(pool.is_some(), dec.digest_kind()) || reread_now > reread {
            let from = if reread_now > reread {
                0
            } else {
                released.saturating_sub(RELEASE_BEHIND)
            };
            // Both ends on 2 MiB: a huge page mapped whole (`MADV_HUGEPAGE`, see
            // `MappedArchive::map`) is dropped whole, not split into 4 KiB
            // entries first; the rest goes with the next release.
            let end = consumed / RELEASE_BEHIND * RELEASE_BEHIND;
            map.release(from / RELEASE_BEHIND * RELEASE_BEHIND..end);
            pb.set_position(consumed as u64);
            (released, reread) = (consumed, reread_now);
        }
    }
    pb.set_position(map.0.len() as u64);
    Ok(())
}

/// Bytes per read of the archive, at most.
const READ_PIECE: usize = 1 << 20;

/// Bytes per read of the archive, at least, and while the next record's length
/// is not buffered: a read stops where the record it completes ends
/// ([`StreamDecoder::record_remaining`]) unless that is closer than this (small
/// records: FILE and SEGMENT records, small tensors' chunks),
/// so that no more than this is left to move to the buffer's start once the
/// records before it are consumed. With reads of a fixed [`READ_PIECE`], that
/// move was 2.8% of a one-thread `verify` of the `--fast-decode` BF16 corpus
/// archive (`perf record --call-graph dwarf`: `StreamDecoder::space`'s
/// `copy_within`), about half of every record.
const SMALL_READ: usize = 64 << 10;

/// Where a [`DecodePool`] thread may run: the CPUs the process may use (Linux).
///
/// The kernel may start a new thread on its parent's CPU: here it did, the
/// hashing thread having just started on the other one. There, beside the
/// reading thread, the pool's thread waited for that CPU while the other idled
/// until the kernel's balancing moved it, 3.7 and 5.5 ms later in two runs
/// (`perf sched timehist` of `brevis verify --threads 2` of the `--fast-decode`
/// BF16 corpus archive, which takes about 16 ms). So its parent sends it
/// elsewhere as it starts ([`Placement::keep_off`]; the kernel moves it at
/// once), and then it may run anywhere again ([`Placement::restore`]).
#[derive(Clone, Copy)]
struct Placement {
    #[cfg(target_os = "linux")]
    allowed: libc::cpu_set_t,
    #[cfg(target_os = "linux")]
    parent_cpu: usize,
}

impl Placement {
    /// The calling thread's CPU and the CPUs it may use, if there are others.
    fn of_caller() -> Option<Placement> {
        #[cfg(target_os = "linux")]
        {
            let size = std::mem::size_of::<libc::cpu_set_t>();
            // SAFETY: sched_getcpu takes nothing. cpu_set_t is a plain bit
            // array (all zeros is an empty set); sched_getaffinity gets a
            // pointer to a live one and its exact size; CPU_ISSET and CPU_COUNT
            // read within it (`cpu` is below CPU_SETSIZE).
            unsafe {
                let cpu = usize::try_from(libc::sched_getcpu()).ok()?;
                let mut allowed: libc::cpu_set_t = std::mem::zeroed();
                if cpu >= libc::CPU_SETSIZE as usize || libc::sched_getaffinity(0, size, &mut allowed) != 0 {
                    return None;
                }
                (libc::CPU_ISSET(cpu, &allowed) && libc::CPU_COUNT(&allowed) >= 2).then_some(Placement {
                    allowed,
                    parent_cpu: cpu,
                })
            }
        }
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Keeps `thread` (just started) off the parent's CPU. Failing is harmless.
    fn keep_off<T>(&self, thread: &std::thread::JoinHandle<T>) {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::thread::JoinHandleExt;
            let mut elsewhere = self.allowed;
            // SAFETY: `elsewhere` is a live cpu_set_t, `parent_cpu` below
            // CPU_SETSIZE (checked in `of_caller`), and the pthread_t is that
            // of a thread whose handle we hold (not joined, so not reused).
            unsafe {
                libc::CPU_CLR(self.parent_cpu, &mut elsewhere);
                libc::pthread_setaffinity_np(
                    thread.as_pthread_t(),
                    std::mem::size_of::<libc::cpu_set_t>(),
                    &elsewhere,
                );
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = thread;
    }

    /// Lets the calling thread run on any of the CPUs again.
    fn restore(&self) {
        #[cfg(target_os = "linux")]
        // SAFETY: a pointer to a live cpu_set_t and its exact size.
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.allowed);
        }
    }
}

/// A job for the [`DecodePool`]: a chunk's program to run.
type Job = Box<dyn FnOnce() + Send>;

/// Chunks of at most this many decoded bytes are small: the thread reading the
/// archive runs them itself while it waits ([`PoolChunk::wait`]). `--fast-decode`
/// archives' chunks (1 MiB) are, the default 4 MiB ones are not.
const SMALL_JOB: u64 = 1 << 20;

/// The jobs not started, oldest first (the chunk needed next is the oldest
/// started), each with whether it is small; and whether more may come.
#[derive(Default)]
struct Jobs {
    queue: std::collections::VecDeque<(Job, bool)>,
    closed: bool,
}

/// What the [`DecodePool`]'s threads share.
#[derive(Default)]
struct JobQueue {
    jobs: std::sync::Mutex<Jobs>,
    added: std::sync::Condvar,
}

impl JobQueue {
    /// The oldest job not started, if there is one and it is small.
    fn take_small(&self) -> Option<Job> {
        let mut jobs = self.jobs.lock().ok()?;
        match jobs.queue.front() {
            Some((_, true)) => jobs.queue.pop_front().map(|(job, _)| job),
            _ => None,
        }
    }
}

/// Threads that run chunks' programs while the thread reading the archive starts
/// more. With `--threads N`, N - 1 of them at first, and the reading thread
/// helps: while it waits for a chunk it runs the oldest jobs not started, if small
/// ([`PoolChunk::wait`]), instead of sleeping; an Nth thread starts at the first
/// chunk that is not small, which the reading thread leaves to the others (a
/// long job would keep it from reading and starting chunks: two threads decoded
/// the default BF16, FP16 and FP32 corpus archives 1.54 / 1.36 / 1.50x as fast
/// as one with it helping with every job, 1.66 / 1.62 / 1.63x with rayon's pool
/// of N threads beside it, `bench/threads.py`). Small chunks decode in well
/// under a millisecond each, and with N threads beside the reading thread and
/// the hashing thread, all four took turns on two cores: 3.6k context switches
/// in a two-thread verify of a synthetic 1 GiB `--fast-decode` archive, and the
/// kernel's scheduling 8% of the samples (`perf record`).
struct DecodePool {
    queue: std::sync::Arc<JobQueue>,
    /// The file digest of XXH3-128 archives, which jobs hash their chunks into
    /// when their turn comes.
    xxh3: std::sync::Arc<SharedXxh3>,
    /// Threads started so far.
    started: std::cell::Cell<usize>,
    max_threads: usize,
}

/// A [`DecodePool`] thread's work: runs queued jobs until the queue is closed.
fn worker_loop(queue: &JobQueue) {
    loop {
        let job = {
            let Ok(mut jobs) = queue.jobs.lock() else { return };
            loop {
                match jobs.queue.pop_front() {
                    Some((job, _)) => break job,
                    None if jobs.closed => return,
                    None => match queue.added.wait(jobs) {
                        Ok(j) => jobs = j,
                        Err(_) => return,
                    },
                }
            }
        };
        job();
    }
}

impl DecodePool {
    /// A pool of up to `n` threads (at least 1), `n - 1` of them started now,
    /// whose jobs hash XXH3-128 archives' chunks into `xxh3`.
    fn new(n: usize, xxh3: std::sync::Arc<SharedXxh3>) -> Result<Self> {
        let pool = DecodePool {
            queue: std::sync::Arc::default(),
            xxh3,
            started: std::cell::Cell::new(0),
            max_threads: n.max(1),
        };
        // Started before any work: each off this thread's CPU (see [`Placement`]).
        let placement = Placement::of_caller();
        for _ in 1..pool.max_threads {
            pool.spawn(placement)?;
        }
        Ok(pool)
    }

    /// Starts one more thread; with a `placement`, off its parent's CPU.
    fn spawn(&self, placement: Option<Placement>) -> Result<()> {
        let queue = self.queue.clone();
        // Set once its parent has moved it: it then lifts the restriction.
        let placed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let moved = placed.clone();
        let thread = std::thread::Builder::new()
            .name(format!("decode-{}", self.started.get()))
            .spawn(move || {
                if let Some(p) = placement {
                    while !moved.load(std::sync::atomic::Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                    p.restore();
                }
                worker_loop(&queue)
            })
            .context("cannot start a decoding thread")?;
        if let Some(p) = &placement {
            p.keep_off(&thread);
        }
        placed.store(true, std::sync::atomic::Ordering::Release);
        self.started.set(self.started.get() + 1);
        Ok(())
    }

    /// Queues the chunk record `record` to decode, its checksum checked by the
    /// job. Where `record` lies in `map` (the mapped archive), the job decodes
    /// it there: the thread reading the archive does not touch its bytes, and
    /// the job checks the checksum after decoding, when decoding has brought
    /// them into its core's cache ([`decode_chunk_record`]). Else it is
    /// checked and parsed here, and the parsed program, which holds its own
    /// copy of the literals' payloads, runs in the job: not a copy of
    /// the record as well, so one copy of each chunk's bytes less in memory
    /// while it waits and runs (the two-thread peak on a synthetic 4 GiB
    /// `--fast-decode` archive rose past 64 MiB with a record copy per pending
    /// chunk), and one pass less over them.
    ///
    /// Given the chunk's place in its file, the job also hashes what it decoded
    /// while the bytes are in its core's cache: in BLAKE3 archives their
    /// subtrees ([`Subtrees`]), for [`ThreadedHasher`] to merge; in XXH3-128
    /// archives the bytes themselves, into the file's digest, if their turn has
    /// come ([`SharedXxh3::hash_in_turn`]).
    fn start(
        &self,
        record: &[u8],
        map: Option<&std::sync::Arc<memmap2::Mmap>>,
        limits: &Limits,
        place: Option<ChunkPlace>,
    ) -> Box<dyn PendingChunk> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        type Run = Box<dyn FnOnce() -> Result<LeBytes, FormatError> + Send>;
        let in_map = map.and_then(|m| Some((m.clone(), range_in(m, record)?)));
        let work: Result<(Run, u64), FormatError> = match in_map {
            Some((map, range)) => chunk_body(record).and_then(ChunkRecord::parse).map(|chunk| {
                let limits = *limits;
                let run: Run = Box::new(move || decode_chunk_record(&map[range], &limits));
                (run, chunk.decoded_len)
            }),
            None => open_record(record)
                .and_then(|(_, body)| ParsedChunk::parse(body, limits))
                .map(|chunk| {
                    let len = chunk.decoded_len();
                    let run: Run = Box::new(move || chunk.run());
                    (run, len)
                }),
        };
        match work {
            Ok((run, decoded_len)) => {
                let small = decoded_len <= SMALL_JOB;
                // If the thread cannot start, the others run the job.
                // Not placed: started mid-decode, it is left to the kernel,
                // which has the other threads' load to go by by then.
                if !small && self.started.get() < self.max_threads {
                    let _ = self.spawn(None);
                }
                let xxh3 = self.xxh3.clone();
                let job: Job = Box::new(move || {
                    let decoded = run().map(|bytes| {
                        let subtrees = match place {
                            Some(p) if p.digest == DigestKind::Blake3 => Some(Subtrees::hash(&bytes, p)),
                            Some(p) if p.digest == DigestKind::Xxh3 => {
                                xxh3.hash_in_turn(p, &bytes);
                                None
                            }
                            _ => None,
                        };
                        DecodedChunk { subtrees, bytes }
                    });
                    let _ = tx.send(decoded);
                });
                // A poisoned lock (a job panicked, which aborts) drops the job:
                // its chunk then fails with WORKER_GONE.
                if let Ok(mut jobs) = self.queue.jobs.lock() {
                    jobs.queue.push_back((job, small));
                    self.queue.added.notify_one();
                }
            }
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        }
        Box::new(PoolChunk {
            rx,
            got: None,
            queue: self.queue.clone(),
        })
    }
}

/// Closes the queue, drops the jobs not started (after an error nobody waits
/// for them), and lets the threads end by themselves: they are not joined.
/// Every chunk asked for was received by then, and the process ends soon after
/// (`verify`, `decompress`), or goes on while they wake and return. Joining
/// them made the thread reading the archive wait, at the very end of a decode,
/// for the other cores to wake up and exit: 0.07-0.1 ms of a 13 ms two-thread
/// `verify` of the `--fast-decode` BF16 corpus archive (timestamps taken inside
/// the process by a throwaway build). `bench/threads.py --runs 80 --bin OLD
/// --bin NEW` on the `--fast-decode` BF16, FP16 and FP32 corpus archives: two
/// threads 0.980 / 0.994 / 0.992 of the time with joins (paired ratio), one
/// thread (no pool) 0.995-1.002.
impl Drop for DecodePool {
    fn drop(&mut self) {
        let not_started = match self.queue.jobs.lock() {
            Ok(mut jobs) => {
                jobs.closed = true;
                std::mem::take(&mut jobs.queue)
            }
            Err(_) => Default::default(),
        };
        self.queue.added.notify_all();
        drop(not_started);
    }
}

/// A chunk queued on a [`DecodePool`].
struct PoolChunk {
    rx: std::sync::mpsc::Receiver<Result<DecodedChunk, FormatError>>,
    got: Option<Result<DecodedChunk, FormatError>>,
    queue: std::sync::Arc<JobQueue>,
}

/// The job's sender is gone only if it never ran to the end (a panic, which
/// aborts): that chunk then fails.
const WORKER_GONE: FormatError = FormatError::Invalid {
    what: "chunk (its decoding thread stopped)",
};

impl PendingChunk for PoolChunk {
    fn is_ready(&mut self) -> bool {
        if self.got.is_none() {
            match self.rx.try_recv() {
                Ok(r) => self.got = Some(r),
                Err(std::sync::mpsc::TryRecvError::Empty) => return false,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => self.got = Some(Err(WORKER_GONE)),
            }
        }
        true
    }

    /// Runs the oldest jobs not started, while they are small, until this chunk
    /// is done: its own, if no thread has taken it yet, or later ones (their
    /// results wait for their turn).
    fn wait(mut self: Box<Self>) -> Result<DecodedChunk, FormatError> {
        loop {
            if self.is_ready() {
                return self.got.take().unwrap_or(Err(WORKER_GONE));
            }
            match self.queue.take_small() {
                Some(job) => job(),
                None => return self.rx.recv().unwrap_or(Err(WORKER_GONE)),
            }
        }
    }
}

/// The loop of [`stream_archive`]: chunk records start decoding on the pool as
/// soon as they are buffered (within `ahead`); while less input is buffered
/// than they may declare ([`StreamDecoder::ahead_budget`]), input is read
/// instead of waiting for the chunk whose turn it is, so the workers always
/// have the next chunks.
fn decode_stream(
    dec: &mut StreamDecoder,
    mut f: File,
    path: &Path,
    ahead: Ahead,
    pool: Option<&DecodePool>,
    pb: &indicatif::ProgressBar,
    on_event: &mut impl FnMut(Event) -> Result<()>,
) -> Result<()> {
    // Without a pool nothing is started ahead (`ahead` allows none); were it,
    // the chunk would be decoded here and then.
    let mut start = |record: &[u8], limits: &Limits, place: Option<ChunkPlace>| match pool {
        Some(p) => p.start(record, None, limits, place),
        None => Box::new(decode_chunk_record(record, limits)) as Box<dyn PendingChunk>,
    };
    let mut eof = false;
    loop {
        let wait = eof || dec.buffered() as u64 >= dec.ahead_budget(&ahead);
        match dec.next_event_ahead(ahead, &mut start, wait).map_err(CorruptArchive)? {
            Some(ev) => on_event(ev)?,
            None if eof => return Ok(()),
            None => {
                // Straight into the decoder's buffer, up to a record's end.
                let piece = dec
                    .record_remaining()
                    .map_or(SMALL_READ, |left| left.clamp(SMALL_READ, READ_PIECE));
                let n = dec
                    .fill(piece, |b| f.read(b))
                    .with_context(|| format!("cannot read `{}`", path.display()))?;
                if n == 0 {
                    eof = true;
                } else {
                    pb.inc(n as u64);
                }
            }
        }
    }
}

/// Files kept open at most for reading copies back ([`Outputs`]); sources in
/// other files are kept as without reading back (decoded again from a mapped
/// archive, held from a pipe).
const MAX_KEPT: usize = 256;

/// The files `decompress` writes, shared by the loop that writes them and the
/// decoder, which reads copies of retained segments back from them
/// ([`StreamDecoder::read_copies_back`]) instead of decoding their sources
/// again: from the page cache, a copy then costs about what writing it does.
#[derive(Default)]
struct Outputs {
    /// The file being written, with its number (files are numbered in archive order).
    current: Option<(u64, AtomicFile)>,
    /// Files started so far.
    started: u64,
    /// Files holding segments that later ones copy, by number, kept open (the
    /// descriptor outlives the temporary name the file was written under).
    kept: Vec<(u64, File)>,
    /// The last read back that failed: what to report if the decode fails for
    /// it (from a pipe, where the source was not kept otherwise).
    read_error: Option<std::io::Error>,
}

/// [`Outputs`] as the decoder sees them.
struct ReadBack(std::rc::Rc<std::cell::RefCell<Outputs>>);

impl WrittenOutput for ReadBack {
    fn keep(&mut self, file: u64) -> bool {
        let mut outputs = self.0.borrow_mut();
        let outputs = &mut *outputs;
        if outputs.kept.iter().any(|k| k.0 == file) {
            return true;
        }
        // Asked while the file is being written (the decoder asks at a segment
        // of the file whose start it has reported).
        let Some((number, f)) = outputs.current.as_mut().filter(|c| c.0 == file) else {
            return false;
        };
        if outputs.kept.len() >= MAX_KEPT || !cfg!(unix) {
            return false;
        }
        match f.written().and_then(File::try_clone) {
            Ok(handle) => {
                outputs.kept.push((*number, handle));
                true
            }
            Err(_) => false,
        }
    }

    fn read_at(&mut self, file: u64, offset: u64, buf: &mut [u8]) -> bool {
        let mut outputs = self.0.borrow_mut();
        // Bytes still in the open file's write buffer reach the file first.
        if let Some((_, f)) = outputs.current.as_mut().filter(|c| c.0 == file) {
            if let Err(e) = f.written() {
                outputs.read_error = Some(e);
                return false;
            }
        }
        let Some((_, handle)) = outputs.kept.iter().find(|k| k.0 == file) else {
            return false;
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileExt;
            match handle.read_exact_at(buf, offset) {
                Ok(()) => true,
                Err(e) => {
                    outputs.read_error = Some(e);
                    false
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = (handle, offset, buf);
            false
        }
    }
}

/// The files a `decompress` writes: every one, or those named ([`Args::files`]).
struct Selection {
    named: Vec<String>,
    /// Whether the archive held each named file.
    met: Vec<bool>,
}

impl Selection {
    fn new(named: Vec<String>) -> Self {
        let met = vec![false; named.len()];
        Selection { named, met }
    }

    /// Whether the file at `path` (in the archive) is written.
    fn wants(&mut self, path: &str) -> bool {
        if self.named.is_empty() {
            return true;
        }
        let mut wanted = false;
        for (name, met) in self.named.iter().zip(&mut self.met) {
            if name == path {
                (*met, wanted) = (true, true);
            }
        }
        wanted
    }

    /// Fails, naming them, if some files asked for were not in the archive.
    fn all_met(&self) -> Result<()> {
        let missing: Vec<&str> = self
            .named
            .iter()
            .zip(&self.met)
            .filter(|(_, &met)| !met)
            .map(|(name, _)| name.as_str())
            .collect();
        if !missing.is_empty() {
            anyhow::bail!("not in the archive: {}", missing.join(", "));
        }
        Ok(())
    }
}

/// Why [`Indexed::read`] stopped: the archive (exit code 3, or 1 for a base)
/// or the caller's output.
enum PieceFailure {
    Archive(DecodeError),
    Output(anyhow::Error),
}

impl From<DecodeError> for PieceFailure {
    fn from(e: DecodeError) -> Self {
        PieceFailure::Archive(e)
    }
}

/// An archive file opened through its index, for `decompress ARCHIVE FILE...`
/// ([`by_index`]).
struct Indexed<'a> {
    archive: Archive<'a>,
    map: &'a MappedArchive,
}

/// Decoded bytes between two releases of the mapped archive's pages while
/// files are read through the index ([`Indexed::read`]). Taking the 22.7 MB
/// FP8 file out of an archive of the corpus's `all-minilm-l6-v2-derived`
/// folder (`decompress -c`, `/usr/bin/time -f %M`, three runs), the process
/// peaked at 22 MB with 8 MiB, 32 MB with 64 MiB (the file's records all
/// stayed mapped), 45 MB with no release at all (not even of the records
/// opening reads: 21.8 MB of the archive mapped before the first chunk, by
/// `/proc/PID/smaps`, the map then advised huge pages); 0.19-0.20 s each way.
const INDEXED_RELEASE_STEP: u64 = 8 << 20;

impl Indexed<'_> {
    /// [`Archive::read_file_pieces`] with `piece` writing each chunk's bytes
    /// out. The archive's pages it maps are released every
    /// [`INDEXED_RELEASE_STEP`] bytes decoded and at the end, so that what
    /// the process holds does not grow with the file.
    fn read(&self, file: &FileInfo, mut piece: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
        let mut since_release = 0u64;
        let read = self.archive.read_file_pieces(file, |p| {
            piece(p).map_err(PieceFailure::Output)?;
            since_release += p.len() as u64;
            if since_release >= INDEXED_RELEASE_STEP {
                self.map.release(0..self.map.0.len());
                since_release = 0;
            }
            Ok(())
        });
        self.map.release(0..self.map.0.len());
        read.map_err(|e| match e {
            PieceFailure::Archive(e) => anyhow::Error::new(CorruptArchive(e)),
            PieceFailure::Output(e) => e,
        })
    }
}

/// `decompress ARCHIVE FILE...` of an archive read from a file whose index is
/// intact, when the named files hold under half of its bytes: only their
/// chunks are decoded, one at a time, through the index (`each(indexed,
/// file)` for every named file, in archive order, which reads it with
/// [`Indexed::read`]), not the whole archive on every thread; a damaged
/// record elsewhere goes unread. Fails before
/// anything is written if a name is not in the archive. `Ok(false)` where this
/// does not apply: the streamed decode then does the work (and says what is
/// wrong with a damaged index).
fn by_index(args: &Args, quiet: bool, mut each: impl FnMut(&Indexed, &FileInfo) -> Result<()>) -> Result<bool> {
    if args.files.is_empty() || args.archive == Path::new("-") {
        return Ok(false);
    }
    // Mapped without `MappedArchive::map`'s advice (huge pages, sequential
    // reading): what is read here, the FILE and SEGMENT records and then the
    // named files' chunks, lies scattered over the archive.
    let Ok(Mapped::Map(map)) = map_file(&args.archive) else {
        return Ok(false);
    };
    let map = MappedArchive(std::sync::Arc::new(map));
    let Ok(archive) = Archive::open(&map.0, args.limits.limits()) else {
        return Ok(false);
    };
    let mut selection = Selection::new(args.files.clone());
    let chosen: Vec<FileInfo> = archive
        .files()
        .iter()
        .filter(|f| selection.wants(&f.path))
        .cloned()
        .collect();
    let (bytes, all) = (
        chosen.iter().map(|f| f.size).sum::<u64>(),
        archive.files().iter().map(|f| f.size).sum::<u64>(),
    );
    if bytes.saturating_mul(2) >= all {
        return Ok(false);
    }
    selection.all_met()?;
    let base = args.limits.base()?;
    let archive = match &base {
        Some(b) => archive.with_base(b),
        None => archive,
    };
    // Opening read every FILE and SEGMENT record, scattered over the archive:
    // their pages go before decoding.
    map.release(0..map.0.len());
    let indexed = Indexed { archive, map: &map };
    let pb = progress(bytes, quiet, "decode");
    for f in &chosen {
        each(&indexed, f)?;
        pb.inc(f.size);
    }
    pb.finish_and_clear();
    Ok(true)
}

/// `brevis decompress`, on `threads` threads.
pub fn run(args: Args, quiet: bool, threads: usize) -> Result<()> {
    if args.archive == Path::new("-") && args.salvage {
        anyhow::bail!("--salvage reads the archive in any order: give it as a file, not `-`");
    }
    if args.salvage {
        return salvage(args, quiet);
    }
    if args.stdout {
        return to_stdout(args, quiet, threads);
    }
    let dir = args.output.clone().unwrap_or_else(|| PathBuf::from("."));
    let mut written = Vec::new();
    let mut total = 0u64;
    let indexed = by_index(&args, quiet, |chosen, file| {
        let target = dir.join(&file.path);
        let mut out = create_output(&target, args.force)?;
        chosen.read(file, |p| out.write_all(p).context("write failed"))?;
        // Only now, its digest verified, does it appear under its name.
        out.commit()
            .with_context(|| format!("cannot write `{}`", target.display()))?;
        written.push(target);
        total += file.size;
        Ok(())
    })?;
    if indexed {
        return report_written(&written, total, quiet);
    }
    let mut selection = Selection::new(args.files);
    let outputs = std::rc::Rc::new(std::cell::RefCell::new(Outputs::default()));
    let read_back = Box::new(ReadBack(outputs.clone()));
    let decoded = stream_archive(&args.archive, &args.limits, quiet, threads, Some(read_back), |ev| {
        let mut outputs = outputs.borrow_mut();
        match ev {
            Event::FileStart { path, .. } => {
                let number = outputs.started;
                outputs.started += 1;
                if !selection.wants(&path) {
                    return Ok(());
                }
                // `path` was checked by the decoder: relative, no `..`.
                outputs.current = Some((number, create_output(&dir.join(&path), args.force)?));
            }
            Event::Data(d) => {
                if let Some((_, f)) = outputs.current.as_mut() {
                    f.write_all(&d).context("write failed")?;
                    total += d.len() as u64;
                }
            }
            Event::FileEnd { .. } => {
                // The decoder verified the digest before reporting the end: only
                // then does the file appear under its name.
                if let Some((_, f)) = outputs.current.take() {
                    let p = f.path().to_path_buf();
                    f.commit().with_context(|| format!("cannot write `{}`", p.display()))?;
                    written.push(p);
                }
            }
            _ => {}
        }
        Ok(())
    });
    if let Err(e) = decoded {
        // A copy whose source could not be read back (and was not kept
        // otherwise): an input/output error, not a damaged archive.
        let unread = e.chain().any(|c| {
            c.downcast_ref::<CorruptArchive>()
                .is_some_and(|c| matches!(c.0.error, FormatError::Invalid { what } if what.contains("read back")))
        });
        return match outputs.borrow_mut().read_error.take() {
            Some(io) if unread => Err(anyhow::Error::new(io).context(format!("{e:#}"))),
            _ => Err(e),
        };
    }
    report_written(&written, total, quiet)?;
    selection.all_met()
}

/// A file `decompress` rebuilds at `target` (a path from the archive, which
/// the decoder checked: relative, no `..`), its folders created: written to a
/// temporary name until committed.
fn create_output(target: &Path, force: bool) -> Result<AtomicFile> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create `{}`", parent.display()))?;
    }
    AtomicFile::create(target, force).with_context(|| format!("cannot write `{}`", target.display()))
}

/// `decompress`'s summary on stderr, unless `quiet`.
fn report_written(written: &[PathBuf], total: u64, quiet: bool) -> Result<()> {
    if !quiet {
        for p in written {
            eprintln!("{}", p.display());
        }
        eprintln!("{} file(s), {} rebuilt and verified", written.len(), human(total));
    }
    Ok(())
}

/// Bytes `--stdout` gathers before a write: small pieces (a file's header, a
/// small tensor) go out together, a chunk's (1 to 16 MiB) goes out alone.
const STDOUT_BUFFER: usize = 256 << 10;

/// `decompress --stdout`: see [`Args::stdout`]. Copies are decoded from
/// their sources again (or held, from a pipe), as `verify` does: standard
/// output cannot be read back.
fn to_stdout(args: Args, quiet: bool, threads: usize) -> Result<()> {
    let mut out = std::io::BufWriter::with_capacity(STDOUT_BUFFER, stdout_file(args.force)?);
    let (mut files, mut total) = (0usize, 0u64);
    let indexed = by_index(&args, quiet, |chosen, file| {
        chosen.read(file, |p| out.write_all(p).context("cannot write to standard output"))?;
        (files, total) = (files + 1, total + file.size);
        Ok(())
    })?;
    if !indexed {
        let mut selection = Selection::new(args.files);
        let mut writing = false;
        stream_archive(&args.archive, &args.limits, quiet, threads, None, |ev| {
            match ev {
                Event::FileStart { path, .. } => writing = selection.wants(&path),
                Event::Data(d) if writing => {
                    out.write_all(&d).context("cannot write to standard output")?;
                    total += d.len() as u64;
                }
                Event::FileEnd { .. } if writing => files += 1,
                _ => {}
            }
            Ok(())
        })?;
        selection.all_met()?;
    }
    out.flush().context("cannot write to standard output")?;
    if !quiet {
        eprintln!(
            "{files} file(s), {} written to standard output and verified",
            human(total)
        );
    }
    Ok(())
}

/// `brevis verify`, on `threads` threads.
pub fn verify(args: VerifyArgs, quiet: bool, threads: usize) -> Result<()> {
    let mut files = 0;
    let mut total = 0u64;
    stream_archive(&args.archive, &args.limits, quiet, threads, None, |ev| {
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

/// Writes `bytes` to `path` atomically, creating parent folders.
fn write_file(path: &Path, bytes: &[u8], force: bool) -> Result<()> {
    let mut f = create_output(path, force)?;
    f.write_all(bytes)
        .with_context(|| format!("cannot write `{}`", path.display()))?;
    f.commit().with_context(|| format!("cannot write `{}`", path.display()))
}

/// `decompress --salvage`: see [`Args::salvage`].
fn salvage(args: Args, quiet: bool) -> Result<()> {
    let dir = args.output.unwrap_or_else(|| PathBuf::from("."));
    let data = map_file(&args.archive)?;
    let base = args.limits.base()?;
    let (archive, damage) = Archive::scan(&data, args.limits.limits()).map_err(CorruptArchive)?;
    let archive = match &base {
        Some(b) => archive.with_base(b),
        None => archive,
    };
    // A damaged chunk is reported below with the bytes it held; list the rest here.
    let mut lost: Vec<String> = damage
        .iter()
        .filter(|d| d.location.chunk.is_none())
        .map(|d| format!("damaged record: {d}"))
        .collect();
    let (mut whole, mut partial) = (0usize, 0usize);
    // The index names every file: a name not among them fails before anything is written.
    let mut selection = Selection::new(args.files);
    let chosen: Vec<_> = archive.files().iter().filter(|f| selection.wants(&f.path)).collect();
    selection.all_met()?;
    for file in chosen {
        let target = dir.join(&file.path);
        if let Ok(bytes) = archive.read_file(file) {
            write_file(&target, &bytes, args.force)?;
            whole += 1;
            continue;
        }
        // Rebuild chunk by chunk; what cannot be decoded stays zero.
        let size = usize::try_from(file.size)
            .unwrap_or(0)
            .min(data.len().saturating_mul(64));
        let mut bytes = vec![0u8; size];
        let mut covered = 0u64;
        for seg in &file.segments {
            let mut at = seg.file_offset;
            for (i, c) in seg.chunks.iter().enumerate() {
                let range = at..at + c.decoded_len;
                match archive.read_chunk(file, seg, i) {
                    Ok(d) if (range.end as usize) <= bytes.len() => {
                        bytes[range.start as usize..range.end as usize].copy_from_slice(&d);
                        covered += d.len() as u64;
                    }
                    Ok(_) => lost.push(format!(
                        "{}: segment `{}` chunk {i}: beyond the file's size",
                        file.path, seg.name
                    )),
                    Err(e) => lost.push(format!(
                        "{}: bytes {}..{} (segment `{}`, chunk {i}) lost: {e}",
                        file.path, range.start, range.end, seg.name
                    )),
                }
                at = range.end;
            }
        }
        if covered < file.size {
            let listed: u64 = file.segments.iter().map(|s| s.len).sum();
            if listed < file.size {
                lost.push(format!(
                    "{}: bytes {}..{} lost (their segment records are damaged)",
                    file.path, listed, file.size
                ));
            }
        }
        let partial_path = dir.join(format!("{}.partial", file.path));
        write_file(&partial_path, &bytes, args.force)?;
        partial += 1;
    }
    if !quiet {
        eprintln!("salvage: {whole} file(s) intact, {partial} partial (written as NAME.partial)");
    }
    if lost.is_empty() {
        return Ok(());
    }
    for l in &lost {
        eprintln!("brevis: {l}");
    }
    anyhow::bail!(SalvageIncomplete(lost.len()))
}

/// Salvage could not recover everything (exit code 3, like any damaged archive).
#[derive(Debug)]
pub struct SalvageIncomplete(pub usize);

impl std::fmt::Display for SalvageIncomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "archive is damaged: {} problem(s) listed above; everything else was recovered",
            self.0
        )
    }
}

impl std::error::Error for SalvageIncomplete {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::{DigestKind, Digester, FileDigest, FileHasher, Piece, Placement, SharedXxh3, ThreadedHasher};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Gives `h` the files, each in pieces of up to 1000 bytes, and checks each
    /// digest against a [`Digester`]'s; `in_place` makes every file take the path
    /// of a hashing thread that could not start.
    fn hash_files(h: &mut ThreadedHasher, kind: DigestKind, files: &[&[u8]], in_place: bool) {
        for (i, bytes) in files.iter().enumerate() {
            h.start(kind, bytes.len() as u64);
            if in_place && kind != DigestKind::Xxh3 {
                h.thread = None;
                h.in_place = Some(FileDigest::new(kind, bytes.len() as u64));
            }
            for part in bytes.chunks(1000) {
                h.update(&Piece::new(part.to_vec()));
            }
            let mut want = Digester::new(kind);
            want.update(bytes);
            assert_eq!(h.finish(), want.finish(), "{kind:?} file {i}, in place: {in_place}");
        }
    }

    #[test]
    fn the_hashing_thread_starts_only_for_the_digests_it_computes() {
        let long = [7u8; 5000];
        let files: [&[u8]; 3] = [b"first file", &long, b""];
        for kind in [DigestKind::Xxh3, DigestKind::Sha256, DigestKind::Blake3] {
            let mut h = ThreadedHasher::new(Arc::new(SharedXxh3::new()));
            hash_files(&mut h, kind, &files, false);
            // XXH3-128 files are hashed where they are decoded; the others on
            // one thread, started once for all of them.
            assert_eq!(h.thread.is_some(), kind != DigestKind::Xxh3, "{kind:?}");
            let mut h = ThreadedHasher::new(Arc::new(SharedXxh3::new()));
            hash_files(&mut h, kind, &files, true);
        }
    }

    #[test]
    fn a_placed_thread_runs_off_its_parents_cpu() {
        // With one CPU allowed there is nowhere else to go, and no placement.
        if Placement::of_caller().is_none() {
            return;
        }
        for _ in 0..20 {
            let p = Placement::of_caller().expect("still several CPUs");
            let (pinned, placed) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
            let (pinned_, placed_) = (pinned.clone(), placed.clone());
            let thread = std::thread::spawn(move || {
                // On its parent's CPU first, as a new thread may start: the
                // placement must move it from there.
                // SAFETY: cpu_set_t is a plain bit array (zeros: empty), passed
                // live with its exact size; `parent_cpu` is below CPU_SETSIZE.
                unsafe {
                    let mut only: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(p.parent_cpu, &mut only);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &only);
                }
                pinned_.store(true, Ordering::Release);
                while !placed_.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                // SAFETY: sched_getcpu takes nothing and returns a number.
                let cpu = unsafe { libc::sched_getcpu() };
                p.restore();
                cpu
            });
            while !pinned.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            p.keep_off(&thread);
            placed.store(true, Ordering::Release);
            let cpu = thread.join().expect("the thread runs");
            assert!(cpu >= 0, "sched_getcpu failed");
            assert_ne!(cpu as usize, p.parent_cpu, "the thread ran on its parent's CPU");
        }
    }
}

#[cfg(all(test, unix))]
mod read_back_tests {
    use super::*;

    /// A file kept while written reads back what was written, buffered bytes
    /// included, and still after it is moved into place and the next one starts;
    /// files not kept (or not open when asked) are not read back.
    #[test]
    fn kept_files_read_back_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let outputs = std::rc::Rc::new(std::cell::RefCell::new(Outputs::default()));
        let mut read_back = ReadBack(outputs.clone());
        let start = |number: u64, name: &str| {
            let mut o = outputs.borrow_mut();
            o.current = Some((number, AtomicFile::create(&dir.path().join(name), false).unwrap()));
            o.started += 1;
        };
        let write = |bytes: &[u8]| {
            outputs
                .borrow_mut()
                .current
                .as_mut()
                .unwrap()
                .1
                .write_all(bytes)
                .unwrap()
        };
        start(0, "a");
        write(b"0123456789");
        assert!(read_back.keep(0));
        assert!(!read_back.keep(1), "only the file being written can be kept");
        write(b"abcdef");
        let mut buf = [0u8; 8];
        assert!(read_back.read_at(0, 6, &mut buf));
        assert_eq!(&buf, b"6789abcd", "bytes still buffered are read back too");
        assert!(!read_back.read_at(0, 12, &mut buf), "bytes not written are not read");
        let (_, a) = outputs.borrow_mut().current.take().unwrap();
        a.commit().unwrap();
        start(1, "b");
        write(b"xyz");
        assert!(read_back.read_at(0, 10, &mut buf[..6]));
        assert_eq!(&buf[..6], b"abcdef", "a committed file reads back");
        assert!(
            !read_back.read_at(1, 0, &mut buf[..3]),
            "a file not kept is not read back"
        );
        assert_eq!(std::fs::read(dir.path().join("a")).unwrap(), b"0123456789abcdef");
    }
}
