//! Canonical binary serialization of programs (see `docs/FORMAT.md` § Program).
//!
//! Each node is `[u8 operator tag]` followed by its fields; children follow
//! their parent (pre-order). The form is canonical: varints are shortest-form,
//! and [`parse`] rejects anything [`serialize`] would not have written, so
//! `serialize(parse(b)) == b` for every accepted `b`.

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::{Limits, Node};
use crate::bytes::{put_varint, varint_len, ByteReader};
use crate::error::{FormatError, Result};
use crate::ops::{MapOp, MergeOp, ScanOp};
use crate::wire::LitEncoding;

/// Appends the canonical bytes of `node` to `out`.
pub fn serialize_into<P: AsRef<[u8]>>(node: &Node<P>, out: &mut Vec<u8>) {
    out.push(node.operator() as u8);
    match node {
        Node::Lit {
            width,
            count,
            encoding,
            payload,
        } => {
            out.push(*width);
            put_varint(out, *count);
            out.push(*encoding as u8);
            let payload = payload.as_ref();
            put_varint(out, payload.len() as u64);
            out.extend_from_slice(payload);
        }
        Node::Const { width, count, value } => {
            out.push(*width);
            put_varint(out, *count);
            put_varint(out, *value);
        }
        Node::Concat(children) => {
            put_varint(out, children.len() as u64);
            children.iter().for_each(|c| serialize_into(c, out));
        }
        Node::Repeat { times, child } => {
            put_varint(out, *times);
            serialize_into(child, out);
        }
        Node::Map { op, child } => {
            out.push(op.tag());
            match op {
                MapOp::XorConst(c) | MapOp::AddConst(c) => put_varint(out, *c),
                MapOp::RotateLeft(r) => out.push(*r),
                MapOp::ZigZag | MapOp::Gray | MapOp::BitReverse => {}
            }
            serialize_into(child, out);
        }
        Node::Scan { op, stride, child } => {
            out.push(op.tag());
            put_varint(out, *stride);
            serialize_into(child, out);
        }
        Node::Merge { op, children } => {
            out.push(op.tag());
            match op {
                MergeOp::Fields(w) => {
                    out.push(w.len() as u8);
                    out.extend_from_slice(w);
                }
                MergeOp::BitPlanes(k) | MergeOp::BytePlanes(k) => out.push(*k),
            }
            children.iter().for_each(|c| serialize_into(c, out));
        }
        Node::Interleave(children) => {
            put_varint(out, children.len() as u64);
            children.iter().for_each(|c| serialize_into(c, out));
        }
    }
}

/// The canonical bytes of `node`.
pub fn serialize<P: AsRef<[u8]>>(node: &Node<P>) -> Vec<u8> {
    let mut out = Vec::with_capacity(serialized_size(node));
    serialize_into(node, &mut out);
    out
}

/// `serialize(node).len()`, computed without serializing.
pub fn serialized_size<P: AsRef<[u8]>>(node: &Node<P>) -> usize {
    1 + match node {
        Node::Lit { count, payload, .. } => {
            let len = payload.as_ref().len();
            1 + varint_len(*count) + 1 + varint_len(len as u64) + len
        }
        Node::Const { count, value, .. } => 1 + varint_len(*count) + varint_len(*value),
        Node::Concat(children) => {
            varint_len(children.len() as u64) + children.iter().map(serialized_size).sum::<usize>()
        }
        Node::Repeat { times, child } => varint_len(*times) + serialized_size(child),
        Node::Map { op, child } => {
            1 + match op {
                MapOp::XorConst(c) | MapOp::AddConst(c) => varint_len(*c),
                MapOp::RotateLeft(_) => 1,
                _ => 0,
            } + serialized_size(child)
        }
        Node::Scan { stride, child, .. } => 1 + varint_len(*stride) + serialized_size(child),
        Node::Merge { op, children } => {
            1 + match op {
                MergeOp::Fields(w) => 1 + w.len(),
                _ => 1,
            } + children.iter().map(serialized_size).sum::<usize>()
        }
        Node::Interleave(children) => {
            varint_len(children.len() as u64) + children.iter().map(serialized_size).sum::<usize>()
        }
    }
}

/// Parses one program that must span all of `bytes`, then checks its typing
/// rules and `limits`. Nothing is allocated beyond the tree itself, whose size
/// is bounded by `bytes.len()`.
pub fn parse(bytes: &[u8], limits: &Limits) -> Result<Node> {
    parse_with(bytes, limits, <[u8]>::to_vec)
}

/// [`parse`], with each literal's payload a slice of `bytes` instead of a copy.
pub fn parse_borrowed<'a>(bytes: &'a [u8], limits: &Limits) -> Result<Node<&'a [u8]>> {
    parse_with(bytes, limits, |payload| payload)
}

/// [`parse`] with `payload` making each literal's payload from its bytes.
fn parse_with<'a, P>(bytes: &'a [u8], limits: &Limits, payload: impl Fn(&'a [u8]) -> P + Copy) -> Result<Node<P>> {
    let mut r = ByteReader::new(bytes);
    let mut nodes = 0u32;
    let node = parse_node(&mut r, limits, 1, &mut nodes, payload)?;
    r.finish("program")?;
    node.check(limits)?;
    Ok(node)
}

fn parse_node<'a, P>(
    r: &mut ByteReader<'a>,
    limits: &Limits,
    depth: u32,
    nodes: &mut u32,
    payload: impl Fn(&'a [u8]) -> P + Copy,
) -> Result<Node<P>> {
    if depth > limits.max_depth {
        return Err(FormatError::LimitExceeded {
            limit: "program depth",
            requested: depth.into(),
            allowed: limits.max_depth.into(),
        });
    }
    *nodes += 1;
    if *nodes > limits.max_nodes {
        return Err(FormatError::LimitExceeded {
            limit: "program nodes",
            requested: (*nodes).into(),
            allowed: limits.max_nodes.into(),
        });
    }
    let tag = r.u8("operator tag")?;
    let mut child = |r: &mut ByteReader<'a>| parse_node(r, limits, depth + 1, nodes, payload).map(Box::new);
    Ok(match tag {
        0 => {
            let width = r.u8("Lit width")?;
            let count = r.varint("Lit count")?;
            let encoding = LitEncoding::from_tag(r.u8("Lit encoding")?)?;
            let len = r.varint_usize("Lit payload length", r.remaining() as u64)?;
            Node::Lit {
                width,
                count,
                encoding,
                payload: payload(r.bytes(len, "Lit payload")?),
            }
        }
        1 => Node::Const {
            width: r.u8("Const width")?,
            count: r.varint("Const count")?,
            value: r.varint("Const value")?,
        },
        2 => {
            let k = r.varint_usize("Concat children", limits.max_concat_children.into())?;
            // Each child takes at least two bytes, so `remaining / 2` bounds a real count.
            let mut children = Vec::with_capacity(k.min(r.remaining() / 2));
            for _ in 0..k {
                children.push(*child(r)?);
            }
            Node::Concat(children)
        }
        3 => {
            let times = r.varint("Repeat times")?;
            Node::Repeat {
                times,
                child: child(r)?,
            }
        }
        4 => {
            let op = match r.u8("Map op")? {
                0 => MapOp::XorConst(r.varint("Map constant")?),
                1 => MapOp::AddConst(r.varint("Map constant")?),
                2 => MapOp::ZigZag,
                3 => MapOp::Gray,
                4 => MapOp::RotateLeft(r.u8("Map rotation")?),
                5 => MapOp::BitReverse,
                t => {
                    return Err(FormatError::UnknownTag {
                        what: "map op",
                        tag: t.into(),
                    })
                }
            };
            Node::Map { op, child: child(r)? }
        }
        5 => {
            let op = ScanOp::from_tag(r.u8("Scan op")?)?;
            let stride = r.varint("Scan stride")?;
            Node::Scan {
                op,
                stride,
                child: child(r)?,
            }
        }
        6 => {
            let op = match r.u8("Merge op")? {
                0 => {
                    let k = usize::from(r.u8("Merge field count")?);
                    MergeOp::Fields(r.bytes(k, "Merge field widths")?.to_vec())
                }
                1 => MergeOp::BitPlanes(r.u8("Merge plane count")?),
                2 => MergeOp::BytePlanes(r.u8("Merge plane count")?),
                t => {
                    return Err(FormatError::UnknownTag {
                        what: "merge op",
                        tag: t.into(),
                    })
                }
            };
            // Check the layout before reading children, so `k` is trustworthy.
            op.check()?;
            let k = op.field_widths().len();
            let mut children = Vec::with_capacity(k);
            for _ in 0..k {
                children.push(*child(r)?);
            }
            Node::Merge { op, children }
        }
        7 => {
            let k = r.varint_usize("Interleave children", super::MAX_INTERLEAVE as u64)?;
            let mut children = Vec::with_capacity(k.min(r.remaining() / 2));
            for _ in 0..k {
                children.push(*child(r)?);
            }
            Node::Interleave(children)
        }
        t => {
            return Err(FormatError::UnknownTag {
                what: "operator",
                tag: t.into(),
            })
        }
    })
}
