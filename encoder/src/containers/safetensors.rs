//! safetensors: an 8-byte header length, a JSON header, then the tensors' bytes.
//! The header (with its padding) becomes one opaque segment; each tensor a
//! tensor segment in file order. Parsing and validation (offsets contiguous and
//! in bounds, sizes matching shapes) is the `safetensors` crate's.

use anyhow::{bail, Context, Result};
use brevis_format::DType;
use safetensors::tensor::{Dtype, SafeTensors};

use super::{Layout, SegmentPlan};

/// Our dtype for a safetensors dtype, where the archive has one.
pub fn dtype(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::BOOL => DType::Bool,
        Dtype::U8 => DType::U8,
        Dtype::I8 => DType::I8,
        Dtype::F8_E4M3 => DType::F8E4M3,
        Dtype::F8_E5M2 => DType::F8E5M2,
        Dtype::I16 => DType::I16,
        Dtype::U16 => DType::U16,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::I32 => DType::I32,
        Dtype::U32 => DType::U32,
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        Dtype::I64 => DType::I64,
        Dtype::U64 => DType::U64,
        _ => return None,
    })
}

/// Segments of a safetensors file.
pub fn plan(data: &[u8]) -> Result<Vec<SegmentPlan>> {
    let (n, metadata) = SafeTensors::read_metadata(data).map_err(|e| anyhow::anyhow!("{e}"))?;
    let start = 8usize.checked_add(n).context("header length overflows")?;
    let mut plans = vec![SegmentPlan::opaque("safetensors header", 0..start)];
    let tensors = metadata.tensors();
    for name in metadata.offset_keys() {
        let info = tensors.get(&name).context("tensor listed without info")?;
        let (a, b) = info.data_offsets;
        let range = start + a..start + b;
        if range.end > data.len() {
            bail!("tensor `{name}` ends beyond the file");
        }
        plans.push(match dtype(info.dtype) {
            Some(dtype) => SegmentPlan::tensor(name, dtype, info.shape.iter().map(|&d| d as u64).collect(), range),
            // Dtypes the archive has no code for yet travel as opaque bytes;
            // packed 4-bit ones are viewed as nibbles.
            None => SegmentPlan {
                layout: if info.dtype == Dtype::F4 {
                    Layout::Nibbles
                } else {
                    Layout::Auto
                },
                ..SegmentPlan::opaque(name, range)
            },
        });
    }
    // `read_metadata` checked the tensors are contiguous and cover the data exactly.
    Ok(plans)
}
