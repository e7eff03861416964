//! File digests: SHA-256 or BLAKE3, whichever the archive header names.

use alloc::boxed::Box;

use brevis_format::archive::DigestKind;
use brevis_format::FormatError;
use sha2::Digest as _;

/// Hashes one file's bytes incrementally with the hash of a [`DigestKind`].
#[derive(Clone)]
pub enum Digester {
    /// SHA-256.
    Sha256(sha2::Sha256),
    /// BLAKE3 (boxed: its state is about 2 KiB).
    Blake3(Box<blake3::Hasher>),
}

impl Digester {
    /// A hasher of `kind`, with nothing hashed yet.
    pub fn new(kind: DigestKind) -> Self {
        match kind {
            DigestKind::Sha256 => Digester::Sha256(sha2::Sha256::new()),
            DigestKind::Blake3 => Digester::Blake3(Box::new(blake3::Hasher::new())),
        }
    }

    /// Which hash it computes.
    pub fn kind(&self) -> DigestKind {
        match self {
            Digester::Sha256(_) => DigestKind::Sha256,
            Digester::Blake3(_) => DigestKind::Blake3,
        }
    }

    /// Hashes the next bytes.
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Digester::Sha256(h) => h.update(data),
            Digester::Blake3(h) => {
                h.update(data);
            }
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
        }
    }
}

/// The error for a file whose `computed` digest is not the `stored` one.
pub(crate) fn mismatch(kind: DigestKind, stored: &[u8; 32], computed: &[u8; 32]) -> FormatError {
    let prefix = |d: &[u8; 32]| u64::from_be_bytes(d[..8].try_into().unwrap_or([0; 8]));
    FormatError::Checksum {
        what: match kind {
            DigestKind::Sha256 => "file SHA-256",
            DigestKind::Blake3 => "file BLAKE3",
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

    #[test]
    fn known_answers_and_incremental_equals_whole() {
        // FIPS 180-4 and the BLAKE3 reference test vectors for "abc".
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
        let data: alloc::vec::Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
        for kind in [DigestKind::Sha256, DigestKind::Blake3] {
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
