//! Writes archive records in order and keeps the index as it goes.

use std::io::Write;

use brevis_format::archive::{
    end_body, header, index_body, put_record, DigestKind, FileRecord, IndexEntry, RecordKind, SegmentRecord,
};

/// Writes an archive: header, then records, then the index and END on [`ArchiveWriter::finish`].
pub struct ArchiveWriter<W: Write> {
    out: W,
    offset: u64,
    index: Vec<IndexEntry>,
    scratch: Vec<u8>,
}

impl<W: Write> ArchiveWriter<W> {
    /// Starts an archive on `out` by writing the header; its FILE records will
    /// carry `digest` digests.
    pub fn new(mut out: W, digest: DigestKind) -> std::io::Result<Self> {
        let h = header(digest);
        out.write_all(&h)?;
        Ok(ArchiveWriter {
            out,
            offset: h.len() as u64,
            index: Vec::new(),
            scratch: Vec::new(),
        })
    }

    /// Bytes written so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn record(&mut self, kind: RecordKind, body: &[u8], decoded_len: u64) -> std::io::Result<()> {
        self.scratch.clear();
        put_record(&mut self.scratch, kind, body);
        if kind != RecordKind::Index && kind != RecordKind::End {
            self.index.push(IndexEntry {
                kind,
                offset: self.offset,
                decoded_len,
            });
        }
        self.out.write_all(&self.scratch)?;
        self.offset += self.scratch.len() as u64;
        Ok(())
    }

    /// Starts a file.
    pub fn file(&mut self, rec: &FileRecord) -> std::io::Result<()> {
        self.record(RecordKind::File, &rec.body(), 0)
    }

    /// Starts a segment of the current file.
    pub fn segment(&mut self, rec: &SegmentRecord) -> std::io::Result<()> {
        self.record(RecordKind::Segment, &rec.body(), 0)
    }

    /// Writes a chunk record (its body from `ChunkRecord::body`).
    pub fn chunk(&mut self, body: &[u8], decoded_len: u64) -> std::io::Result<()> {
        self.record(RecordKind::Chunk, body, decoded_len)
    }

    /// Writes the index and END record; returns the sink and the archive's length.
    pub fn finish(mut self) -> std::io::Result<(W, u64)> {
        let index_offset = self.offset;
        let body = index_body(&self.index);
        self.record(RecordKind::Index, &body, 0)?;
        let end_len = brevis_format::archive::END_LEN as u64;
        let end = end_body(index_offset, self.offset + end_len);
        self.record(RecordKind::End, &end, 0)?;
        self.out.flush()?;
        Ok((self.out, self.offset))
    }
}
