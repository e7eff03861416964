//! File digests: SHA-256, BLAKE3 or XXH3-128, whichever the archive header names.

use alloc::boxed::Box;
use alloc::vec::Vec;

use brevis_format::archive::{DigestKind, Xxh3Hasher};
use brevis_format::FormatError;
use sha2::Digest as _;

/// Hashes one file's bytes incrementally with the hash of a [`DigestKind`].
#[derive(Clone)]
pub enum Digester {
    /// SHA-256.
    Sha256(sha2::Sha256),
    /// BLAKE3 (boxed: its state is about 2 KiB).
    Blake3(Box<blake3::Hasher>),
    /// XXH3-128 (boxed: its state is about 400 bytes).
    Xxh3(Box<Xxh3Hasher>),
}

impl Digester {
    /// A hasher of `kind`, with nothing hashed yet.
    pub fn new(kind: DigestKind) -> Self {
        match kind {
            DigestKind::Sha256 => Digester::Sha256(sha2::Sha256::new()),
            DigestKind::Blake3 => Digester::Blake3(Box::new(blake3::Hasher::new())),
            DigestKind::Xxh3 => Digester::Xxh3(Box::default()),
        }
    }

    /// Which hash it computes.
    pub fn kind(&self) -> DigestKind {
        match self {
            Digester::Sha256(_) => DigestKind::Sha256,
            Digester::Blake3(_) => DigestKind::Blake3,
            Digester::Xxh3(_) => DigestKind::Xxh3,
        }
    }

    /// Hashes the next bytes.
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Digester::Sha256(h) => h.update(data),
            Digester::Blake3(h) => {
                h.update(data);
            }
            Digester::Xxh3(h) => h.update(data),
        }
    }

    /// The digest of every byte given since it was made or last finished; it then
    /// starts over (same kind).
    pub fn finish(&mut self) -> [u8; 32] {
        match self {
            Digester::Sha256(h) => h.finalize_reset().into(),
            Digester::Blake3(h) => {
                let d = *h.finalize().as_bytes();
                h.reset();
                d
            }
            Digester::Xxh3(h) => {
                let mut d = [0; 32];
                d[..16].copy_from_slice(&h.finish().to_be_bytes());
                **h = Xxh3Hasher::new();
                d
            }
        }
    }
}

/// BLAKE3's chunk: the tree's leaves are this many bytes.
const CHUNK: u64 = blake3::CHUNK_LEN as u64;

/// Where a chunk's decoded bytes go in their file: enough to hash them where
/// they are decoded (BLAKE3: [`Subtrees::hash`]; XXH3-128: in the file's
/// hasher, when every byte before them has been hashed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkPlace {
    /// The file's number: how many FILE records come before its own in the
    /// archive (the order in which [`crate::FileHasher::start`] is called).
    pub file: u64,
    /// Offset of the chunk's first byte in its file.
    pub file_offset: u64,
    /// The file's size.
    pub file_size: u64,
    /// The hash of the archive's file digests: [`DigestKind::Blake3`] or
    /// [`DigestKind::Xxh3`] (SHA-256 archives' chunks get no place).
    pub digest: DigestKind,
}

/// One whole BLAKE3 subtree inside a piece of a file: its chaining value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Subtree {
    /// Where it starts in the piece.
    start: usize,
    /// Its bytes: a power of two, at least a BLAKE3 chunk.
    len: usize,
    cv: blake3::hazmat::ChainingValue,
}

/// The BLAKE3 chaining values of the whole subtrees inside one decoded chunk's
/// bytes, computed where the chunk was decoded (while its bytes are in that
/// core's cache), so that the thread computing the file's digest ([`Blake3Tree`])
/// merges a few values instead of hashing every byte again. BLAKE3 hashes
/// 1 KiB chunks at their offsets in the file and merges them in a binary tree,
/// so any aligned power-of-two run of chunks (a subtree) can be hashed apart
/// from the rest. The bytes before the first and after the last subtree (under
/// 1 KiB each side, unless the chunk is small) and the file's last BLAKE3
/// chunk (the root needs it) are left to the digest's thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subtrees {
    file_offset: u64,
    parts: Vec<Subtree>,
}

impl Subtrees {
    /// Hashes the subtrees of `bytes`, which go at `place` in their file.
    pub fn hash(bytes: &[u8], place: ChunkPlace) -> Self {
        let file_offset = place.file_offset;
        let end = file_offset.saturating_add(bytes.len() as u64);
        let from = file_offset.checked_next_multiple_of(CHUNK).unwrap_or(u64::MAX);
        let to = end.min(last_chunk_start(place.file_size)) / CHUNK * CHUNK;
        let parts = hash_subtrees(bytes, file_offset, from, to).collect();
        Subtrees { file_offset, parts }
    }

    /// Bytes the subtrees cover.
    pub fn covered(&self) -> u64 {
        self.parts.iter().map(|p| p.len as u64).sum()
    }
}

/// Where a file of `size` bytes has its last BLAKE3 chunk (0 for an empty file).
fn last_chunk_start(size: u64) -> u64 {
    size.saturating_sub(1) / CHUNK * CHUNK
}

/// The largest aligned subtrees, left to right, that cover `start..end` (both
/// multiples of [`CHUNK`]): each a power of two of chunks no larger than its
/// start allows ([`blake3::hazmat::max_subtree_len`]).
fn aligned_subtrees(mut start: u64, end: u64) -> impl Iterator<Item = (u64, u64)> {
    core::iter::from_fn(move || {
        if start >= end {
            return None;
        }
        // A power of two at least `CHUNK`, since `end - start` is a multiple of it.
        let room = 1u64 << (63 - (end - start).leading_zeros());
        let len = blake3::hazmat::max_subtree_len(start).map_or(room, |max| max.min(room));
        let subtree = (start, len);
        start += len;
        Some(subtree)
    })
}

/// The subtrees of `bytes`, which start `base` bytes into the file, that cover
/// its bytes `from..to` (file offsets, multiples of [`CHUNK`], within `bytes`),
/// hashed: [`aligned_subtrees`] with their chaining values.
fn hash_subtrees(bytes: &[u8], base: u64, from: u64, to: u64) -> impl Iterator<Item = Subtree> + '_ {
    aligned_subtrees(from, to).map(move |(at, len)| {
        // `base <= from <= at` and `at + len <= to`: within `bytes`.
        let start = (at - base) as usize;
        let len = len as usize;
        Subtree {
            start,
            len,
            cv: subtree_cv(&bytes[start..start + len], at),
        }
    })
}

/// The chaining value of the subtree `bytes`, which starts `offset` bytes
/// into the file (a multiple of [`CHUNK`]; `bytes` is a whole subtree there).
fn subtree_cv(bytes: &[u8], offset: u64) -> blake3::hazmat::ChainingValue {
    use blake3::hazmat::HasherExt;
    let mut h = blake3::Hasher::new();
    h.set_input_offset(offset);
    h.update(bytes);
    h.finalize_non_root()
}

/// A BLAKE3 hasher of one file that takes, besides bytes, the [`Subtrees`]
/// already hashed where a piece was decoded. It gives what [`blake3::hash`]
/// gives for the same bytes, whichever way they come. Subtrees that do not
/// sit where it expects them (another offset, past the file's last chunk, not
/// aligned) are ignored and their piece hashed here.
pub struct Blake3Tree {
    /// The file's size, as its record says.
    size: u64,
    /// Chaining values of the subtrees hashed so far, left to right, siblings
    /// merged: one for each bit set in `pos / CHUNK`, largest first.
    stack: Vec<(blake3::hazmat::ChainingValue, u64)>,
    /// Bytes the stack covers (a multiple of [`CHUNK`]).
    pos: u64,
    /// The bytes after `pos` (at most a chunk): kept until more come, since
    /// the file's last chunk is hashed as part of the root.
    tail: Vec<u8>,
}

impl Blake3Tree {
    /// A hasher of a file of `size` bytes.
    pub fn new(size: u64) -> Self {
        Blake3Tree {
            size,
            stack: Vec::new(),
            pos: 0,
            tail: Vec::with_capacity(CHUNK as usize),
        }
    }

    /// Hashes the next bytes of the file.
    pub fn update(&mut self, mut data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if !self.tail.is_empty() {
            let need = CHUNK as usize - self.tail.len();
            if data.len() <= need {
                self.tail.extend_from_slice(data);
                return;
            }
            self.tail.extend_from_slice(&data[..need]);
            data = &data[need..];
            self.push_tail();
        }
        // Whole chunks but the last (more bytes may follow, or none).
        let whole = (data.len() - 1) / CHUNK as usize * CHUNK as usize;
        for part in hash_subtrees(data, self.pos, self.pos, self.pos + whole as u64) {
            self.push(part.cv, part.len as u64);
        }
        self.tail.extend_from_slice(&data[whole..]);
    }

    /// Hashes the next bytes of the file, `data`, whose `subtrees` were hashed
    /// where it was decoded ([`Subtrees::hash`]).
    pub fn update_with_subtrees(&mut self, data: &[u8], subtrees: &Subtrees) {
        if !self.fits(data.len(), subtrees) {
            return self.update(data);
        }
        let mut at = 0;
        for part in &subtrees.parts {
            self.update(&data[at..part.start]);
            // The subtree starts at a chunk boundary after `pos`, so the tail is
            // empty or a whole chunk, and more bytes follow it.
            if !self.tail.is_empty() {
                self.push_tail();
            }
            self.push(part.cv, part.len as u64);
            at = part.start + part.len;
        }
        self.update(&data[at..]);
    }

    /// Whether `subtrees` sit in the `len` bytes that come next as they
    /// should: in order, inside, at the chunk boundaries and sizes BLAKE3's
    /// tree has there, none reaching the file's last chunk. (The tail before
    /// each then holds no more than a chunk: [`Self::update`] keeps at most one.)
    fn fits(&self, len: usize, subtrees: &Subtrees) -> bool {
        let here = self.pos + self.tail.len() as u64;
        if subtrees.file_offset != here {
            return false;
        }
        let limit = last_chunk_start(self.size);
        let mut at = 0usize;
        subtrees.parts.iter().all(|p| {
            let offset = here + p.start as u64;
            let ok = p.start >= at
                && p.start <= len
                && p.len <= len - p.start
                && offset.is_multiple_of(CHUNK)
                && p.len as u64 >= CHUNK
                && p.len.is_power_of_two()
                && blake3::hazmat::max_subtree_len(offset).is_none_or(|max| p.len as u64 <= max)
                && offset.checked_add(p.len as u64).is_some_and(|end| end <= limit);
            at = p.start + p.len;
            ok
        })
    }

    /// Pushes the tail, a whole chunk that more bytes follow.
    fn push_tail(&mut self) {
        let cv = subtree_cv(&self.tail, self.pos);
        self.tail.clear();
        self.push(cv, CHUNK);
    }

    /// Pushes the chaining value of the subtree of `len` bytes at `pos`, merging
    /// siblings (the stack is `pos` in binary, and the subtree is aligned, so
    /// a merge is a carry). More bytes always follow what is pushed (the
    /// file's last chunk is kept), so no merged node is the root.
    fn push(&mut self, cv: blake3::hazmat::ChainingValue, len: u64) {
        use blake3::hazmat::{merge_subtrees_non_root, Mode};
        let mut node = (cv, len);
        while let Some(&(left, left_len)) = self.stack.last() {
            if left_len != node.1 {
                break;
            }
            self.stack.pop();
            node = (merge_subtrees_non_root(&left, &node.0, Mode::Hash), 2 * left_len);
        }
        self.stack.push(node);
        self.pos += len;
    }

    /// The file's digest: what [`blake3::hash`] gives for the bytes given. (All
    /// zeros if fewer bytes came than the size said and the last ones were whole
    /// subtrees: no real digest, and not the file's.)
    pub fn finalize(&self) -> [u8; 32] {
        use blake3::hazmat::{merge_subtrees_non_root, merge_subtrees_root, HasherExt, Mode};
        let Some(((first, _), rest)) = self.stack.split_first() else {
            return *blake3::hash(&self.tail).as_bytes();
        };
        if self.tail.is_empty() {
            return [0; 32];
        }
        let mut last = blake3::Hasher::new();
        last.set_input_offset(self.pos);
        last.update(&self.tail);
        let mut right = last.finalize_non_root();
        for (left, _) in rest.iter().rev() {
            right = merge_subtrees_non_root(left, &right, Mode::Hash);
        }
        *merge_subtrees_root(first, &right, Mode::Hash).as_bytes()
    }
}

/// The error for a file whose `computed` digest is not the `stored` one.
pub(crate) fn mismatch(kind: DigestKind, stored: &[u8; 32], computed: &[u8; 32]) -> FormatError {
    let prefix = |d: &[u8; 32]| u64::from_be_bytes(d[..8].try_into().unwrap_or([0; 8]));
    FormatError::Checksum {
        what: match kind {
            DigestKind::Sha256 => "file SHA-256",
            DigestKind::Blake3 => "file BLAKE3",
            DigestKind::Xxh3 => "file XXH3-128",
        },
        stored: prefix(stored),
        computed: prefix(computed),
    }
}

/// The `kind` digest of `data`.
pub fn digest(kind: DigestKind, data: &[u8]) -> [u8; 32] {
    let mut d = Digester::new(kind);
    d.update(data);
    d.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A BLAKE3 archive's first file's place.
    fn place(file_offset: u64, file_size: u64) -> ChunkPlace {
        ChunkPlace {
            file: 0,
            file_offset,
            file_size,
            digest: DigestKind::Blake3,
        }
    }

    fn bytes(len: usize, seed: u32) -> Vec<u8> {
        (0..len as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) ^ seed) as u8)
            .collect()
    }

    /// `data` cut at `cuts` (sorted, deduplicated, within it), each piece hashed
    /// by a [`Blake3Tree`] raw or, where `hashed` says, with its subtrees as a
    /// worker would hash them at `place(offset)`; with `scribble`, the bytes the
    /// subtrees cover are changed before the tree sees them (so only their
    /// chaining values can make the digest right).
    fn tree_digest(
        data: &[u8],
        cuts: &[usize],
        hashed: &[bool],
        place: impl Fn(u64) -> ChunkPlace,
        scribble: bool,
    ) -> ([u8; 32], u64) {
        let mut tree = Blake3Tree::new(data.len() as u64);
        let mut covered = 0;
        let mut from = 0;
        for (k, &to) in cuts.iter().chain([&data.len()]).enumerate() {
            let piece = &data[from..to];
            if hashed.get(k).copied().unwrap_or(false) {
                let subtrees = Subtrees::hash(piece, place(from as u64));
                covered += subtrees.covered();
                let mut seen = piece.to_vec();
                if scribble {
                    for p in &subtrees.parts {
                        seen[p.start..p.start + p.len].iter_mut().for_each(|b| *b ^= 0x55);
                    }
                }
                tree.update_with_subtrees(&seen, &subtrees);
            } else {
                tree.update(piece);
            }
            from = to;
        }
        (tree.finalize(), covered)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// However a file comes (pieces of any size, some with subtrees hashed
        /// where they were decoded), the digest is BLAKE3's; and the subtrees
        /// are used, not hashed again: with the bytes under them changed, the
        /// digest is still the file's.
        #[test]
        fn a_tree_of_subtrees_is_blake3(
            len in prop_oneof![0usize..5000, 5000usize..300_000, (1usize..300).prop_map(|k| k * CHUNK as usize)],
            cut_at in proptest::collection::vec(0.0f64..1.0, 0..12),
            hashed in proptest::collection::vec(any::<bool>(), 13),
            seed in any::<u32>(),
        ) {
            let data = bytes(len, seed);
            let want = *blake3::hash(&data).as_bytes();
            let mut cuts: Vec<usize> = cut_at.iter().map(|f| (f * len as f64) as usize).collect();
            cuts.sort_unstable();
            cuts.dedup();
            let size = len as u64;
            let right = |at| place(at, size);
            let (got, covered) = tree_digest(&data, &cuts, &hashed, right, false);
            prop_assert_eq!(got, want);
            let (scribbled, _) = tree_digest(&data, &cuts, &hashed, right, true);
            prop_assert_eq!(scribbled, want);
            // Subtrees hashed at a wrong place, or for a larger file, are not
            // taken (the bytes are hashed instead): the digest stays right.
            let shifted = |at| place(at + CHUNK, size + CHUNK);
            prop_assert_eq!(tree_digest(&data, &cuts, &hashed, shifted, false).0, want);
            let larger = |at| place(at, size + 3 * CHUNK);
            prop_assert_eq!(tree_digest(&data, &cuts, &hashed, larger, false).0, want);
            // Everything but the edges of hashed pieces and the last chunk is
            // covered by subtrees when the pieces are large.
            if cuts.is_empty() && hashed[0] && len > 2 * CHUNK as usize {
                prop_assert_eq!(covered, last_chunk_start(size));
            }
        }
    }

    /// The subtrees of a piece are the largest BLAKE3's tree has there.
    #[test]
    fn subtrees_are_the_largest_aligned_ones() {
        let spans: Vec<(u64, u64)> = aligned_subtrees(3 * CHUNK, 20 * CHUNK).collect();
        let k = |n: u64| n * CHUNK;
        assert_eq!(
            spans,
            [(k(3), k(1)), (k(4), k(4)), (k(8), k(8)), (k(16), k(4))],
            "in chunks: 3, 4..8, 8..16, 16..20"
        );
        assert_eq!(aligned_subtrees(0, k(6)).collect::<Vec<_>>(), [(0, k(4)), (k(4), k(2))]);
        assert_eq!(aligned_subtrees(k(5), k(5)).count(), 0);
        // A piece from byte 100 of a 10-chunk file: its first whole chunk
        // starts at byte 1024, and the file's last chunk is left out.
        let piece = bytes(k(10) as usize - 100, 1);
        let sub = Subtrees::hash(&piece, place(100, k(10)));
        let parts: Vec<(usize, usize)> = sub.parts.iter().map(|p| (p.start, p.len)).collect();
        let c = CHUNK as usize;
        assert_eq!(
            parts,
            [
                (c - 100, c),
                (2 * c - 100, 2 * c),
                (4 * c - 100, 4 * c),
                (8 * c - 100, c)
            ]
        );
        assert_eq!(sub.covered(), k(8));
    }

    #[test]
    fn known_answers_and_incremental_equals_whole() {
        // FIPS 180-4 and the BLAKE3 reference test vectors for "abc"; XXH3-128's as
        // the `xxhash` reference library (through Python's `xxhash` 3) gives it.
        let hex = |d: [u8; 32]| {
            d.iter()
                .map(|b| alloc::format!("{b:02x}"))
                .collect::<alloc::string::String>()
        };
        assert_eq!(
            hex(digest(DigestKind::Sha256, b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(digest(DigestKind::Blake3, b"abc")),
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
        );
        assert_eq!(
            hex(digest(DigestKind::Xxh3, b"abc")),
            "06b05ab6733a618578af5f94892f3950\
             00000000000000000000000000000000"
        );
        let data: alloc::vec::Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
        for kind in DigestKind::ALL {
            let mut d = Digester::new(kind);
            assert_eq!(d.kind(), kind);
            for part in data.chunks(7777) {
                d.update(part);
            }
            assert_eq!(d.finish(), digest(kind, &data));
            // Finishing starts over.
            d.update(b"abc");
            assert_eq!(d.finish(), digest(kind, b"abc"));
        }
    }
}
