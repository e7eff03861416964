//! `Map[op](P)`: a pointwise bijection on `b`-bit words.
//!
//! Decoder direction: `out[i] = op(child[i])`. Encoder direction: the child's
//! target is `op⁻¹(target[i])`. All arithmetic is modulo `2^b`.

use crate::error::{FormatError, Result};
use crate::stream::{mask, Word};

/// A pointwise bijection on `b`-bit words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MapOp {
    /// `out = child ^ c` (`0 < c < 2^b`).
    XorConst(u64),
    /// `out = child + c mod 2^b` (`0 < c < 2^b`).
    AddConst(u64),
    /// `out = zigzag_decode(child)`: 0,1,2,3,… → 0,−1,1,−2,… in `b`-bit two's complement.
    ZigZag,
    /// `out = gray_decode(child)` (prefix XOR of the bits from the top).
    Gray,
    /// `out = rotate_left_b(child, r)` (`0 < r < b`).
    RotateLeft(u8),
    /// `out = reverse of the b bits of child`.
    BitReverse,
}

impl MapOp {
    /// Wire tag.
    pub fn tag(self) -> u8 {
        match self {
            MapOp::XorConst(_) => 0,
            MapOp::AddConst(_) => 1,
            MapOp::ZigZag => 2,
            MapOp::Gray => 3,
            MapOp::RotateLeft(_) => 4,
            MapOp::BitReverse => 5,
        }
    }

    /// Name used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            MapOp::XorConst(_) => "xor",
            MapOp::AddConst(_) => "add",
            MapOp::ZigZag => "zigzag",
            MapOp::Gray => "gray",
            MapOp::RotateLeft(_) => "rotl",
            MapOp::BitReverse => "bitrev",
        }
    }

    /// Typing rule: is this op legal on `width`-bit words?
    pub fn check(self, width: u8) -> Result<()> {
        let ok = match self {
            MapOp::XorConst(c) | MapOp::AddConst(c) => c != 0 && c <= mask(width),
            MapOp::ZigZag | MapOp::Gray | MapOp::BitReverse => width >= 2,
            MapOp::RotateLeft(r) => r > 0 && r < width,
        };
        if ok {
            Ok(())
        } else {
            Err(FormatError::Type {
                op: "Map",
                rule: "parameter out of range for the word width",
            })
        }
    }

    /// The decoder direction, in place: `w = op(w)`.
    pub fn apply<W: Word>(self, width: u8, words: &mut [W]) {
        let m = mask(width);
        let b = u32::from(width);
        match self {
            MapOp::XorConst(c) => words.iter_mut().for_each(|w| *w = W::from_u64(w.to_u64() ^ c)),
            MapOp::AddConst(c) => words
                .iter_mut()
                .for_each(|w| *w = W::from_u64(w.to_u64().wrapping_add(c) & m)),
            MapOp::ZigZag => words.iter_mut().for_each(|w| {
                let x = w.to_u64();
                *w = W::from_u64(((x >> 1) ^ (x & 1).wrapping_neg()) & m)
            }),
            MapOp::Gray => words.iter_mut().for_each(|w| {
                let mut x = w.to_u64();
                let mut s = 1;
                while s < b {
                    x ^= x >> s;
                    s <<= 1;
                }
                *w = W::from_u64(x)
            }),
            MapOp::RotateLeft(r) => {
                let r = u32::from(r);
                words.iter_mut().for_each(|w| {
                    let x = w.to_u64();
                    *w = W::from_u64(((x << r) | (x >> (b - r))) & m)
                })
            }
            MapOp::BitReverse => words
                .iter_mut()
                .for_each(|w| *w = W::from_u64(w.to_u64().reverse_bits() >> (64 - b))),
        }
    }

    /// The encoder direction, in place: `w = op⁻¹(w)`.
    pub fn invert<W: Word>(self, width: u8, words: &mut [W]) {
        let m = mask(width);
        let b = u32::from(width);
        match self {
            MapOp::XorConst(_) | MapOp::BitReverse => self.apply(width, words),
            MapOp::AddConst(c) => words
                .iter_mut()
                .for_each(|w| *w = W::from_u64(w.to_u64().wrapping_sub(c) & m)),
            MapOp::ZigZag => words.iter_mut().for_each(|w| {
                let x = w.to_u64();
                // Sign-extend the b-bit value, then the usual zigzag.
                let sign = (x >> (b - 1)) & 1;
                *w = W::from_u64(((x << 1) ^ sign.wrapping_neg()) & m)
            }),
            MapOp::Gray => words.iter_mut().for_each(|w| {
                let x = w.to_u64();
                *w = W::from_u64(x ^ (x >> 1))
            }),
            MapOp::RotateLeft(r) => {
                let r = u32::from(r);
                words.iter_mut().for_each(|w| {
                    let x = w.to_u64();
                    *w = W::from_u64(((x >> r) | (x << (b - r))) & m)
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn all_ops(width: u8) -> Vec<MapOp> {
        let mut v = alloc::vec![MapOp::XorConst(mask(width)), MapOp::AddConst(1 + (mask(width) >> 1))];
        if width >= 2 {
            v.extend([
                MapOp::ZigZag,
                MapOp::Gray,
                MapOp::BitReverse,
                MapOp::RotateLeft(1),
                MapOp::RotateLeft(width - 1),
            ]);
        }
        v
    }

    #[test]
    fn every_op_is_a_bijection_on_small_widths() {
        for width in 1..=10u8 {
            let all: Vec<u16> = (0..1u16 << width).collect();
            for op in all_ops(width) {
                op.check(width).unwrap();
                let mut w = all.clone();
                op.apply(width, &mut w);
                let mut sorted = w.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, all, "{op:?} on {width} bits is not a permutation");
                op.invert(width, &mut w);
                assert_eq!(w, all, "{op:?} on {width} bits does not invert");
            }
        }
    }

    #[test]
    fn inverse_round_trips_on_64_bits() {
        let vals: Vec<u64> = (0..1000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
        for op in all_ops(64) {
            let mut w = vals.clone();
            op.invert(64, &mut w);
            op.apply(64, &mut w);
            assert_eq!(w, vals, "{op:?}");
        }
    }

    #[test]
    fn zigzag_matches_the_usual_mapping() {
        let mut w: Vec<u8> = alloc::vec![0, 1, 2, 3, 4];
        MapOp::ZigZag.apply(8, &mut w);
        assert_eq!(w, [0, 0xff, 1, 0xfe, 2]);
    }

    #[test]
    fn typing_rejects_bad_parameters() {
        assert!(MapOp::XorConst(0).check(8).is_err());
        assert!(MapOp::XorConst(256).check(8).is_err());
        assert!(MapOp::RotateLeft(8).check(8).is_err());
        assert!(MapOp::ZigZag.check(1).is_err());
    }
}
