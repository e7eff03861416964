//! Word streams: `n` words of `b` bits (`b[n]`), the values every program node produces.
//!
//! A stream keeps its words in the smallest machine integer that holds `b` bits
//! (`u8` up to 8 bits, `u16` up to 16, `u32` up to 32, `u64` up to 64), so operators
//! run as plain loops over slices the compiler can vectorize.

use alloc::vec::Vec;

use crate::error::{FormatError, Result};

/// Largest word width a stream may have, in bits.
pub const MAX_WIDTH: u8 = 64;

/// A machine integer that holds the words of a stream. (`Pod`: a slice of words
/// can be viewed as its bytes, which some decoders store several words at a time.)
pub trait Word: bytemuck::Pod + Default + Eq + Ord + core::fmt::Debug + Send + Sync + 'static {
    /// Bits in the machine integer (8, 16, 32 or 64).
    const BITS: u32;
    /// Zero-extends to `u64`.
    fn to_u64(self) -> u64;
    /// Truncates a `u64` to this integer.
    fn from_u64(v: u64) -> Self;
}

macro_rules! impl_word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            const BITS: u32 = <$t>::BITS;
            #[inline(always)]
            fn to_u64(self) -> u64 { self as u64 }
            #[inline(always)]
            fn from_u64(v: u64) -> Self { v as $t }
        }
    )*};
}
impl_word!(u8, u16, u32, u64);

/// The storage of a stream's words, by container size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Words {
    /// Widths 1..=8.
    U8(Vec<u8>),
    /// Widths 9..=16.
    U16(Vec<u16>),
    /// Widths 17..=32.
    U32(Vec<u32>),
    /// Widths 33..=64.
    U64(Vec<u64>),
}

impl Words {
    /// The words as slices, for a decoder writing into storage it does not own
    /// ([`WordsMut`]).
    pub fn as_mut(&mut self) -> WordsMut<'_> {
        match self {
            Words::U8(v) => WordsMut::U8(v),
            Words::U16(v) => WordsMut::U16(v),
            Words::U32(v) => WordsMut::U32(v),
            Words::U64(v) => WordsMut::U64(v),
        }
    }
}

/// Words in storage the caller owns, by container size: what a decoder writes
/// into in place (a slice of a file's output buffer, say) instead of a
/// [`Words`] of its own.
#[derive(Debug, PartialEq, Eq)]
pub enum WordsMut<'a> {
    /// Widths 1..=8.
    U8(&'a mut [u8]),
    /// Widths 9..=16.
    U16(&'a mut [u16]),
    /// Widths 17..=32.
    U32(&'a mut [u32]),
    /// Widths 33..=64.
    U64(&'a mut [u64]),
}

impl WordsMut<'_> {
    /// Number of words.
    pub fn len(&self) -> usize {
        match self {
            WordsMut::U8(w) => w.len(),
            WordsMut::U16(w) => w.len(),
            WordsMut::U32(w) => w.len(),
            WordsMut::U64(w) => w.len(),
        }
    }

    /// Whether there are no words.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same words, reborrowed (to pass on and use again after).
    pub fn reborrow(&mut self) -> WordsMut<'_> {
        match self {
            WordsMut::U8(w) => WordsMut::U8(w),
            WordsMut::U16(w) => WordsMut::U16(w),
            WordsMut::U32(w) => WordsMut::U32(w),
            WordsMut::U64(w) => WordsMut::U64(w),
        }
    }

    /// Viewed in the container of `width`-bit words, if `bytes` (little-endian
    /// words, on a little-endian machine) are aligned for it and hold whole
    /// words, and `width` fills its container (8, 16, 32 or 64 bits: every
    /// value of the container is a word, so whatever is written there is one):
    /// where a chunk's root can be evaluated straight into its output bytes.
    pub fn from_le_bytes(width: u8, bytes: &mut [u8]) -> Option<WordsMut<'_>> {
        if !cfg!(target_endian = "little") || usize::from(width) != 8 * container_bytes(width) {
            return None;
        }
        Some(match width {
            8 => WordsMut::U8(bytes),
            16 => WordsMut::U16(bytemuck::try_cast_slice_mut(bytes).ok()?),
            32 => WordsMut::U32(bytemuck::try_cast_slice_mut(bytes).ok()?),
            _ => WordsMut::U64(bytemuck::try_cast_slice_mut(bytes).ok()?),
        })
    }
}

/// Checks that `width` is legal and `words` are in its container.
pub fn check_container(width: u8, words: &WordsMut<'_>) -> Result<()> {
    check_width(width)?;
    let ok = matches!(
        (words, container_bytes(width)),
        (WordsMut::U8(_), 1) | (WordsMut::U16(_), 2) | (WordsMut::U32(_), 4) | (WordsMut::U64(_), 8)
    );
    if !ok {
        return Err(FormatError::BadWidth { width });
    }
    Ok(())
}

/// Checks that the container of `words` is that of `width`-bit words and that
/// every word fits in `width` bits.
pub fn check_fit(width: u8, words: WordsMut<'_>) -> Result<()> {
    check_container(width, &words)?;
    // A width that fills its container holds every word (nothing to scan).
    if usize::from(width) != 8 * container_bytes(width) {
        let m = mask(width);
        // An OR over every word (no early exit) vectorizes in the word's own width.
        let all = match words {
            WordsMut::U8(v) => u64::from(v.iter().fold(0u8, |a, &x| a | x)),
            WordsMut::U16(v) => u64::from(v.iter().fold(0u16, |a, &x| a | x)),
            WordsMut::U32(v) => u64::from(v.iter().fold(0u32, |a, &x| a | x)),
            WordsMut::U64(v) => v.iter().fold(0u64, |a, &x| a | x),
        };
        if all & !m != 0 {
            return Err(FormatError::WordTooWide { width });
        }
    }
    Ok(())
}

/// `n` words of `width` bits; every word is below `2^width`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    width: u8,
    words: Words,
}

/// Bytes of the container that holds words of `width` bits (1, 2, 4 or 8).
pub const fn container_bytes(width: u8) -> usize {
    match width {
        0..=8 => 1,
        9..=16 => 2,
        17..=32 => 4,
        _ => 8,
    }
}

/// The mask of the low `width` bits.
#[inline(always)]
pub const fn mask(width: u8) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Checks that `width` is a legal stream width (1..=64).
pub fn check_width(width: u8) -> Result<()> {
    if width == 0 || width > MAX_WIDTH {
        return Err(FormatError::BadWidth { width });
    }
    Ok(())
}

/// Writes each word's `N` little-endian bytes (the whole word) into `dst`.
#[inline(always)]
fn le_words<const N: usize, T: Copy>(dst: &mut [u8], src: &[T], le: impl Fn(T) -> [u8; N]) {
    for (d, &x) in dst.chunks_exact_mut(N).zip(src) {
        d.copy_from_slice(&le(x));
    }
}

/// Writes the low `wb` little-endian bytes of each word into `dst`.
#[inline(always)]
fn le_prefix<const N: usize, T: Copy>(dst: &mut [u8], wb: usize, src: &[T], le: impl Fn(T) -> [u8; N]) {
    for (d, &x) in dst.chunks_exact_mut(wb).zip(src) {
        d.copy_from_slice(&le(x)[..wb]);
    }
}

/// A stream's words as little-endian bytes (what a chunk decodes to).
///
/// Where each word fills its container (widths 8, 16, 32, 64) on a little-endian
/// machine, these are the words' own buffer, viewed as bytes: decoding a chunk
/// then copies nothing after its root operator (`Stream::into_le_bytes`).
/// Otherwise they are a byte copy made by [`Stream::write_le_bytes`]. Two are
/// equal when their bytes are, however they are held.
#[derive(Clone, Debug)]
pub struct LeBytes(Words);

impl PartialEq for LeBytes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for LeBytes {}

impl LeBytes {
    /// The bytes as a vector: the buffer itself if it holds bytes, else a copy.
    pub fn into_vec(mut self) -> Vec<u8> {
        match &mut self.0 {
            Words::U8(v) => core::mem::take(v),
            _ => self.to_vec(),
        }
    }
}

/// With the feature `recycle`, the buffer is kept for a later literal to decode
/// into ([`crate::spare`]).
#[cfg(feature = "recycle")]
impl Drop for LeBytes {
    fn drop(&mut self) {
        crate::spare::give(core::mem::replace(&mut self.0, Words::U8(Vec::new())));
    }
}

impl From<Vec<u8>> for LeBytes {
    fn from(bytes: Vec<u8>) -> Self {
        LeBytes(Words::U8(bytes))
    }
}

impl core::ops::Deref for LeBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Words::U8(v) => v,
            Words::U16(v) => bytemuck::cast_slice(v),
            Words::U32(v) => bytemuck::cast_slice(v),
            Words::U64(v) => bytemuck::cast_slice(v),
        }
    }
}

impl core::ops::DerefMut for LeBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Words::U8(v) => v,
            Words::U16(v) => bytemuck::cast_slice_mut(v),
            Words::U32(v) => bytemuck::cast_slice_mut(v),
            Words::U64(v) => bytemuck::cast_slice_mut(v),
        }
    }
}

impl AsRef<[u8]> for LeBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Stream {
    /// A stream of `len` zero words of `width` bits.
    pub fn zeros(width: u8, len: usize) -> Result<Self> {
        check_width(width)?;
        let words = match container_bytes(width) {
            1 => Words::U8(alloc::vec![0; len]),
            2 => Words::U16(alloc::vec![0; len]),
            4 => Words::U32(alloc::vec![0; len]),
            _ => Words::U64(alloc::vec![0; len]),
        };
        Ok(Stream { width, words })
    }

    /// A stream of `len` words of `width` bits for a decoder that writes every one
    /// (or fails): with the feature `recycle`, a buffer kept from a dropped chunk
    /// (module `spare`) when one holds `len` words, its words whatever they were
    /// (so possibly wider than `width` until overwritten); otherwise
    /// [`Self::zeros`].
    pub fn for_overwrite(width: u8, len: usize) -> Result<Self> {
        check_width(width)?;
        #[cfg(feature = "recycle")]
        if let Some(words) = crate::spare::take(container_bytes(width), len) {
            return Ok(Stream { width, words });
        }
        Stream::zeros(width, len)
    }

    /// Wraps words, checking the container matches `width` and every word fits.
    pub fn new(width: u8, mut words: Words) -> Result<Self> {
        check_fit(width, words.as_mut())?;
        Ok(Stream { width, words })
    }

    /// Builds a stream from `u64` values (test and encoder convenience).
    pub fn from_u64s(width: u8, values: &[u64]) -> Result<Self> {
        let mut s = Stream::zeros(width, values.len())?;
        with_words_mut!(&mut s.words, w => {
            for (d, &v) in w.iter_mut().zip(values) {
                *d = Word::from_u64(v);
            }
        });
        Stream::new(width, s.words)
    }

    /// Reads little-endian words of `width` bits (`width` a multiple of 8) from bytes.
    pub fn from_le_bytes(width: u8, bytes: &[u8]) -> Result<Self> {
        check_width(width)?;
        if !width.is_multiple_of(8) {
            return Err(FormatError::BadWidth { width });
        }
        let wb = usize::from(width / 8);
        if !bytes.len().is_multiple_of(wb) {
            return Err(FormatError::LengthMismatch {
                what: "bytes for words",
                expected: (bytes.len() / wb * wb) as u64,
                found: bytes.len() as u64,
            });
        }
        let n = bytes.len() / wb;
        let words = match width {
            8 => Words::U8(bytes.to_vec()),
            16 => Words::U16(
                bytes
                    .chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect(),
            ),
            24 => Words::U32(
                bytes
                    .chunks_exact(3)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], 0]))
                    .collect(),
            ),
            32 => Words::U32(
                bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            _ => {
                let mut v = Vec::with_capacity(n);
                for c in bytes.chunks_exact(wb) {
                    let mut b = [0u8; 8];
                    b[..wb].copy_from_slice(c);
                    v.push(u64::from_le_bytes(b));
                }
                Words::U64(v)
            }
        };
        Ok(Stream { width, words })
    }

    /// Appends the words as little-endian bytes (`width` a multiple of 8).
    pub fn write_le_bytes(&self, out: &mut Vec<u8>) -> Result<()> {
        if !self.width.is_multiple_of(8) {
            return Err(FormatError::BadWidth { width: self.width });
        }
        let wb = usize::from(self.width / 8);
        let start = out.len();
        let total = self.len().checked_mul(wb).ok_or(FormatError::LimitExceeded {
            limit: "stream bytes",
            requested: u64::MAX,
            allowed: usize::MAX as u64,
        })?;
        if let Words::U8(v) = &self.words {
            out.extend_from_slice(v);
            return Ok(());
        }
        // Grow once, then fill fixed-size pieces: loops without bounds checks or
        // capacity checks, which the compiler turns into shuffles and plain stores.
        out.resize(start + total, 0);
        let dst = &mut out[start..];
        match &self.words {
            Words::U8(_) => {}
            Words::U16(v) => le_words::<2, _>(dst, v, u16::to_le_bytes),
            Words::U32(v) if wb == 4 => le_words::<4, _>(dst, v, u32::to_le_bytes),
            Words::U32(v) => le_prefix(dst, wb, v, u32::to_le_bytes),
            Words::U64(v) if wb == 8 => le_words::<8, _>(dst, v, u64::to_le_bytes),
            Words::U64(v) => le_prefix(dst, wb, v, u64::to_le_bytes),
        }
        Ok(())
    }

    /// The words as little-endian bytes ([`Self::write_le_bytes`]), without a copy
    /// where each word fills its container on a little-endian machine.
    pub fn into_le_bytes(self) -> Result<LeBytes> {
        if cfg!(target_endian = "little") && usize::from(self.width) == 8 * container_bytes(self.width) {
            return Ok(LeBytes(self.words));
        }
        let mut out = Vec::new();
        self.write_le_bytes(&mut out)?;
        Ok(LeBytes(Words::U8(out)))
    }

    /// Element width in bits.
    pub fn width(&self) -> u8 {
        self.width
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        with_words!(&self.words, w => w.len())
    }

    /// True when the stream holds no words.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The word storage.
    pub fn words(&self) -> &Words {
        &self.words
    }

    /// Consumes the stream, returning its storage.
    pub fn into_words(self) -> Words {
        self.words
    }

    /// Word `i` as `u64` (slow path; for tests and small tables).
    pub fn get(&self, i: usize) -> Option<u64> {
        with_words!(&self.words, w => w.get(i).map(|x| x.to_u64()))
    }

    /// All words as `u64` (slow path; for tests and analysis).
    pub fn to_u64s(&self) -> Vec<u64> {
        with_words!(&self.words, w => w.iter().map(|x| x.to_u64()).collect())
    }

    /// Bytes this stream occupies in memory.
    pub fn mem_bytes(&self) -> usize {
        self.len() * container_bytes(self.width)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn le_bytes_round_trip_all_byte_widths() {
        let bytes: Vec<u8> = (0..840u32).map(|i| (i * 37 + 11) as u8).collect();
        for width in [8u8, 16, 24, 32, 40, 48, 56, 64] {
            let s = Stream::from_le_bytes(width, &bytes).unwrap();
            assert_eq!(s.len(), bytes.len() / usize::from(width / 8));
            let mut back = Vec::new();
            s.write_le_bytes(&mut back).unwrap();
            assert_eq!(back, bytes, "width {width}");
        }
    }

    /// `into_le_bytes` gives what `write_le_bytes` writes, whether it keeps the
    /// words' buffer (widths that fill their containers) or copies (the rest),
    /// and writes through `DerefMut` land in the right bytes.
    #[test]
    fn into_le_bytes_matches_write_le_bytes() {
        let bytes: Vec<u8> = (0..840u32).map(|i| (i * 37 + 11) as u8).collect();
        for width in [8u8, 16, 24, 32, 40, 48, 56, 64] {
            let s = Stream::from_le_bytes(width, &bytes).unwrap();
            let mut le = s.clone().into_le_bytes().unwrap();
            assert_eq!(&le[..], &bytes[..], "width {width}");
            le[1] ^= 0xff;
            let mut want = bytes.clone();
            want[1] ^= 0xff;
            assert_eq!(le.clone().into_vec(), want, "width {width}");
            assert_eq!(le.as_ref(), &want[..]);
        }
        // As `write_le_bytes`: whole bytes only.
        let s = Stream::from_u64s(12, &[0xabc, 0x123]).unwrap();
        assert_eq!(s.into_le_bytes(), Err(FormatError::BadWidth { width: 12 }));
        assert_eq!(&LeBytes::from(alloc::vec![1u8, 2])[..], [1, 2]);
        // Equal bytes are equal whether held as bytes or as words.
        let words = Stream::from_le_bytes(16, &bytes).unwrap().into_le_bytes().unwrap();
        assert_eq!(words, LeBytes::from(bytes.clone()));
        assert_ne!(words, LeBytes::from(bytes[1..].to_vec()));
    }

    /// Widths that fill their containers skip the scan of every word, which
    /// cannot fail there; the others still refuse a word too wide.
    #[test]
    fn new_scans_only_widths_narrower_than_their_container() {
        for width in [8u8, 16, 32, 64] {
            let s = Stream::from_u64s(width, &[mask(width), 0]).unwrap();
            assert_eq!(Stream::new(width, s.into_words()).unwrap().len(), 2);
        }
        for width in [7u8, 15, 31, 63] {
            let words = Stream::from_u64s(width + 1, &[mask(width + 1)]).unwrap().into_words();
            assert_eq!(Stream::new(width, words), Err(FormatError::WordTooWide { width }));
        }
    }

    #[test]
    fn new_rejects_words_wider_than_width() {
        assert_eq!(
            Stream::new(3, Words::U8(alloc::vec![1, 8])),
            Err(FormatError::WordTooWide { width: 3 })
        );
        assert_eq!(
            Stream::new(9, Words::U8(alloc::vec![1])),
            Err(FormatError::BadWidth { width: 9 })
        );
        assert_eq!(Stream::zeros(0, 1), Err(FormatError::BadWidth { width: 0 }));
    }
}
