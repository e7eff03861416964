//! The first-cut synthesizer: a fixed menu of decompositions per dtype, each
//! child solved recursively, the smallest exact candidate kept.

use brevis_format::ops::{MapOp, MergeOp, ScanOp};
use brevis_format::program::{serialized_size, Node};
use brevis_format::stream::Stream;

use super::lit::{best_lit, best_lit_below, constant, leaf, prefer_fast_root, LitPolicy, THOROUGH_TENSOR_ZSTD_RETRY};
use super::productions::{self as prods, ctx_leaf, mostly_repeated_words, MAX_FIELD};
use super::{Hint, Synthesizer};

/// Tries the sensible decompositions for each dtype and keeps the smallest.
#[derive(Clone, Debug)]
pub struct CandidateSearch {
    /// How literals are chosen.
    pub lit: LitPolicy,
    /// 0: fastest menu; 1: default; 2+: more candidates (zstd everywhere, more scans).
    pub effort: u32,
    /// Try context-coded literals (`Lit.ctx`); `false` for ablations.
    pub ctx: bool,
}

impl Default for CandidateSearch {
    fn default() -> Self {
        CandidateSearch {
            lit: LitPolicy::new(19, 1.08),
            effort: 1,
            ctx: true,
        }
    }
}

impl CandidateSearch {
    /// A search at the given effort level.
    pub fn with_effort(effort: u32) -> Self {
        let zstd_level = match effort {
            0 => 3,
            1 => 19,
            _ => 22,
        };
        let lit = LitPolicy::new(zstd_level, 1.08);
        CandidateSearch {
            lit: if effort >= 2 {
                LitPolicy {
                    tensor_zstd_retry: THOROUGH_TENSOR_ZSTD_RETRY,
                    ..lit
                }
            } else {
                lit
            },
            effort,
            ctx: true,
        }
    }

    /// The same search favouring decode speed (`--fast-decode`): no
    /// context-coded literals, literals picked by [`LitPolicy::fast_decode`].
    pub fn fast_decode(self) -> Self {
        CandidateSearch {
            ctx: false,
            lit: self.lit.fast_decode(),
            ..self
        }
    }

    /// Policy for the byte fields of a root: zstd is tried quickly, and at its
    /// slow level only where the quick trial already wins (random mantissa bytes
    /// come close to zstd without LZ ever winning there), and for tensors only
    /// where it wins by the margin `for_hint` asks.
    fn fields_policy(&self) -> LitPolicy {
        LitPolicy {
            zstd_retry_within: self.lit.zstd_retry_within.min(1.0),
            ..self.lit
        }
    }

    /// Policy for streams where LZ matches are unlikely (float fields).
    fn entropy_only(&self) -> LitPolicy {
        if self.effort >= 2 {
            self.lit
        } else {
            LitPolicy {
                zstd_level: 0,
                ..self.lit
            }
        }
    }

    /// A leaf, or for streams too wide for the entropy coders, also a split into
    /// byte-sized fields (top field takes the remainder), whichever is smaller.
    fn field(&self, s: &Stream, policy: &LitPolicy) -> Node {
        if let Some(v) = constant(s) {
            return Node::Const {
                width: s.width(),
                count: s.len() as u64,
                value: v,
            };
        }
        if s.width() <= MAX_FIELD {
            return best_lit(s, policy);
        }
        let split = self.merge(s, MergeOp::Fields(prods::split8_widths(s.width())), |c| {
            self.field(c, policy)
        });
        // The split bounds the literal: slow zstd levels are skipped unless they can beat it.
        let bound = split.as_ref().map(serialized_size).unwrap_or(usize::MAX);
        let mut best = best_lit_below(s, policy, bound);
        if let Some(n) = split {
            keep_smaller(&mut best, n);
        }
        best
    }

    /// `Merge[op]` of `s` with each child solved by `solve`, if `op` fits `s`.
    fn merge(&self, s: &Stream, op: MergeOp, solve: impl Fn(&Stream) -> Node) -> Option<Node> {
        let op = match op {
            MergeOp::Fields(w) if w.len() == 1 => return None,
            op => op,
        };
        let children = op.split(s).ok()?;
        let children = children.iter().map(solve).collect();
        Some(Node::Merge { op, children })
    }

    fn float_candidates(&self, s: &Stream, exp: u8, mant: u8, best: &mut Node) {
        let policy = self.entropy_only();
        let solve = |c: &Stream| self.field(c, &policy);
        let w = s.width();
        // Sign / exponent / mantissa; then sign and exponent as one alphabet with
        // the same mantissa (solved once, shared by both candidates).
        if let Ok(parts) = MergeOp::Fields(vec![1, exp, mant]).split(s) {
            let [sign, e, m] = &parts[..] else { return };
            let mant_node = solve(m);
            let three = Node::Merge {
                op: MergeOp::Fields(vec![1, exp, mant]),
                children: vec![solve(sign), solve(e), mant_node.clone()],
            };
            keep_smaller(best, three);
            if exp < MAX_FIELD {
                if let Ok(se) = MergeOp::Fields(vec![1 + exp, mant]).split(s) {
                    let two = Node::Merge {
                        op: MergeOp::Fields(vec![1 + exp, mant]),
                        children: vec![solve(&se[0]), mant_node],
                    };
                    keep_smaller(best, two);
                }
            }
        }
        // Exponent alone in the top bits after rotating the sign to the bottom
        // (ZipNN's byte grouping for BF16 and FP32).
        if w.is_multiple_of(8) && w >= 16 {
            let op = MapOp::RotateLeft(1);
            if let Some(rs) = prods::rotate_sign_down(s) {
                // Exponent first, then the rest in byte-aligned pieces.
                if let Some(inner) = self.merge(&rs, MergeOp::Fields(prods::exp_byte_fields(w, exp)), solve) {
                    keep_smaller(
                        best,
                        Node::Map {
                            op,
                            child: Box::new(inner),
                        },
                    );
                }
            }
        }
        if self.effort >= 1 && self.ctx {
            self.ctx_candidates(s, exp, mant, best);
        }
    }

    /// Sign, exponent and the top `t` mantissa bits as one context-coded field
    /// (`Lit.ctx` with `k = 1 + exp`: the mantissa bits coded given sign and
    /// exponent), the rest of the mantissa as its own field: `Merge.fields[1+e+t,
    /// m-t]`, or the whole word as one `Lit.ctx` when it fits (FP8 bytes, 16-bit
    /// floats). The `t` with the smallest estimate (two at effort 2) is built exactly.
    fn ctx_candidates(&self, s: &Stream, exp: u8, mant: u8, best: &mut Node) {
        let k = 1 + exp;
        let policy = self.entropy_only();
        // The estimate is close (tables exact, data within a fraction of a percent):
        // only effort 2 and up pay for building the runner-up too.
        let tries = if self.effort >= 2 { 2 } else { 1 };
        for t in prods::ctx_choices(s, exp, mant, tries) {
            let node = if t == mant {
                ctx_leaf(s, k)
            } else {
                let op = MergeOp::Fields(vec![k + t, mant - t]);
                op.split(s).ok().and_then(|p| {
                    Some(Node::Merge {
                        op,
                        children: vec![ctx_leaf(&p[0], k)?, self.field(&p[1], &policy)],
                    })
                })
            };
            if let Some(n) = node {
                keep_smaller(best, n);
            }
        }
    }

    fn int_candidates(&self, s: &Stream, signed: bool, best: &mut Node) {
        let w = s.width();
        let policy = self.lit;
        if w >= 16 && w.is_multiple_of(8) {
            if let Some(n) = self.merge(s, MergeOp::BytePlanes(w / 8), |c| leaf(c, &policy)) {
                keep_smaller(best, n);
            }
        }
        // Differences from the previous word (ramps, position ids, sorted ids).
        if let Some(ds) = prods::delta_residuals(s) {
            let child = if signed || w > 8 {
                prods::zigzag_inverse(&ds).map(|zs| Node::Map {
                    op: MapOp::ZigZag,
                    child: Box::new(self.field(&zs, &policy)),
                })
            } else {
                None
            };
            let plain = self.field(&ds, &policy);
            let child = match child {
                Some(c) if serialized_size(&c) < serialized_size(&plain) => c,
                _ => plain,
            };
            keep_smaller(
                best,
                Node::Scan {
                    op: ScanOp::Add,
                    stride: 1,
                    child: Box::new(child),
                },
            );
        }
    }

    /// Smallest period `p < n` with `s = Repeat[n/p](s[..p])`, checked for a few
    /// repeat counts.
    fn repeat(&self, s: &Stream, hint: Hint) -> Option<Node> {
        let times = prods::repeat_times(s)?;
        let words = s.to_u64s();
        let head = Stream::from_u64s(s.width(), &words[..words.len() / times as usize]).ok()?;
        Some(Node::Repeat {
            times,
            child: Box::new(self.synthesize(&head, hint)),
        })
    }
}

impl CandidateSearch {
    /// Bytes cut into records of the length whose columns look cheapest, each
    /// column coded on its own: `Interleave(col_0, …, col_{R-1})`, plus a
    /// `Concat` with the tail when the length is not a multiple of `R`.
    fn columns(&self, s: &Stream) -> Option<Node> {
        let (cols, tail) = prods::columns(s)?;
        let policy = self.lit;
        let node = Node::Interleave(cols.iter().map(|c| leaf(c, &policy)).collect());
        match tail {
            None => Some(node),
            Some(t) => Some(Node::Concat(vec![node, leaf(&t, &policy)])),
        }
    }
}

impl CandidateSearch {
    /// Records of `r` bytes whose length the container knows (GGUF blocks),
    /// with a root of 8- or 16-bit words: `Interleave` of the record's
    /// `r / word bytes` columns, each solved by [`Self::record_column`], plus a
    /// `Concat` with the tail when the length is not whole records.
    fn records(&self, s: &Stream, r: usize) -> Option<Node> {
        let (cols, tail) = prods::records(s, r)?;
        let node = Node::Interleave(cols.iter().map(|c| self.record_column(c)).collect());
        match tail {
            None => Some(node),
            Some(t) => Some(Node::Concat(vec![node, leaf(&t, &self.fields_policy())])),
        }
    }

    /// One column of records: bytes as bytes or as two nibbles (packed
    /// quants); 16-bit words (a scale, two quant bytes) as one alphabet, as
    /// two bytes, as four nibbles, or as FP16 fields.
    fn record_column(&self, c: &Stream) -> Node {
        let policy = self.fields_policy();
        let solve = |x: &Stream| leaf(x, &policy);
        let mut best = self.field(c, &policy);
        match c.width() {
            8 => {
                if let Some(n) = self.merge(c, MergeOp::Fields(vec![4, 4]), solve) {
                    keep_smaller(&mut best, n);
                }
            }
            16 => {
                if let Some(n) = self.merge(c, MergeOp::BytePlanes(2), solve) {
                    keep_smaller(&mut best, n);
                }
                if let Some(n) = self.merge(c, MergeOp::Fields(vec![4, 4, 4, 4]), solve) {
                    keep_smaller(&mut best, n);
                }
                self.float_candidates(c, 5, 10, &mut best);
            }
            _ => {}
        }
        best
    }

    /// 4-bit values packed two per byte: the high and the low nibbles as two
    /// streams (`Merge.fields[4,4]`).
    fn nibbles(&self, s: &Stream) -> Option<Node> {
        if s.width() != 8 {
            return None;
        }
        let policy = self.fields_policy();
        self.merge(s, MergeOp::Fields(vec![4, 4]), |x| self.field(x, &policy))
    }
}

fn keep_smaller(best: &mut Node, cand: Node) {
    super::count_candidate();
    if serialized_size(&cand) < serialized_size(best) {
        *best = cand;
    }
}

impl Synthesizer for CandidateSearch {
    fn synthesize(&self, root: &Stream, hint: Hint) -> Node {
        let lit = self.lit.for_hint(hint);
        if lit != self.lit {
            return CandidateSearch { lit, ..self.clone() }.synthesize(root, hint);
        }
        if let Some(v) = constant(root) {
            super::count_candidate();
            return Node::Const {
                width: root.width(),
                count: root.len() as u64,
                value: v,
            };
        }
        let w = root.width();
        // Structured candidates first, so the literal fallback below knows what
        // it has to beat (and skips slow zstd levels that cannot).
        let mut found: Vec<Node> = Vec::new();
        match hint {
            Hint::Tensor(dtype, row) => {
                if let Some((e, m)) = dtype.float_layout() {
                    let mut b = self.field(root, &self.fields_policy());
                    self.float_candidates(root, e, m, &mut b);
                    // 16-bit floats as two byte planes, each free to use LZ
                    // (what the opaque view of the same bytes tries; it wins on
                    // FP16 checkpoints with repeated rows).
                    // Slow zstd only where the quick level already wins (on a plane
                    // of random low bytes it comes within 8% and never wins).
                    if w == 16 {
                        let policy = self.fields_policy();
                        if let Some(n) = self.merge(root, MergeOp::BytePlanes(2), |c| leaf(c, &policy)) {
                            keep_smaller(&mut b, n);
                        }
                    }
                    found.push(b);
                } else {
                    let mut b = self.field(root, &self.fields_policy());
                    self.int_candidates(root, dtype.is_signed_int(), &mut b);
                    found.push(b);
                }
                // Each row from the row before it, where a sample says it pays.
                if let Some(op) = prods::row_scan(root, row, dtype) {
                    if let Some(child) = prods::scan_residuals(root, op, row) {
                        found.push(Node::Scan {
                            op,
                            stride: row,
                            child: Box::new(self.synthesize(&child, Hint::Tensor(dtype, 0))),
                        });
                    }
                }
            }
            Hint::Opaque => {
                let mut b = self.field(root, &self.fields_policy());
                match w {
                    16 => {
                        self.float_candidates(root, 5, 10, &mut b);
                        self.float_candidates(root, 8, 7, &mut b);
                    }
                    32 => self.float_candidates(root, 8, 23, &mut b),
                    _ => {}
                }
                if w >= 16 && w.is_multiple_of(8) {
                    let policy = self.lit;
                    if let Some(n) = self.merge(root, MergeOp::BytePlanes(w / 8), |c| leaf(c, &policy)) {
                        keep_smaller(&mut b, n);
                    }
                }
                if w == 8 {
                    if let Some(n) = self.columns(root) {
                        keep_smaller(&mut b, n);
                    }
                }
                found.push(b);
            }
            Hint::Records(r) => {
                let mut b = self.field(root, &self.fields_policy());
                if let Some(n) = self.records(root, r) {
                    keep_smaller(&mut b, n);
                }
                found.push(b);
            }
            Hint::Nibbles => {
                let mut b = self.field(root, &self.fields_policy());
                if let Some(n) = self.nibbles(root) {
                    keep_smaller(&mut b, n);
                }
                if let Some(n) = self.columns(root) {
                    keep_smaller(&mut b, n);
                }
                found.push(b);
            }
        }
        if self.effort >= 1 && root.len() <= 1 << 16 {
            if let Some(n) = self.repeat(root, hint) {
                found.push(n);
            }
        }
        // The whole root as one literal, with LZ (zstd) allowed: it wins on data
        // with long repeats that no operator expresses.
        let bound = found.iter().map(serialized_size).min().unwrap_or(usize::MAX);
        // Quick zstd levels do not predict the slow one on data made of few
        // distinct words (an STFT basis: zstd -3 saves 45%, -19 saves 77%), so
        // such roots always get the slow trial; ordinary weights, whose words are
        // nearly all distinct, only when the quick trial comes close.
        let policy = if mostly_repeated_words(root) {
            LitPolicy {
                zstd_retry_within: f64::INFINITY,
                ..self.lit
            }
        } else {
            self.lit
        };
        found.push(best_lit_below(root, &policy, bound));
        for _ in &found {
            super::count_candidate();
        }
        // On ties the structured candidate (earlier) wins.
        let best = found
            .into_iter()
            .min_by_key(serialized_size)
            .expect("the literal is always a candidate");
        prefer_fast_root(root, best, &self.lit)
    }
}
