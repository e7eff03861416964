//! Container readers: map a file's bytes onto segments (tensors with dtype and
//! shape, opaque bytes for everything else) that together cover the file
//! exactly, in order. More containers plug in here.

use std::collections::HashMap;
use std::ops::Range;

use anyhow::{Context, Result};
use brevis_format::archive::SegmentKind;
use brevis_format::DType;

pub mod ctranslate2;
pub mod gguf;
pub mod onnx;
pub mod plain;
pub mod pytorch;
pub mod safetensors;

/// One segment of a file: what it is and which bytes it covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentPlan {
    /// Tensor name, or a label for opaque bytes.
    pub name: String,
    /// Opaque or tensor.
    pub kind: SegmentKind,
    /// The bytes of the file it covers.
    pub range: Range<usize>,
    /// What the encoder knows about the bytes' structure beyond `kind` (never
    /// written to the archive: it only steers the search).
    pub layout: Layout,
}

impl SegmentPlan {
    /// Opaque bytes with no known structure.
    pub fn opaque(name: impl Into<String>, range: Range<usize>) -> Self {
        SegmentPlan {
            name: name.into(),
            kind: SegmentKind::Opaque,
            range,
            layout: Layout::Auto,
        }
    }

    /// A tensor's raw data.
    pub fn tensor(name: impl Into<String>, dtype: DType, shape: Vec<u64>, range: Range<usize>) -> Self {
        SegmentPlan {
            name: name.into(),
            kind: SegmentKind::Tensor { dtype, shape },
            range,
            layout: Layout::Auto,
        }
    }
}

/// Structure of a segment's bytes that the archive has no dtype for, known
/// to the container reader and passed to the synthesizer as a hint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// Nothing beyond the segment kind: opaque bytes are viewed per chunk by
    /// [`plain::choose_view`].
    #[default]
    Auto,
    /// Fixed-size records of this many bytes (GGUF's quantized blocks: scales
    /// and quants in fixed places), to be split into columns.
    Records(usize),
    /// Opaque words of this many bits (a storage of unknown element type whose
    /// element size is known).
    Words(u8),
    /// 4-bit values packed two per byte (int4 / uint4 / FP4).
    Nibbles,
}

/// A bounds-checked little-endian cursor over a container's bytes.
pub(crate) struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    /// The container, for errors (`GGUF truncated: …`).
    what: &'static str,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `data`, a `what` file.
    pub(crate) fn new(data: &'a [u8], what: &'static str) -> Self {
        Cursor { data, pos: 0, what }
    }

    /// Where it is.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: u64) -> Result<&'a [u8]> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .filter(|&e| e <= self.data.len());
        let end = end.with_context(|| format!("{} truncated: {n} bytes wanted at byte {}", self.what, self.pos))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// Bytes left.
    pub(crate) fn left(&self) -> u64 {
        (self.data.len() - self.pos) as u64
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
}

/// Which reader understood a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// A safetensors file: header + tensors.
    Safetensors,
    /// An ONNX model: tensors' raw data inside a protobuf.
    Onnx,
    /// A GGUF file (llama.cpp): metadata, tensor infos, tensors.
    Gguf,
    /// A zip-format PyTorch checkpoint: storages as tensors, the rest opaque.
    PyTorch,
    /// A legacy (pre-1.6, non-zip) `torch.save` file: storages as tensors,
    /// the pickles and storage sizes opaque.
    PyTorchLegacy,
    /// A CTranslate2 model (`model.bin`): variables as tensors, the rest opaque.
    CTranslate2,
    /// An ONNX external data file, mapped by the model(s) beside it.
    OnnxExternalData,
    /// Any other file: opaque bytes.
    Plain,
}

/// Maps `data` (the file at `path`) onto segments.
///
/// A file whose name ends in `.safetensors` must parse as safetensors; an
/// `.onnx` file is read as ONNX when it parses and holds raw tensor data, a
/// file starting with GGUF's magic as GGUF when it parses, a zip holding
/// stored PyTorch storages as a PyTorch checkpoint, else kept opaque; a legacy
/// `torch.save` file (its first pickle the magic number) as such when it
/// parses, else kept opaque; a CTranslate2 model when it parses to its end;
/// other
/// files are tried as safetensors and otherwise kept as opaque bytes.
pub fn plan(path: &str, data: &[u8]) -> Result<(Container, Vec<SegmentPlan>)> {
    if path.ends_with(".onnx") {
        if let Ok(p) = onnx::plan(data) {
            return Ok((Container::Onnx, p));
        }
        return Ok((Container::Plain, plain::plan(data)));
    }
    if data.starts_with(b"GGUF") {
        return Ok(match gguf::plan(data) {
            Ok(p) => (Container::Gguf, p),
            Err(_) => (Container::Plain, plain::plan(data)),
        });
    }
    if data.starts_with(b"PK\x03\x04") {
        return Ok(match pytorch::plan(data) {
            Ok(p) => (Container::PyTorch, p),
            Err(_) => (Container::Plain, plain::plan(data)),
        });
    }
    if pytorch::is_legacy(data) {
        return Ok(match pytorch::plan_legacy(data) {
            Ok(p) => (Container::PyTorchLegacy, p),
            Err(_) => (Container::Plain, plain::plan(data)),
        });
    }
    let named = path.ends_with(".safetensors");
    if !named && ctranslate2::looks_like(data) {
        if let Ok(p) = ctranslate2::plan(data) {
            return Ok((Container::CTranslate2, p));
        }
    }
    match safetensors::plan(data) {
        Ok(p) => Ok((Container::Safetensors, p)),
        Err(e) if named => Err(e.context(format!("`{path}` is not a valid safetensors file"))),
        Err(_) => Ok((Container::Plain, plain::plan(data))),
    }
}

/// Tensors that ONNX models place in external data files, by the archive path
/// of the data file.
pub type ExternalData = HashMap<String, Vec<onnx::ExternalTensor>>;

/// The external data references of every `.onnx` file among `files` (archive
/// path, bytes), keyed by the data file's archive path (its `location`,
/// relative to the model's folder). Models that do not parse, and locations
/// that leave the folder (`..`, absolute paths), are skipped.
pub fn external_data(files: &[(&str, &[u8])]) -> ExternalData {
    let mut out = ExternalData::new();
    for (path, data) in files.iter().filter(|(p, _)| p.ends_with(".onnx")) {
        let Ok(tensors) = onnx::external_tensors(data) else {
            continue;
        };
        let dir = path.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
        for t in tensors {
            let mut parts: Vec<&str> = if dir.is_empty() {
                Vec::new()
            } else {
                dir.split('/').collect()
            };
            let rel = t.location.replace('\\', "/");
            if rel.starts_with('/') || rel.split('/').any(|c| c == "..") {
                continue;
            }
            parts.extend(rel.split('/').filter(|c| !c.is_empty() && *c != "."));
            out.entry(parts.join("/")).or_default().push(t);
        }
    }
    out
}

/// [`plan`], except that a file some model in `external` keeps tensors in is
/// mapped onto those tensors.
pub fn plan_with(path: &str, data: &[u8], external: &ExternalData) -> Result<(Container, Vec<SegmentPlan>)> {
    if let Some(tensors) = external.get(path) {
        let plans = onnx::plan_external(data, tensors);
        if plans.iter().any(|p| p.name != "external data") {
            return Ok((Container::OnnxExternalData, plans));
        }
    }
    plan(path, data)
}
