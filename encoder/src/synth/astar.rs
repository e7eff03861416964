//! Bounded A* over partial programs.
//!
//! A state is a partial program: the productions applied so far (in pre-order),
//! the exact bytes `g` of its finished parts (node headers and closed leaves,
//! both exact), and a stack of open holes (a hole is a role and the exact stream
//! it must produce). Expanding the top hole tries each production the grammar
//! offers there ([`productions`]); an opening production runs its operator's
//! inverse on the hole's target to get its children's exact targets, a closing
//! one builds the leaf (literals are built lazily: only when the state holding
//! that choice is popped, and each distinct leaf once per chunk).
//!
//! Priority is `f = g + h + λ·bits`: `h` sums [`hole_lower_bound`] over the
//! open holes (admissible, see there), `bits` is the prior's cost `−log2 p` of
//! the productions used and `λ` = 1/256 byte per bit. Each production costs at
//! most 16 bits, so the prior term of a program stays well under a byte: it
//! orders states whose byte bounds tie (at first, every choice at the root) and
//! never outweighs a byte of real size. Complete programs are compared by exact
//! serialized size; a state whose `g + h` reaches the best complete size is
//! dropped, and two states with the same open holes keep only the smaller `g`
//! (their completions are the same), which keeps the search linear in the
//! holes' choices instead of their product.
//!
//! The whole root as one literal is the fallback: it is expanded after every
//! structured state, so its slow zstd trial knows the size it must beat (as in
//! the menu search). The budget (expansions) comes from the effort; when it
//! runs out, the best partial program is completed greedily. Effort 0 is
//! greedy: the root's two most likely productions by the prior (and a row
//! scan, where the grammar offers one), every other hole its most likely one.
//!
//! At efforts 0 and 1 a large tensor chunk (128 Ki words or more) is searched on a
//! sample of it, one word in eight (and at least 64 Ki words) in eight evenly
//! spaced blocks of whole rows (`sample`), and the winning program's
//! productions are replayed on the whole chunk (`Run::replay`): the program's
//! shape (operators, field widths, context splits) comes from the sample, its
//! literals' encodings and regime cuts from the whole chunk's words. Every
//! candidate the search builds encodes its whole target, so this divides the
//! search's cost by about the sample's ratio.
//!
//! Also at efforts 0 and 1, a chunk like an earlier one (the same tensor role in
//! another layer: see `compress.rs`) is first built from that chunk's
//! program's productions, its [`Template`] (`Synthesizer::synthesize_reusing`),
//! and searched only where they do not apply: a transformer's layers hold the
//! same kinds of weights, and their programs' shapes rarely differ.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use brevis_format::archive::chunk_checksum;
use brevis_format::program::{serialized_size, Node};
use brevis_format::stream::Stream;
use brevis_format::wire::{LengthRule, LitEncoding};

use super::lit::{pick_lit_below, prefer_fast_root, LitPolicy};
use super::prior::{Context, Prior, PriorCounts};
use super::productions::{
    ctx_leaf, hole_lower_bound, lit_mode, mostly_repeated_words, open, productions, Grammar, LitMode, Prod, Role, Shape,
};
use super::{CandidateSearch, Hint, Synthesizer, Template};

/// Bytes per bit of prior cost in the priority.
const LAMBDA: f64 = 1.0 / 256.0;

/// Productions tried at the root at effort 0 (each completed greedily).
const ROOT_TRIES: usize = 2;

/// A* over the shared grammar, ordered by a learned prior.
#[derive(Clone, Debug)]
pub struct AStarSearch {
    /// Literal policy (zstd levels), as [`CandidateSearch`]'s at the same effort.
    pub lit: LitPolicy,
    /// 0: greedy by the prior; 1: default; 2+: more productions and budget.
    pub effort: u32,
    /// Offer context-coded literals.
    pub ctx: bool,
    /// The production prior (`None`: uniform, ties go to the grammar's order).
    pub prior: Option<Arc<Prior>>,
    /// Most expansions per chunk before the best partial program is completed greedily.
    pub budget: usize,
    /// At efforts 0 and 1, search a large tensor chunk on a sample of it and build the
    /// winning program's productions on the whole chunk (see the module docs).
    pub sample: bool,
    /// At efforts 0 and 1, build a template offered by an earlier chunk like this one
    /// before searching ([`Synthesizer::synthesize_reusing`]; see the module docs).
    pub reuse: bool,
}

impl AStarSearch {
    /// A search at `effort` with the shipped prior.
    pub fn with_effort(effort: u32) -> Self {
        let menu = CandidateSearch::with_effort(effort);
        AStarSearch {
            lit: menu.lit,
            effort,
            ctx: true,
            prior: Some(Arc::new(Prior::default_prior())),
            budget: match effort {
                0 => 0,
                1 => 2048,
                _ => 16384,
            },
            sample: true,
            reuse: true,
        }
    }

    /// The same search favouring decode speed (`--fast-decode`): no
    /// context-coded literals, literals picked by [`LitPolicy::fast_decode`].
    pub fn fast_decode(self) -> Self {
        AStarSearch {
            ctx: false,
            lit: self.lit.fast_decode(),
            ..self
        }
    }

    /// Whether [`Synthesizer::synthesize_reusing`] builds and offers templates
    /// for chunks with this hint.
    fn offers_templates(&self, hint: Hint) -> bool {
        self.reuse && self.effort <= 1 && hint != Hint::Opaque
    }

    fn grammar(&self) -> Grammar {
        Grammar {
            effort: self.effort,
            // Effort 0 follows one path, so it can afford the ctx split the
            // estimate ranks first (the menu only tries ctx from effort 1).
            ctx_tries: match (self.ctx, self.effort) {
                (false, _) => 0,
                (true, 0 | 1) => 1,
                (true, _) => 2,
            },
        }
    }

    /// The literal policy for a mode (the menu's three policies).
    fn policy(&self, mode: LitMode) -> LitPolicy {
        match mode {
            LitMode::Full => self.lit,
            LitMode::Fields => LitPolicy {
                zstd_retry_within: self.lit.zstd_retry_within.min(1.0),
                ..self.lit
            },
            LitMode::Entropy if self.effort >= 2 => self.lit,
            LitMode::Entropy => LitPolicy {
                zstd_level: 0,
                ..self.lit
            },
        }
    }
}

/// A program found by [`AStarSearch::solve`].
#[derive(Clone, Debug)]
pub struct Solved {
    /// The program.
    pub node: Node,
    /// Its exact serialized size (equal to `serialized_size(&node)`).
    pub size: usize,
    /// The size of the program the productions in `trace` build (`node` may
    /// trade a few bytes of it for a faster-decoding root literal).
    pub searched_size: usize,
    /// Built from a template (no search).
    pub from_template: bool,
    /// Productions applied (expansions) during the search.
    pub expansions: usize,
    /// The winning program's choices, `(context, production)`, when traced.
    pub trace: Vec<(Context, Prod)>,
    /// When traced: the encoding of the literal each production of `trace`
    /// closed (as built on the whole chunk), `None` for the other productions.
    pub lits: Vec<Option<LitEncoding>>,
}

/// An open hole.
#[derive(Clone)]
struct Hole {
    /// Unique per hole made in this search (identifies remaining work).
    id: u64,
    s: Arc<Stream>,
    role: Role,
    depth: u32,
    h: usize,
    ctx: Option<Arc<Context>>,
}

/// One applied production, in pre-order.
#[derive(Clone)]
enum Step {
    Leaf(Arc<Leaf>),
    Open(Shape, usize),
}

/// A closed hole: a node, or a literal known by its encoding and exact size,
/// whose payload is built only if it ends up in the program (most leaves the
/// search closes are compared and dropped).
enum Leaf {
    Node(Node),
    Lit {
        s: Arc<Stream>,
        encoding: LitEncoding,
        size: usize,
        lengths: LengthRule,
    },
}

impl Leaf {
    /// The leaf's exact serialized size.
    fn size(&self) -> usize {
        match self {
            Leaf::Node(n) => serialized_size(n),
            Leaf::Lit { size, .. } => *size,
        }
    }

    /// The encoding of a literal leaf.
    fn encoding(&self) -> Option<LitEncoding> {
        match self {
            Leaf::Node(Node::Lit { encoding, .. }) | Leaf::Lit { encoding, .. } => Some(*encoding),
            Leaf::Node(_) => None,
        }
    }

    /// The leaf's node, its payload built now if it was not.
    fn node(&self) -> Node {
        match self {
            Leaf::Node(n) => n.clone(),
            Leaf::Lit {
                s,
                encoding,
                size,
                lengths,
            } => super::lit::PickedLit {
                encoding: *encoding,
                size: *size,
                node: None,
                lengths: *lengths,
            }
            .build(s),
        }
    }
}

#[derive(Clone)]
struct State {
    g: usize,
    bits: f64,
    open: Vec<Hole>,
    steps: Vec<Step>,
    pending: Option<Prod>,
    deferred: bool,
    trace: Vec<(Arc<Context>, Prod)>,
}

impl State {
    fn lb(&self) -> usize {
        self.g + self.open.iter().map(|h| h.h).sum::<usize>()
    }
    fn f(&self) -> f64 {
        self.lb() as f64 + LAMBDA * self.bits
    }
    /// Identity of the remaining work: the open holes and the pending choice.
    fn key(&self) -> (Vec<u64>, Option<Prod>) {
        (self.open.iter().map(|h| h.id).collect(), self.pending)
    }
}

/// Heap entry: smallest `(deferred, f, seq)` first.
struct Entry {
    deferred: bool,
    f: f64,
    seq: u64,
    idx: usize,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap pops the largest.
        (o.deferred, o.f)
            .partial_cmp(&(self.deferred, self.f))
            .unwrap_or(Ordering::Equal)
            .then(o.seq.cmp(&self.seq))
    }
}

/// Key of a built leaf: the target's hash, width, length, and what closed it.
type LeafKey = (u64, u8, usize, Prod, LitMode, bool, Option<LitEncoding>);

struct Run<'a> {
    search: &'a AStarSearch,
    grammar: Grammar,
    trace: bool,
    memo: HashMap<LeafKey, (Arc<Leaf>, usize)>,
    /// Choices per hole id: several states reach the same hole, and the
    /// grammar's ctx estimates are not free (a pass over the stream per split).
    choices: HashMap<u64, Vec<(Prod, f64)>>,
    expansions: usize,
    holes: u64,
}

impl Run<'_> {
    fn hole(&mut self, s: Stream, role: Role, depth: u32, parent: Option<Prod>) -> Hole {
        let constant = super::lit::constant(&s).is_some();
        let ctx = (self.trace || self.search.prior.is_some()).then(|| Arc::new(Context::new(role, &s, parent, depth)));
        self.holes += 1;
        Hole {
            id: self.holes,
            h: hole_lower_bound(s.len() as u64, constant),
            s: Arc::new(s),
            role,
            depth,
            ctx,
        }
    }

    /// The productions at `hole` with their prior costs in bits.
    fn choices(&mut self, hole: &Hole) -> Vec<(Prod, f64)> {
        if let Some(c) = self.choices.get(&hole.id) {
            return c.clone();
        }
        let prods = productions(&hole.s, hole.role, &self.grammar, hole.depth);
        let costs = match (&self.search.prior, &hole.ctx) {
            (Some(p), Some(c)) if prods.len() > 1 => p.costs(c, &prods),
            _ => vec![0.0; prods.len()],
        };
        let c: Vec<(Prod, f64)> = prods.into_iter().zip(costs).collect();
        self.choices.insert(hole.id, c.clone());
        c
    }

    /// The leaf `p` closes `hole` with (`None` when it does not apply); given
    /// `hint`, the encoding a template's literal took there, a literal runs the
    /// costly trials only for that encoding ([`LitPolicy::for_template_leaf`]).
    fn close(&mut self, p: Prod, hole: &Hole, bound: usize, hint: Option<LitEncoding>) -> Option<Arc<Leaf>> {
        let s = &*hole.s;
        let root = matches!(hole.role, Role::Root(_)) && hole.depth == 0;
        match p {
            Prod::Const => Some(Arc::new(Leaf::Node(Node::Const {
                width: s.width(),
                count: s.len() as u64,
                value: super::lit::constant(s)?,
            }))),
            Prod::Lit | Prod::Ctx(_) => {
                let mode = lit_mode(hole.role);
                let width = s.width();
                // The words as the raw wire encoding lays them out (any width).
                let bytes = brevis_format::with_words!(s.words(), w => brevis_format::wire::raw::encode(w, width));
                let key = (chunk_checksum(&bytes), width, s.len(), p, mode, root, hint);
                if let Some((n, b)) = self.memo.get(&key) {
                    // A leaf built with at least this bound tried at least as much.
                    if *b >= bound {
                        return Some(n.clone());
                    }
                }
                let leaf = match p {
                    Prod::Ctx(k) => Leaf::Node(ctx_leaf(s, k)?),
                    _ => {
                        let mut policy = self.search.policy(mode);
                        if let Some(e) = hint {
                            policy = policy.for_template_leaf(e);
                        }
                        // As the menu: roots of few distinct words always get the slow zstd trial.
                        if root && mostly_repeated_words(s) {
                            policy.zstd_retry_within = f64::INFINITY;
                        }
                        let picked = pick_lit_below(s, &policy, bound);
                        match picked.node {
                            Some(n) => Leaf::Node(n),
                            None => Leaf::Lit {
                                s: hole.s.clone(),
                                encoding: picked.encoding,
                                size: picked.size,
                                lengths: picked.lengths,
                            },
                        }
                    }
                };
                let node = Arc::new(leaf);
                self.memo.insert(key, (node.clone(), bound));
                Some(node)
            }
            _ => None,
        }
    }

    /// Applies `p` to the top hole of `st`; false if it does not apply.
    fn apply(&mut self, st: &mut State, p: Prod, bound: usize) -> bool {
        self.apply_hinted(st, p, bound, None)
    }

    /// [`Self::apply`], a literal closing the hole hinted as in [`Self::close`].
    fn apply_hinted(&mut self, st: &mut State, p: Prod, bound: usize, hint: Option<LitEncoding>) -> bool {
        let hole = st.open.pop().expect("a hole to apply to");
        if self.trace {
            if let Some(c) = &hole.ctx {
                st.trace.push((c.clone(), p));
            }
        }
        if p.closes() {
            let Some(leaf) = self.close(p, &hole, bound, hint) else {
                return false;
            };
            st.g += leaf.size();
            st.steps.push(Step::Leaf(leaf));
            return true;
        }
        let Some(opened) = open(p, &hole.s, hole.role) else {
            return false;
        };
        let k = opened.children.len();
        st.g += opened.shape.header_bytes(k);
        st.steps.push(Step::Open(opened.shape, k));
        let holes: Vec<Hole> = opened
            .children
            .into_iter()
            .map(|(c, role)| self.hole(c, role, hole.depth + 1, Some(p)))
            .collect();
        // Reversed onto the stack: the first child is expanded first (pre-order).
        st.open.extend(holes.into_iter().rev());
        true
    }

    /// Completes `st` greedily: each hole takes its cheapest production by the
    /// prior (the grammar's first on ties), falling back to a literal.
    fn greedy(&mut self, mut st: State) -> Option<State> {
        if let Some(p) = st.pending.take() {
            self.expansions += 1;
            super::count_candidate();
            let mut tried = st.clone();
            if self.apply(&mut tried, p, usize::MAX) {
                st = tried;
            } else {
                let mut lit = st.clone();
                if !self.apply(&mut lit, Prod::Lit, usize::MAX) {
                    return None;
                }
                st = lit;
            }
        }
        while let Some(top) = st.open.last().cloned() {
            let mut choices = self.choices(&top);
            choices.sort_by(|a, b| a.1.total_cmp(&b.1));
            let mut done = false;
            for (p, bits) in choices {
                let mut t = st.clone();
                self.expansions += 1;
                super::count_candidate();
                if self.apply(&mut t, p, usize::MAX) {
                    t.bits += bits;
                    st = t;
                    done = true;
                    break;
                }
            }
            if !done {
                return None;
            }
        }
        Some(st)
    }
}

impl<'a> Run<'a> {
    /// A fresh search state for `search` (recording choices if `trace`).
    fn new(search: &'a AStarSearch, trace: bool) -> Self {
        Run {
            search,
            grammar: search.grammar(),
            trace,
            memo: HashMap::new(),
            choices: HashMap::new(),
            expansions: 0,
            holes: 0,
        }
    }

    /// The state with nothing decided: one hole, the whole `root`.
    fn start(&mut self, root: &Stream, hint: Hint) -> State {
        State {
            g: 0,
            bits: 0.0,
            open: vec![self.hole(root.clone(), Role::Root(hint), 0, None)],
            steps: Vec::new(),
            pending: None,
            deferred: false,
            trace: Vec::new(),
        }
    }

    /// Applies `prods` (a program's productions in pre-order) to `st` until it
    /// is complete; `None` if one does not apply or their number is not the
    /// program's.
    fn replay(&mut self, st: State, prods: &[Prod]) -> Option<State> {
        self.replay_hinted(st, prods, &[])
    }

    /// [`Self::replay`], the literal closed by production `i` hinted with the
    /// encoding `lits[i]` names, where it names one (see [`Self::close`]).
    fn replay_hinted(&mut self, mut st: State, prods: &[Prod], lits: &[Option<LitEncoding>]) -> Option<State> {
        let mut prods = prods.iter().enumerate();
        while !st.open.is_empty() {
            let (i, &p) = prods.next()?;
            self.expansions += 1;
            super::count_candidate();
            let hint = lits.get(i).copied().flatten();
            if !self.apply_hinted(&mut st, p, usize::MAX, hint) {
                return None;
            }
        }
        prods.next().is_none().then_some(st)
    }
}

/// How many more bytes per word (a fraction) a template may take on a chunk
/// than where it was found before the chunk is searched instead: layers' weights
/// differ a little in how well they compress; a shape that does not fit (a
/// delta found on an embedding's first rows, special tokens, built on its other
/// rows) costs several percent.
const TEMPLATE_SLACK: f64 = 0.01;

/// Chunks of fewer words are searched whole.
const SAMPLE_MIN_WORDS: usize = 128 << 10;
/// A sample is this many blocks, evenly spaced...
const SAMPLE_BLOCKS: usize = 8;
/// ... holding one word in this many...
const SAMPLE_EVERY: usize = 8;
/// ... or this many words, if more.
const SAMPLE_FLOOR_WORDS: usize = 64 << 10;

/// The words of `root` the search runs on when it is large: [`SAMPLE_BLOCKS`]
/// evenly spaced blocks of whole rows (a tensor's), one word in
/// [`SAMPLE_EVERY`] in all, or [`SAMPLE_FLOOR_WORDS`] if more.
///
/// Tensors only: on opaque data (whisper's CTranslate2 file, the pickled
/// `.pth` files' raw storage) a build that sampled those chunks too missed
/// repeats that zstd frames found in the whole chunk, and made whisper's
/// archive 0.25% larger. On tensors, sampling from 512 Ki words changed the
/// corpus archives by -0.19% (BF16: the whole chunk's search ran out of budget
/// where the sample's did not) to +0.03% (isnet's FP16 ONNX), -0.033% on the
/// ablation files, whose compression took 1.6x less CPU; from 128 Ki words
/// with a floor of 64 Ki, the attention weights of MiniLM (147 Ki words) are
/// sampled too (`bench/ABLATION.md`: `astar e1 (default)` against `astar e1
/// no-sample`; per file in `bench/RESULTS.md`).
fn sample(root: &Stream, hint: Hint) -> Option<Stream> {
    use brevis_format::stream::Words;
    let Hint::Tensor(_, row) = hint else {
        return None;
    };
    let n = root.len();
    if n < SAMPLE_MIN_WORDS {
        return None;
    }
    let mut block = (n / (SAMPLE_BLOCKS * SAMPLE_EVERY)).max(SAMPLE_FLOOR_WORDS / SAMPLE_BLOCKS);
    // Blocks start and end on rows, unless a row is longer than a block.
    let row = usize::try_from(row).ok().filter(|&r| r > 0 && r <= block).unwrap_or(1);
    block = block / row * row;
    let starts: Vec<usize> = (0..SAMPLE_BLOCKS)
        .map(|i| i * (n / SAMPLE_BLOCKS) / row * row)
        .collect();
    fn pick<T: Copy>(w: &[T], starts: &[usize], block: usize) -> Vec<T> {
        starts
            .iter()
            .flat_map(|&at| w[at..at + block].iter().copied())
            .collect()
    }
    let words = match root.words() {
        Words::U8(w) => Words::U8(pick(w, &starts, block)),
        Words::U16(w) => Words::U16(pick(w, &starts, block)),
        Words::U32(w) => Words::U32(pick(w, &starts, block)),
        Words::U64(w) => Words::U64(pick(w, &starts, block)),
    };
    Stream::new(root.width(), words).ok()
}

/// Rebuilds a program from its pre-order steps.
fn build(steps: &mut std::slice::Iter<'_, Step>) -> Node {
    match steps.next().expect("a complete program") {
        Step::Leaf(leaf) => leaf.node(),
        Step::Open(shape, k) => {
            let children = (0..*k).map(|_| build(steps)).collect();
            shape.build(children)
        }
    }
}

impl AStarSearch {
    /// Searches a program for `root`; with `trace`, also returns the winning
    /// program's `(context, production)` choices (for `brevis train-prior`).
    pub fn solve(&self, root: &Stream, hint: Hint, trace: bool) -> Solved {
        self.solve_from(root, hint, trace, false, None)
    }

    /// [`Self::solve`], building `template`'s productions on `root` first: the
    /// result where they apply and take at most [`TEMPLATE_SLACK`] more bytes
    /// per word than they did where the template was found
    /// ([`Solved::from_template`]). With `record`, the trace holds the
    /// program's productions even when `trace` is off.
    fn solve_from(&self, root: &Stream, hint: Hint, trace: bool, record: bool, template: Option<&Template>) -> Solved {
        let lit = self.lit.for_hint(hint);
        if lit != self.lit {
            return AStarSearch { lit, ..self.clone() }.solve_from(root, hint, trace, record, template);
        }
        let mut run = Run::new(self, trace || record);
        let start = run.start(root, hint);
        let fresh = start.clone();
        let reused = template.and_then(|t| {
            let built = run.replay_hinted(start.clone(), &t.prods, &t.lits)?;
            let allowed = t.bytes_per_word * root.len() as f64 * (1.0 + TEMPLATE_SLACK);
            (built.g as f64 <= allowed).then_some(built)
        });
        let from_template = reused.is_some();
        // A large tensor chunk at effort 0 or 1: the search runs on a sample of it,
        // and its winning program's productions are replayed on the whole chunk
        // (every candidate encodes its whole target exactly, so the search's
        // cost grows with the chunk). Where the replay does not apply, the
        // whole chunk is searched.
        let guided = if reused.is_some() {
            reused
        } else if self.sample && self.effort <= 1 && !trace {
            sample(root, hint).and_then(|s| {
                let guide = self.solve(&s, hint, true);
                // The sample's expansions count as this chunk's (`--report`).
                run.expansions += guide.expansions;
                let prods: Vec<Prod> = guide.trace.into_iter().map(|(_, p)| p).collect();
                run.replay(start.clone(), &prods)
            })
        } else {
            None
        };
        let best = if guided.is_some() {
            guided
        } else if self.effort == 0 || self.budget == 0 {
            // The root's two most likely productions, each completed greedily: one
            // wrong guess at the root costs the most (int8 weights where the prior
            // favours a delta), and the second path costs about as much as the first.
            let root = start.open[0].clone();
            let mut choices = run.choices(&root);
            choices.sort_by(|a, b| a.1.total_cmp(&b.1));
            let mut best: Option<State> = None;
            // A row scan the grammar offers is tried too: its gate (a sample of
            // rows) is the evidence, and the prior has seen too few to rank it.
            let row_scan = choices
                .iter()
                .skip(ROOT_TRIES)
                .filter(|(p, _)| matches!(p, Prod::RowScan(_)));
            for &(p, bits) in choices.iter().take(ROOT_TRIES).chain(row_scan) {
                let mut st = start.clone();
                st.pending = Some(p);
                st.bits = bits;
                if let Some(done) = run.greedy(st) {
                    if best.as_ref().is_none_or(|b| done.g < b.g) {
                        best = Some(done);
                    }
                }
            }
            best
        } else {
            self.astar(&mut run, start)
        };
        let best = best.unwrap_or_else(|| {
            // Unreachable in practice (a literal always applies); stay total anyway.
            let mut st = fresh;
            run.apply(&mut st, Prod::Lit, usize::MAX);
            st
        });
        let node = build(&mut best.steps.iter());
        debug_assert_eq!(serialized_size(&node), best.g);
        let node = prefer_fast_root(root, node, &self.lit);
        // Every applied production pushed one step and (when traced) one
        // choice, in the same order.
        let lits = best
            .trace
            .iter()
            .zip(&best.steps)
            .map(|((_, p), step)| match (p, step) {
                (Prod::Lit, Step::Leaf(leaf)) => leaf.encoding(),
                _ => None,
            })
            .collect();
        Solved {
            size: serialized_size(&node),
            node,
            searched_size: best.g,
            from_template,
            expansions: run.expansions,
            lits,
            trace: best
                .trace
                .into_iter()
                .map(|(c, p)| (Arc::unwrap_or_clone(c), p))
                .collect(),
        }
    }

    fn astar(&self, run: &mut Run<'_>, start: State) -> Option<State> {
        let mut states: Vec<Option<State>> = Vec::new();
        let mut heap = BinaryHeap::new();
        let mut seq = 0u64;
        let mut best_g: HashMap<(Vec<u64>, Option<Prod>), usize> = HashMap::new();
        let mut push = |st: State, states: &mut Vec<Option<State>>, heap: &mut BinaryHeap<Entry>| {
            // Same remaining work, no smaller g: dominated.
            let key = st.key();
            match best_g.get(&key) {
                Some(&g) if g <= st.g => return,
                _ => {
                    best_g.insert(key, st.g);
                }
            }
            heap.push(Entry {
                deferred: st.deferred,
                f: st.f(),
                seq,
                idx: states.len(),
            });
            seq += 1;
            states.push(Some(st));
        };
        push(start, &mut states, &mut heap);
        let mut incumbent: Option<State> = None;
        while let Some(e) = heap.pop() {
            let Some(mut st) = states[e.idx].take() else { continue };
            let limit = incumbent.as_ref().map_or(usize::MAX, |b| b.g);
            if st.lb() >= limit {
                continue;
            }
            let Some(p) = st.pending.take() else {
                // Choose: one successor per production at the top hole.
                let top = st.open.last().cloned().expect("open states have a hole");
                for (p, bits) in run.choices(&top) {
                    let mut next = st.clone();
                    next.pending = Some(p);
                    next.bits += bits;
                    next.deferred = p == Prod::Lit && top.depth == 0;
                    push(next, &mut states, &mut heap);
                }
                continue;
            };
            if run.expansions >= self.budget {
                // Out of budget: finish the most promising partial program greedily.
                st.pending = Some(p);
                if incumbent.is_none() {
                    incumbent = run.greedy(st);
                }
                break;
            }
            run.expansions += 1;
            super::count_candidate();
            // Only the whole-root literal gets a bound (the best so far), as in the menu.
            let bound = if st.deferred { limit } else { usize::MAX };
            if !run.apply(&mut st, p, bound) {
                continue;
            }
            if st.open.is_empty() {
                if st.g < limit {
                    incumbent = Some(st);
                }
                continue;
            }
            push(st, &mut states, &mut heap);
        }
        incumbent
    }
}

impl Synthesizer for AStarSearch {
    fn synthesize(&self, root: &Stream, hint: Hint) -> Node {
        self.solve(root, hint, false).node
    }

    /// At effort 0 or 1 with `reuse`, on tensors (not opaque bytes, whose best
    /// program depends on repeats only their own bytes hold): `template`'s
    /// productions built on `root` where they apply and cost about what they
    /// did where it was found, else a search, whose program is offered on.
    fn synthesize_reusing(&self, root: &Stream, hint: Hint, template: Option<&Template>) -> (Node, Option<Template>) {
        if !self.offers_templates(hint) {
            return (self.synthesize(root, hint), None);
        }
        let solved = self.solve_from(root, hint, false, true, template);
        let offer = (!solved.from_template).then(|| Template {
            // The search's size (the trace's program), not `prefer_fast_root`'s.
            bytes_per_word: solved.searched_size as f64 / root.len().max(1) as f64,
            prods: solved.trace.into_iter().map(|(_, p)| p).collect(),
            lits: solved.lits,
        });
        (solved.node, offer)
    }

    fn waits_for_template(&self, hint: Hint, words: usize) -> bool {
        let sampled = self.sample && matches!(hint, Hint::Tensor(..)) && words >= SAMPLE_MIN_WORDS;
        self.offers_templates(hint) && !sampled
    }
}

/// Trains a prior: runs an exhaustive A* (no prior, effort 1, a large budget)
/// on one chunk in `every` (chosen by a hash of its bytes, so the sample does
/// not depend on thread timing) and counts the winning program's choices, each
/// weighted by the chunk's size (one per started 64 KiB: the prior should
/// follow the bytes at stake, not the many tiny tensors). The other chunks get
/// a raw literal at once, which is all the pipeline needs.
pub struct PriorTrainer {
    search: AStarSearch,
    every: u64,
    counts: std::sync::Mutex<(PriorCounts, u64)>,
}

impl PriorTrainer {
    /// A trainer sampling one chunk in `every`.
    pub fn new(every: u64) -> Self {
        PriorTrainer {
            search: AStarSearch {
                prior: None,
                budget: 1 << 20,
                ..AStarSearch::with_effort(1)
            },
            every: every.max(1),
            counts: std::sync::Mutex::new((PriorCounts::default(), 0)),
        }
    }

    /// The counts so far and the number of chunks searched.
    pub fn counts(&self) -> (PriorCounts, u64) {
        self.counts.lock().expect("trainer lock").clone()
    }
}

impl Synthesizer for PriorTrainer {
    fn synthesize(&self, root: &Stream, hint: Hint) -> Node {
        let mut bytes = Vec::with_capacity(root.mem_bytes());
        let sampled = root.write_le_bytes(&mut bytes).is_ok() && chunk_checksum(&bytes).is_multiple_of(self.every);
        if !sampled {
            return super::lit::lit(root, brevis_format::wire::LitEncoding::Raw, 0)
                .expect("raw applies to every stream");
        }
        let solved = self.search.solve(root, hint, true);
        let weight = bytes.len().div_ceil(64 << 10).max(1) as u64;
        let mut c = PriorCounts::default();
        for (ctx, p) in &solved.trace {
            c.add(ctx, *p, weight);
        }
        let mut lock = self.counts.lock().expect("trainer lock");
        lock.0.merge(c);
        lock.1 += 1;
        solved.node
    }
}

#[cfg(test)]
mod tests {
    use brevis_decoder::decode_chunk;
    use brevis_format::archive::ChunkRecord;
    use brevis_format::program::{serialize, Limits};
    use brevis_format::DType;

    use super::*;
    use crate::synth::productions::open;

    #[test]
    fn byte_fields_keep_the_tensor_margin_for_the_slow_zstd_level() {
        use crate::synth::lit::{TENSOR_ZSTD_RETRY, THOROUGH_TENSOR_ZSTD_RETRY};
        let tensor = Hint::Tensor(DType::F32, 384);
        // The policies a chunk's search uses: `solve_from` applies `for_hint`.
        let retry = |search: AStarSearch, hint: Hint, mode: LitMode| {
            let lit = search.lit.for_hint(hint);
            AStarSearch { lit, ..search }.policy(mode).zstd_retry_within
        };
        for mode in [LitMode::Full, LitMode::Fields] {
            assert_eq!(retry(AStarSearch::with_effort(1), tensor, mode), TENSOR_ZSTD_RETRY);
            assert_eq!(retry(AStarSearch::with_effort(0), tensor, mode), TENSOR_ZSTD_RETRY);
            assert_eq!(
                retry(AStarSearch::with_effort(2), tensor, mode),
                THOROUGH_TENSOR_ZSTD_RETRY
            );
            let fast = AStarSearch::with_effort(1).fast_decode();
            assert_eq!(retry(fast, tensor, mode), TENSOR_ZSTD_RETRY);
        }
        // Opaque chunks: the whole stream may retry within 8%, its byte fields
        // only where the quick level wins.
        assert_eq!(retry(AStarSearch::with_effort(1), Hint::Opaque, LitMode::Full), 1.08);
        assert_eq!(retry(AStarSearch::with_effort(1), Hint::Opaque, LitMode::Fields), 1.0);
    }

    /// Deterministic pseudo-random words.
    fn rng(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed;
        move || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 11
        }
    }

    /// Small targets of every kind the search meets.
    fn cases(n: usize) -> Vec<(Stream, Hint)> {
        let mut r = rng(7);
        let mut floats = |bits: u8, exp_bits: u8| -> Vec<u64> {
            // Floats near zero: a few exponents, random mantissas and signs.
            let mant = bits - 1 - exp_bits;
            let bias = (1u64 << (exp_bits - 1)) - 1;
            (0..n)
                .map(|_| {
                    let e = bias - 1 - r() % 3;
                    let m = r() & ((1 << mant) - 1);
                    ((r() & 1) << (bits - 1)) | (e << mant) | m
                })
                .collect()
        };
        let f32s = floats(32, 8);
        let bf16 = floats(16, 8);
        let f16 = floats(16, 5);
        let f8 = floats(8, 4);
        let mut r = rng(11);
        let bytes: Vec<u64> = (0..n).map(|i| if i % 4 == 0 { 7 } else { r() % 256 }).collect();
        let nibbles: Vec<u64> = (0..n).map(|_| r() % 3 * 16 + r() % 5).collect();
        let ramp: Vec<u64> = (0..n as u64).map(|i| 1000 + 3 * i).collect();
        let words16: Vec<u64> = (0..n).map(|i| if i % 2 == 0 { 0x3c00 } else { r() % 256 }).collect();
        let rep: Vec<u64> = (0..n).map(|i| [5u64, 9, 200, 3][i % 4]).collect();
        let s = |w: u8, v: &[u64]| Stream::from_u64s(w, v).unwrap();
        vec![
            (s(32, &f32s), Hint::Tensor(DType::F32, 0)),
            (s(16, &bf16), Hint::Tensor(DType::BF16, 0)),
            (s(16, &f16), Hint::Tensor(DType::F16, 0)),
            (s(8, &f8), Hint::Tensor(DType::F8E4M3, 0)),
            (s(32, &ramp), Hint::Tensor(DType::I32, 0)),
            (s(8, &bytes), Hint::Opaque),
            (s(16, &bf16), Hint::Opaque),
            (s(8, &nibbles), Hint::Nibbles),
            (s(16, &words16), Hint::Records(4)),
            (s(8, &rep), Hint::Tensor(DType::U8, 0)),
            (s(16, &vec![0x3c00; n]), Hint::Tensor(DType::F16, 0)),
        ]
    }

    /// The best completion of a hole over the whole grammar, by brute force,
    /// checking at every hole that the A* bound does not exceed it.
    fn exhaustive(run: &mut Run<'_>, s: &Stream, role: Role, depth: u32) -> usize {
        let mut best = usize::MAX;
        for p in productions(s, role, &run.grammar, depth) {
            let size = if p.closes() {
                let hole = run.hole(s.clone(), role, depth, None);
                run.close(p, &hole, usize::MAX, None).map(|l| l.size())
            } else {
                open(p, s, role).map(|o| {
                    let k = o.children.len();
                    o.shape.header_bytes(k)
                        + o.children
                            .iter()
                            .map(|(c, r)| exhaustive(run, c, *r, depth + 1))
                            .sum::<usize>()
                })
            };
            if let Some(size) = size {
                best = best.min(size);
            }
        }
        let h = hole_lower_bound(s.len() as u64, super::super::lit::constant(s).is_some());
        assert!(h <= best, "h = {h} > best completion {best} for {role:?}");
        best
    }

    fn decodes_to(node: &Node, s: &Stream) {
        let mut bytes = Vec::new();
        s.write_le_bytes(&mut bytes).unwrap();
        let body = ChunkRecord::body(bytes.len() as u64, chunk_checksum(&bytes), s.width(), &serialize(node));
        assert_eq!(decode_chunk(&body, &Limits::default()).unwrap(), bytes, "{node}");
    }

    #[test]
    fn lower_bound_is_admissible_and_astar_finds_the_exhaustive_best() {
        for n in [1usize, 5, 24, 48] {
            for (s, hint) in cases(n) {
                let search = AStarSearch {
                    prior: None,
                    ..AStarSearch::with_effort(1)
                };
                let mut run = Run::new(&search, false);
                let best = exhaustive(&mut run, &s, Role::Root(hint), 0);
                let solved = search.solve(&s, hint, false);
                assert_eq!(solved.size, best, "{hint:?} n={n}: {}", solved.node);
            }
        }
    }

    #[test]
    fn every_program_decodes_and_sizes_are_exact() {
        let prior = Arc::new(Prior::default_prior());
        for n in [3usize, 64, 700] {
            for (s, hint) in cases(n) {
                for effort in 0..=2 {
                    for p in [None, Some(prior.clone())] {
                        for ctx in [true, false] {
                            let search = AStarSearch {
                                prior: p.clone(),
                                ctx,
                                ..AStarSearch::with_effort(effort)
                            };
                            let solved = search.solve(&s, hint, true);
                            assert_eq!(solved.size, serialized_size(&solved.node));
                            assert_eq!(solved.size, serialize(&solved.node).len());
                            decodes_to(&solved.node, &s);
                            if effort == 0 {
                                assert!(!solved.trace.is_empty());
                            }
                        }
                    }
                }
            }
        }
    }

    /// FP8 words whose first quarter are mostly small (unused embedding rows)
    /// and the rest mostly larger: two regimes over the same four exponents.
    fn two_regime_fp8(n: usize) -> Stream {
        let mut r = rng(5);
        let v: Vec<u64> = (0..n)
            .map(|i| {
                // High bits of the generator: its low bits repeat within a few
                // thousand words, and zstd would find them.
                let x = r() >> 40;
                let skew = (x % 4).min(x >> 2 & 3);
                let e = if i < n / 4 { 7 + skew } else { 10 - skew };
                ((x >> 4 & 1) << 7) | (e << 3) | (x >> 5 & 7)
            })
            .collect();
        Stream::from_u64s(8, &v).unwrap()
    }

    #[test]
    fn a_tensor_that_changes_regime_is_a_concat_of_blocks() {
        let s = two_regime_fp8(1 << 17);
        let hint = Hint::Tensor(DType::F8E4M3, 0);
        let whole = serialized_size(&crate::synth::productions::ctx_lit(&s, 5).unwrap());
        // The leaf: cut where the regime changes, each block its own Lit.ctx.
        let leaf = ctx_leaf(&s, 5).unwrap();
        let Node::Concat(blocks) = &leaf else {
            panic!("a Concat of blocks: {leaf}")
        };
        assert!(blocks.iter().all(|b| matches!(
            b,
            Node::Lit {
                encoding: brevis_format::wire::LitEncoding::Ctx,
                ..
            }
        )));
        let Node::Lit { count, .. } = &blocks[0] else {
            unreachable!()
        };
        assert_eq!(*count, 1 << 15, "{leaf}");
        assert!(
            serialized_size(&leaf) < whole,
            "{leaf}: not below one Lit.ctx of {whole} B"
        );
        decodes_to(&leaf, &s);
        // Both searches cut it too (the split of the word the estimate picks
        // may differ), and beat one Lit.ctx of the whole word.
        let menu = CandidateSearch::with_effort(1).synthesize(&s, hint);
        let solved = AStarSearch::with_effort(1).solve(&s, hint, false);
        for node in [&menu, &solved.node] {
            assert!(serialized_size(node) < whole, "{node}");
            assert!(node.to_string().contains("Concat("), "{node}");
            decodes_to(node, &s);
        }
        assert_eq!(solved.size, serialized_size(&solved.node));
        assert_eq!(solved.size, serialize(&solved.node).len());
    }

    /// FP16 bits of `x` (mantissa truncated, flushed to zero below the normal range).
    fn f16_bits(x: f32) -> u64 {
        let b = x.to_bits();
        let sign = u64::from(b >> 31);
        let exp = i64::from((b >> 23) & 0xff) - 127 + 15;
        if exp < 1 {
            // Below the normal range: a signed zero is close enough here.
            return sign << 15;
        }
        assert!(exp < 31, "{x} out of the FP16 range");
        (sign << 15) | ((exp as u64) << 10) | u64::from((b >> 13) & 0x3ff)
    }

    /// An FP16 tensor of `rows` rows of `row` words that varies smoothly from
    /// row to row (position embeddings), or, `iid`, the same values shuffled.
    fn smooth_f16(rows: usize, row: usize, iid: bool) -> Stream {
        let mut r = rng(3);
        let mut v: Vec<u64> = (0..rows * row)
            .map(|k| {
                let (i, j) = ((k / row) as f32, (k % row) as f32);
                let amp = 0.5 + 0.4 * (1.3 * j).cos();
                let noise = ((r() >> 20) % 64) as f32 / 64.0 * 1e-3;
                f16_bits(amp * (0.03 * i + 0.37 * j).sin() + 0.02 + noise)
            })
            .collect();
        if iid {
            // Fisher-Yates: same values, no order.
            for i in (1..v.len()).rev() {
                v.swap(i, (r() % (i as u64 + 1)) as usize);
            }
        }
        Stream::from_u64s(16, &v).unwrap()
    }

    #[test]
    fn a_smooth_tensor_is_scanned_one_row_back() {
        let (rows, row) = (96, 256);
        let s = smooth_f16(rows, row, false);
        let hint = Hint::Tensor(DType::F16, row as u64);
        assert!(crate::synth::productions::row_scan(&s, row as u64, DType::F16).is_some());
        // Without the row length (and so without the scan) it costs more.
        let flat = AStarSearch::with_effort(1)
            .solve(&s, Hint::Tensor(DType::F16, 0), false)
            .size;
        let menu = CandidateSearch::with_effort(1).synthesize(&s, hint);
        let solved = AStarSearch::with_effort(1).solve(&s, hint, false);
        // Effort 0 tries it beside the prior's two likeliest root productions.
        let greedy = AStarSearch::with_effort(0).synthesize(&s, hint);
        for node in [&menu, &solved.node, &greedy] {
            assert!(
                matches!(node, Node::Scan { stride, .. } if *stride == row as u64),
                "not a row scan: {node}"
            );
            assert!(serialized_size(node) < flat, "{node}: not below {flat} B");
            decodes_to(node, &s);
        }
        assert_eq!(solved.size, serialized_size(&solved.node));
        assert_eq!(solved.size, serialize(&solved.node).len());
    }

    #[test]
    fn an_iid_tensor_is_not_scanned() {
        let (rows, row) = (96, 256);
        let s = smooth_f16(rows, row, true);
        let hint = Hint::Tensor(DType::F16, row as u64);
        assert_eq!(crate::synth::productions::row_scan(&s, row as u64, DType::F16), None);
        let menu = CandidateSearch::with_effort(1).synthesize(&s, hint);
        let solved = AStarSearch::with_effort(1).solve(&s, hint, false);
        for node in [&menu, &solved.node] {
            assert!(!node.to_string().contains("Scan"), "{node}");
            decodes_to(node, &s);
        }
        // The random floats of the other tests too.
        for (s, hint) in cases(4096) {
            if let Hint::Tensor(d, _) = hint {
                let node = AStarSearch::with_effort(1).synthesize(&s, Hint::Tensor(d, 64));
                assert!(
                    !node.to_string().contains("Scan.xor[64]") && !node.to_string().contains("Scan.delta[64]"),
                    "{node}"
                );
            }
        }
    }

    #[test]
    fn a_smooth_int8_tensor_is_scanned_one_row_back_and_a_shuffled_one_is_not() {
        let (rows, row) = (96usize, 256usize);
        let mut r = rng(9);
        // Quantized position embeddings: int8 codes that drift by a step or two per row.
        let mut v: Vec<u64> = (0..rows * row)
            .map(|k| {
                let (i, j) = ((k / row) as f32, (k % row) as f32);
                let x = 90.0 * (0.04 * i + 0.61 * j).sin() + ((r() >> 20) % 3) as f32;
                u64::from(x.round() as i8 as u8)
            })
            .collect();
        let hint = Hint::Tensor(DType::I8, row as u64);
        let s = Stream::from_u64s(8, &v).unwrap();
        assert!(crate::synth::productions::row_scan(&s, row as u64, DType::I8).is_some());
        let flat = AStarSearch::with_effort(1)
            .solve(&s, Hint::Tensor(DType::I8, 0), false)
            .size;
        for node in [
            CandidateSearch::with_effort(1).synthesize(&s, hint),
            AStarSearch::with_effort(1).solve(&s, hint, false).node,
        ] {
            assert!(
                matches!(&node, Node::Scan { stride, .. } if *stride == row as u64),
                "not a row scan: {node}"
            );
            assert!(serialized_size(&node) < flat, "{node}: not below {flat} B");
            decodes_to(&node, &s);
        }
        for i in (1..v.len()).rev() {
            v.swap(i, (r() % (i as u64 + 1)) as usize);
        }
        let s = Stream::from_u64s(8, &v).unwrap();
        assert_eq!(crate::synth::productions::row_scan(&s, row as u64, DType::I8), None);
        let node = AStarSearch::with_effort(1).synthesize(&s, hint);
        assert!(!node.to_string().contains("Scan"), "{node}");
        decodes_to(&node, &s);
    }

    #[test]
    fn a_tiny_budget_still_completes() {
        for (s, hint) in cases(300) {
            let search = AStarSearch {
                budget: 2,
                ..AStarSearch::with_effort(1)
            };
            let solved = search.solve(&s, hint, false);
            assert_eq!(solved.size, serialized_size(&solved.node));
            decodes_to(&solved.node, &s);
        }
    }

    #[test]
    fn replaying_a_programs_productions_rebuilds_it() {
        for (s, hint) in cases(3000) {
            let search = AStarSearch::with_effort(1);
            let solved = search.solve(&s, hint, true);
            let prods: Vec<Prod> = solved.trace.iter().map(|(_, p)| *p).collect();
            let mut run = Run::new(&search, false);
            let start = run.start(&s, hint);
            let st = run
                .replay(start.clone(), &prods)
                .expect("the program's own productions apply");
            assert_eq!(
                build(&mut st.steps.iter()).to_string(),
                solved.node.to_string(),
                "{hint:?}"
            );
            assert_eq!(st.g, solved.size);
            // One production short or one too many: no program.
            if let Some((_, short)) = prods.split_last() {
                assert!(run.replay(start.clone(), short).is_none(), "{hint:?}");
            }
            let mut long = prods.clone();
            long.push(Prod::Lit);
            assert!(run.replay(start, &long).is_none(), "{hint:?}");
        }
    }

    #[test]
    fn a_programs_literal_encodings_line_up_with_its_productions() {
        let mut hinted = 0;
        for (s, hint) in cases(3000) {
            let search = AStarSearch::with_effort(1);
            let solved = search.solve(&s, hint, true);
            let prods: Vec<Prod> = solved.trace.iter().map(|(_, p)| *p).collect();
            assert_eq!(solved.lits.len(), prods.len(), "{hint:?}");
            for (p, e) in prods.iter().zip(&solved.lits) {
                assert_eq!(e.is_some(), *p == Prod::Lit, "{hint:?}: {p:?} {e:?}");
            }
            hinted += solved.lits.iter().flatten().count();
            // Each literal trying only its own encoding's costly trials
            // (`for_template_leaf`) picks that encoding again: the same program.
            let mut run = Run::new(&search, true);
            let start = run.start(&s, hint);
            let st = run
                .replay_hinted(start, &prods, &solved.lits)
                .expect("the program's own productions apply");
            assert_eq!(
                build(&mut st.steps.iter()).to_string(),
                solved.node.to_string(),
                "{hint:?}"
            );
        }
        assert!(hinted > 0, "no case closed a hole with Prod::Lit");
    }

    #[test]
    fn a_template_leaf_skips_the_costly_trials_its_encoding_did_not_need() {
        let p = LitPolicy::new(19, 1.08);
        let huff = p.for_template_leaf(LitEncoding::Huffman);
        assert_eq!((huff.zstd_level, huff.rans, huff.nbr), (0, false, true));
        let zstd = p.for_template_leaf(LitEncoding::Zstd);
        assert_eq!((zstd.zstd_level, zstd.rans), (19, false));
        let rans = p.for_template_leaf(LitEncoding::Rans);
        assert_eq!((rans.zstd_level, rans.rans), (0, true));
        // Fast-decode's hsplit stays on; so does nbr where the policy has it.
        let fast = p.fast_decode().for_template_leaf(LitEncoding::HSplit);
        assert!(fast.hsplit && !fast.nbr && !fast.rans && fast.zstd_level == 0);
    }

    #[test]
    fn a_sample_is_evenly_spaced_blocks_of_whole_rows() {
        let n = 600_000usize;
        let v: Vec<u64> = (0..n as u64).map(|i| i % 65_521).collect();
        let s = Stream::from_u64s(16, &v).unwrap();
        let row = 384usize;
        let got = sample(&s, Hint::Tensor(DType::BF16, row as u64)).unwrap().to_u64s();
        // 600000 / 64 = 9375 words a block, 24 whole rows of 384.
        let block = 24 * row;
        assert_eq!(got.len(), SAMPLE_BLOCKS * block);
        for (i, b) in got.chunks(block).enumerate() {
            let at = i * (n / SAMPLE_BLOCKS) / row * row;
            assert_eq!(b, &v[at..at + block], "block {i}");
        }
        // Rows longer than a block: blocks of the sampled length, unaligned.
        let wide = sample(&s, Hint::Tensor(DType::BF16, 100_000)).unwrap();
        assert_eq!(wide.len(), SAMPLE_BLOCKS * (n / (SAMPLE_BLOCKS * SAMPLE_EVERY)));
        // Between the threshold and 8 x 64 Ki words: blocks of the floor's share.
        let mid = Stream::from_u64s(16, &v[..200_000]).unwrap();
        let got = sample(&mid, Hint::Tensor(DType::BF16, 0)).unwrap();
        assert_eq!(got.len(), SAMPLE_FLOOR_WORDS);
        // Not a tensor, or too small: searched whole.
        assert!(sample(&s, Hint::Opaque).is_none());
        let small = Stream::from_u64s(16, &v[..SAMPLE_MIN_WORDS - 1]).unwrap();
        assert!(sample(&small, Hint::Tensor(DType::BF16, 0)).is_none());
    }

    #[test]
    fn large_tensor_chunks_searched_on_a_sample_decode_exactly() {
        // BF16 weights near zero, 600 Ki words: above the sampling threshold.
        let mut r = rng(3);
        let v: Vec<u64> = (0..600 << 10)
            .map(|_| {
                let e = 120 - (r() % 4).min(r() % 4);
                ((r() & 1) << 15) | (e << 7) | (r() & 0x7f)
            })
            .collect();
        let s = Stream::from_u64s(16, &v).unwrap();
        let hint = Hint::Tensor(DType::BF16, 768);
        let sampled = AStarSearch::with_effort(1).solve(&s, hint, false);
        let whole = AStarSearch {
            sample: false,
            ..AStarSearch::with_effort(1)
        }
        .solve(&s, hint, false);
        decodes_to(&sampled.node, &s);
        assert_eq!(sampled.size, serialized_size(&sampled.node));
        // The sample's search counts, with the replay's one expansion a production.
        let guide = AStarSearch::with_effort(1).solve(&sample(&s, hint).unwrap(), hint, true);
        assert_eq!(sampled.expansions, guide.expansions + guide.trace.len());
        // The same statistics throughout: the sample finds the whole chunk's program.
        assert_eq!(sampled.node.to_string(), whole.node.to_string());
    }

    #[test]
    fn a_template_builds_a_like_chunk_and_an_unfit_one_is_searched() {
        let weights = |seed: u64, bits: u8, exp_bits: u8| {
            let mut r = rng(seed);
            let mant = bits - 1 - exp_bits;
            let bias = (1u64 << (exp_bits - 1)) - 1;
            let v: Vec<u64> = (0..20_000)
                .map(|_| {
                    let e = bias - 1 - (r() % 4).min(r() % 4);
                    ((r() & 1) << (bits - 1)) | (e << mant) | (r() & ((1 << mant) - 1))
                })
                .collect();
            Stream::from_u64s(bits, &v).unwrap()
        };
        let (a, b) = (weights(1, 16, 8), weights(2, 16, 8));
        let hint = Hint::Tensor(DType::BF16, 384);
        let search = AStarSearch::with_effort(1);
        let (first, offer) = search.synthesize_reusing(&a, hint, None);
        let offer = offer.expect("effort 1 offers a template on tensors");
        decodes_to(&first, &a);
        assert_eq!(first.to_string(), search.synthesize(&a, hint).to_string());
        // Built on a like chunk: one candidate per production, no search.
        super::super::take_candidates();
        let (second, again) = search.synthesize_reusing(&b, hint, Some(&offer));
        assert_eq!(super::super::take_candidates() as usize, offer.prods.len());
        decodes_to(&second, &b);
        assert_eq!(again, None, "built, not searched: nothing new to offer");
        // Effort 0 takes templates too: the same productions (its literals
        // follow its own zstd level), no greedy search.
        let (greedy, none) = AStarSearch::with_effort(0).synthesize_reusing(&b, hint, Some(&offer));
        assert_eq!(super::super::take_candidates() as usize, offer.prods.len());
        decodes_to(&greedy, &b);
        assert_eq!(none, None);
        // A template that applies but takes over 1% more bytes per word than
        // where it was found (a row scan found on smooth rows, built on the
        // same rows shuffled): searched, and the search's program offered.
        let h16 = Hint::Tensor(DType::F16, 256);
        let (_, scan) = search.synthesize_reusing(&smooth_f16(96, 256, false), h16, None);
        let scan = scan.expect("offered");
        let shuffled = smooth_f16(96, 256, true);
        let mut run = Run::new(&search, false);
        let start = run.start(&shuffled, h16);
        let built = run.replay(start, &scan.prods).expect("a row scan builds any rows");
        assert!(built.g as f64 > scan.bytes_per_word * shuffled.len() as f64 * 1.01);
        let (node, offered) = search.synthesize_reusing(&shuffled, h16, Some(&scan));
        assert_eq!(node.to_string(), search.synthesize(&shuffled, h16).to_string());
        assert!(offered.is_some_and(|t| t != scan));
        // A template that does not apply (a BF16 program's shape on FP32
        // words): the chunk is searched, as without one.
        let f32s = weights(3, 32, 8);
        let f32_hint = Hint::Tensor(DType::F32, 384);
        let (searched, _) = search.synthesize_reusing(&f32s, f32_hint, Some(&offer));
        decodes_to(&searched, &f32s);
        assert_eq!(searched.to_string(), search.synthesize(&f32s, f32_hint).to_string());
        // Opaque bytes, effort 2 and `reuse: false`: no template taken or offered.
        let plain = |s: &AStarSearch, hint| s.synthesize_reusing(&b, hint, Some(&offer));
        for (s, hint) in [
            (search.clone(), Hint::Opaque),
            (AStarSearch::with_effort(2), hint),
            (
                AStarSearch {
                    reuse: false,
                    ..AStarSearch::with_effort(1)
                },
                hint,
            ),
        ] {
            let (node, offered) = plain(&s, hint);
            assert!(offered.is_none(), "effort {} {hint:?}", s.effort);
            assert_eq!(node.to_string(), s.synthesize(&b, hint).to_string());
        }
    }

    #[test]
    fn default_effort_matches_the_menu_on_small_floats() {
        // Same grammar and policies: A* at effort 1 is never larger than the menu.
        for (s, hint) in cases(2000) {
            let a = AStarSearch::with_effort(1).solve(&s, hint, false).size;
            let m = serialized_size(&CandidateSearch::with_effort(1).synthesize(&s, hint));
            assert!(a <= m, "{hint:?}: astar {a} > menu {m}");
        }
    }
}
