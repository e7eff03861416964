//! CTranslate2 models (`model.bin`: Whisper, Marian, NLLB and other models
//! converted for CTranslate2 and faster-whisper), binary versions 4 to 6, as
//! `python/ctranslate2/specs/model_spec.py` writes them and
//! `src/models/model.cc` reads them, all little-endian:
//!
//! ```text
//! u32 version | string spec name | u32 spec revision      (name and revision: version >= 2)
//! u32 variables, each: string name | u8 rank | u32 dims[rank] | u8 dtype | u32 bytes | data
//! u32 aliases, each: string alias | string variable name    (version >= 3)
//! ```
//!
//! A string is its length (`u16`, the terminating NUL included) and its bytes.
//! Dtype ids: 0 float32, 1 int8, 2 int16, 3 int32, 4 float16, 5 bfloat16.
//! Each variable's data becomes a tensor segment (shape slowest first, as
//! written); a variable of another dtype, or whose bytes disagree with its
//! shape, stays opaque. Everything else (header, each variable's name, shape
//! and sizes, the aliases) is opaque. The file must parse to its last byte:
//! anything else is not read as a model (the caller keeps it plain).

use anyhow::{ensure, Context, Result};
use brevis_format::DType;

use super::{Cursor, Layout, SegmentPlan};

/// Binary versions read here: from the first with a dtype byte per variable
/// (4) to the newest known (6).
const VERSIONS: std::ops::RangeInclusive<u32> = 4..=6;

/// Our dtype for a CTranslate2 dtype id.
fn dtype(id: u8) -> Option<DType> {
    Some(match id {
        0 => DType::F32,
        1 => DType::I8,
        2 => DType::I16,
        3 => DType::I32,
        4 => DType::F16,
        5 => DType::BF16,
        _ => return None,
    })
}

/// A string: `u16` length (NUL included), its bytes, the last one NUL.
fn string(r: &mut Cursor<'_>) -> Result<String> {
    let n = r.u16()?;
    let s = r.take(u64::from(n))?;
    let (&nul, s) = s.split_last().context("empty CTranslate2 string")?;
    ensure!(nul == 0, "CTranslate2 string without its NUL");
    Ok(std::str::from_utf8(s)
        .context("CTranslate2 string not UTF-8")?
        .to_owned())
}

/// Whether `d` may be a CTranslate2 model: its first `u32` a version read here.
pub fn looks_like(d: &[u8]) -> bool {
    d.get(..4)
        .is_some_and(|b| VERSIONS.contains(&u32::from_le_bytes(b.try_into().expect("4 bytes"))))
}

/// Segments of a CTranslate2 model (see the module docs).
pub fn plan(d: &[u8]) -> Result<Vec<SegmentPlan>> {
    let mut r = Cursor::new(d, "CTranslate2 model");
    let version = r.u32()?;
    ensure!(
        VERSIONS.contains(&version),
        "CTranslate2 binary version {version} not read here"
    );
    string(&mut r)?;
    r.u32()?;
    let variables = r.u32()?;
    // Each variable takes at least 8 bytes: a bound before anything is reserved.
    ensure!(
        variables as usize <= d.len() / 8,
        "CTranslate2 model claims more variables than it can hold"
    );
    let mut plans = Vec::with_capacity(2 * variables as usize + 1);
    let mut opaque_from = 0;
    for _ in 0..variables {
        let name = string(&mut r)?;
        let rank = r.u8()?;
        let shape = (0..rank)
            .map(|_| r.u32().map(u64::from))
            .collect::<Result<Vec<u64>>>()?;
        let id = r.u8()?;
        let bytes = r.u32()? as usize;
        let start = r.pos();
        r.take(bytes as u64)?;
        let range = start..r.pos();
        if range.is_empty() {
            continue;
        }
        plans.push(SegmentPlan::opaque("ctranslate2", opaque_from..start));
        let elements = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
        plans.push(match dtype(id) {
            Some(dt) if elements.and_then(|n| n.checked_mul(dt.size() as u64)) == Some(bytes as u64) => {
                SegmentPlan::tensor(name, dt, shape, range)
            }
            Some(dt) if matches!(dt.bits(), 16 | 32) && bytes.is_multiple_of(dt.size()) => SegmentPlan {
                layout: Layout::Words(dt.bits()),
                ..SegmentPlan::opaque(name, range)
            },
            _ => SegmentPlan::opaque(name, range),
        });
        opaque_from = r.pos();
    }
    for _ in 0..r.u32()? {
        string(&mut r)?;
        string(&mut r)?;
    }
    ensure!(r.left() == 0, "bytes after the CTranslate2 model");
    ensure!(!plans.is_empty(), "a CTranslate2 model without data");
    plans.push(SegmentPlan::opaque("ctranslate2", opaque_from..d.len()));
    plans.retain(|p| !p.range.is_empty());
    Ok(plans)
}
