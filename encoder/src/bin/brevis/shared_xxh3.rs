//! The XXH3-128 file digest of a multi-threaded decode, hashed where each chunk
//! was decoded when its turn has come.

use std::collections::VecDeque;
use std::sync::Mutex;

use brevis_decoder::{ChunkPlace, DigestKind, Digester};

/// The XXH3-128 digest of the file being decoded, shared by the thread that
/// reads the archive (its `FileHasher`) and the threads that decode its chunks.
///
/// XXH3 hashes its input in order, so a file's pieces must reach the hasher in
/// file order. A decoding thread hashes its chunk's bytes right after decoding
/// them, while they are in its core's cache, if every byte before them has
/// been hashed ([`Self::hash_in_turn`]); the reading thread hashes every other
/// piece when it reaches it, and passes over those hashed ahead of it
/// ([`Self::update`]). Before, the reading thread hashed every piece, most of
/// them decoded on another core: with two threads on the `--fast-decode` BF16
/// corpus archive that took twice the time it takes on one thread
/// (`perf record`), on the thread whose work bounds the decode.
///
/// A piece hashed ahead is known by where its bytes lie. The reading thread
/// gets that very buffer as the chunk's piece (the decoder hands a chunk's
/// bytes on without a copy), and the buffer lives until the reading thread has
/// passed it, so no other piece can have its address meanwhile. Whatever the
/// reading thread meets that is not the next piece hashed ahead (a piece
/// placed wrongly: an archive whose records say two things) makes the digest
/// one that cannot match: the file then fails its check, never the reverse.
pub struct SharedXxh3(Mutex<Turns>);

struct Turns {
    /// The number ([`ChunkPlace::file`]) of the file being hashed; `None`
    /// before the first and once a file's digest is taken.
    file: Option<u64>,
    /// The number the next file started gets.
    next_file: u64,
    /// Bytes of the file hashed, by either side.
    hashed: u64,
    hasher: Digester,
    /// The pieces hashed ahead of the reading thread, in file order: the
    /// address and length of their bytes.
    ahead: VecDeque<(usize, usize)>,
    /// The reading thread met a piece that is not the next one hashed ahead.
    broken: bool,
}

impl Turns {
    /// Nothing hashed yet, of file `file`; the next file started is `next_file`.
    fn new(file: Option<u64>, next_file: u64) -> Self {
        Turns {
            file,
            next_file,
            hashed: 0,
            hasher: Digester::new(DigestKind::Xxh3),
            ahead: VecDeque::new(),
            broken: false,
        }
    }
}

impl SharedXxh3 {
    /// A digest with no file started.
    pub fn new() -> Self {
        SharedXxh3(Mutex::new(Turns::new(None, 0)))
    }

    /// The next file starts (numbered in order: the decoder's
    /// `FileHasher::start` calls, one per FILE record).
    pub fn start(&self) {
        let Ok(mut t) = self.0.lock() else { return };
        let number = t.next_file;
        *t = Turns::new(Some(number), number + 1);
    }

    /// A decoding thread's chunk, whose bytes go at `place`: hashes them now
    /// if that is where the file's hashing stands, else leaves them to
    /// [`Self::update`]. Returns whether it hashed them.
    pub fn hash_in_turn(&self, place: ChunkPlace, bytes: &[u8]) -> bool {
        if bytes.is_empty() {
            return false;
        }
        let Ok(mut t) = self.0.lock() else { return false };
        if t.broken || t.file != Some(place.file) || t.hashed != place.file_offset {
            return false;
        }
        t.hasher.update(bytes);
        t.hashed += bytes.len() as u64;
        t.ahead.push_back((bytes.as_ptr() as usize, bytes.len()));
        true
    }

    /// The reading thread's next piece of the file: passed over if it is the
    /// next one hashed ahead, hashed if none is.
    pub fn update(&self, piece: &[u8]) {
        if piece.is_empty() {
            return;
        }
        let Ok(mut t) = self.0.lock() else { return };
        match t.ahead.front() {
            Some(&at) if at == (piece.as_ptr() as usize, piece.len()) => {
                t.ahead.pop_front();
            }
            Some(_) => t.broken = true,
            None => {
                t.hasher.update(piece);
                t.hashed += piece.len() as u64;
            }
        }
    }

    /// The digest of the pieces the reading thread gave since [`Self::start`];
    /// all zeros (never a file's real digest in practice, so the check fails)
    /// if they are not what was hashed.
    pub fn finish(&self) -> [u8; 32] {
        let Ok(mut t) = self.0.lock() else { return [0; 32] };
        t.file = None;
        let digest = t.hasher.finish();
        if t.broken || !t.ahead.is_empty() {
            return [0; 32];
        }
        digest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(file: u64, file_offset: u64) -> ChunkPlace {
        ChunkPlace {
            file,
            file_offset,
            file_size: 1 << 20,
            digest: DigestKind::Xxh3,
        }
    }

    fn xxh3(pieces: &[&[u8]]) -> [u8; 32] {
        let mut d = Digester::new(DigestKind::Xxh3);
        for p in pieces {
            d.update(p);
        }
        d.finish()
    }

    /// However the chunks' turns fall, the digest is that of the pieces in
    /// order; chunks out of turn, of another file or of one not started are
    /// left to the reading thread.
    #[test]
    fn pieces_hashed_in_turn_or_not_give_the_files_digest() {
        let pieces: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 1000 + 300 * usize::from(i)]).collect();
        let refs: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        let want = xxh3(&refs);
        let offsets: Vec<u64> = refs
            .iter()
            .scan(0u64, |at, p| {
                let here = *at;
                *at += p.len() as u64;
                Some(here)
            })
            .collect();
        // Which pieces a decoding thread offers, and when: before the reading
        // thread passes piece `when` (so in turn only if all before are hashed).
        for mask in 0u32..64 {
            for lag in 0..3usize {
                let shared = SharedXxh3::new();
                // Not started: nothing is hashed ahead.
                assert!(!shared.hash_in_turn(place(0, 0), refs[0]));
                shared.start();
                let mut hashed_ahead = 0;
                for (i, p) in refs.iter().enumerate() {
                    // This piece and the `lag` after it are offered now (again,
                    // for those offered before: no longer in turn).
                    for j in i..(i + lag + 1).min(refs.len()) {
                        if mask & (1 << j) != 0 {
                            let was = shared.hash_in_turn(place(0, offsets[j]), refs[j]);
                            hashed_ahead += usize::from(was);
                            // Of another file: never.
                            assert!(!shared.hash_in_turn(place(1, offsets[j]), refs[j]));
                        }
                    }
                    shared.update(p);
                }
                assert_eq!(shared.finish(), want, "mask {mask:b}, lag {lag}");
                // Offered in turn: every piece is, from the first on.
                if mask == 63 {
                    assert_eq!(hashed_ahead, refs.len(), "lag {lag}");
                }
            }
        }
    }

    /// A piece other than the one hashed ahead (the same bytes elsewhere), or
    /// a piece hashed ahead that the reading thread never passes, gives a
    /// digest that does not match; files are told apart by their numbers.
    #[test]
    fn a_piece_that_is_not_the_one_hashed_ahead_fails_the_digest() {
        let a = vec![1u8; 4000];
        let b = vec![2u8; 4000];
        let right = xxh3(&[&a, &b]);

        let shared = SharedXxh3::new();
        shared.start();
        assert!(shared.hash_in_turn(place(0, 0), &a));
        // The same bytes elsewhere: not the piece hashed ahead.
        let copy = a.clone();
        shared.update(&copy);
        shared.update(&b);
        assert_eq!(shared.finish(), [0; 32]);

        let shared = SharedXxh3::new();
        shared.start();
        assert!(shared.hash_in_turn(place(0, 0), &a));
        assert!(shared.hash_in_turn(place(0, 4000), &b));
        shared.update(&a);
        assert_eq!(shared.finish(), [0; 32], "b hashed but never passed");

        // The second file's numbering: a chunk of file 1 waits for its start.
        let shared = SharedXxh3::new();
        shared.start();
        shared.update(&a);
        assert!(!shared.hash_in_turn(place(1, 0), &b));
        assert_eq!(shared.finish(), xxh3(&[&a]));
        assert!(!shared.hash_in_turn(place(0, 4000), &b), "file 0 is done");
        shared.start();
        assert!(shared.hash_in_turn(place(1, 0), &b));
        shared.update(&b);
        assert_eq!(shared.finish(), xxh3(&[&b]));
        assert_ne!(right, [0; 32]);
    }
}
