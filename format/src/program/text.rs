//! The human-readable text form of programs, used by `brevis inspect`:
//! `Merge.fields[1,8,7](Lit.packed<b1×1024>(129 B), Lit.rans<b8×1024>(…), …)`.
//! It is for people; it is not parsed back.

use core::fmt;

use super::Node;
use crate::ops::{MapOp, MergeOp};

impl<P: AsRef<[u8]>> fmt::Display for Node<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Lit {
                width,
                count,
                encoding,
                payload,
            } => {
                write!(
                    f,
                    "Lit.{}<b{width}×{count}>({} B)",
                    encoding.name(),
                    payload.as_ref().len()
                )
            }
            Node::Const { width, count, value } => write!(f, "Const<b{width}×{count}>({value:#x})"),
            Node::Concat(children) => list(f, "Concat", children),
            Node::Repeat { times, child } => write!(f, "Repeat[{times}]({child})"),
            Node::Map { op, child } => {
                write!(f, "Map.{}", op.name())?;
                match op {
                    MapOp::XorConst(c) | MapOp::AddConst(c) => write!(f, "[{c:#x}]")?,
                    MapOp::RotateLeft(r) => write!(f, "[{r}]")?,
                    _ => {}
                }
                write!(f, "({child})")
            }
            Node::Scan { op, stride, child } => write!(f, "Scan.{}[{stride}]({child})", op.name()),
            Node::Merge { op, children } => {
                write!(f, "Merge.{}", op.name())?;
                if let MergeOp::Fields(w) = op {
                    f.write_str("[")?;
                    for (i, x) in w.iter().enumerate() {
                        if i > 0 {
                            f.write_str(",")?;
                        }
                        write!(f, "{x}")?;
                    }
                    f.write_str("]")?;
                }
                list(f, "", children)
            }
            Node::Interleave(children) => list(f, "Interleave", children),
        }
    }
}

fn list<P: AsRef<[u8]>>(f: &mut fmt::Formatter<'_>, name: &str, children: &[Node<P>]) -> fmt::Result {
    write!(f, "{name}(")?;
    for (i, c) in children.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{c}")?;
    }
    f.write_str(")")
}
