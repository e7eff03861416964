//! GGUF (llama.cpp's format, versions 2 and 3): a header, key–value metadata,
//! tensor infos, padding to `general.alignment` (default 32), then every
//! tensor's data at its recorded offset (relative to the data section, each
//! aligned).
//!
//! The header and metadata, the tensor infos, and any padding or bytes no
//! tensor claims become opaque segments. Tensors of a type the archive has a
//! dtype for (F32, F16, BF16, F64, I8–I64) become tensor segments, with the
//! shape written slowest dimension first (GGUF lists `ne[0]`, the fastest,
//! first). Block-quantized tensors (Q4_0 … Q8_K, IQ*, TQ*, MXFP4) become
//! opaque segments that carry their block length as a [`Layout::Records`]
//! hint, so the search cuts them into blocks and codes the scales and the
//! quants of each block as separate columns. A tensor of a type not listed
//! here has no known size: its bytes fall into the opaque gap around it.
//!
//! The reader never trusts a count: every length is checked against the bytes
//! left before anything is read or allocated, so a hostile file fails with an
//! error (and [`super::plan`] keeps it as plain bytes) instead of panicking or
//! allocating what the header claims.
//!
//! Reference: `ggml/include/ggml.h` (type ids), `ggml/src/ggml-common.h` (block
//! layouts) and `docs/gguf.md` in the llama.cpp / ggml repositories.

use anyhow::{bail, ensure, Context, Result};
use brevis_format::archive::SegmentKind;
use brevis_format::DType;

use super::{Cursor, Layout, SegmentPlan};

/// `GGUF` as a little-endian u32.
const MAGIC: &[u8; 4] = b"GGUF";
/// Alignment of the data section and of each tensor when the metadata sets none.
const DEFAULT_ALIGNMENT: u64 = 32;
/// Deepest nesting of arrays accepted in metadata values.
const MAX_ARRAY_DEPTH: u32 = 8;
/// Most dimensions accepted for a tensor (ggml has 4).
const MAX_DIMS: u32 = 8;

/// How a ggml type stores its elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Storage {
    /// One element per word of this dtype.
    Plain(DType),
    /// Blocks of `elems` elements in `bytes` bytes.
    Blocks { elems: u64, bytes: u64 },
}

/// What a ggml type id means, for the types whose size is known.
fn storage(ggml_type: u32) -> Option<(&'static str, Storage)> {
    use Storage::{Blocks, Plain};
    let b = |elems, bytes| Blocks { elems, bytes };
    Some(match ggml_type {
        0 => ("F32", Plain(DType::F32)),
        1 => ("F16", Plain(DType::F16)),
        2 => ("Q4_0", b(32, 18)),    // d: f16, qs[16]
        3 => ("Q4_1", b(32, 20)),    // d, m: f16, qs[16]
        6 => ("Q5_0", b(32, 22)),    // d, qh[4], qs[16]
        7 => ("Q5_1", b(32, 24)),    // d, m, qh[4], qs[16]
        8 => ("Q8_0", b(32, 34)),    // d, qs[32]
        9 => ("Q8_1", b(32, 36)),    // d, s, qs[32]
        10 => ("Q2_K", b(256, 84)),  // scales[16], qs[64], d, dmin
        11 => ("Q3_K", b(256, 110)), // hmask[32], qs[64], scales[12], d
        12 => ("Q4_K", b(256, 144)), // d, dmin, scales[12], qs[128]
        13 => ("Q5_K", b(256, 176)), // d, dmin, scales[12], qh[32], qs[128]
        14 => ("Q6_K", b(256, 210)), // ql[128], qh[64], scales[16], d
        15 => ("Q8_K", b(256, 292)), // d: f32, qs[256], bsums: i16[16]
        16 => ("IQ2_XXS", b(256, 66)),
        17 => ("IQ2_XS", b(256, 74)),
        18 => ("IQ3_XXS", b(256, 98)),
        19 => ("IQ1_S", b(256, 50)),
        20 => ("IQ4_NL", b(32, 18)),
        21 => ("IQ3_S", b(256, 110)),
        22 => ("IQ2_S", b(256, 82)),
        23 => ("IQ4_XS", b(256, 136)),
        24 => ("I8", Plain(DType::I8)),
        25 => ("I16", Plain(DType::I16)),
        26 => ("I32", Plain(DType::I32)),
        27 => ("I64", Plain(DType::I64)),
        28 => ("F64", Plain(DType::F64)),
        29 => ("IQ1_M", b(256, 56)),
        30 => ("BF16", Plain(DType::BF16)),
        34 => ("TQ1_0", b(256, 54)),
        35 => ("TQ2_0", b(256, 66)),
        39 => ("MXFP4", b(32, 17)), // e: u8, qs[16]
        _ => return None,
    })
}

/// GGUF's fields (see [`Cursor`] for the rest).
impl<'a> Cursor<'a> {
    fn string(&mut self) -> Result<&'a [u8]> {
        let n = self.u64()?;
        self.take(n)
    }

    /// Skips one metadata value of type `ty`, returning it as an integer when
    /// it is one (for `general.alignment`).
    fn value(&mut self, ty: u32, depth: u32) -> Result<Option<u64>> {
        if let Some(size) = scalar_size(ty) {
            let b = self.take(size)?;
            let mut v = [0u8; 8];
            v[..b.len()].copy_from_slice(b);
            return Ok(Some(u64::from_le_bytes(v)));
        }
        match ty {
            8 => {
                self.string()?;
            }
            9 => {
                ensure!(
                    depth < MAX_ARRAY_DEPTH,
                    "GGUF arrays nested more than {MAX_ARRAY_DEPTH} deep"
                );
                let elem = self.u32()?;
                let n = self.u64()?;
                if let Some(size) = scalar_size(elem) {
                    self.take(n.checked_mul(size).context("GGUF array length overflows")?)?;
                } else {
                    // Strings and arrays take at least 8 bytes each: a count larger
                    // than the bytes left allow is refused before looping over it.
                    ensure!(n <= self.left() / 8, "GGUF array of {n} elements runs past the file");
                    for _ in 0..n {
                        self.value(elem, depth + 1)?;
                    }
                }
            }
            other => bail!("unknown GGUF metadata value type {other} at byte {}", self.pos()),
        }
        Ok(None)
    }
}

/// Bytes of a scalar metadata value type.
fn scalar_size(ty: u32) -> Option<u64> {
    Some(match ty {
        0 | 1 | 7 => 1, // u8, i8, bool
        2 | 3 => 2,     // u16, i16
        4..=6 => 4,     // u32, i32, f32
        10..=12 => 8,   // u64, i64, f64
        _ => return None,
    })
}

/// A tensor whose size is known: its name, where its bytes are, what it is.
struct TensorInfo {
    name: String,
    range: std::ops::Range<usize>,
    kind: SegmentKind,
    layout: Layout,
}

/// Segments of a GGUF file (see the module docs).
pub fn plan(data: &[u8]) -> Result<Vec<SegmentPlan>> {
    let mut c = Cursor::new(data, "GGUF");
    ensure!(c.take(4)? == MAGIC, "not a GGUF file");
    let version = c.u32()?;
    ensure!(matches!(version, 2 | 3), "GGUF version {version} is not supported");
    let n_tensors = c.u64()?;
    let n_kv = c.u64()?;
    // Each KV takes at least 8 + 4 + 1 bytes, each tensor info at least 8 + 4 + 4 + 8.
    ensure!(
        n_kv <= c.left() / 13,
        "GGUF claims {n_kv} metadata entries, more than the file holds"
    );
    let mut alignment = DEFAULT_ALIGNMENT;
    for _ in 0..n_kv {
        let key = c.string()?;
        let ty = c.u32()?;
        let v = c.value(ty, 0)?;
        if key == b"general.alignment" {
            alignment = v.context("general.alignment is not an integer")?;
            ensure!(
                alignment.is_power_of_two() && alignment <= 1 << 20,
                "bad general.alignment {alignment}"
            );
        }
    }
    let metadata_end = c.pos();
    ensure!(
        n_tensors <= c.left() / 24,
        "GGUF claims {n_tensors} tensors, more than the file holds"
    );
    let mut infos = Vec::new();
    let mut unknown = 0usize;
    for _ in 0..n_tensors {
        let name = String::from_utf8_lossy(c.string()?).into_owned();
        let n_dims = c.u32()?;
        ensure!(n_dims <= MAX_DIMS, "tensor `{name}` has {n_dims} dimensions");
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(c.u64()?);
        }
        let ty = c.u32()?;
        let offset = c.u64()?;
        let Some((_, storage)) = storage(ty) else {
            unknown += 1;
            continue;
        };
        let elems = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let elems = elems.with_context(|| format!("tensor `{name}`: element count overflows"))?;
        let (bytes, kind, layout) = match storage {
            Storage::Plain(dtype) => {
                let bytes = elems.checked_mul(dtype.size() as u64);
                let shape = dims.iter().rev().copied().collect();
                (bytes, SegmentKind::Tensor { dtype, shape }, Layout::Auto)
            }
            Storage::Blocks { elems: per, bytes } => {
                ensure!(
                    elems.is_multiple_of(per),
                    "tensor `{name}`: {elems} elements is not whole blocks of {per}"
                );
                let layout = Layout::Records(bytes as usize);
                ((elems / per).checked_mul(bytes), SegmentKind::Opaque, layout)
            }
        };
        let bytes = bytes.with_context(|| format!("tensor `{name}`: size overflows"))?;
        infos.push((name, offset, bytes, kind, layout));
    }
    let infos_end = c.pos();
    let data_start = (infos_end as u64)
        .checked_next_multiple_of(alignment)
        .context("data offset overflows")?;
    ensure!(
        data_start <= data.len() as u64,
        "GGUF data section starts past the end of the file"
    );

    let mut tensors = Vec::with_capacity(infos.len());
    for (name, offset, bytes, kind, layout) in infos {
        ensure!(
            offset.is_multiple_of(alignment),
            "tensor `{name}` is not aligned to {alignment}"
        );
        let start = data_start.checked_add(offset);
        let end = start.and_then(|s| s.checked_add(bytes));
        let (Some(start), Some(end)) = (start, end) else {
            bail!("tensor `{name}`: offset overflows")
        };
        ensure!(
            end <= data.len() as u64,
            "tensor `{name}` ends past the end of the file"
        );
        tensors.push(TensorInfo {
            name,
            range: start as usize..end as usize,
            kind,
            layout,
        });
    }
    tensors.sort_by_key(|t| (t.range.start, t.range.end));

    let mut plans = vec![
        SegmentPlan::opaque("gguf header", 0..metadata_end),
        SegmentPlan::opaque("gguf tensor infos", metadata_end..data_start as usize),
    ];
    let mut at = data_start as usize;
    for t in tensors {
        if t.range.start < at {
            // Two tensors sharing bytes: legal in principle (views), but our
            // segments must tile the file, so the file is kept plain.
            bail!("tensor `{}` overlaps another", t.name);
        }
        if t.range.start > at {
            let label = if unknown > 0 {
                "gguf padding or unknown tensors"
            } else {
                "gguf padding"
            };
            plans.push(SegmentPlan::opaque(label, at..t.range.start));
        }
        at = t.range.end;
        plans.push(SegmentPlan {
            name: t.name,
            kind: t.kind,
            range: t.range,
            layout: t.layout,
        });
    }
    if at < data.len() {
        plans.push(SegmentPlan::opaque("gguf trailing bytes", at..data.len()));
    }
    Ok(plans)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Metadata value of a test GGUF.
    pub enum Value {
        U32(u32),
        Str(&'static str),
        StrArray(Vec<&'static str>),
        F32Array(Vec<f32>),
    }

    fn string(out: &mut Vec<u8>, s: &[u8]) {
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(s);
    }

    /// A GGUF v3 file: `kv` metadata, then `tensors` (name, dims fastest first,
    /// ggml type, data) laid out in order at `alignment`.
    pub fn gguf(kv: &[(&str, Value)], tensors: &[(&str, Vec<u64>, u32, Vec<u8>)], alignment: usize) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(kv.len() as u64).to_le_bytes());
        for (k, v) in kv {
            string(&mut out, k.as_bytes());
            match v {
                Value::U32(x) => {
                    out.extend_from_slice(&4u32.to_le_bytes());
                    out.extend_from_slice(&x.to_le_bytes());
                }
                Value::Str(s) => {
                    out.extend_from_slice(&8u32.to_le_bytes());
                    string(&mut out, s.as_bytes());
                }
                Value::StrArray(a) => {
                    out.extend_from_slice(&9u32.to_le_bytes());
                    out.extend_from_slice(&8u32.to_le_bytes());
                    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
                    a.iter().for_each(|s| string(&mut out, s.as_bytes()));
                }
                Value::F32Array(a) => {
                    out.extend_from_slice(&9u32.to_le_bytes());
                    out.extend_from_slice(&6u32.to_le_bytes());
                    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
                    a.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
                }
            }
        }
        let mut offset = 0usize;
        let mut offsets = Vec::new();
        for (name, dims, ty, data) in tensors {
            string(&mut out, name.as_bytes());
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            dims.iter().for_each(|d| out.extend_from_slice(&d.to_le_bytes()));
            out.extend_from_slice(&ty.to_le_bytes());
            out.extend_from_slice(&(offset as u64).to_le_bytes());
            offsets.push(offset);
            offset = (offset + data.len()).next_multiple_of(alignment);
        }
        let start = out.len().next_multiple_of(alignment);
        out.resize(start, 0);
        for ((_, _, _, data), off) in tensors.iter().zip(offsets) {
            out.resize(start + off, 0);
            out.extend_from_slice(data);
        }
        out
    }

    fn covers_exactly(plans: &[SegmentPlan], len: usize) {
        let mut at = 0;
        for p in plans {
            assert_eq!(p.range.start, at, "{}", p.name);
            at = p.range.end;
        }
        assert_eq!(at, len);
    }

    fn sample() -> Vec<u8> {
        let f32s: Vec<u8> = (0..12u32).flat_map(|i| (i as f32 * 0.25).to_le_bytes()).collect();
        let q41: Vec<u8> = (0..3 * 20u32).map(|i| (i * 7) as u8).collect();
        let weird: Vec<u8> = vec![9; 10];
        gguf(
            &[
                ("general.architecture", Value::Str("llama")),
                ("general.alignment", Value::U32(64)),
                ("tokenizer.ggml.tokens", Value::StrArray(vec!["a", "bb", ""])),
                ("tokenizer.ggml.scores", Value::F32Array(vec![0.5, 1.0])),
            ],
            &[
                ("norm", vec![4, 3], 0, f32s),
                ("blk.0.q", vec![32, 3], 3, q41),
                ("mystery", vec![10], 200, weird),
            ],
            64,
        )
    }

    #[test]
    fn tensors_quantized_blocks_and_padding() {
        let file = sample();
        let plans = plan(&file).unwrap();
        covers_exactly(&plans, file.len());
        let norm = plans.iter().find(|p| p.name == "norm").unwrap();
        assert_eq!(
            norm.kind,
            SegmentKind::Tensor {
                dtype: DType::F32,
                shape: vec![3, 4]
            }
        );
        assert_eq!(norm.range.start % 64, 0);
        assert_eq!(norm.range.len(), 48);
        let q = plans.iter().find(|p| p.name == "blk.0.q").unwrap();
        assert_eq!(q.kind, SegmentKind::Opaque);
        assert_eq!(q.layout, Layout::Records(20));
        assert_eq!(q.range.len(), 60);
        // The unknown type's bytes are in an opaque gap, not a segment of their own.
        assert!(plans.iter().all(|p| p.name != "mystery"));
        let last = plans.last().unwrap();
        assert_eq!(last.kind, SegmentKind::Opaque);
        assert!(file[last.range.clone()].ends_with(&[9u8; 10]));
    }

    #[test]
    fn default_alignment_is_32() {
        let f32s: Vec<u8> = (0..5u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let file = gguf(&[], &[("a", vec![5], 0, f32s.clone()), ("b", vec![5], 0, f32s)], 32);
        let plans = plan(&file).unwrap();
        covers_exactly(&plans, file.len());
        let starts: Vec<usize> = plans
            .iter()
            .filter(|p| p.name.len() == 1)
            .map(|p| p.range.start)
            .collect();
        assert_eq!(starts.len(), 2);
        assert!(starts.iter().all(|s| s % 32 == 0));
    }

    #[test]
    fn hostile_files_are_refused_without_panics() {
        let file = sample();
        // Every truncation either errors or still tiles exactly what is there.
        for n in 0..file.len() {
            if let Ok(p) = plan(&file[..n]) {
                covers_exactly(&p, n);
            }
        }
        // Huge counts.
        for at in [8usize, 16] {
            let mut f = file.clone();
            f[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
            assert!(plan(&f).is_err());
        }
        // A huge string length in the first key.
        let mut f = file.clone();
        f[24..32].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
        assert!(plan(&f).is_err());
        // Version 1 and a wrong magic.
        let mut f = file.clone();
        f[4] = 1;
        assert!(plan(&f).is_err());
        assert!(plan(b"GGUX\x03\0\0\0").is_err());
        // Single-byte corruption anywhere: never a panic, and a plan always tiles.
        for i in 0..file.len().min(600) {
            for v in [0x00, 0xff, 0x7f] {
                let mut f = file.clone();
                f[i] = v;
                if let Ok(p) = plan(&f) {
                    covers_exactly(&p, f.len());
                }
            }
        }
    }

    #[test]
    fn offsets_past_the_end_and_overlaps_are_refused() {
        let d: Vec<u8> = vec![1; 64];
        let ok = gguf(&[], &[("a", vec![16], 0, d.clone()), ("b", vec![16], 0, d.clone())], 32);
        assert!(plan(&ok).is_ok());
        // The second tensor's offset field is the last 8 bytes of its info.
        let info_end = ok.len() - 128;
        let info_end = (0..=info_end)
            .rev()
            .find(|&e| ok[e - 8..e] == 64u64.to_le_bytes())
            .unwrap();
        let mut overlap = ok.clone();
        overlap[info_end - 8..info_end].copy_from_slice(&32u64.to_le_bytes());
        assert!(plan(&overlap).unwrap_err().to_string().contains("overlaps"));
        let mut past = ok.clone();
        past[info_end - 8..info_end].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(plan(&past).is_err());
        let mut wrapping = ok;
        wrapping[info_end - 8..info_end].copy_from_slice(&(u64::MAX - 31).to_le_bytes());
        assert!(plan(&wrapping).is_err());
    }
}
