//! Programs: trees of the seven operators, their typing rules, canonical binary
//! serialization ([`serialize`], [`parse`], [`serialized_size`]) and text form
//! (`Display`).
//!
//! Every node produces a stream of type `b[n]` ([`Type`]). A program's type is
//! checked when it is built ([`Node::ty`]) and again, against [`Limits`], when
//! it is parsed from untrusted bytes.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::error::{FormatError, Result};
use crate::ops::{MapOp, MergeOp, ScanOp};
use crate::stream::{check_width, container_bytes, mask};
use crate::wire::LitEncoding;

mod serialize;
mod text;

pub use serialize::{parse, parse_borrowed, serialize, serialized_size};

/// The type of a stream: `count` words of `width` bits (`b[n]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Type {
    /// Bits per word, 1..=64.
    pub width: u8,
    /// Number of words.
    pub count: u64,
}

/// A program node. Children are owned; a program is a tree.
///
/// `P` holds each literal's payload: its own bytes (`Vec<u8>`, the default: what
/// the encoder builds and [`parse`] gives), or a slice of the bytes the program
/// was parsed from ([`parse_borrowed`]: the decoder runs a chunk's program from
/// its record without copying the payloads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node<P = Vec<u8>> {
    /// Stored words in one of the wire encodings.
    Lit {
        /// Word width.
        width: u8,
        /// Number of words.
        count: u64,
        /// How the payload stores them.
        encoding: LitEncoding,
        /// The encoded words (tables included).
        payload: P,
    },
    /// `count` copies of `value`.
    Const {
        /// Word width.
        width: u8,
        /// Number of words (at least 1).
        count: u64,
        /// The word.
        value: u64,
    },
    /// Children one after another.
    Concat(Vec<Node<P>>),
    /// The child's whole stream `times` times.
    Repeat {
        /// How many times (at least 2).
        times: u64,
        /// The repeated stream.
        child: Box<Node<P>>,
    },
    /// A pointwise bijection.
    Map {
        /// The bijection.
        op: MapOp,
        /// Its input.
        child: Box<Node<P>>,
    },
    /// A prefix recurrence.
    Scan {
        /// The recurrence.
        op: ScanOp,
        /// Distance to the word it combines with (at least 1).
        stride: u64,
        /// The residuals.
        child: Box<Node<P>>,
    },
    /// Words assembled from child fields.
    Merge {
        /// The field layout.
        op: MergeOp,
        /// One child per field, most significant first.
        children: Vec<Node<P>>,
    },
    /// Children's words taken in turn: `out[i·k + j] = child_j[i]` (columns of
    /// `k`-word records; the dual of `Concat`). Our extension of the paper's seven.
    Interleave(Vec<Node<P>>),
}

/// Bounds a parsed program must respect, so hostile bytes cannot make the
/// decoder recurse, allocate or loop beyond what the chunk declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting of nodes.
    pub max_depth: u32,
    /// Most nodes in one program.
    pub max_nodes: u32,
    /// Most children of a `Concat`.
    pub max_concat_children: u32,
    /// Intermediate memory a program may need, as a multiple of its output bytes
    /// (plus [`Limits::work_slack_bytes`]).
    pub max_work_factor: u32,
    /// Intermediate memory allowed on top of the factor.
    pub work_slack_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 32,
            max_nodes: 1 << 16,
            max_concat_children: 1 << 16,
            max_work_factor: 16,
            work_slack_bytes: 1 << 20,
        }
    }
}

/// Most children of an `Interleave` (the longest record it splits into columns).
pub const MAX_INTERLEAVE: usize = 4096;

/// Operator names, for messages and statistics.
pub const OPERATOR_NAMES: [&str; 8] = ["Lit", "Const", "Concat", "Repeat", "Map", "Scan", "Merge", "Interleave"];

impl<P> Node<P> {
    /// Index of this node's operator in [`OPERATOR_NAMES`] (also its wire tag).
    pub fn operator(&self) -> usize {
        match self {
            Node::Lit { .. } => 0,
            Node::Const { .. } => 1,
            Node::Concat(_) => 2,
            Node::Repeat { .. } => 3,
            Node::Map { .. } => 4,
            Node::Scan { .. } => 5,
            Node::Merge { .. } => 6,
            Node::Interleave(_) => 7,
        }
    }

    /// The node's children.
    pub fn children(&self) -> &[Node<P>] {
        match self {
            Node::Lit { .. } | Node::Const { .. } => &[],
            Node::Concat(c) | Node::Merge { children: c, .. } | Node::Interleave(c) => c,
            Node::Repeat { child, .. } | Node::Map { child, .. } | Node::Scan { child, .. } => {
                core::slice::from_ref(child)
            }
        }
    }

    /// Checks the typing rules of the whole tree and returns the root type.
    pub fn ty(&self) -> Result<Type> {
        self.check(&Limits {
            max_work_factor: u32::MAX,
            work_slack_bytes: u64::MAX,
            ..Limits::default()
        })
        .map(|c| c.ty)
    }

    /// Checks typing rules and limits; returns the type, node count and the
    /// intermediate memory the decoder will need.
    pub fn check(&self, limits: &Limits) -> Result<Checked> {
        let mut acc = Checked {
            ty: Type { width: 1, count: 0 },
            nodes: 0,
            work_bytes: 0,
        };
        let ty = check_node(self, limits, 1, &mut acc)?;
        acc.ty = ty;
        let out_bytes = ty.count.saturating_mul(container_bytes(ty.width) as u64);
        let allowed = out_bytes
            .saturating_mul(u64::from(limits.max_work_factor))
            .saturating_add(limits.work_slack_bytes);
        if acc.work_bytes > allowed {
            return Err(FormatError::LimitExceeded {
                limit: "program working memory",
                requested: acc.work_bytes,
                allowed,
            });
        }
        Ok(acc)
    }
}

/// What [`Node::check`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The root's type.
    pub ty: Type,
    /// Nodes in the tree.
    pub nodes: u32,
    /// Bytes of all intermediate streams the decoder materializes.
    pub work_bytes: u64,
}

fn check_node<P>(node: &Node<P>, limits: &Limits, depth: u32, acc: &mut Checked) -> Result<Type> {
    if depth > limits.max_depth {
        return Err(FormatError::LimitExceeded {
            limit: "program depth",
            requested: depth.into(),
            allowed: limits.max_depth.into(),
        });
    }
    acc.nodes += 1;
    if acc.nodes > limits.max_nodes {
        return Err(FormatError::LimitExceeded {
            limit: "program nodes",
            requested: acc.nodes.into(),
            allowed: limits.max_nodes.into(),
        });
    }
    let ty = match node {
        Node::Lit {
            width, count, encoding, ..
        } => {
            check_width(*width)?;
            if !encoding.supports_width(*width) {
                return Err(FormatError::Type {
                    op: "Lit",
                    rule: "entropy-coded literals hold at most 16-bit words",
                });
            }
            Type {
                width: *width,
                count: *count,
            }
        }
        Node::Const { width, count, value } => {
            check_width(*width)?;
            if *count == 0 {
                return Err(FormatError::Type {
                    op: "Const",
                    rule: "count must be at least 1",
                });
            }
            if *value > mask(*width) {
                return Err(FormatError::Type {
                    op: "Const",
                    rule: "value does not fit the width",
                });
            }
            Type {
                width: *width,
                count: *count,
            }
        }
        Node::Concat(children) => {
            if children.len() < 2 {
                return Err(FormatError::Type {
                    op: "Concat",
                    rule: "needs at least 2 children",
                });
            }
            if children.len() as u64 > u64::from(limits.max_concat_children) {
                return Err(FormatError::LimitExceeded {
                    limit: "concat children",
                    requested: children.len() as u64,
                    allowed: limits.max_concat_children.into(),
                });
            }
            let mut width = None;
            let mut count = 0u64;
            for c in children {
                let t = check_node(c, limits, depth + 1, acc)?;
                if *width.get_or_insert(t.width) != t.width {
                    return Err(FormatError::Type {
                        op: "Concat",
                        rule: "children differ in width",
                    });
                }
                count = count.checked_add(t.count).ok_or(FormatError::Invalid {
                    what: "concat length overflows",
                })?;
            }
            Type {
                width: width.unwrap_or(1),
                count,
            }
        }
        Node::Repeat { times, child } => {
            if *times < 2 {
                return Err(FormatError::Type {
                    op: "Repeat",
                    rule: "must repeat at least twice",
                });
            }
            let t = check_node(child, limits, depth + 1, acc)?;
            let count = t.count.checked_mul(*times).ok_or(FormatError::Invalid {
                what: "repeat length overflows",
            })?;
            Type { width: t.width, count }
        }
        Node::Map { op, child } => {
            let t = check_node(child, limits, depth + 1, acc)?;
            op.check(t.width)?;
            t
        }
        Node::Scan { stride, child, .. } => {
            if *stride == 0 {
                return Err(FormatError::Type {
                    op: "Scan",
                    rule: "stride must be at least 1",
                });
            }
            check_node(child, limits, depth + 1, acc)?
        }
        Node::Merge { op, children } => {
            let width = op.check()?;
            let widths = op.field_widths();
            if widths.len() != children.len() {
                return Err(FormatError::Type {
                    op: "Merge",
                    rule: "child count differs from the field count",
                });
            }
            let mut count = None;
            for (c, &w) in children.iter().zip(&widths) {
                let t = check_node(c, limits, depth + 1, acc)?;
                if t.width != w {
                    return Err(FormatError::Type {
                        op: "Merge",
                        rule: "child width differs from its field",
                    });
                }
                if *count.get_or_insert(t.count) != t.count {
                    return Err(FormatError::Type {
                        op: "Merge",
                        rule: "children differ in length",
                    });
                }
            }
            Type {
                width,
                count: count.unwrap_or(0),
            }
        }
        Node::Interleave(children) => {
            if children.len() < 2 || children.len() > MAX_INTERLEAVE {
                return Err(FormatError::Type {
                    op: "Interleave",
                    rule: "needs 2..=4096 children",
                });
            }
            let mut first: Option<Type> = None;
            for c in children {
                let t = check_node(c, limits, depth + 1, acc)?;
                let f = *first.get_or_insert(t);
                if f.width != t.width || f.count != t.count {
                    return Err(FormatError::Type {
                        op: "Interleave",
                        rule: "children differ in width or length",
                    });
                }
            }
            let f = first.unwrap_or(Type { width: 1, count: 0 });
            let count = f.count.checked_mul(children.len() as u64).ok_or(FormatError::Invalid {
                what: "interleave length overflows",
            })?;
            Type { width: f.width, count }
        }
    };
    let bytes = ty.count.saturating_mul(container_bytes(ty.width) as u64);
    acc.work_bytes = acc.work_bytes.saturating_add(bytes);
    Ok(ty)
}

#[cfg(test)]
mod tests;
