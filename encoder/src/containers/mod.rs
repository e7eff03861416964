//! Container readers: map a file's bytes onto segments (tensors with dtype and
//! shape, opaque bytes for everything else) that together cover the file
//! exactly, in order. More containers plug in here.

use std::ops::Range;

use anyhow::Result;
use brevis_format::archive::SegmentKind;

pub mod onnx;
pub mod plain;
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
}

/// Which reader understood a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// A safetensors file: header + tensors.
    Safetensors,
    /// An ONNX model: tensors' raw data inside a protobuf.
    Onnx,
    /// Any other file: opaque bytes.
    Plain,
}

/// Maps `data` (the file at `path`) onto segments.
///
/// A file whose name ends in `.safetensors` must parse as safetensors; an
/// `.onnx` file is read as ONNX when it parses and holds raw tensor data, else
/// kept opaque; other files are tried as safetensors and otherwise kept as
/// opaque bytes.
pub fn plan(path: &str, data: &[u8]) -> Result<(Container, Vec<SegmentPlan>)> {
    if path.ends_with(".onnx") {
        if let Ok(p) = onnx::plan(data) {
            return Ok((Container::Onnx, p));
        }
        return Ok((Container::Plain, plain::plan(data)));
    }
    let named = path.ends_with(".safetensors");
    match safetensors::plan(data) {
        Ok(p) => Ok((Container::Safetensors, p)),
        Err(e) if named => Err(e.context(format!("`{path}` is not a valid safetensors file"))),
        Err(_) => Ok((Container::Plain, plain::plan(data))),
    }
}
