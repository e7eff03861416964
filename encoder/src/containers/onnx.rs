//! ONNX: a protobuf `ModelProto`. Every `TensorProto` whose values are stored
//! as `raw_data` (initializers, `Constant` node attributes, tensors inside
//! subgraphs) becomes a tensor segment over exactly those bytes; everything else
//! — the graph, names, shapes, tensors stored in typed repeated fields — stays
//! opaque. The file is rebuilt byte for byte because segments only *label*
//! ranges of the original bytes. Packed 4-bit tensors (INT4, UINT4, FP4) have
//! no archive dtype: they become opaque segments viewed as nibbles.
//!
//! Tensors stored outside the model (`data_location = EXTERNAL`, with
//! `location`, `offset` and `length` entries) are collected by
//! [`external_tensors`]; when the data file is archived with the model,
//! [`plan_external`] maps it onto those tensors (see [`super::plan_with`]).
//!
//! The protobuf wire format is read by hand (about a hundred lines) rather than
//! with generated `prost` types: we need the byte *positions* of fields, which
//! decoding into owned structs throws away, and only five message types matter.
//! Reference: the ONNX schema (`onnx.proto3`) for the field numbers below.

use anyhow::{bail, Result};
use brevis_format::DType;

use brevis_format::archive::SegmentKind;

use super::{Layout, SegmentPlan};

/// Protobuf wire types.
const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;
const FIXED32: u64 = 5;

/// Which message a length-delimited field holds, for the fields we descend into.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Message {
    Model,
    Graph,
    Node,
    Attribute,
    Tensor,
}

/// The message type of field `field` inside a `parent`, if it is one we walk.
fn child_message(parent: Message, field: u64) -> Option<Message> {
    use Message::*;
    Some(match (parent, field) {
        (Model, 7) => Graph,       // ModelProto.graph
        (Graph, 1) => Node,        // GraphProto.node
        (Graph, 5) => Tensor,      // GraphProto.initializer
        (Node, 5) => Attribute,    // NodeProto.attribute
        (Attribute, 5) => Tensor,  // AttributeProto.t
        (Attribute, 6) => Graph,   // AttributeProto.g
        (Attribute, 10) => Tensor, // AttributeProto.tensors
        (Attribute, 11) => Graph,  // AttributeProto.graphs
        _ => return None,
    })
}

/// Our dtype for an ONNX `TensorProto.DataType`, where one fits the bytes of `raw_data`.
fn dtype(onnx: u64) -> Option<DType> {
    Some(match onnx {
        1 => DType::F32,
        2 => DType::U8,
        3 => DType::I8,
        4 => DType::U16,
        5 => DType::I16,
        6 => DType::I32,
        7 => DType::I64,
        9 => DType::Bool,
        10 => DType::F16,
        11 => DType::F64,
        12 => DType::U32,
        13 => DType::U64,
        16 => DType::BF16,
        17 => DType::F8E4M3,
        19 => DType::F8E5M2,
        _ => return None,
    })
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let Some(&b) = self.data.get(self.pos) else {
                bail!("truncated varint at byte {}", self.pos)
            };
            self.pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        bail!("varint longer than 10 bytes at byte {}", self.pos)
    }

    fn skip(&mut self, n: u64, end: usize) -> Result<()> {
        let to = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .filter(|&t| t <= end);
        self.pos = to.ok_or_else(|| anyhow::anyhow!("field runs past its message at byte {}", self.pos))?;
        Ok(())
    }
}

/// ONNX's packed 4-bit types (UINT4, INT4, FLOAT4E2M1): two values per byte.
fn is_packed4(onnx: u64) -> bool {
    matches!(onnx, 21..=23)
}

/// A tensor found in the file: where its `raw_data` bytes are and what they hold.
struct Found {
    name: String,
    data_type: u64,
    dims: Vec<u64>,
    raw: Option<std::ops::Range<usize>>,
    /// `TensorProto.external_data` entries (key, value).
    external: Vec<(String, String)>,
    /// `TensorProto.data_location` (1 = EXTERNAL).
    location: u64,
}

/// A tensor whose data lives in another file (`data_location = EXTERNAL`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalTensor {
    /// The tensor's name.
    pub name: String,
    /// `location`: the data file, relative to the model's directory.
    pub location: String,
    /// Where its bytes start in that file.
    pub offset: u64,
    /// How many bytes (the `length` entry, else computed from dims and dtype).
    pub len: u64,
    /// Its dtype and shape, where the archive has a dtype for it.
    pub kind: SegmentKind,
    /// Packed 4-bit values, or nothing special.
    pub layout: Layout,
}

/// What a walk over the model collects.
#[derive(Default)]
struct Walk {
    plans: Vec<SegmentPlan>,
    external: Vec<ExternalTensor>,
}

/// The `(key, value)` of a `StringStringEntryProto` in `data[range]`.
fn string_entry(data: &[u8], range: std::ops::Range<usize>) -> Result<(String, String)> {
    let mut r = Reader { data, pos: range.start };
    let (mut k, mut v) = (String::new(), String::new());
    while r.pos < range.end {
        let key = r.varint()?;
        match key & 7 {
            VARINT => {
                r.varint()?;
            }
            LEN => {
                let len = r.varint()?;
                let start = r.pos;
                r.skip(len, range.end)?;
                let s = String::from_utf8_lossy(&data[start..r.pos]).into_owned();
                match key >> 3 {
                    1 => k = s,
                    2 => v = s,
                    _ => {}
                }
            }
            FIXED64 => r.skip(8, range.end)?,
            FIXED32 => r.skip(4, range.end)?,
            other => bail!("unsupported protobuf wire type {other}"),
        }
    }
    Ok((k, v))
}

fn walk(r: &mut Reader<'_>, end: usize, msg: Message, out: &mut Walk, depth: u32) -> Result<()> {
    if depth > 64 {
        bail!("messages nested more than 64 deep");
    }
    let mut t = Found {
        name: String::new(),
        data_type: 0,
        dims: Vec::new(),
        raw: None,
        external: Vec::new(),
        location: 0,
    };
    while r.pos < end {
        let key = r.varint()?;
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            VARINT => {
                let v = r.varint()?;
                match (msg, field) {
                    (Message::Tensor, 1) => t.dims.push(v),
                    (Message::Tensor, 2) => t.data_type = v,
                    (Message::Tensor, 14) => t.location = v,
                    _ => {}
                }
            }
            FIXED64 => r.skip(8, end)?,
            FIXED32 => r.skip(4, end)?,
            LEN => {
                let len = r.varint()?;
                let start = r.pos;
                r.skip(len, end)?;
                let range = start..r.pos;
                match (msg, field) {
                    (Message::Tensor, 1) => {
                        // Packed dims.
                        let mut inner = Reader {
                            data: r.data,
                            pos: range.start,
                        };
                        while inner.pos < range.end {
                            t.dims.push(inner.varint()?);
                        }
                    }
                    (Message::Tensor, 8) => t.name = String::from_utf8_lossy(&r.data[range]).into_owned(),
                    (Message::Tensor, 9) => t.raw = Some(range),
                    (Message::Tensor, 13) => t.external.push(string_entry(r.data, range)?),
                    _ => {
                        if let Some(child) = child_message(msg, field) {
                            let mut inner = Reader {
                                data: r.data,
                                pos: range.start,
                            };
                            walk(&mut inner, range.end, child, out, depth + 1)?;
                        }
                    }
                }
            }
            other => bail!("unsupported protobuf wire type {other} at byte {}", r.pos),
        }
    }
    if msg == Message::Tensor {
        tensor_found(t, out);
    }
    Ok(())
}

/// Records a tensor whose bytes match its dtype and shape: raw data as a
/// segment, external data as a reference.
fn tensor_found(t: Found, out: &mut Walk) {
    let elems = t.dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    let (kind, layout, bytes) = match (dtype(t.data_type), elems) {
        (Some(dtype), Some(n)) => (
            SegmentKind::Tensor {
                dtype,
                shape: t.dims.clone(),
            },
            Layout::Auto,
            n.checked_mul(dtype.size() as u64),
        ),
        (None, Some(n)) if is_packed4(t.data_type) => (SegmentKind::Opaque, Layout::Nibbles, Some(n.div_ceil(2))),
        _ => return,
    };
    let Some(bytes) = bytes.filter(|&b| b > 0) else { return };
    if let Some(raw) = t.raw {
        if bytes == raw.len() as u64 {
            out.plans.push(SegmentPlan {
                name: t.name,
                kind,
                range: raw,
                layout,
            });
        }
        return;
    }
    if t.location != 1 {
        return;
    }
    let get = |k: &str| {
        t.external
            .iter()
            .rev()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let Some(location) = get("location") else { return };
    let offset = get("offset").map(str::parse::<u64>);
    let len = get("length").map(str::parse::<u64>);
    let (Ok(offset), Ok(len)) = (offset.unwrap_or(Ok(0)), len.unwrap_or(Ok(bytes))) else {
        return;
    };
    if len != bytes {
        return;
    }
    out.external.push(ExternalTensor {
        name: t.name,
        location: location.to_string(),
        offset,
        len,
        kind,
        layout,
    });
}

/// The tensors of an ONNX model whose data is in external files.
pub fn external_tensors(data: &[u8]) -> Result<Vec<ExternalTensor>> {
    let mut w = Walk::default();
    let mut r = Reader { data, pos: 0 };
    walk(&mut r, data.len(), Message::Model, &mut w, 0)?;
    Ok(w.external)
}

/// Segments of an external data file (`model.onnx_data`) given the tensors
/// that models place in it: each tensor that fits in the file and overlaps no
/// other becomes a segment (a second reference to the same bytes is
/// skipped); the gaps are opaque.
pub fn plan_external(data: &[u8], tensors: &[ExternalTensor]) -> Vec<SegmentPlan> {
    let mut ts: Vec<&ExternalTensor> = tensors
        .iter()
        .filter(|t| t.offset.checked_add(t.len).is_some_and(|e| e <= data.len() as u64))
        .collect();
    ts.sort_by_key(|t| (t.offset, std::cmp::Reverse(t.len)));
    let mut plans = Vec::with_capacity(ts.len() * 2 + 1);
    let mut at = 0usize;
    for t in ts {
        let range = t.offset as usize..(t.offset + t.len) as usize;
        if range.start < at {
            continue;
        }
        if range.start > at {
            plans.push(SegmentPlan::opaque("external data", at..range.start));
        }
        at = range.end;
        plans.push(SegmentPlan {
            name: t.name.clone(),
            kind: t.kind.clone(),
            range,
            layout: t.layout,
        });
    }
    if at < data.len() || plans.is_empty() {
        plans.push(SegmentPlan::opaque("external data", at..data.len()));
    }
    plans
}

/// Segments of an ONNX model: tensors' `raw_data` as tensor segments, the rest opaque.
pub fn plan(data: &[u8]) -> Result<Vec<SegmentPlan>> {
    let mut w = Walk::default();
    let mut r = Reader { data, pos: 0 };
    walk(&mut r, data.len(), Message::Model, &mut w, 0)?;
    let mut tensors = w.plans;
    if tensors.is_empty() {
        bail!("no tensors with raw data");
    }
    tensors.sort_by_key(|t| t.range.start);
    let mut plans = Vec::with_capacity(tensors.len() * 2 + 1);
    let mut at = 0;
    for t in tensors {
        if t.range.start < at {
            bail!("tensor `{}` overlaps another", t.name);
        }
        if t.range.start > at {
            plans.push(SegmentPlan::opaque("protobuf", at..t.range.start));
        }
        at = t.range.end;
        plans.push(t);
    }
    if at < data.len() {
        plans.push(SegmentPlan::opaque("protobuf", at..data.len()));
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn field_len(out: &mut Vec<u8>, field: u64, body: &[u8]) {
        varint(out, field << 3 | LEN);
        varint(out, body.len() as u64);
        out.extend_from_slice(body);
    }

    fn field_varint(out: &mut Vec<u8>, field: u64, v: u64) {
        varint(out, field << 3 | VARINT);
        varint(out, v);
    }

    /// A TensorProto with dims (unpacked or packed), a data type, a name and raw data.
    fn tensor(name: &str, dims: &[u64], packed: bool, data_type: u64, raw: &[u8]) -> Vec<u8> {
        let mut t = Vec::new();
        if packed {
            let mut p = Vec::new();
            dims.iter().for_each(|&d| varint(&mut p, d));
            field_len(&mut t, 1, &p);
        } else {
            dims.iter().for_each(|&d| field_varint(&mut t, 1, d));
        }
        field_varint(&mut t, 2, data_type);
        field_len(&mut t, 8, name.as_bytes());
        field_len(&mut t, 9, raw);
        t
    }

    #[test]
    fn initializers_and_constant_attributes_become_tensors() {
        let w: Vec<u8> = (0..24u32).flat_map(|i| (i as f32 * 0.5).to_le_bytes()).collect();
        let q: Vec<u8> = (0..10u8).collect();
        let c: Vec<u8> = (0..4u16).flat_map(|i| i.to_le_bytes()).collect();
        // A Constant node whose attribute `value` holds an F16 tensor.
        let mut attr = Vec::new();
        field_len(&mut attr, 1, b"value");
        field_len(&mut attr, 5, &tensor("const", &[4], true, 10, &c));
        let mut node = Vec::new();
        field_len(&mut node, 4, b"Constant");
        field_len(&mut node, 5, &attr);
        let mut graph = Vec::new();
        field_len(&mut graph, 1, &node);
        field_len(&mut graph, 2, b"g");
        field_len(&mut graph, 5, &tensor("w", &[2, 3, 4], false, 1, &w));
        field_len(&mut graph, 5, &tensor("q", &[10], true, 3, &q));
        // A tensor whose raw data does not match its shape stays opaque.
        field_len(&mut graph, 5, &tensor("bad", &[7], false, 1, &q));
        let mut model = Vec::new();
        field_varint(&mut model, 1, 8);
        field_len(&mut model, 7, &graph);

        let plans = plan(&model).unwrap();
        let tensors: Vec<(&str, &SegmentKind, &[u8])> = plans
            .iter()
            .filter(|p| matches!(p.kind, SegmentKind::Tensor { .. }))
            .map(|p| (p.name.as_str(), &p.kind, &model[p.range.clone()]))
            .collect();
        assert_eq!(tensors.len(), 3);
        assert_eq!(
            tensors[0],
            (
                "const",
                &SegmentKind::Tensor {
                    dtype: DType::F16,
                    shape: vec![4]
                },
                &c[..]
            )
        );
        assert_eq!(
            tensors[1],
            (
                "w",
                &SegmentKind::Tensor {
                    dtype: DType::F32,
                    shape: vec![2, 3, 4]
                },
                &w[..]
            )
        );
        assert_eq!(
            tensors[2],
            (
                "q",
                &SegmentKind::Tensor {
                    dtype: DType::I8,
                    shape: vec![10]
                },
                &q[..]
            )
        );
        // Segments cover the file exactly, in order.
        let mut at = 0;
        for p in &plans {
            assert_eq!(p.range.start, at);
            at = p.range.end;
        }
        assert_eq!(at, model.len());
    }

    #[test]
    fn truncated_or_garbage_protobuf_is_refused() {
        let mut graph = Vec::new();
        field_len(&mut graph, 5, &tensor("w", &[4], false, 1, &[0; 16]));
        let mut model = Vec::new();
        field_len(&mut model, 7, &graph);
        assert!(plan(&model).is_ok());
        for n in 0..model.len() {
            assert!(plan(&model[..n]).is_err(), "prefix {n}");
        }
        assert!(plan(b"\x0f\xff\xff").is_err());
    }

    /// A TensorProto whose data is in `location` at `offset` (`length` given or not).
    fn external(name: &str, dims: &[u64], data_type: u64, location: &str, offset: u64, length: Option<u64>) -> Vec<u8> {
        let mut t = Vec::new();
        dims.iter().for_each(|&d| field_varint(&mut t, 1, d));
        field_varint(&mut t, 2, data_type);
        field_len(&mut t, 8, name.as_bytes());
        let mut entries = vec![("location", location.to_string()), ("offset", offset.to_string())];
        if let Some(l) = length {
            entries.push(("length", l.to_string()));
        }
        for (k, v) in entries {
            let mut e = Vec::new();
            field_len(&mut e, 1, k.as_bytes());
            field_len(&mut e, 2, v.as_bytes());
            field_len(&mut t, 13, &e);
        }
        field_varint(&mut t, 14, 1);
        t
    }

    #[test]
    fn external_data_is_mapped_onto_tensors() {
        let mut graph = Vec::new();
        field_len(&mut graph, 5, &external("a", &[4, 4], 1, "w.bin", 0, Some(64)));
        field_len(&mut graph, 5, &external("b", &[10], 10, "w.bin", 128, None));
        // Packed int4: 5 values in 3 bytes.
        field_len(&mut graph, 5, &external("q", &[5], 22, "w.bin", 160, Some(3)));
        // Wrong length, past the end, a second reference to `a`'s bytes.
        field_len(&mut graph, 5, &external("bad", &[4], 1, "w.bin", 200, Some(15)));
        field_len(&mut graph, 5, &external("far", &[4], 1, "w.bin", 1 << 40, None));
        field_len(&mut graph, 5, &external("a2", &[4, 4], 1, "w.bin", 0, Some(64)));
        let mut model = Vec::new();
        field_len(&mut model, 7, &graph);
        let ext = external_tensors(&model).unwrap();
        assert_eq!(ext.len(), 5);
        let data = vec![7u8; 300];
        let plans = plan_external(&data, &ext);
        let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["a", "external data", "b", "external data", "q", "external data"]
        );
        assert_eq!(plans[2].range, 128..148);
        assert_eq!(plans[4].layout, Layout::Nibbles);
        let mut at = 0;
        for p in &plans {
            assert_eq!(p.range.start, at);
            at = p.range.end;
        }
        assert_eq!(at, data.len());
        // Nothing fits: the whole file is opaque.
        assert_eq!(plan_external(&data[..10], &ext).len(), 1);
    }
}
