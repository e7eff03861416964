//! ONNX: a protobuf `ModelProto`. Every `TensorProto` whose values are stored
//! as `raw_data` (initializers, `Constant` node attributes, tensors inside
//! subgraphs) becomes a tensor segment over exactly those bytes; everything else
//! — the graph, names, shapes, tensors stored in typed repeated fields — stays
//! opaque. The file is rebuilt byte for byte because segments only *label*
//! ranges of the original bytes.
//!
//! The protobuf wire format is read by hand (about a hundred lines) rather than
//! with generated `prost` types: we need the byte *positions* of fields, which
//! decoding into owned structs throws away, and only five message types matter.
//! Reference: the ONNX schema (`onnx.proto3`) for the field numbers below.

use anyhow::{bail, Result};
use brevis_format::DType;

use super::SegmentPlan;

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

/// A tensor found in the file: where its `raw_data` bytes are and what they hold.
struct Found {
    name: String,
    dtype: Option<DType>,
    dims: Vec<u64>,
    raw: Option<std::ops::Range<usize>>,
}

fn walk(r: &mut Reader<'_>, end: usize, msg: Message, out: &mut Vec<SegmentPlan>, depth: u32) -> Result<()> {
    if depth > 64 {
        bail!("messages nested more than 64 deep");
    }
    let mut t = Found {
        name: String::new(),
        dtype: None,
        dims: Vec::new(),
        raw: None,
    };
    while r.pos < end {
        let key = r.varint()?;
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            VARINT => {
                let v = r.varint()?;
                match (msg, field) {
                    (Message::Tensor, 1) => t.dims.push(v),
                    (Message::Tensor, 2) => t.dtype = dtype(v),
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
        if let (Some(raw), Some(dtype)) = (t.raw, t.dtype) {
            let bytes = t.dims.iter().try_fold(dtype.size() as u64, |a, &d| a.checked_mul(d));
            if bytes == Some(raw.len() as u64) && !raw.is_empty() {
                out.push(SegmentPlan::tensor(t.name, dtype, t.dims, raw));
            }
        }
    }
    Ok(())
}

/// Segments of an ONNX model: tensors' `raw_data` as tensor segments, the rest opaque.
pub fn plan(data: &[u8]) -> Result<Vec<SegmentPlan>> {
    let mut tensors = Vec::new();
    let mut r = Reader { data, pos: 0 };
    walk(&mut r, data.len(), Message::Model, &mut tensors, 0)?;
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
    use brevis_format::archive::SegmentKind;

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
}
