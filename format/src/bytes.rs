//! Checked byte reading and the small integer encodings every structure uses.
//!
//! Integers are little-endian; `varint` is unsigned LEB128 (7 bits a byte, low
//! groups first, at most 10 bytes, and the canonical — shortest — form only, so
//! every value has exactly one serialization).

use alloc::vec::Vec;

use crate::error::{FormatError, Result};

/// A cursor over untrusted bytes: every read is checked and fails with
/// [`FormatError::Truncated`] instead of panicking.
#[derive(Clone, Debug)]
pub struct ByteReader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> ByteReader<'a> {
    /// A reader at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        ByteReader { data, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The unread bytes.
    pub fn rest(&self) -> &'a [u8] {
        &self.data[self.pos..]
    }

    /// Reads one byte.
    pub fn u8(&mut self, what: &'static str) -> Result<u8> {
        let b = *self.data.get(self.pos).ok_or(FormatError::Truncated { what })?;
        self.pos += 1;
        Ok(b)
    }

    /// Reads `n` bytes.
    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(FormatError::Truncated { what })?;
        let s = self.data.get(self.pos..end).ok_or(FormatError::Truncated { what })?;
        self.pos = end;
        Ok(s)
    }

    /// Reads a fixed-size array.
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let s = self.bytes(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Reads a little-endian `u32`.
    pub fn u32_le(&mut self, what: &'static str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// Reads a little-endian `u64`.
    pub fn u64_le(&mut self, what: &'static str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Reads a canonical unsigned LEB128 varint.
    pub fn varint(&mut self, what: &'static str) -> Result<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8(what)?;
            let group = u64::from(b & 0x7f);
            if i == 9 && b > 1 {
                return Err(FormatError::Invalid {
                    what: "varint (overflows 64 bits)",
                });
            }
            v |= group << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return Err(FormatError::Invalid {
                        what: "varint (not in shortest form)",
                    });
                }
                return Ok(v);
            }
        }
        Err(FormatError::Invalid {
            what: "varint (longer than 10 bytes)",
        })
    }

    /// Reads a varint that must fit `usize` and be at most `max`.
    pub fn varint_usize(&mut self, what: &'static str, max: u64) -> Result<usize> {
        let v = self.varint(what)?;
        if v > max {
            return Err(FormatError::LimitExceeded {
                limit: what,
                requested: v,
                allowed: max,
            });
        }
        usize::try_from(v).map_err(|_| FormatError::LimitExceeded {
            limit: what,
            requested: v,
            allowed: usize::MAX as u64,
        })
    }

    /// Reads a varint length-prefixed UTF-8 string of at most `max` bytes.
    pub fn string(&mut self, what: &'static str, max: u64) -> Result<&'a str> {
        let n = self.varint_usize(what, max)?;
        let b = self.bytes(n, what)?;
        core::str::from_utf8(b).map_err(|_| FormatError::Invalid { what })
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self, what: &'static str) -> Result<()> {
        if self.remaining() != 0 {
            return Err(FormatError::TrailingBytes {
                what,
                count: self.remaining() as u64,
            });
        }
        Ok(())
    }
}

/// Appends `v` as a canonical LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Bytes [`put_varint`] writes for `v`.
pub fn varint_len(v: u64) -> usize {
    let bits = 64 - v.leading_zeros() as usize;
    bits.div_ceil(7).max(1)
}

/// Appends a varint length followed by the string's bytes.
pub fn put_string(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_and_length() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v), "{v}");
            let mut r = ByteReader::new(&out);
            assert_eq!(r.varint("v").unwrap(), v);
            r.finish("v").unwrap();
        }
    }

    #[test]
    fn varint_rejects_non_canonical_and_overlong() {
        assert!(matches!(
            ByteReader::new(&[0x80, 0x00]).varint("v"),
            Err(FormatError::Invalid { .. })
        ));
        assert!(matches!(
            ByteReader::new(&[0xff; 11]).varint("v"),
            Err(FormatError::Invalid { .. })
        ));
        let mut eleven = [0xffu8; 10];
        eleven[9] = 0x02;
        assert!(matches!(
            ByteReader::new(&eleven).varint("v"),
            Err(FormatError::Invalid { .. })
        ));
        assert_eq!(
            ByteReader::new(&[0x80]).varint("v"),
            Err(FormatError::Truncated { what: "v" })
        );
    }

    #[test]
    fn reads_are_checked() {
        let mut r = ByteReader::new(&[1, 2, 3]);
        assert_eq!(r.bytes(4, "x"), Err(FormatError::Truncated { what: "x" }));
        assert_eq!(r.u32_le("x"), Err(FormatError::Truncated { what: "x" }));
        assert_eq!(r.bytes(usize::MAX, "x"), Err(FormatError::Truncated { what: "x" }));
        assert_eq!(r.bytes(3, "x").unwrap(), &[1, 2, 3]);
    }
}
