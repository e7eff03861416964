//! Tensor element types, with the codes the archive stores for them.
//!
//! Names follow safetensors. Codes are part of the format (`docs/FORMAT.md`) and
//! never change meaning.

use crate::error::{FormatError, Result};

/// A tensor's element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// Boolean, one byte per element.
    Bool,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 8-bit integer.
    I8,
    /// FP8 with 4 exponent and 3 mantissa bits.
    F8E4M3,
    /// FP8 with 5 exponent and 2 mantissa bits.
    F8E5M2,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// IEEE binary16.
    F16,
    /// bfloat16.
    BF16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// IEEE binary32.
    F32,
    /// IEEE binary64.
    F64,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
}

impl DType {
    /// Every dtype, in code order.
    pub const ALL: [DType; 15] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::I16,
        DType::U16,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::U32,
        DType::F32,
        DType::F64,
        DType::I64,
        DType::U64,
    ];

    /// The archive code of this dtype.
    pub fn code(self) -> u8 {
        Self::ALL.iter().position(|&d| d == self).unwrap_or(0) as u8
    }

    /// The dtype with archive code `code`.
    pub fn from_code(code: u8) -> Result<Self> {
        Self::ALL
            .get(usize::from(code))
            .copied()
            .ok_or(FormatError::UnknownTag {
                what: "dtype",
                tag: code.into(),
            })
    }

    /// The safetensors name (`"BF16"`, `"F8_E4M3"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "BOOL",
            DType::U8 => "U8",
            DType::I8 => "I8",
            DType::F8E4M3 => "F8_E4M3",
            DType::F8E5M2 => "F8_E5M2",
            DType::I16 => "I16",
            DType::U16 => "U16",
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::I32 => "I32",
            DType::U32 => "U32",
            DType::F32 => "F32",
            DType::F64 => "F64",
            DType::I64 => "I64",
            DType::U64 => "U64",
        }
    }

    /// The dtype with safetensors name `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|d| d.name() == name)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 | DType::F8E4M3 | DType::F8E5M2 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// Bits per element.
    pub fn bits(self) -> u8 {
        (self.size() * 8) as u8
    }

    /// `(exponent bits, mantissa bits)` for floating-point dtypes; the sign is one bit.
    pub fn float_layout(self) -> Option<(u8, u8)> {
        match self {
            DType::F8E4M3 => Some((4, 3)),
            DType::F8E5M2 => Some((5, 2)),
            DType::F16 => Some((5, 10)),
            DType::BF16 => Some((8, 7)),
            DType::F32 => Some((8, 23)),
            DType::F64 => Some((11, 52)),
            _ => None,
        }
    }

    /// True for signed integer dtypes.
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }
}

impl core::fmt::Display for DType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_code(d.code()).unwrap(), d);
            assert_eq!(DType::from_name(d.name()), Some(d));
            if let Some((e, m)) = d.float_layout() {
                assert_eq!(1 + e + m, d.bits());
            }
        }
        assert!(DType::from_code(15).is_err());
    }
}
