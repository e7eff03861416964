//! Whole archives in memory: decode everything ([`decode_all`]), or open the
//! index ([`Archive::open`]) and decode one file or one tensor alone.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;

use brevis_format::archive::{
    check_header, open_record, parse_end, parse_index, ChunkRecord, DigestKind, FileRecord, RecordHead, RecordKind,
    SegmentKind, SegmentRecord, SegmentSource, UncheckedRecord, END_LEN, HEADER_LEN,
};
use brevis_format::stream::LeBytes;
use brevis_format::FormatError;

use crate::digest::{mismatch, Digester};
use crate::error::{DecodeError, Location};
use crate::exec::{decode_chunk_bytes, decode_chunk_into};
use crate::stream::{Event, StreamDecoder};
use crate::{fetch_base, xor_into, BaseProvider, DecodeLimits};

/// A file rebuilt from an archive, its digest verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedFile {
    /// Relative path.
    pub path: String,
    /// The file's bytes.
    pub data: Vec<u8>,
    /// Its digest.
    pub digest: [u8; 32],
    /// The digest's hash (the archive's).
    pub digest_kind: DigestKind,
}

/// Decodes every file of an archive held in memory, verifying every record,
/// the index, each chunk's checksum and each file's digest.
///
/// Through the index ([`Archive::open`], then [`Archive::read_file`]): the
/// archive read where it lies, each chunk decoded straight into its file's
/// buffer and hashed there. Should that fail, the archive is decoded again in
/// order by a [`StreamDecoder`], whose error (or files) is returned: an error
/// says where the archive first goes wrong, as streaming it would, whatever
/// the index says. (Both accept the same archives: the fuzz targets `archive`
/// and `stream` check it.)
pub fn decode_all(archive: &[u8], limits: &DecodeLimits) -> Result<Vec<DecodedFile>, DecodeError> {
    decode_indexed(Archive::open(archive, *limits), |a, f| a.read_file(f))
        .or_else(|_| decode_all_from(archive, StreamDecoder::new(*limits)))
}

/// [`decode_all`] with each file's chunks decoded on up to `threads` threads
/// ([`Archive::read_file_threads`]): the same files, checks and errors.
#[cfg(feature = "std")]
pub fn decode_all_threads(
    archive: &[u8],
    limits: &DecodeLimits,
    threads: usize,
) -> Result<Vec<DecodedFile>, DecodeError> {
    decode_indexed(Archive::open(archive, *limits), |a, f| a.read_file_threads(f, threads))
        .or_else(|_| decode_all_from(archive, StreamDecoder::new(*limits)))
}

/// [`decode_all`] for an archive stored against a base (a fine-tune): the base
/// tensors come from `base`.
pub fn decode_all_with_base(
    archive: &[u8],
    limits: &DecodeLimits,
    base: alloc::boxed::Box<dyn BaseProvider>,
) -> Result<Vec<DecodedFile>, DecodeError> {
    decode_indexed(Archive::open(archive, *limits).map(|a| a.with_base(&*base)), |a, f| {
        a.read_file(f)
    })
    .or_else(|_| decode_all_from(archive, StreamDecoder::with_base(*limits, base)))
}

/// Every file of an opened archive, by `read` ([`Archive::read_file`] or
/// [`Archive::read_file_threads`]); refused (for the [`StreamDecoder`] to say
/// why) where a [`StreamDecoder`] would keep more than
/// [`DecodeLimits::max_retained_bytes`] for copies, so that [`decode_all`]
/// accepts what streaming accepts under the same limits.
fn decode_indexed(
    archive: Result<Archive<'_>, DecodeError>,
    read: impl Fn(&Archive<'_>, &FileInfo) -> Result<Vec<u8>, DecodeError>,
) -> Result<Vec<DecodedFile>, DecodeError> {
    let archive = archive?;
    let retained = peak_retained(archive.files());
    if retained > archive.limits.max_retained_bytes {
        return Err(FormatError::LimitExceeded {
            limit: "retained bytes (segments kept for later copies)",
            requested: retained,
            allowed: archive.limits.max_retained_bytes,
        }
        .into());
    }
    archive
        .files()
        .iter()
        .map(|f| {
            Ok(DecodedFile {
                data: read(&archive, f)?,
                path: f.path.clone(),
                digest: f.digest,
                digest_kind: f.digest_kind,
            })
        })
        .collect()
}

fn decode_all_from(archive: &[u8], mut dec: StreamDecoder) -> Result<Vec<DecodedFile>, DecodeError> {
    let mut files = Vec::new();
    let mut current: Option<DecodedFile> = None;
    // Feed record-sized pieces so the decoder's buffer never holds the whole archive twice.
    let mut fed = 0usize;
    loop {
        match dec.next_event()? {
            Some(Event::FileStart { path, size }) => {
                let cap = usize::try_from(crate::earned_capacity(size, archive.len() as u64)).unwrap_or(0);
                current = Some(DecodedFile {
                    path,
                    data: Vec::with_capacity(cap),
                    digest: [0; 32],
                    digest_kind: dec.digest_kind(),
                });
            }
            Some(Event::Data(d)) => {
                if let Some(f) = current.as_mut() {
                    f.data.extend_from_slice(&d);
                }
            }
            Some(Event::FileEnd { digest, .. }) => {
                if let Some(mut f) = current.take() {
                    f.digest = digest;
                    files.push(f);
                }
            }
            Some(Event::SegmentStart { .. } | Event::SegmentEnd) => {}
            Some(Event::End) => {}
            None => {
                if fed == archive.len() {
                    dec.finish()?;
                    return Ok(files);
                }
                let n = (archive.len() - fed).min(1 << 20);
                dec.push(&archive[fed..fed + n]);
                fed += n;
            }
        }
    }
}

/// The most bytes a [`StreamDecoder`] keeps at once for later copies of the
/// segments of `files` (an archive [`Archive::open`] accepted): a retained
/// segment counts from its start until its last copy is made.
fn peak_retained(files: &[FileInfo]) -> u64 {
    // (copies still to come, length) by archive-wide segment index.
    let mut kept: Vec<(u64, u64)> = Vec::new();
    let (mut total, mut peak) = (0u64, 0u64);
    for seg in files.iter().flat_map(|f| &f.segments) {
        if seg.retain > 0 {
            total = total.saturating_add(seg.len);
            peak = peak.max(total);
        }
        kept.push((seg.retain, seg.len));
        let source = seg.copy_of.and_then(|i| usize::try_from(i).ok());
        if let Some((left, len)) = source.and_then(|i| kept.get_mut(i)) {
            *left = left.saturating_sub(1);
            if *left == 0 {
                total = total.saturating_sub(*len);
            }
        }
    }
    peak
}

/// Where one chunk is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkInfo {
    /// Offset of the chunk record in the archive.
    pub offset: u64,
    /// Bytes of the record, framing included.
    pub record_len: u64,
    /// Bytes it decodes to.
    pub decoded_len: u64,
}

/// One segment of a file, with its chunks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Tensor name or opaque label.
    pub name: String,
    /// Opaque or tensor (dtype, shape).
    pub kind: SegmentKind,
    /// Decoded bytes.
    pub len: u64,
    /// Offset of the segment's first byte in the rebuilt file.
    pub file_offset: u64,
    /// Its chunks, in order. A copy lists its source's chunks (and reads them).
    pub chunks: Vec<ChunkInfo>,
    /// How many later segments copy this one (0: none).
    pub retain: u64,
    /// For a copy: the archive-wide index of the segment it copies.
    pub copy_of: Option<u64>,
    /// For a segment stored as a difference from a base tensor (or a copy of
    /// one): that base tensor.
    pub base: Option<BaseRef>,
}

/// A base tensor a segment is stored against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseRef {
    /// The tensor's name (the delta segment's).
    pub name: String,
    /// SHA-256 of its bytes.
    pub sha256: [u8; 32],
}

impl SegmentInfo {
    fn from_record(s: SegmentRecord, file_offset: u64) -> Self {
        let base = match s.source {
            SegmentSource::BaseDelta { sha256 } => Some(BaseRef {
                name: s.name.clone(),
                sha256,
            }),
            _ => None,
        };
        SegmentInfo {
            copy_of: match s.source {
                SegmentSource::Copy { segment } => Some(segment),
                _ => None,
            },
            name: s.name,
            kind: s.kind,
            len: s.len,
            file_offset,
            chunks: Vec::new(),
            retain: s.retain,
            base,
        }
    }
}

/// Resolves copy `seg` (just pushed as the last segment of `files`): its
/// source must be an earlier retained segment of the same length; the copy
/// takes the source's chunk list and base. `copies[i]` counts the copies made
/// of segment `i` (archive-wide index; grown as sources are met).
fn resolve_copy(
    files: &mut [FileInfo],
    places: &[Option<(usize, usize)>],
    copies: &mut Vec<u64>,
) -> Result<(), FormatError> {
    let Some(Some((fi, si))) = places.last().copied() else {
        return Ok(());
    };
    let Some(source) = files[fi].segments[si].copy_of else {
        return Ok(());
    };
    let bad = FormatError::Invalid {
        what: "copy source (not a retained earlier segment)",
    };
    let index = usize::try_from(source).map_err(|_| bad.clone())?;
    let (sf, ss) = places.get(index).copied().flatten().ok_or(bad.clone())?;
    if (sf, ss) == (fi, si) {
        return Err(bad);
    }
    let src = &files[sf].segments[ss];
    if src.retain == 0 {
        return Err(bad);
    }
    if copies.len() <= index {
        copies.resize(index + 1, 0);
    }
    let n = &mut copies[index];
    *n += 1;
    if *n > src.retain {
        return Err(FormatError::Invalid {
            what: "copies (more than the source declares)",
        });
    }
    if src.len != files[fi].segments[si].len {
        return Err(FormatError::LengthMismatch {
            what: "copy length (differs from its source's)",
            expected: src.len,
            found: files[fi].segments[si].len,
        });
    }
    let (chunks, base) = (src.chunks.clone(), src.base.clone());
    let seg = &mut files[fi].segments[si];
    seg.chunks = chunks;
    seg.base = base;
    Ok(())
}

/// One file in the archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    /// Relative path.
    pub path: String,
    /// Decoded size.
    pub size: u64,
    /// Digest of the rebuilt file.
    pub digest: [u8; 32],
    /// The digest's hash (the archive header's).
    pub digest_kind: DigestKind,
    /// Its segments, in order.
    pub segments: Vec<SegmentInfo>,
}

/// An archive opened through its index, for random access.
pub struct Archive<'a> {
    data: &'a [u8],
    files: Cow<'a, [FileInfo]>,
    limits: DecodeLimits,
    base: Option<&'a dyn BaseProvider>,
}

impl<'a> Archive<'a> {
    /// Reads the END record, the index and every FILE and SEGMENT record, and
    /// checks that they describe a consistent archive. Chunk records are only
    /// located here; they are checked when decoded.
    pub fn open(data: &'a [u8], limits: DecodeLimits) -> Result<Self, DecodeError> {
        let digest_kind = check_header(data)?;
        let len = data.len() as u64;
        if data.len() < HEADER_LEN + END_LEN {
            return Err(FormatError::Truncated {
                what: "archive (shorter than header and END record)",
            }
            .into());
        }
        let end_at = data.len() - END_LEN;
        let at = |offset: u64| Location {
            offset: Some(offset),
            ..Location::default()
        };
        let (head, body) = open_record(&data[end_at..]).map_err(|e| DecodeError::new(e).at(&at(end_at as u64)))?;
        if head.kind != RecordKind::End {
            return Err(DecodeError::new(FormatError::Invalid {
                what: "last record (not END)",
            })
            .at(&at(end_at as u64)));
        }
        let index_offset = parse_end(body, len)?;
        let index_at = usize::try_from(index_offset).unwrap_or(usize::MAX);
        let (head, body) = open_record(data.get(index_at..end_at).unwrap_or(&[]))
            .map_err(|e| DecodeError::new(e).at(&at(index_offset)))?;
        if head.kind != RecordKind::Index || index_at + head.total_len() != end_at {
            return Err(DecodeError::new(FormatError::Invalid { what: "index record" }).at(&at(index_offset)));
        }
        let entries = parse_index(body, index_offset)?;

        let mut files: Vec<FileInfo> = Vec::new();
        let mut segs_left = 0u64;
        let mut chunks_left = 0u64;
        let mut expected_next = HEADER_LEN as u64;
        let mut output_total = 0u64;
        // Where each segment is (archive-wide index -> file, segment), and the copies of each source.
        let mut places: Vec<Option<(usize, usize)>> = Vec::new();
        let mut copies: Vec<u64> = Vec::new();
        for e in &entries {
            let loc = at(e.offset);
            if e.offset != expected_next {
                return Err(DecodeError::new(FormatError::Invalid {
                    what: "index (records not contiguous)",
                })
                .at(&loc));
            }
            let rec = &data[e.offset as usize..index_at];
            let head = RecordHead::parse(rec).map_err(|er| DecodeError::new(er).at(&loc))?;
            if head.kind != e.kind || head.total_len() > rec.len() {
                return Err(DecodeError::new(FormatError::Invalid {
                    what: "index entry (kind or length)",
                })
                .at(&loc));
            }
            expected_next = e.offset + head.total_len() as u64;
            match e.kind {
                RecordKind::File => {
                    if segs_left != 0 || chunks_left != 0 {
                        return Err(DecodeError::new(FormatError::Invalid { what: "record order" }).at(&loc));
                    }
                    let (_, body) = open_record(rec).map_err(|er| DecodeError::new(er).at(&loc))?;
                    let f = FileRecord::parse(body).map_err(|er| DecodeError::new(er).at(&loc))?;
                    output_total = output_total.saturating_add(f.size);
                    if output_total > limits.max_output_bytes {
                        return Err(DecodeError::new(FormatError::LimitExceeded {
                            limit: "output bytes",
                            requested: output_total,
                            allowed: limits.max_output_bytes,
                        }));
                    }
                    // The sizes the files declare must be what this many bytes
                    // of archive may produce (see DecodeLimits::max_ratio).
                    limits
                        .check_ratio(output_total, len)
                        .map_err(|er| DecodeError::new(er).at(&loc))?;
                    segs_left = f.segments;
                    files.push(FileInfo {
                        path: f.path,
                        size: f.size,
                        digest: f.digest,
                        digest_kind,
                        segments: Vec::new(),
                    });
                }
                RecordKind::Segment => {
                    let file = files.last_mut().filter(|_| segs_left > 0 && chunks_left == 0);
                    let file =
                        file.ok_or_else(|| DecodeError::new(FormatError::Invalid { what: "record order" }).at(&loc))?;
                    let (_, body) = open_record(rec).map_err(|er| DecodeError::new(er).at(&loc))?;
                    let s = SegmentRecord::parse(body).map_err(|er| DecodeError::new(er).at(&loc))?;
                    let file_offset = file.segments.last().map(|p| p.file_offset + p.len).unwrap_or(0);
                    if file_offset.checked_add(s.len).is_none_or(|end| end > file.size) {
                        return Err(DecodeError::new(FormatError::Invalid {
                            what: "segment length (beyond its file)",
                        })
                        .at(&loc));
                    }
                    segs_left -= 1;
                    chunks_left = s.chunks;
                    file.segments.push(SegmentInfo::from_record(s, file_offset));
                    places.push(Some((files.len() - 1, files[files.len() - 1].segments.len() - 1)));
                    resolve_copy(&mut files, &places, &mut copies).map_err(|er| DecodeError::new(er).at(&loc))?;
                }
                RecordKind::Chunk => {
                    let seg = files
                        .last_mut()
                        .and_then(|f| f.segments.last_mut())
                        .filter(|_| chunks_left > 0);
                    let seg =
                        seg.ok_or_else(|| DecodeError::new(FormatError::Invalid { what: "record order" }).at(&loc))?;
                    chunks_left -= 1;
                    seg.chunks.push(ChunkInfo {
                        offset: e.offset,
                        record_len: head.total_len() as u64,
                        decoded_len: e.decoded_len,
                    });
                    if chunks_left == 0 && seg.chunks.iter().map(|c| c.decoded_len).sum::<u64>() != seg.len {
                        return Err(DecodeError::new(FormatError::Invalid {
                            what: "chunk lengths (do not add up to the segment's)",
                        })
                        .at(&loc));
                    }
                }
                RecordKind::Index | RecordKind::End => unreachable_kind()?,
            }
        }
        if segs_left != 0 || chunks_left != 0 || expected_next != index_offset {
            return Err(FormatError::Invalid {
                what: "index (archive structure incomplete)",
            }
            .into());
        }
        let declared = places
            .iter()
            .flatten()
            .map(|&(f, s)| files[f].segments[s].retain)
            .sum::<u64>();
        if copies.iter().sum::<u64>() != declared {
            return Err(FormatError::Invalid {
                what: "retained segments (fewer copies than declared)",
            }
            .into());
        }
        for f in &files {
            if f.segments.iter().map(|s| s.len).sum::<u64>() != f.size {
                return Err(DecodeError::new(FormatError::Invalid {
                    what: "file size (segments do not add up)",
                })
                .at(&Location {
                    file: Some(f.path.clone()),
                    ..Location::default()
                }));
            }
        }
        Ok(Archive {
            data,
            files: Cow::Owned(files),
            limits,
            base: None,
        })
    }

    /// Takes the base tensors of delta segments (a fine-tune stored against its
    /// base) from `base`; see [`BaseProvider`].
    pub fn with_base(mut self, base: &'a dyn BaseProvider) -> Self {
        self.base = Some(base);
        self
    }

    /// Opens a damaged archive for salvage: walks the records from the header
    /// without trusting the index, keeping every file whose FILE record and
    /// segment table are intact. Returns the archive and what was found damaged
    /// (records whose checksum failed, records that could not be placed).
    /// Damaged chunks stay listed, so decoding them reports their own error,
    /// and the chunks around them still decode. Records that contradict the
    /// structure (a segment past its file's size, a chunk past its segment's)
    /// are damage too, so salvage never decodes more than the files declare;
    /// their sizes count against [`DecodeLimits::max_output_bytes`] as in
    /// [`Archive::open`].
    pub fn scan(data: &'a [u8], limits: DecodeLimits) -> Result<(Self, Vec<DecodeError>), DecodeError> {
        let digest_kind = check_header(data)?;
        let mut files: Vec<FileInfo> = Vec::new();
        let mut damage = Vec::new();
        // Segments and chunks still expected for the last file; `skipping` while
        // a damaged FILE or SEGMENT record left the structure unknown.
        let (mut segs_left, mut chunks_left, mut skipping) = (0u64, 0u64, false);
        // Bytes of the current segment not yet claimed by a chunk, and of all files.
        let (mut seg_left, mut output_total) = (0u64, 0u64);
        let mut places: Vec<Option<(usize, usize)>> = Vec::new();
        let mut copies: Vec<u64> = Vec::new();
        let mut pos = HEADER_LEN;
        while pos < data.len() {
            let loc = Location {
                offset: Some(pos as u64),
                file: files.last().map(|f| f.path.clone()),
                ..Location::default()
            };
            let head = match RecordHead::parse(&data[pos..]) {
                Ok(h) if pos + h.total_len() <= data.len() => h,
                Ok(_) => {
                    damage.push(
                        DecodeError::new(FormatError::Truncated {
                            what: "record (archive ends inside it)",
                        })
                        .at(&loc),
                    );
                    break;
                }
                Err(e) => {
                    // Without a readable length the following records cannot be found.
                    damage.push(DecodeError::new(e).at(&loc));
                    break;
                }
            };
            let rec = &data[pos..pos + head.total_len()];
            let body = open_record(rec).map(|(_, b)| b);
            // Every SEGMENT record counts in the archive-wide numbering copies use,
            // a damaged one as a hole.
            if head.kind == RecordKind::Segment {
                places.push(None);
            }
            match head.kind {
                RecordKind::File => match body.and_then(FileRecord::parse) {
                    Ok(f) => {
                        // As in `open`: the files' sizes bound what salvage can rebuild.
                        output_total = output_total.saturating_add(f.size);
                        if output_total > limits.max_output_bytes {
                            return Err(DecodeError::new(FormatError::LimitExceeded {
                                limit: "output bytes",
                                requested: output_total,
                                allowed: limits.max_output_bytes,
                            })
                            .at(&loc));
                        }
                        limits
                            .check_ratio(output_total, data.len() as u64)
                            .map_err(|er| DecodeError::new(er).at(&loc))?;
                        segs_left = f.segments;
                        chunks_left = 0;
                        skipping = false;
                        files.push(FileInfo {
                            path: f.path,
                            size: f.size,
                            digest: f.digest,
                            digest_kind,
                            segments: Vec::new(),
                        });
                    }
                    Err(e) => {
                        damage.push(DecodeError::new(e).at(&loc));
                        skipping = true;
                    }
                },
                RecordKind::Segment if !skipping => match (body.and_then(SegmentRecord::parse), files.last_mut()) {
                    (Ok(sr), Some(file)) if segs_left > 0 && chunks_left == 0 => {
                        let file_offset = file.segments.last().map(|p| p.file_offset + p.len).unwrap_or(0);
                        if file_offset.checked_add(sr.len).is_none_or(|end| end > file.size) {
                            damage.push(
                                DecodeError::new(FormatError::Invalid {
                                    what: "segment length (beyond its file)",
                                })
                                .at(&loc),
                            );
                            skipping = true;
                            pos += head.total_len();
                            continue;
                        }
                        segs_left -= 1;
                        chunks_left = sr.chunks;
                        seg_left = sr.len;
                        file.segments.push(SegmentInfo::from_record(sr, file_offset));
                        places.pop();
                        places.push(Some((files.len() - 1, files[files.len() - 1].segments.len() - 1)));
                        // A copy whose source was lost stays listed without chunks: it cannot be rebuilt.
                        if let Err(e) = resolve_copy(&mut files, &places, &mut copies) {
                            damage.push(DecodeError::new(e).at(&loc));
                        }
                    }
                    (Err(e), _) => {
                        damage.push(DecodeError::new(e).at(&loc));
                        skipping = true;
                    }
                    _ => {
                        damage.push(DecodeError::new(FormatError::Invalid { what: "record order" }).at(&loc));
                        skipping = true;
                    }
                },
                RecordKind::Chunk if !skipping && chunks_left > 0 => {
                    let seg = files.last_mut().and_then(|f| f.segments.last_mut());
                    if let Some(seg) = seg {
                        chunks_left -= 1;
                        let chunk_loc = Location {
                            segment: Some(seg.name.clone()),
                            chunk: Some(seg.chunks.len() as u64),
                            ..loc.clone()
                        };
                        // A chunk that does not fit what is left of its segment is
                        // damage too: listed with an unknown length, never decoded.
                        let decoded_len = match body.and_then(ChunkRecord::parse).and_then(|c| {
                            if c.decoded_len > seg_left {
                                return Err(FormatError::LengthMismatch {
                                    what: "chunk lengths (do not add up to the segment's)",
                                    expected: seg_left,
                                    found: c.decoded_len,
                                });
                            }
                            Ok(c.decoded_len)
                        }) {
                            Ok(len) => len,
                            Err(e) => {
                                damage.push(DecodeError::new(e).at(&chunk_loc));
                                0
                            }
                        };
                        seg_left -= decoded_len;
                        seg.chunks.push(ChunkInfo {
                            offset: pos as u64,
                            record_len: head.total_len() as u64,
                            decoded_len,
                        });
                        if chunks_left == 0 {
                            infer_damaged_length(seg);
                        }
                    }
                }
                RecordKind::Index | RecordKind::End => break,
                _ => {}
            }
            pos += head.total_len();
        }
        Ok((
            Archive {
                data,
                files: Cow::Owned(files),
                limits,
                base: None,
            },
            damage,
        ))
    }

    /// The files, in archive order.
    pub fn files(&self) -> &[FileInfo] {
        &self.files
    }

    /// The index, to keep after the archive is dropped: with the same bytes,
    /// [`Archive::with_index`] reopens the archive without reading it again.
    pub fn into_files(self) -> Vec<FileInfo> {
        self.files.into_owned()
    }

    /// Reattaches an index read by [`Archive::open`] (or [`Archive::scan`]) to
    /// the same bytes, at no cost. Nothing is trusted more than before: every
    /// chunk is still checked when it is decoded, and files against their
    /// SHA-256. Bytes other than those the index was read from only make
    /// reads fail their checks.
    pub fn with_index(data: &'a [u8], files: &'a [FileInfo], limits: DecodeLimits) -> Self {
        Archive {
            data,
            files: Cow::Borrowed(files),
            limits,
            base: None,
        }
    }

    /// The first tensor (or opaque segment) named `name`, with its file.
    pub fn find_segment(&self, name: &str) -> Option<(&FileInfo, &SegmentInfo)> {
        self.files
            .iter()
            .find_map(|f| f.segments.iter().find(|s| s.name == name).map(|s| (f, s)))
    }

    /// The body of a chunk record, its checksum verified.
    pub fn chunk_body(&self, chunk: &ChunkInfo) -> Result<&'a [u8], DecodeError> {
        let start = chunk.offset as usize;
        let rec = self.data.get(start..start + chunk.record_len as usize).unwrap_or(&[]);
        let (_, body) = open_record(rec).map_err(|e| {
            DecodeError::new(e).at(&Location {
                offset: Some(chunk.offset),
                ..Location::default()
            })
        })?;
        Ok(body)
    }

    /// A chunk's record, its framing checked.
    fn chunk_record(&self, chunk: &ChunkInfo) -> Result<UncheckedRecord<'a>, FormatError> {
        chunk_record(self.data, chunk)
    }

    /// Refuses a chunk body whose header declares another length than the
    /// index gives the chunk (a salvaged archive lists lengths that were not
    /// checked against the index).
    fn check_declared_len(c: &ChunkInfo, body: &[u8]) -> Result<(), FormatError> {
        match ChunkRecord::parse(body) {
            Ok(header) if header.decoded_len != c.decoded_len => Err(FormatError::LengthMismatch {
                what: "chunk length (against the index)",
                expected: c.decoded_len,
                found: header.decoded_len,
            }),
            _ => Ok(()),
        }
    }

    /// Decodes chunk `index` of a segment, checking it against its checksum
    /// and the length the index gives it. A copy reads its source's chunk; a
    /// delta segment XORs its base tensor's bytes in (the base is fetched and
    /// checked for each call: [`Archive::read_segment`] fetches it once).
    pub fn read_chunk(&self, file: &FileInfo, seg: &SegmentInfo, index: usize) -> Result<Vec<u8>, DecodeError> {
        let base = self.base_of(file, seg)?;
        self.read_chunk_with(file, seg, index, base.as_deref())
            .map(LeBytes::into_vec)
    }

    /// The checked bytes of `seg`'s base tensor, if it is stored against one.
    fn base_of(&self, file: &FileInfo, seg: &SegmentInfo) -> Result<Option<Vec<u8>>, DecodeError> {
        let Some(b) = &seg.base else { return Ok(None) };
        fetch_base(self.base, &b.name, &b.sha256, seg.len)
            .map(Some)
            .map_err(|e| {
                DecodeError::new(e).at(&Location {
                    file: Some(file.path.clone()),
                    segment: Some(seg.name.clone()),
                    ..Location::default()
                })
            })
    }

    /// [`Self::read_chunk`] with the base already fetched: the chunk decoded into
    /// a buffer of its own.
    fn read_chunk_with(
        &self,
        file: &FileInfo,
        seg: &SegmentInfo,
        index: usize,
        base: Option<&[u8]>,
    ) -> Result<LeBytes, DecodeError> {
        let c = seg
            .chunks
            .get(index)
            .ok_or(FormatError::Invalid { what: "chunk index" })?;
        let loc = chunk_location(file, seg, index);
        let at = seg.chunks[..index]
            .iter()
            .try_fold(0u64, |a, c| a.checked_add(c.decoded_len));
        let decode = || {
            // Decoded before the record's checksum is checked, as in
            // `read_chunk_into`.
            let record = self.chunk_record(c)?;
            let body = record.body();
            let decoded =
                Self::check_declared_len(c, body).and_then(|()| decode_chunk_bytes(body, &self.limits.program));
            record.check()?;
            let mut out = decoded?;
            if out.len() as u64 != c.decoded_len {
                return Err(FormatError::LengthMismatch {
                    what: "chunk length (against the index)",
                    expected: c.decoded_len,
                    found: out.len() as u64,
                }
                .into());
            }
            xor_base(base, at, &mut out)?;
            Ok(out)
        };
        decode().map_err(|e: DecodeError| e.at(&loc))
    }

    /// Decodes chunk `c`, which starts `at` bytes into its segment, into `out`
    /// (its `decoded_len` bytes), checking it against its checksum and the
    /// length the index gives it, and XORs in its part of `base` (a delta
    /// segment's base tensor). Errors have no location: the caller's.
    fn read_chunk_into(
        &self,
        c: &ChunkInfo,
        at: Option<u64>,
        base: Option<&[u8]>,
        out: &mut [u8],
    ) -> Result<(), DecodeError> {
        read_chunk_into(self.data, &self.limits.program, c, at, base, out)
    }

    /// Decodes one segment (a tensor's raw bytes), checking each chunk and,
    /// before decoding any, that the chunks' lengths add up to the segment's.
    pub fn read_segment(&self, file: &FileInfo, seg: &SegmentInfo) -> Result<Vec<u8>, DecodeError> {
        let mut out = Output::new(seg.len, self.data.len());
        self.read_segment_into(file, seg, &mut out, None)?;
        Ok(out.bytes)
    }

    /// Decodes `seg` onto the end of `out`, each chunk straight into place,
    /// hashing its bytes into `digest` as they are decoded (while in cache).
    fn read_segment_into(
        &self,
        file: &FileInfo,
        seg: &SegmentInfo,
        out: &mut Output,
        mut digest: Option<&mut Digester>,
    ) -> Result<(), DecodeError> {
        check_segment_chunks(file, seg)?;
        let base = self.base_of(file, seg)?;
        let mut at = 0u64;
        for (i, c) in seg.chunks.iter().enumerate() {
            let loc = chunk_location(file, seg, i);
            let (declared, filled) = (out.declared, out.filled as u64);
            let place = out.next(c.decoded_len).ok_or_else(|| {
                DecodeError::new(FormatError::LengthMismatch {
                    what: "chunk lengths (beyond the file's size)",
                    expected: declared,
                    found: filled.saturating_add(c.decoded_len),
                })
                .at(&loc)
            })?;
            self.read_chunk_into(c, Some(at), base.as_deref(), place)
                .map_err(|e| e.at(&loc))?;
            if let Some(d) = digest.as_deref_mut() {
                d.update(place);
            }
            at += c.decoded_len;
        }
        Ok(())
    }

    /// Decodes a file chunk by chunk, in order, handing each chunk's bytes to
    /// `piece` once its checksums pass, and checks the file's digest after the
    /// last: the working memory is one chunk (and a delta segment's base
    /// tensor), whatever the file's size. What `piece` was given before an
    /// error (a chunk, the digest) is not the file: the caller must drop it.
    /// Its own error stops the decode and is returned as it is.
    ///
    /// The same checks as [`Self::read_file`]: segments that do not add up to
    /// the file's size are refused before anything is decoded, and each
    /// segment's chunks must add up to it.
    pub fn read_file_pieces<E: From<DecodeError>>(
        &self,
        file: &FileInfo,
        mut piece: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        check_file_size(file)?;
        let mut hasher = Digester::new(file.digest_kind);
        for seg in &file.segments {
            check_segment_chunks(file, seg)?;
            // Fetched once for the segment, not for each chunk.
            let base = self.base_of(file, seg)?;
            for i in 0..seg.chunks.len() {
                let bytes = self.read_chunk_with(file, seg, i, base.as_deref())?;
                hasher.update(&bytes);
                piece(&bytes)?;
            }
        }
        Ok(check_file_digest(file, hasher)?)
    }

    /// Decodes a whole file and checks its size and digest. An archive opened
    /// with [`Archive::scan`] may list segments that do not add up to the file's
    /// size (a damaged record); that is refused before anything is decoded.
    ///
    /// Each chunk is decoded straight into the file's buffer where its root's
    /// words can be (they fill their containers and the bytes are aligned for
    /// them) and hashed there while in cache.
    pub fn read_file(&self, file: &FileInfo) -> Result<Vec<u8>, DecodeError> {
        check_file_size(file)?;
        let mut out = Output::new(file.size, self.data.len());
        let mut hasher = Digester::new(file.digest_kind);
        for seg in &file.segments {
            self.read_segment_into(file, seg, &mut out, Some(&mut hasher))?;
        }
        check_file_digest(file, hasher)?;
        Ok(out.bytes)
    }
}

#[cfg(feature = "std")]
impl Archive<'_> {
    /// [`Self::read_file`] with the file's chunks decoded on up to `threads`
    /// threads, this one among them (`std::thread::scope`: none outlives the
    /// call): the same bytes, the same checks. Each chunk is decoded straight
    /// into its place in the file's buffer; the thread that has just decoded
    /// a chunk hashes, in file order, the chunks decoded so far that the digest
    /// has not taken yet, mostly its own while they are in its cache. With
    /// `threads` of 0 or 1, a file of one chunk, or a buffer the archive does
    /// not earn whole ([`crate::earned_capacity`]), it is [`Self::read_file`].
    /// Should anything fail (a chunk, the digest, a base), the file is read
    /// again by [`Self::read_file`], whose error is returned: the same error,
    /// at the same place, as one thread gives. (A thread that cannot start is
    /// no failure: the others do its share.)
    ///
    /// Memory: the file's buffer, and each thread's working memory for one
    /// chunk.
    pub fn read_file_threads(&self, file: &FileInfo, threads: usize) -> Result<Vec<u8>, DecodeError> {
        let chunks: usize = file.segments.iter().map(|s| s.chunks.len()).sum();
        if threads <= 1 || chunks <= 1 {
            return self.read_file(file);
        }
        match self.read_file_split(file, threads.min(chunks)) {
            Some(bytes) => Ok(bytes),
            None => self.read_file(file),
        }
    }

    /// [`Self::read_file_threads`]'s work, `None` on any failure.
    fn read_file_split(&self, file: &FileInfo, threads: usize) -> Option<Vec<u8>> {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Mutex;

        // As `read_file` checks them (its errors are the ones reported).
        let segments = file.segments.iter().map(|s| s.len);
        check_sum(segments, file.size, "file size", Location::default()).ok()?;
        let mut out = Output::new(file.size, self.data.len());
        if out.bytes.len() as u64 != file.size {
            return None;
        }
        let bases = file
            .segments
            .iter()
            .map(|s| self.base_of(file, s).ok())
            .collect::<Option<Vec<_>>>()?;
        // Every chunk of the file in order, with its offset in its segment, its
        // segment's base and its place in the buffer.
        let mut rest: &mut [u8] = &mut out.bytes;
        let mut jobs = Vec::new();
        for (seg, base) in file.segments.iter().zip(&bases) {
            let chunks = seg.chunks.iter().map(|c| c.decoded_len);
            check_sum(chunks, seg.len, "chunk lengths", Location::default()).ok()?;
            let mut at = 0u64;
            for c in &seg.chunks {
                // In bounds (the lengths add up to the buffer's); checked, not assumed.
                let len = usize::try_from(c.decoded_len).ok().filter(|&n| n <= rest.len())?;
                let (place, tail) = core::mem::take(&mut rest).split_at_mut(len);
                rest = tail;
                jobs.push((c, at, base.as_deref(), place));
                // Below `seg.len`: the chunks' lengths add up to it.
                at += c.decoded_len;
            }
        }
        let count = jobs.len();
        let queue = Mutex::new(jobs.into_iter().enumerate());
        let digest = Mutex::new(InOrder {
            digester: Digester::new(file.digest_kind),
            next: 0,
            ready: alloc::collections::BTreeMap::new(),
        });
        let failed = AtomicBool::new(false);
        let (data, program) = (self.data, &self.limits.program);
        let work = || {
            while !failed.load(Ordering::Relaxed) {
                // The queue's lock is held only to take a job.
                let job = queue.lock().ok().and_then(|mut q| q.next());
                let Some((i, (c, at, base, place))) = job else { return };
                // A thread may wait here while another hashes the chunks in
                // turn (a try-lock that left its chunk for the thread hashing
                // measured the same: `decode_all --threads 2`, best of 11, four
                // rounds each on the fast BF16 and FP32 archives).
                let done = read_chunk_into(data, program, c, Some(at), base, &mut *place).is_ok()
                    && digest.lock().map(|mut d| d.take(i, &*place)).is_ok();
                if !done {
                    failed.store(true, Ordering::Relaxed);
                }
            }
        };
        std::thread::scope(|s| {
            for _ in 1..threads {
                // A thread that cannot start leaves its share to the others.
                let _ = std::thread::Builder::new().spawn_scoped(s, work);
            }
            work();
        });
        let mut digest = digest.into_inner().ok()?;
        if failed.into_inner() || digest.next != count || digest.digester.finish() != file.digest {
            return None;
        }
        Some(out.bytes)
    }
}

/// A file's digest over its chunks in file order, fed them in whatever order
/// the threads of [`Archive::read_file_threads`] decode them.
#[cfg(feature = "std")]
struct InOrder<'b> {
    digester: Digester,
    /// The first chunk not hashed yet.
    next: usize,
    /// Chunks decoded ahead of it, by index.
    ready: alloc::collections::BTreeMap<usize, &'b [u8]>,
}

#[cfg(feature = "std")]
impl<'b> InOrder<'b> {
    /// Takes chunk `index`'s bytes, and hashes every chunk from `next` on that
    /// is decoded.
    fn take(&mut self, index: usize, bytes: &'b [u8]) {
        self.ready.insert(index, bytes);
        while let Some(b) = self.ready.remove(&self.next) {
            self.digester.update(b);
            self.next += 1;
        }
    }
}

/// [`Archive::read_chunk_into`] on the archive's bytes `data` with program
/// limits `program`: what the threads of [`Archive::read_file_threads`] run,
/// which share these and not the archive (its base provider need not be `Sync`).
fn read_chunk_into(
    data: &[u8],
    program: &brevis_format::program::Limits,
    c: &ChunkInfo,
    at: Option<u64>,
    base: Option<&[u8]>,
    out: &mut [u8],
) -> Result<(), DecodeError> {
    // Decoded before the record's checksum is checked, while the record is
    // in cache, and a bad checksum is the error whatever decoding found (see
    // `UncheckedRecord`); nothing decoded is handed out unless it passes.
    // Spelled out here and in `read_chunk_with` rather than through
    // `UncheckedRecord::read_then_check`: its closures put the WebAssembly
    // module 36 B over the npm package's size budget.
    let record = chunk_record(data, c)?;
    let body = record.body();
    let decoded = Archive::check_declared_len(c, body).and_then(|()| decode_chunk_into(body, program, out));
    record.check()?;
    decoded?;
    xor_base(base, at, out)
}

/// A chunk's record in the archive's bytes `data`, its framing checked.
fn chunk_record<'a>(data: &'a [u8], chunk: &ChunkInfo) -> Result<UncheckedRecord<'a>, FormatError> {
    let start = chunk.offset as usize;
    let rec = data.get(start..start + chunk.record_len as usize).unwrap_or(&[]);
    UncheckedRecord::parse(rec)
}

/// XORs into `out`, a chunk's bytes `at` bytes into its segment, their part
/// of `base` (the segment's base tensor, if it is stored against one).
fn xor_base(base: Option<&[u8]>, at: Option<u64>, out: &mut [u8]) -> Result<(), DecodeError> {
    let Some(base) = base else { return Ok(()) };
    let at = at.and_then(|at| usize::try_from(at).ok());
    let part = at.and_then(|at| base.get(at..at.checked_add(out.len())?));
    let part = part.ok_or(FormatError::Invalid {
        what: "chunk lengths (beyond the base tensor)",
    })?;
    xor_into(out, part);
    Ok(())
}

/// Refuses a file whose segments do not add up to its size (an archive opened
/// with [`Archive::scan`] may list such a file: a damaged record).
fn check_file_size(file: &FileInfo) -> Result<(), DecodeError> {
    let loc = Location {
        file: Some(file.path.clone()),
        ..Location::default()
    };
    let segments = file.segments.iter().map(|s| s.len);
    check_sum(segments, file.size, "file size (segments do not add up)", loc)
}

/// Refuses a segment whose chunks do not add up to its length.
fn check_segment_chunks(file: &FileInfo, seg: &SegmentInfo) -> Result<(), DecodeError> {
    let loc = Location {
        file: Some(file.path.clone()),
        segment: Some(seg.name.clone()),
        ..Location::default()
    };
    let chunks = seg.chunks.iter().map(|c| c.decoded_len);
    check_sum(chunks, seg.len, "chunk lengths (do not add up to the segment's)", loc)
}

/// Checks the digest of a file rebuilt, `hasher` having taken all its bytes.
fn check_file_digest(file: &FileInfo, mut hasher: Digester) -> Result<(), DecodeError> {
    let found = hasher.finish();
    if found == file.digest {
        return Ok(());
    }
    Err(
        DecodeError::new(mismatch(file.digest_kind, &file.digest, &found)).at(&Location {
            file: Some(file.path.clone()),
            ..Location::default()
        }),
    )
}

/// Where chunk `index` of `seg` is, for errors.
fn chunk_location(file: &FileInfo, seg: &SegmentInfo, index: usize) -> Location {
    Location {
        offset: seg.chunks.get(index).map(|c| c.offset),
        file: Some(file.path.clone()),
        segment: Some(seg.name.clone()),
        chunk: Some(index as u64),
    }
}

/// A file (or segment) being rebuilt: zeroed bytes that chunks are decoded
/// into, in order. Allocated whole where the archive in hand earns its
/// declared size ([`crate::earned_capacity`]), zeroed by the allocator (fresh
/// pages from the system, no pass over them); otherwise grown as chunks come.
struct Output {
    bytes: Vec<u8>,
    /// Bytes decoded so far (`bytes` may be longer: allocated whole).
    filled: usize,
    /// The declared size.
    declared: u64,
}

impl Output {
    fn new(declared: u64, archive_bytes: usize) -> Self {
        let earned = crate::earned_capacity(declared, archive_bytes as u64);
        let bytes = match usize::try_from(declared) {
            Ok(n) if earned == declared => {
                #[allow(unused_mut)] // written to with the feature `huge-pages` only
                let mut zeroed = alloc::vec![0; n];
                // Before any byte is written: the kernel can then map the buffer
                // 2 MiB at a time as chunks fill it (measured in `docs/UNSAFE.md`).
                #[cfg(feature = "huge-pages")]
                brevis_format::pages::advise_huge_pages(&mut zeroed);
                zeroed
            }
            _ => Vec::with_capacity(usize::try_from(earned).unwrap_or(0)),
        };
        Output {
            bytes,
            filled: 0,
            declared,
        }
    }

    /// The next `len` bytes to decode into, or `None` past the declared size.
    fn next(&mut self, len: u64) -> Option<&mut [u8]> {
        let end = (self.filled as u64).checked_add(len).filter(|&e| e <= self.declared)?;
        let end = usize::try_from(end).ok()?;
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
        let start = core::mem::replace(&mut self.filled, end);
        Some(&mut self.bytes[start..end])
    }
}

/// Checks that `parts` add up to `expected` (with checked arithmetic: an
/// archive opened by `scan` can list anything).
fn check_sum(
    mut parts: impl Iterator<Item = u64>,
    expected: u64,
    what: &'static str,
    loc: Location,
) -> Result<(), DecodeError> {
    let listed = parts.try_fold(0u64, |acc, p| acc.checked_add(p));
    if listed == Some(expected) {
        return Ok(());
    }
    Err(DecodeError::new(FormatError::LengthMismatch {
        what,
        expected,
        found: listed.unwrap_or(u64::MAX),
    })
    .at(&loc))
}

/// When exactly one chunk of a segment lost its header, its length is what the
/// others leave of the segment's.
fn infer_damaged_length(seg: &mut SegmentInfo) {
    let known: u64 = seg.chunks.iter().map(|c| c.decoded_len).sum();
    let mut unknown = seg.chunks.iter_mut().filter(|c| c.decoded_len == 0);
    if let (Some(c), None) = (unknown.next(), unknown.next()) {
        c.decoded_len = seg.len.saturating_sub(known);
    }
}

fn unreachable_kind() -> Result<(), DecodeError> {
    Err(FormatError::Invalid {
        what: "index entry kind",
    }
    .into())
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    /// Golden archives of SHA-256, XXH3-128 and BLAKE3 digests, with files of
    /// several chunks.
    const GOLDEN: [&[u8]; 3] = [
        include_bytes!("../../tests/golden/v1-mixed.brv"),
        include_bytes!("../../tests/golden/v1-xxh3.brv"),
        include_bytes!("../../tests/golden/v1-blake3.brv"),
    ];

    /// `golden` with a byte of `f`'s last chunk's record flipped, and that chunk.
    fn last_chunk_damaged<'a>(golden: &[u8], f: &'a FileInfo) -> (Vec<u8>, &'a ChunkInfo) {
        let last = f.segments.iter().rev().find_map(|s| s.chunks.last()).unwrap();
        let mut bad = golden.to_vec();
        bad[(last.offset + last.record_len / 2) as usize] ^= 1;
        (bad, last)
    }

    /// The threaded read itself succeeds (it is not the one-thread read it falls
    /// back to), with the one-thread read's bytes; and it gives up on a damaged
    /// chunk.
    #[test]
    fn files_split_over_threads_are_read_by_the_threads() {
        let mut split = 0;
        for golden in GOLDEN {
            let a = Archive::open(golden, DecodeLimits::default()).unwrap();
            for f in a.files() {
                let chunks: usize = f.segments.iter().map(|s| s.chunks.len()).sum();
                if chunks < 2 {
                    continue;
                }
                split += 1;
                let one = a.read_file(f).unwrap();
                for threads in [2, 3, chunks + 1] {
                    assert!(a.read_file_split(f, threads) == Some(one.clone()), "{}", f.path);
                }
                // A byte of the file's last chunk's record flipped: the threads give up.
                let (bad, _) = last_chunk_damaged(golden, f);
                let files = a.files().to_vec();
                let damaged = Archive::with_index(&bad, &files, DecodeLimits::default());
                let f = &files[a.files().iter().position(|g| g.path == f.path).unwrap()];
                assert!(damaged.read_file_split(f, 2).is_none(), "{}", f.path);
                assert_eq!(damaged.read_file_threads(f, 2), damaged.read_file(f));
            }
        }
        assert!(split > 0, "no golden file has several chunks");
    }

    /// What [`Archive::read_file_pieces`]' caller's own failure is, in the test.
    #[derive(Debug, PartialEq)]
    enum PieceError {
        Decode(DecodeError),
        Full,
    }

    impl From<DecodeError> for PieceError {
        fn from(e: DecodeError) -> Self {
            PieceError::Decode(e)
        }
    }

    /// Chunk by chunk, the file's bytes; a damaged chunk or a wrong digest fails
    /// after the pieces before it (never a piece of the damaged chunk); the
    /// caller's own error stops the decode and comes back as it is.
    #[test]
    fn files_read_in_pieces_are_the_files() {
        let mut several = 0;
        for golden in GOLDEN {
            let a = Archive::open(golden, DecodeLimits::default()).unwrap();
            let files = a.files().to_vec();
            for (at, f) in files.iter().enumerate() {
                let whole = a.read_file(f).unwrap();
                let (mut got, mut pieces) = (Vec::new(), 0);
                a.read_file_pieces::<DecodeError>(f, |p| {
                    got.extend_from_slice(p);
                    pieces += 1;
                    Ok(())
                })
                .unwrap();
                assert!(got == whole, "{}", f.path);
                let chunks: usize = f.segments.iter().map(|s| s.chunks.len()).sum();
                assert_eq!(pieces, chunks, "a piece a chunk: {}", f.path);
                if chunks < 2 {
                    continue;
                }
                several += 1;

                // The caller stops it at the first piece.
                let stopped = a.read_file_pieces(f, |_| Err(PieceError::Full));
                assert_eq!(stopped, Err(PieceError::Full));

                // The last chunk's record damaged: every piece before it, then the error.
                let (bad, last) = last_chunk_damaged(golden, f);
                let damaged = Archive::with_index(&bad, &files, DecodeLimits::default());
                let mut got = Vec::new();
                let e = damaged
                    .read_file_pieces::<DecodeError>(f, |p| {
                        got.extend_from_slice(p);
                        Ok(())
                    })
                    .unwrap_err();
                assert_eq!(e.location.offset, Some(last.offset), "{e}");
                assert!(e.location.chunk.is_some(), "{e}");
                assert!(got.len() as u64 == f.size - last.decoded_len && whole.starts_with(&got));

                // A digest that does not match: every byte handed on, then the error.
                let mut wrong = files.clone();
                wrong[at].digest[0] ^= 1;
                let lied = Archive::with_index(golden, &wrong, DecodeLimits::default());
                let mut got = Vec::new();
                let e = lied
                    .read_file_pieces::<DecodeError>(&wrong[at], |p| {
                        got.extend_from_slice(p);
                        Ok(())
                    })
                    .unwrap_err();
                assert!(got == whole);
                assert_eq!(e, lied.read_file(&wrong[at]).unwrap_err(), "the error read_file gives");
            }
        }
        assert!(several > 0, "no golden file has several chunks");
    }
}
