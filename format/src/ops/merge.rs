//! `Merge[op](P1..Pk)`: builds each word from `k` child words laid side by side
//! as contiguous bit fields, the first child in the most significant bits.
//!
//! - [`MergeOp::Fields`]`(w1..wk)`: child `j` is a `wj`-bit field; the output is
//!   `Σ wj` bits wide. Float sign/exponent/mantissa is `Fields(1, e, m)`.
//! - [`MergeOp::BitPlanes`]: `Fields(1, 1, …, 1)`, one plane per bit, top bit first.
//! - [`MergeOp::BytePlanes`]: `Fields(8, 8, …)`, one plane per byte, top byte first.
//!
//! Decoder direction: `out[i] = Σ child_j[i] << shift_j`. Encoder direction:
//! `child_j[i] = (t[i] >> shift_j) & mask(wj)`.

use alloc::vec::Vec;

use crate::error::{FormatError, Result};
use crate::stream::{mask, Stream, Word};

/// The most children a merge may have (one per bit of a 64-bit word).
pub const MAX_FIELDS: usize = 64;

/// How child words are laid side by side.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MergeOp {
    /// Fields of the given widths, first = most significant.
    Fields(Vec<u8>),
    /// `k` one-bit planes (`k` = output width).
    BitPlanes(u8),
    /// `k` byte planes (output width `8k`).
    BytePlanes(u8),
}

impl MergeOp {
    /// Wire tag.
    pub fn tag(&self) -> u8 {
        match self {
            MergeOp::Fields(_) => 0,
            MergeOp::BitPlanes(_) => 1,
            MergeOp::BytePlanes(_) => 2,
        }
    }

    /// Name used in the text form.
    pub fn name(&self) -> &'static str {
        match self {
            MergeOp::Fields(_) => "fields",
            MergeOp::BitPlanes(_) => "bits",
            MergeOp::BytePlanes(_) => "bytes",
        }
    }

    /// The children's widths, most significant first.
    pub fn field_widths(&self) -> Vec<u8> {
        match self {
            MergeOp::Fields(w) => w.clone(),
            MergeOp::BitPlanes(k) => alloc::vec![1; usize::from(*k)],
            MergeOp::BytePlanes(k) => alloc::vec![8; usize::from(*k)],
        }
    }

    /// Typing rule: 2..=64 fields, each at least one bit, at most 64 bits in all.
    /// Returns the output width.
    pub fn check(&self) -> Result<u8> {
        let widths = self.field_widths();
        if widths.len() < 2 || widths.len() > MAX_FIELDS {
            return Err(FormatError::Type {
                op: "Merge",
                rule: "needs 2..=64 children",
            });
        }
        let mut total = 0u32;
        for &w in &widths {
            if w == 0 {
                return Err(FormatError::Type {
                    op: "Merge",
                    rule: "a field has zero width",
                });
            }
            total += u32::from(w);
        }
        if total > 64 {
            return Err(FormatError::Type {
                op: "Merge",
                rule: "fields add up to more than 64 bits",
            });
        }
        Ok(total as u8)
    }

    /// The decoder direction: puts each child into place in `out` (which must
    /// have the children's length; what it held is overwritten).
    pub fn apply<W: Word>(&self, children: &[Stream], out: &mut [W]) -> Result<()> {
        let widths = self.field_widths();
        if children.len() != widths.len() {
            return Err(FormatError::Type {
                op: "Merge",
                rule: "child count differs from the field count",
            });
        }
        if children
            .iter()
            .zip(&widths)
            .any(|(child, &w)| child.width() != w || child.len() != out.len())
        {
            return Err(FormatError::Type {
                op: "Merge",
                rule: "child type differs from its field",
            });
        }
        // Natively, two fields (sign and exponent, mantissa: the usual float split)
        // in one pass: FP32's `Merge.fields[9,23]` wrote and reread its 4-byte
        // words in a second pass. (WebAssembly keeps the loop below: 16 fewer
        // instances of it per word type, a smaller module.)
        #[cfg(not(target_arch = "wasm32"))]
        if let [high, low] = children {
            let shift = u32::from(low.width());
            crate::with_words!(high.words(), h => crate::with_words!(low.words(), l => set_pair(out, h, shift, l)));
            return Ok(());
        }
        let mut shift: u32 = widths.iter().map(|&w| u32::from(w)).sum();
        for (i, (child, &w)) in children.iter().zip(&widths).enumerate() {
            shift -= u32::from(w);
            // The first child stores rather than ORs: `out` is never read before
            // it is written, so freshly mapped zero pages take one write fault
            // each, not a read then a copy-on-write fault (which with several
            // threads also flushes every core's TLB).
            if i == 0 {
                crate::with_words!(child.words(), c => set_shifted(out, c, shift));
            } else {
                crate::with_words!(child.words(), c => or_shifted(out, c, shift));
            }
        }
        Ok(())
    }

    /// The encoder direction: splits `target` into the children's streams.
    pub fn split(&self, target: &Stream) -> Result<Vec<Stream>> {
        let widths = self.field_widths();
        let total = self.check()?;
        if total != target.width() {
            return Err(FormatError::Type {
                op: "Merge",
                rule: "fields do not add up to the target width",
            });
        }
        let mut shift = u32::from(total);
        let mut out = Vec::with_capacity(widths.len());
        for &w in &widths {
            shift -= u32::from(w);
            let mut child = Stream::zeros(w, target.len())?;
            let m = mask(w);
            let mut words = child.into_words();
            crate::with_words!(target.words(), t => crate::with_words_mut!(&mut words, c => extract(t, c, shift, m)));
            child = Stream::new(w, words)?;
            out.push(child);
        }
        Ok(out)
    }
}

#[inline]
fn set_shifted<O: Word, C: Word>(out: &mut [O], child: &[C], shift: u32) {
    for (o, &c) in out.iter_mut().zip(child) {
        *o = O::from_u64(c.to_u64() << shift);
    }
}

/// `out[i] = high[i] << shift | low[i]`.
#[cfg(not(target_arch = "wasm32"))]
#[inline]
fn set_pair<O: Word, H: Word, L: Word>(out: &mut [O], high: &[H], shift: u32, low: &[L]) {
    for ((o, &h), &l) in out.iter_mut().zip(high).zip(low) {
        *o = O::from_u64(h.to_u64() << shift | l.to_u64());
    }
}

#[inline]
fn or_shifted<O: Word, C: Word>(out: &mut [O], child: &[C], shift: u32) {
    for (o, &c) in out.iter_mut().zip(child) {
        *o = O::from_u64(o.to_u64() | (c.to_u64() << shift));
    }
}

#[inline]
fn extract<T: Word, C: Word>(target: &[T], child: &mut [C], shift: u32, m: u64) {
    for (c, &t) in child.iter_mut().zip(target) {
        *c = C::from_u64((t.to_u64() >> shift) & m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_then_apply_round_trips() {
        let vals: Vec<u64> = (0..300u64).map(|i| i.wrapping_mul(0x9E37_79B9) & 0xffff).collect();
        let target = Stream::from_u64s(16, &vals).unwrap();
        for op in [
            MergeOp::Fields(alloc::vec![1, 8, 7]),
            MergeOp::BitPlanes(16),
            MergeOp::BytePlanes(2),
        ] {
            assert_eq!(op.check().unwrap(), 16);
            let children = op.split(&target).unwrap();
            let mut out = alloc::vec![0u16; vals.len()];
            op.apply(&children, &mut out).unwrap();
            let back: Vec<u64> = out.iter().map(|&x| u64::from(x)).collect();
            assert_eq!(back, vals, "{op:?}");
        }
    }

    /// Two fields take the fused pass natively: every pairing of child word types
    /// (FP32's `[9, 23]`, BF16's `[9, 7]`, bytes, 64-bit halves) rebuilds the
    /// target, and a child of the wrong type is still refused.
    #[test]
    fn two_fields_round_trip_in_every_container() {
        for (width, fields) in [
            (32u8, [9u8, 23]),
            (16, [9, 7]),
            (16, [6, 10]),
            (16, [8, 8]),
            (64, [31, 33]),
            (24, [20, 4]),
        ] {
            let vals: Vec<u64> = (0..301u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) & mask(width))
                .collect();
            let target = Stream::from_u64s(width, &vals).unwrap();
            let op = MergeOp::Fields(fields.to_vec());
            let children = op.split(&target).unwrap();
            let mut out = alloc::vec![0u64; vals.len()];
            op.apply(&children, &mut out).unwrap();
            assert_eq!(out, vals, "{fields:?}");
            let mut short = children.clone();
            short[1] = Stream::zeros(fields[1], vals.len() - 1).unwrap();
            assert!(op.apply(&short, &mut out).is_err());
        }
    }

    #[test]
    fn float_fields_put_sign_first() {
        let target = Stream::from_u64s(16, &[0x8000 | (0x7f << 7) | 5]).unwrap();
        let parts = MergeOp::Fields(alloc::vec![1, 8, 7]).split(&target).unwrap();
        let got: Vec<u64> = parts.iter().map(|p| p.get(0).unwrap()).collect();
        assert_eq!(got, [1, 0x7f, 5]);
    }

    #[test]
    fn typing_rejects_bad_layouts() {
        assert!(MergeOp::Fields(alloc::vec![8]).check().is_err());
        assert!(MergeOp::Fields(alloc::vec![8, 0]).check().is_err());
        assert!(MergeOp::Fields(alloc::vec![40, 40]).check().is_err());
        assert!(MergeOp::BytePlanes(9).check().is_err());
        assert_eq!(MergeOp::BytePlanes(8).check().unwrap(), 64);
    }
}
