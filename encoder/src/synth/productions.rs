//! The grammar both searches expand: which productions apply to a hole (a
//! stream the program must produce exactly, and the role it plays in its
//! parent), and each production's inverse, which turns the hole's exact target
//! into its children's exact targets.
//!
//! [`CandidateSearch`](super::CandidateSearch) walks a fixed menu built from
//! the same splits (its control flow and policies are kept so its programs stay
//! byte-identical); [`AStarSearch`](super::AStarSearch) enumerates
//! [`productions`] at every hole and orders them with the learned prior.

use brevis_format::ops::{interleave, MapOp, MergeOp, ScanOp};
use brevis_format::program::{serialized_size, Node};
use brevis_format::stream::{Stream, Words};
use brevis_format::wire::ctx;
use brevis_format::{with_words, with_words_mut, DType};

use super::Hint;

/// Widest field the entropy coders take; wider fields are split further.
pub const MAX_FIELD: u8 = 16;

/// Which literal policy closes a hole (see `CandidateSearch`): the search's
/// full policy (zstd tried, slow level retried within 8%), the policy for byte
/// fields (slow zstd only where the quick trial already wins) or entropy coders only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LitMode {
    /// Everything, zstd retried at its slow level when the quick trial comes close.
    Full,
    /// zstd at its slow level only where the quick trial wins (for tensors, by
    /// `LitPolicy::tensor_zstd_retry`'s margin).
    Fields,
    /// Huffman/rANS/packed/raw (zstd too from effort 2).
    Entropy,
}

/// What a hole is for: decides the productions that apply to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A chunk's root.
    Root(Hint),
    /// A field of a decomposition: a constant, a literal, or (wider than 16
    /// bits) a split into bytes.
    Field(LitMode),
    /// A constant or a literal, nothing else (byte planes, columns).
    Leaf(LitMode),
    /// The top field of a context-coded split: one `Lit.ctx` with this `k`.
    CtxTop(u8),
    /// A float rotated left by one (sign at the bottom): split as the
    /// exponent then bytes.
    Rotated(u8),
    /// Differences from the previous word: a field, or zigzagged first when `true`.
    Delta(bool),
    /// One column of fixed-size records (GGUF blocks).
    Column,
}

impl Role {
    /// A short stable label (the prior's contexts use it).
    pub fn label(&self) -> String {
        let mode = |m: &LitMode| match m {
            LitMode::Full => "full",
            LitMode::Fields => "fields",
            LitMode::Entropy => "entropy",
        };
        match self {
            Role::Root(Hint::Tensor(d, _)) => format!("root:{}", d.to_string().to_lowercase()),
            Role::Root(Hint::Opaque) => "root:opaque".into(),
            Role::Root(Hint::Records(_)) => "root:records".into(),
            Role::Root(Hint::Nibbles) => "root:nibbles".into(),
            Role::Field(m) => format!("field:{}", mode(m)),
            Role::Leaf(m) => format!("leaf:{}", mode(m)),
            Role::CtxTop(_) => "ctxtop".into(),
            Role::Rotated(_) => "rotated".into(),
            Role::Delta(_) => "delta".into(),
            Role::Column => "column".into(),
        }
    }
}

/// One way to produce a hole: a leaf that closes it, or an operator whose
/// inverse opens one hole per child.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prod {
    /// `Const` (every word equal).
    Const,
    /// The best literal under the hole's policy.
    Lit,
    /// One `Lit.ctx` split at `k`.
    Ctx(u8),
    /// `Merge.fields[rem,8,…,8]`: a wide field in byte-sized fields.
    Split8,
    /// `Merge.fields[1,e,m]`: sign, exponent, mantissa.
    Fields3(u8, u8),
    /// `Merge.fields[1+e,m]`: sign and exponent as one alphabet, mantissa.
    Fields2(u8, u8),
    /// `Map.rotl[1]`: the sign to the bottom, then exponent-first fields.
    RotExp(u8),
    /// `Merge.fields[e,…]` of a rotated float: exponent, then byte-aligned pieces.
    ExpBytes(u8),
    /// `Merge.fields[k+t, m-t]`: sign, exponent and `t` mantissa bits context-coded.
    CtxSplit(u8, u8),
    /// `Merge.bytes(w/8)`: byte planes.
    Bytes,
    /// `Merge.fields[4,4]`: two nibbles.
    Nib,
    /// `Merge.fields[4,4,4,4]`: four nibbles of a 16-bit column.
    Quads,
    /// `Scan.add[1]`: differences from the previous word.
    Delta,
    /// `Scan[op, row]` of a tensor: each word from the word one row back
    /// (smooth rows: position embeddings); the child is the tensor again.
    RowScan(ScanOp),
    /// `Map.zigzag`: signed differences to small unsigned ones.
    ZigZag,
    /// `Interleave` of guessed record columns (plus a tail in a `Concat`).
    Columns,
    /// `Interleave` of the container's records of `r` bytes (plus a tail).
    Records(usize),
    /// `Repeat[k]` of the first `n/k` words.
    Repeat(u64),
}

impl Prod {
    /// A short stable name (the prior counts wins by it).
    pub fn name(&self) -> String {
        match self {
            Prod::Const => "const".into(),
            Prod::Lit => "lit".into(),
            Prod::Ctx(_) => "ctx".into(),
            Prod::Split8 => "split8".into(),
            Prod::Fields3(..) => "fields3".into(),
            Prod::Fields2(..) => "fields2".into(),
            Prod::RotExp(_) => "rotexp".into(),
            Prod::ExpBytes(_) => "expbytes".into(),
            // The split point comes from the estimate, so the prior judges the kind.
            Prod::CtxSplit(..) => "ctxsplit".into(),
            Prod::Bytes => "bytes".into(),
            Prod::Nib => "nib".into(),
            Prod::Quads => "quads".into(),
            Prod::Delta => "delta".into(),
            Prod::RowScan(ScanOp::Xor) => "rowxor".into(),
            Prod::RowScan(ScanOp::Add) => "rowdelta".into(),
            Prod::ZigZag => "zigzag".into(),
            Prod::Columns => "columns".into(),
            Prod::Records(_) => "records".into(),
            Prod::Repeat(_) => "repeat".into(),
        }
    }

    /// True for productions that close their hole with a leaf.
    pub fn closes(&self) -> bool {
        matches!(self, Prod::Const | Prod::Lit | Prod::Ctx(_))
    }
}

/// Which productions the grammar offers (the search's effort and switches).
#[derive(Clone, Copy, Debug)]
pub struct Grammar {
    /// Search effort (0 fastest): `Repeat` from 1.
    pub effort: u32,
    /// How many context-coded splits of a float to offer (best estimates
    /// first; 0: none). `Lit.ctx` is off altogether when this is 0.
    pub ctx_tries: usize,
}

/// The operator a production puts above its children; [`Shape::build`]
/// makes the node once the children are solved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `Merge[op]`.
    Merge(MergeOp),
    /// `Map[op]`.
    Map(MapOp),
    /// `Scan[op, stride]`.
    Scan(ScanOp, u64),
    /// `Interleave` of all children.
    Interleave,
    /// `Concat(Interleave(children but the last), last)`.
    InterleaveTail,
    /// `Repeat[times]`.
    Repeat(u64),
}

impl Shape {
    /// The node over `children` (in order).
    pub fn build(&self, mut children: Vec<Node>) -> Node {
        match self {
            Shape::Merge(op) => Node::Merge {
                op: op.clone(),
                children,
            },
            Shape::Map(op) => Node::Map {
                op: *op,
                child: Box::new(children.pop().expect("one child")),
            },
            Shape::Scan(op, stride) => Node::Scan {
                op: *op,
                stride: *stride,
                child: Box::new(children.pop().expect("one child")),
            },
            Shape::Interleave => Node::Interleave(children),
            Shape::InterleaveTail => {
                let tail = children.pop().expect("a tail");
                Node::Concat(vec![Node::Interleave(children), tail])
            }
            Shape::Repeat(times) => Node::Repeat {
                times: *times,
                child: Box::new(children.pop().expect("one child")),
            },
        }
    }

    /// Exact serialized bytes of this node over `k` children, the children excluded.
    pub fn header_bytes(&self, k: usize) -> usize {
        // Placeholder children of a known size: the header is what is left.
        let leaf = Node::Const {
            width: 1,
            count: 1,
            value: 0,
        };
        let each = serialized_size(&leaf);
        serialized_size(&self.build(vec![leaf; k])) - each * k
    }
}

/// A production's children: the operator and each child's target and role.
pub struct Opened {
    /// The operator above the children.
    pub shape: Shape,
    /// Each child's exact target and role, in order.
    pub children: Vec<(Stream, Role)>,
}

/// The literal mode that closes a hole of this role.
pub fn lit_mode(role: Role) -> LitMode {
    match role {
        Role::Root(_) => LitMode::Full,
        Role::Field(m) | Role::Leaf(m) => m,
        Role::Delta(_) => LitMode::Full,
        Role::Column => LitMode::Fields,
        Role::CtxTop(_) | Role::Rotated(_) => LitMode::Entropy,
    }
}

/// The productions that apply to a hole, in a fixed order (structured first,
/// the plain literal last: ties go to the earlier one, as in the menu).
pub fn productions(s: &Stream, role: Role, g: &Grammar, depth: u32) -> Vec<Prod> {
    let w = s.width();
    let mut out = Vec::new();
    if super::lit::constant(s).is_some() {
        // A constant is one node of a few bytes: nothing beats it.
        return vec![Prod::Const];
    }
    let float = |out: &mut Vec<Prod>, exp: u8, mant: u8| {
        if w != 1 + exp + mant {
            return;
        }
        out.push(Prod::Fields3(exp, mant));
        if exp < MAX_FIELD {
            out.push(Prod::Fields2(exp, mant));
        }
        if w.is_multiple_of(8) && w >= 16 {
            out.push(Prod::RotExp(exp));
        }
        if g.ctx_tries > 0 {
            let k = 1 + exp;
            for t in ctx_choices(s, exp, mant, g.ctx_tries) {
                out.push(if t == mant { Prod::Ctx(k) } else { Prod::CtxSplit(k, t) });
            }
        }
    };
    match role {
        Role::Root(hint) => {
            match hint {
                Hint::Tensor(dtype, row) => {
                    if let Some((e, m)) = dtype.float_layout() {
                        float(&mut out, e, m);
                        if w == 16 {
                            out.push(Prod::Bytes);
                        }
                    } else {
                        if w >= 16 && w.is_multiple_of(8) {
                            out.push(Prod::Bytes);
                        }
                        out.push(Prod::Delta);
                    }
                    if let Some(op) = row_scan(s, row, dtype) {
                        out.push(Prod::RowScan(op));
                    }
                }
                Hint::Opaque => {
                    match w {
                        16 => {
                            float(&mut out, 5, 10);
                            float(&mut out, 8, 7);
                        }
                        32 => float(&mut out, 8, 23),
                        _ => {}
                    }
                    if w >= 16 && w.is_multiple_of(8) {
                        out.push(Prod::Bytes);
                    }
                    if w == 8 && columns(s).is_some() {
                        out.push(Prod::Columns);
                    }
                }
                Hint::Records(r) => {
                    if records(s, r).is_some() {
                        out.push(Prod::Records(r));
                    }
                }
                Hint::Nibbles => {
                    if w == 8 {
                        out.push(Prod::Nib);
                        if columns(s).is_some() {
                            out.push(Prod::Columns);
                        }
                    }
                }
            }
            if w > MAX_FIELD {
                out.push(Prod::Split8);
            }
            if g.effort >= 1 && s.len() <= 1 << 16 && depth < 4 {
                if let Some(times) = repeat_times(s) {
                    out.push(Prod::Repeat(times));
                }
            }
            out.push(Prod::Lit);
        }
        Role::Field(_) => {
            if w > MAX_FIELD {
                out.push(Prod::Split8);
            }
            out.push(Prod::Lit);
        }
        Role::Leaf(_) => out.push(Prod::Lit),
        Role::CtxTop(k) => out.push(Prod::Ctx(k)),
        Role::Rotated(exp) => out.push(Prod::ExpBytes(exp)),
        Role::Delta(zig) => {
            if zig {
                out.push(Prod::ZigZag);
            }
            if w > MAX_FIELD {
                out.push(Prod::Split8);
            }
            out.push(Prod::Lit);
        }
        Role::Column => {
            match w {
                8 => out.push(Prod::Nib),
                16 => {
                    out.push(Prod::Bytes);
                    out.push(Prod::Quads);
                    float(&mut out, 5, 10);
                }
                _ => {}
            }
            out.push(Prod::Lit);
        }
    }
    out
}

/// Runs an opening production's inverse on `s`: the operator and its
/// children's exact targets and roles. `None` for leaves and misfits.
pub fn open(p: Prod, s: &Stream, role: Role) -> Option<Opened> {
    let w = s.width();
    let merge = |op: MergeOp, child: &dyn Fn(usize) -> Role| -> Option<Opened> {
        let parts = op.split(s).ok()?;
        Some(Opened {
            children: parts.into_iter().enumerate().map(|(i, c)| (c, child(i))).collect(),
            shape: Shape::Merge(op),
        })
    };
    // Children of byte planes and nibbles keep LZ at the root, and the
    // byte-field policy in a record column or a nibble root.
    // A float tensor's planes get slow zstd only where the quick level already
    // wins (on a plane of random low bytes it comes within 8% and never wins).
    let lz = match role {
        Role::Column | Role::Root(Hint::Nibbles) | Role::Root(Hint::Records(_)) => LitMode::Fields,
        Role::Root(Hint::Tensor(d, _)) if d.float_layout().is_some() => LitMode::Fields,
        _ => LitMode::Full,
    };
    match p {
        Prod::Const | Prod::Lit | Prod::Ctx(_) => None,
        Prod::Split8 => {
            let mode = match role {
                Role::Field(m) => m,
                Role::Delta(_) => LitMode::Full,
                _ => LitMode::Fields,
            };
            merge(MergeOp::Fields(split8_widths(w)), &|_| Role::Field(mode))
        }
        Prod::Fields3(e, m) => merge(MergeOp::Fields(vec![1, e, m]), &|_| Role::Field(LitMode::Entropy)),
        Prod::Fields2(e, m) => merge(MergeOp::Fields(vec![1 + e, m]), &|_| Role::Field(LitMode::Entropy)),
        Prod::RotExp(e) => Some(Opened {
            shape: Shape::Map(MapOp::RotateLeft(1)),
            children: vec![(rotate_sign_down(s)?, Role::Rotated(e))],
        }),
        Prod::ExpBytes(e) => merge(MergeOp::Fields(exp_byte_fields(w, e)), &|_| {
            Role::Field(LitMode::Entropy)
        }),
        Prod::CtxSplit(k, t) => merge(MergeOp::Fields(vec![k + t, w - k - t]), &|i| {
            if i == 0 {
                Role::CtxTop(k)
            } else {
                Role::Field(LitMode::Entropy)
            }
        }),
        Prod::Bytes => merge(MergeOp::BytePlanes(w / 8), &|_| Role::Leaf(lz)),
        Prod::Nib => {
            let child = if matches!(role, Role::Column) {
                Role::Leaf(LitMode::Fields)
            } else {
                Role::Field(LitMode::Fields)
            };
            merge(MergeOp::Fields(vec![4, 4]), &|_| child)
        }
        Prod::Quads => merge(MergeOp::Fields(vec![4, 4, 4, 4]), &|_| Role::Leaf(LitMode::Fields)),
        Prod::Delta => {
            let signed = matches!(role, Role::Root(Hint::Tensor(d, _)) if d.is_signed_int());
            Some(Opened {
                shape: Shape::Scan(ScanOp::Add, 1),
                children: vec![(delta_residuals(s)?, Role::Delta(signed || w > 8))],
            })
        }
        Prod::RowScan(op) => {
            let Role::Root(Hint::Tensor(dtype, row)) = role else {
                return None;
            };
            Some(Opened {
                shape: Shape::Scan(op, row),
                // The child is solved as the tensor it is, without another row scan.
                children: vec![(scan_residuals(s, op, row)?, Role::Root(Hint::Tensor(dtype, 0)))],
            })
        }
        Prod::ZigZag => Some(Opened {
            shape: Shape::Map(MapOp::ZigZag),
            children: vec![(zigzag_inverse(s)?, Role::Field(LitMode::Full))],
        }),
        Prod::Columns => {
            let (cols, tail) = columns(s)?;
            Some(interleaved(
                cols,
                Role::Leaf(LitMode::Full),
                tail,
                Role::Leaf(LitMode::Full),
            ))
        }
        Prod::Records(r) => {
            let (cols, tail) = records(s, r)?;
            Some(interleaved(cols, Role::Column, tail, Role::Leaf(LitMode::Fields)))
        }
        Prod::Repeat(times) => {
            let words = s.to_u64s();
            let head = Stream::from_u64s(w, &words[..words.len() / times as usize]).ok()?;
            Some(Opened {
                shape: Shape::Repeat(times),
                children: vec![(head, role)],
            })
        }
    }
}

/// Field widths that cut a `w`-bit word into bytes, the top field taking the remainder.
pub fn split8_widths(w: u8) -> Vec<u8> {
    let mut widths = vec![8u8; usize::from(w / 8)];
    if !w.is_multiple_of(8) {
        widths.insert(0, w % 8);
    }
    widths
}

/// Field widths of a float rotated left by one: the exponent, then the rest
/// in byte-aligned pieces.
pub fn exp_byte_fields(w: u8, exp: u8) -> Vec<u8> {
    let mut fields = vec![exp];
    let mut rest = w - exp;
    while rest > 0 {
        let f = if rest.is_multiple_of(8) { 8 } else { rest % 8 };
        fields.push(f);
        rest -= f;
    }
    fields
}

/// The child of `Map.rotl[1]` that produces `s` (ZipNN's byte grouping: the
/// exponent alone in the top bits).
pub fn rotate_sign_down(s: &Stream) -> Option<Stream> {
    let w = s.width();
    let mut rot = s.clone().into_words();
    with_words_mut!(&mut rot, r => MapOp::RotateLeft(1).invert(w, r));
    Stream::new(w, rot).ok()
}

/// The child of `Scan.add[1]` that produces `s`: differences from the previous word.
pub fn delta_residuals(s: &Stream) -> Option<Stream> {
    let w = s.width();
    let mut d = s.clone().into_words();
    with_words_mut!(&mut d, x => ScanOp::Add.invert(w, 1, x));
    Stream::new(w, d).ok()
}

/// The child of `Scan[op, stride]` that produces `s`.
pub fn scan_residuals(s: &Stream, op: ScanOp, stride: u64) -> Option<Stream> {
    let stride = usize::try_from(stride).ok().filter(|&r| r >= 1)?;
    let w = s.width();
    let mut d = s.clone().into_words();
    with_words_mut!(&mut d, x => op.invert(w, stride, x));
    Stream::new(w, d).ok()
}

/// An `Interleave` of `cols` (each a hole of role `col`), with the ragged
/// `tail` (role `tail_role`) after them in a `Concat` when there is one.
fn interleaved(cols: Vec<Stream>, col: Role, tail: Option<Stream>, tail_role: Role) -> Opened {
    let mut children: Vec<(Stream, Role)> = cols.into_iter().map(|c| (c, col)).collect();
    let shape = match tail {
        Some(t) => {
            children.push((t, tail_role));
            Shape::InterleaveTail
        }
        None => Shape::Interleave,
    };
    Opened { shape, children }
}

/// Words sampled by [`row_scan`]'s estimate (whole rows, each with the row before it).
const ROW_SAMPLE: usize = 1 << 14;

/// Bits of the top field [`row_scan`] estimates: a float's sign, exponent and
/// three mantissa bits, at most 12 (the whole word of an FP8); an integer of
/// up to 16 bits, its top 12 bits at most (the whole word of an int8); none
/// for wider integers (their top bits are all sign).
fn row_top_bits(dtype: DType) -> Option<u8> {
    let w = dtype.bits();
    match dtype.float_layout() {
        Some((exp, _)) => Some(w.min(1 + exp + 3).min(12)),
        None if (2..=16).contains(&w) => Some(w.min(12)),
        None => None,
    }
}

/// The scan one row back worth offering for a tensor of `dtype` with rows of
/// `row` words (at least 16, and 8 rows), if any: on a sample of rows, the
/// order-0 entropy of the top field (`row_top_bits`) of each word XORed
/// with (or less) the word one row back, against the words themselves.
/// Offered only when the better of the two is below the plain field's entropy
/// by `ROW_SCAN_MIN_GAIN` (rows of ordinary weights are independent, and
/// there the scan only spreads the field); the search then charges the
/// program its exact size like any other.
pub fn row_scan(s: &Stream, row: u64, dtype: DType) -> Option<ScanOp> {
    let row = usize::try_from(row).ok()?;
    let n = s.len();
    if row < ROW_SCAN_MIN_ROW || n / row < 8 || s.width() != dtype.bits() {
        return None;
    }
    let w = s.width();
    let top = row_top_bits(dtype)?;
    let shift = w - top;
    let rows = n / row;
    let want = (ROW_SAMPLE / row).clamp(1, rows - 1);
    let step = (rows - 1) / want;
    let m = brevis_format::stream::mask(w);
    let mut hist = vec![[0u32; 3]; 1usize << top];
    with_words!(s.words(), x => {
        for k in 0..want {
            let start = (1 + k * step) * row;
            for i in start..start + row {
                let cur = brevis_format::Word::to_u64(x[i]);
                let prev = brevis_format::Word::to_u64(x[i - row]);
                hist[(cur >> shift) as usize][0] += 1;
                hist[((cur ^ prev) >> shift) as usize][1] += 1;
                hist[((cur.wrapping_sub(prev) & m) >> shift) as usize][2] += 1;
            }
        }
    });
    let total = (want * row) as f64;
    // Bits of the field over the sample.
    let entropy = |j: usize| -> f64 {
        hist.iter()
            .map(|h| f64::from(h[j]))
            .filter(|&c| c > 0.0)
            .map(|c| c * (total / c).log2())
            .sum::<f64>()
    };
    let (plain, xor, add) = (entropy(0), entropy(1), entropy(2));
    let (best, op) = if add < xor {
        (add, ScanOp::Add)
    } else {
        (xor, ScanOp::Xor)
    };
    (best < plain * (1.0 - ROW_SCAN_MIN_GAIN)).then_some(op)
}

/// Shortest row [`row_scan`] considers. A shorter last dimension is a
/// convolution's kernel row (3×3 kernels: the sample passed the gate on 20 of
/// isnet_fp16.onnx's tensors, 9 of its 88 MB, the scan never won and their
/// search took 2.0 s more of 17).
const ROW_SCAN_MIN_ROW: usize = 16;

/// Share of the top field's estimated entropy a row scan must save to be offered.
const ROW_SCAN_MIN_GAIN: f64 = 0.02;

/// The child of `Map.zigzag` that produces `s`.
pub fn zigzag_inverse(s: &Stream) -> Option<Stream> {
    let w = s.width();
    let mut z = s.clone().into_words();
    with_words_mut!(&mut z, x => MapOp::ZigZag.invert(w, x));
    Stream::new(w, z).ok()
}

/// Smallest period checked for a few repeat counts: `Some(times)` when
/// `s = Repeat[times](s[..n/times])`.
pub fn repeat_times(s: &Stream) -> Option<u64> {
    let words = s.to_u64s();
    let n = words.len();
    for times in [2usize, 3, 4, 8, 16, 32, 64] {
        if n < times * 2 || !n.is_multiple_of(times) {
            continue;
        }
        let p = n / times;
        if words.chunks_exact(p).all(|c| c == &words[..p]) {
            return Some(times as u64);
        }
    }
    None
}

/// Bytes cut into records of the length whose columns look cheapest
/// (`plain::record_len`): the columns, and the tail that is not whole records.
pub fn columns(s: &Stream) -> Option<(Vec<Stream>, Option<Stream>)> {
    let Words::U8(bytes) = s.words() else { return None };
    let r = crate::containers::plain::record_len(bytes)?;
    let body = bytes.len() / r * r;
    let cols = interleave::split(&bytes[..body], r)
        .into_iter()
        .map(|c| Stream::new(8, Words::U8(c)).expect("bytes are 8-bit words"))
        .collect();
    let tail = (body < bytes.len()).then(|| Stream::new(8, Words::U8(bytes[body..].to_vec())).expect("bytes"));
    Some((cols, tail))
}

/// Records of `r` bytes (the container's), over a root of 8- or 16-bit words:
/// the record's `r / word bytes` columns and the tail that is not whole records.
pub fn records(s: &Stream, r: usize) -> Option<(Vec<Stream>, Option<Stream>)> {
    let wb = match s.words() {
        Words::U8(_) if s.width() == 8 => 1,
        Words::U16(_) if s.width() == 16 => 2,
        _ => return None,
    };
    if !r.is_multiple_of(wb) {
        return None;
    }
    let k = r / wb;
    if !(2..=4096).contains(&k) || s.len() < k {
        return None;
    }
    let body = s.len() / k * k;
    let (cols, tail) = match s.words() {
        Words::U8(w) => (
            interleave::split(&w[..body], k)
                .into_iter()
                .map(Words::U8)
                .collect::<Vec<_>>(),
            Words::U8(w[body..].to_vec()),
        ),
        Words::U16(w) => (
            interleave::split(&w[..body], k).into_iter().map(Words::U16).collect(),
            Words::U16(w[body..].to_vec()),
        ),
        _ => return None,
    };
    let cols = cols
        .into_iter()
        .map(|c| Stream::new(s.width(), c))
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    let tail = if body == s.len() {
        None
    } else {
        Some(Stream::new(s.width(), tail).ok()?)
    };
    Some((cols, tail))
}

/// The mantissa bits `t` worth coding with sign and exponent in one `Lit.ctx`
/// (`t == mant`: the whole word), best estimate first, at most `tries`.
///
/// Each `t` is priced as `Merge.fields[k + t, mant - t]` of a `Lit.ctx` and a
/// field coded on its own, from censuses alone: the counts of the top
/// `k + t` bits are marginals of one census of the top `k + max t` bits, and
/// the low field's of one census of the low bits (at most 16; wider fields are
/// priced packed). Two passes over the words at most, instead of a split and
/// two censuses for every `t`.
pub fn ctx_choices(s: &Stream, exp: u8, mant: u8, tries: usize) -> Vec<u8> {
    let k = 1 + exp;
    let w = s.width();
    if k >= 16 || mant == 0 || w != k + mant {
        return Vec::new();
    }
    let max_t = mant.min(16 - k);
    let n = s.len() as u64;
    let top = census(s, w - k - max_t, k + max_t);
    // The low fields are the low `mant - t` bits; those of 16 bits or fewer
    // are priced from the census of the low `low_bits`.
    let low_bits = (mant - 1).min(16);
    let low = if max_t == mant {
        // `top` is the census of whole words.
        marginal(&top, |v| v & ((1 << low_bits) - 1), low_bits)
    } else {
        census(s, 0, low_bits)
    };
    let mut ests: Vec<(f64, u8)> = Vec::new();
    for t in 1..=max_t {
        let est = if t == mant {
            ctx::estimate_counts(&top, w, k)
        } else {
            let high = marginal(&top, |v| v >> (max_t - t), k + t);
            let fw = mant - t;
            let field = if fw > 16 {
                n as f64 * f64::from(fw) / 8.0
            } else {
                field_estimate_counts(&marginal(&low, |v| v & ((1 << fw) - 1), fw), n, fw)
            };
            ctx::estimate_counts(&high, k + t, k).map(|e| e + field)
        };
        if let Some(e) = est {
            ests.push((e, t));
        }
    }
    ests.sort_by(|a, b| a.0.total_cmp(&b.0));
    ests.into_iter().take(tries).map(|(_, t)| t).collect()
}

/// How often each value of bits `shift .. shift + bits` of the words occurs
/// (`2^bits` entries).
fn census(s: &Stream, shift: u8, bits: u8) -> Vec<u64> {
    let mut counts = vec![0u64; 1usize << bits];
    let mask = (1u64 << bits) - 1;
    with_words!(s.words(), w => for x in w.iter() {
        counts[((brevis_format::Word::to_u64(*x) >> shift) & mask) as usize] += 1;
    });
    counts
}

/// The census of `f(v)` (a value of `bits` bits) from the census of `v`.
fn marginal(counts: &[u64], f: impl Fn(usize) -> usize, bits: u8) -> Vec<u64> {
    let mut out = vec![0u64; 1usize << bits];
    for (v, &c) in counts.iter().enumerate() {
        out[f(v)] += c;
    }
    out
}

/// `s` as one `Lit.ctx` split at `k`, if the encoding applies.
pub fn ctx_lit(s: &Stream, k: u8) -> Option<Node> {
    let payload = match s.words() {
        Words::U8(w) => ctx::encode(w, s.width(), k)?,
        Words::U16(w) => ctx::encode(w, s.width(), k)?,
        _ => return None,
    };
    Some(Node::Lit {
        width: s.width(),
        count: s.len() as u64,
        encoding: brevis_format::wire::LitEncoding::Ctx,
        payload,
    })
}

/// `s` as one `Lit.ctx` split at `k`, or, where its distribution changes along
/// the stream (row blocks of another magnitude), as a `Concat` of blocks each
/// its own `Lit.ctx`: whichever is smaller by exact serialized size.
pub fn ctx_leaf(s: &Stream, k: u8) -> Option<Node> {
    let whole = ctx_lit(s, k)?;
    let size = serialized_size(&whole);
    // A cut must save more than a Concat's few header bytes and a block's Lit
    // header, and enough to be worth encoding the stream again.
    let min_gain = 64.0 + size as f64 * REGIME_MIN_GAIN;
    let width = s.width();
    let cut = super::segment::regime_cuts(s, min_gain, |h| ctx::estimate_counts(h, width, k))
        .and_then(|ends| super::segment::concat_blocks(s, &ends, |b| ctx_lit(b, k)));
    match cut {
        Some(c) if serialized_size(&c) < size => Some(c),
        _ => Some(whole),
    }
}

/// Fraction of a literal's bytes that cutting it into regimes must save by
/// estimate before the blocks are built. 0.001 instead: 594 B (FP8) and 220 B
/// (FP16) more on the all-MiniLM derived files, in the same time.
const REGIME_MIN_GAIN: f64 = 0.0002;

/// Rough bytes of a field of `width` bits (16 or fewer) coded on its own,
/// from its census (`counts`, `n` words): the smaller of packed bits and the
/// order-0 entropy plus about a byte and a half of table per symbol.
fn field_estimate_counts(counts: &[u64], n: u64, width: u8) -> f64 {
    let n = n as f64;
    let packed = n * f64::from(width) / 8.0;
    let (mut bits, mut syms) = (0.0, 0usize);
    for &c in counts.iter().filter(|&&c| c > 0) {
        bits += c as f64 * (n / c as f64).log2();
        syms += 1;
    }
    packed.min(bits / 8.0 + 1.5 * syms as f64)
}

/// Words sampled by [`mostly_repeated_words`].
const DISTINCT_SAMPLE: usize = 1 << 16;

/// True when fewer than half the words of a sample (the first 64 Ki words)
/// are distinct and they are few for the width (below `2^(width/2)`): a small
/// vocabulary, not just a narrow type (a BF16 tensor of 64 Ki words has only a
/// few thousand distinct values, yet zstd -19 never wins there).
pub fn mostly_repeated_words(s: &Stream) -> bool {
    let n = s.len().min(DISTINCT_SAMPLE);
    if n < 64 {
        return false;
    }
    let mut words: Vec<u64> =
        with_words!(s.words(), w => w[..n].iter().map(|x| brevis_format::Word::to_u64(*x)).collect());
    words.sort_unstable();
    words.dedup();
    words.len() * 2 < n && (words.len() as u64) < 1u64 << (s.width() / 2)
}

/// An admissible lower bound on the serialized bytes of *any* program whose
/// output is a stream of `count` words (and, when `constant` is false, not a
/// constant one).
///
/// Relaxed grammar: every node kind may produce the hole, ignoring whether its
/// payload could hold the data. The cheapest conceivable nodes are a `Const`
/// (tag, width, varint count, varint value: at least `3 + varint(count)`), a
/// `Lit` (tag, width, count, encoding, a varint payload length:
/// `4 + varint(count)`), and a `Repeat` (tag, varint times, then a child of at
/// least 4 bytes: `6`). `Map`, `Scan` and `Merge` add at least 2 bytes of
/// header above a child (or children) producing the same count, so they are
/// never below the bound of that child; `Concat` and `Interleave` have at least
/// two children of 4 bytes each. So no program is smaller than this, and the
/// A* search never overestimates what an open hole will cost.
pub fn hole_lower_bound(count: u64, constant: bool) -> usize {
    let vl = brevis_format::bytes::varint_len(count);
    let smallest = if constant { 3 + vl } else { 4 + vl };
    smallest.min(6)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Float-like words: a random sign, an exponent skewed around the middle of
    /// its range, and mantissa bits whose top bit leans on the exponent.
    fn floats(exp: u8, mant: u8, n: usize, seed: u64) -> Stream {
        let mut x = seed;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let bias = (1u64 << (exp - 1)) - 1;
        let values: Vec<u64> = (0..n)
            .map(|_| {
                let r = next();
                let e = (bias - (r % 7).min(bias) + (r >> 3) % 2) & ((1 << exp) - 1);
                let m = (r >> 8) & ((1 << mant) - 1);
                let m = if e.is_multiple_of(2) { m >> 1 } else { m };
                (r >> 63) << (exp + mant) | e << mant | m
            })
            .collect();
        Stream::from_u64s(1 + exp + mant, &values).unwrap()
    }

    /// What `ctx_choices` estimated before it worked from censuses: split the
    /// stream at every `t` and price the two parts (kept here as the oracle).
    fn ctx_choices_by_splitting(s: &Stream, exp: u8, mant: u8, tries: usize) -> Vec<u8> {
        let k = 1 + exp;
        let whole = |s: &Stream, k: u8| match s.words() {
            Words::U8(w) => ctx::estimate(w, s.width(), k),
            Words::U16(w) => ctx::estimate(w, s.width(), k),
            _ => None,
        };
        let field = |s: &Stream| {
            let n = s.len() as u64;
            if s.width() > 16 {
                return n as f64 * f64::from(s.width()) / 8.0;
            }
            let mut counts = vec![0u64; 1usize << s.width()];
            for v in s.to_u64s() {
                counts[v as usize] += 1;
            }
            field_estimate_counts(&counts, n, s.width())
        };
        let mut ests: Vec<(f64, u8)> = Vec::new();
        for t in 1..=mant.min(16 - k) {
            let est = if t == mant {
                whole(s, k)
            } else {
                let p = MergeOp::Fields(vec![k + t, mant - t]).split(s).unwrap();
                whole(&p[0], k).map(|e| e + field(&p[1]))
            };
            if let Some(e) = est {
                ests.push((e, t));
            }
        }
        ests.sort_by(|a, b| a.0.total_cmp(&b.0));
        ests.into_iter().take(tries).map(|(_, t)| t).collect()
    }

    #[test]
    fn ctx_choices_from_censuses_are_those_of_the_split_streams() {
        // BF16, FP16, FP32, FP8 E4M3 and E5M2.
        for (exp, mant) in [(8u8, 7u8), (5, 10), (8, 23), (4, 3), (5, 2)] {
            for seed in [1u64, 2, 3] {
                let s = floats(exp, mant, 5000, seed);
                let all = usize::from(mant);
                let got = ctx_choices(&s, exp, mant, all);
                assert!(!got.is_empty(), "e{exp}m{mant}");
                assert_eq!(
                    got,
                    ctx_choices_by_splitting(&s, exp, mant, all),
                    "e{exp}m{mant} seed {seed}"
                );
                assert_eq!(ctx_choices(&s, exp, mant, 1), got[..1], "e{exp}m{mant}");
            }
        }
    }
}
