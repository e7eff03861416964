//! Output files written atomically: a temporary sibling is written, synced and
//! then moved into place, so the final name never holds a partial file. Without
//! `overwrite` the move is a hard link, which fails if the name exists, so even a
//! file created meanwhile by someone else is never clobbered.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// A file being written under a temporary name next to its final path.
pub struct AtomicFile {
    final_path: PathBuf,
    temp_path: PathBuf,
    writer: Option<BufWriter<File>>,
    overwrite: bool,
    committed: bool,
}

impl AtomicFile {
    /// Creates the temporary file. Fails at once if `path` exists and
    /// `overwrite` is false, or the directory is not writable.
    pub fn create(path: &Path, overwrite: bool) -> io::Result<Self> {
        if !overwrite && fs::symlink_metadata(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} already exists (use -f to overwrite)", path.display()),
            ));
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        let mut attempt = 0u32;
        loop {
            let temp_path = dir.join(format!(".{name}.brevis-tmp-{}-{attempt}", std::process::id()));
            // Readable too, for what is written to be read back (`written`).
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&temp_path)
            {
                Ok(f) => {
                    return Ok(AtomicFile {
                        final_path: path.to_path_buf(),
                        temp_path,
                        writer: Some(BufWriter::with_capacity(1 << 20, f)),
                        overwrite,
                        committed: false,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.final_path
    }

    /// The file as written so far, flushed, for reading back what was written
    /// (at offsets: `FileExt::read_exact_at` leaves the write position alone).
    pub fn written(&mut self) -> io::Result<&File> {
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| io::Error::other("already committed"))?;
        writer.flush()?;
        Ok(writer.get_ref())
    }

    /// Flushes, syncs and moves the file into place.
    pub fn commit(mut self) -> io::Result<()> {
        let writer = self
            .writer
            .take()
            .ok_or_else(|| io::Error::other("already committed"))?;
        let file = writer.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        if self.overwrite {
            fs::rename(&self.temp_path, &self.final_path)?;
        } else {
            fs::hard_link(&self.temp_path, &self.final_path).map_err(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    io::Error::new(
                        e.kind(),
                        format!("{} already exists (use -f to overwrite)", self.final_path.display()),
                    )
                } else {
                    e
                }
            })?;
            let _ = fs::remove_file(&self.temp_path);
        }
        self.committed = true;
        if let Some(dir) = self.final_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // Make the rename durable; not every platform can sync a directory.
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer
            .as_mut()
            .ok_or_else(|| io::Error::other("already committed"))?
            .write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer
            .as_mut()
            .ok_or_else(|| io::Error::other("already committed"))?
            .flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.temp_path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_moves_into_place_and_drop_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.brv");
        let mut f = AtomicFile::create(&p, false).unwrap();
        f.write_all(b"hello").unwrap();
        assert!(!p.exists(), "nothing under the final name before commit");
        f.commit().unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"hello");

        let err = AtomicFile::create(&p, false).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);

        let mut g = AtomicFile::create(&p, true).unwrap();
        g.write_all(b"partial").unwrap();
        drop(g);
        assert_eq!(
            fs::read(&p).unwrap(),
            b"hello",
            "an abandoned write leaves the old file"
        );
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "temp file removed");
    }

    #[cfg(unix)]
    #[test]
    fn what_was_written_reads_back_and_writing_goes_on_where_it_was() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out");
        let mut f = AtomicFile::create(&p, false).unwrap();
        f.write_all(b"hello, ").unwrap();
        let mut back = [0u8; 5];
        f.written().unwrap().read_exact_at(&mut back, 2).unwrap();
        assert_eq!(&back, b"llo, ", "buffered bytes are flushed before the read");
        f.write_all(b"world").unwrap();
        f.commit().unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"hello, world");
    }

    #[test]
    fn commit_without_overwrite_never_clobbers_a_file_created_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x");
        let mut f = AtomicFile::create(&p, false).unwrap();
        f.write_all(b"new").unwrap();
        fs::write(&p, b"someone else's").unwrap();
        assert_eq!(f.commit().unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&p).unwrap(), b"someone else's");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn unwritable_directory_is_a_clear_error() {
        let p = Path::new("/nonexistent-brevis-dir/out.brv");
        assert_eq!(
            AtomicFile::create(p, false).err().unwrap().kind(),
            io::ErrorKind::NotFound
        );
    }
}
