//! `Scan[op, s](P)`: a prefix recurrence with stride `s` (`s = 1`: the previous
//! word; `s = row length`: the word one row back).
//!
//! Decoder direction: `out[i] = child[i]` for `i < s`, else
//! `out[i] = child[i] ⊕ out[i−s]` where `⊕` is XOR ([`ScanOp::Xor`]) or addition
//! modulo `2^b` ([`ScanOp::Add`], i.e. the child holds differences).
//! Encoder direction: `child[i] = t[i] ⊖ t[i−s]`.

use crate::error::{FormatError, Result};
use crate::stream::{mask, Word};

/// The recurrence of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanOp {
    /// `out[i] = child[i] ^ out[i-s]`.
    Xor,
    /// `out[i] = child[i] + out[i-s] mod 2^b`.
    Add,
}

impl ScanOp {
    /// Wire tag.
    pub fn tag(self) -> u8 {
        match self {
            ScanOp::Xor => 0,
            ScanOp::Add => 1,
        }
    }

    /// The op with wire tag `tag`.
    pub fn from_tag(tag: u8) -> Result<Self> {
        match tag {
            0 => Ok(ScanOp::Xor),
            1 => Ok(ScanOp::Add),
            _ => Err(FormatError::UnknownTag {
                what: "scan op",
                tag: tag.into(),
            }),
        }
    }

    /// Name used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            ScanOp::Xor => "xor",
            ScanOp::Add => "delta",
        }
    }

    /// The decoder direction, in place.
    pub fn apply<W: Word>(self, width: u8, stride: usize, words: &mut [W]) {
        if stride == 0 || stride >= words.len() {
            return;
        }
        let m = mask(width);
        match self {
            ScanOp::Xor => {
                for i in stride..words.len() {
                    words[i] = W::from_u64(words[i].to_u64() ^ words[i - stride].to_u64());
                }
            }
            ScanOp::Add => {
                for i in stride..words.len() {
                    words[i] = W::from_u64(words[i].to_u64().wrapping_add(words[i - stride].to_u64()) & m);
                }
            }
        }
    }

    /// The encoder direction, in place (walks backwards so each step reads
    /// the untouched predecessor).
    pub fn invert<W: Word>(self, width: u8, stride: usize, words: &mut [W]) {
        if stride == 0 || stride >= words.len() {
            return;
        }
        let m = mask(width);
        for i in (stride..words.len()).rev() {
            let prev = words[i - stride].to_u64();
            let cur = words[i].to_u64();
            words[i] = W::from_u64(match self {
                ScanOp::Xor => cur ^ prev,
                ScanOp::Add => cur.wrapping_sub(prev) & m,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn scan_inverts_for_all_strides() {
        let vals: Vec<u16> = (0..500u32).map(|i| ((i * 7919) % 4096) as u16).collect();
        for op in [ScanOp::Xor, ScanOp::Add] {
            for stride in [1usize, 2, 3, 17, 499, 500, 1000] {
                let mut w = vals.clone();
                op.invert(12, stride, &mut w);
                assert!(w.iter().all(|&x| x < 4096));
                op.apply(12, stride, &mut w);
                assert_eq!(w, vals, "{op:?} stride {stride}");
            }
        }
    }

    #[test]
    fn delta_of_a_ramp_is_constant() {
        let mut w: Vec<u8> = (10..20).collect();
        ScanOp::Add.invert(8, 1, &mut w);
        assert_eq!(w, [10, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
    }
}
