//! Choosing a literal's wire encoding: encode the stream every applicable way
//! and keep the smallest by exact serialized size (tables included).

use brevis_format::program::{serialized_size, Node};
use brevis_format::stream::Stream;
use brevis_format::wire::{self, raw, LengthRule, LitEncoding};
use brevis_format::with_words;

/// Which of the slower encodings to try.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LitPolicy {
    /// Try zstd frames at this level (0 = never).
    pub zstd_level: i32,
    /// After a level-3 trial comes within this factor of the best, retry at `zstd_level`.
    pub zstd_retry_within: f64,
    /// The most [`LitPolicy::for_hint`] leaves of `zstd_retry_within` for the chunks
    /// of tensors, records and nibbles: [`TENSOR_ZSTD_RETRY`] by default,
    /// [`THOROUGH_TENSOR_ZSTD_RETRY`] at effort 2 and above.
    pub tensor_zstd_retry: f64,
    /// How much smaller (parts per million of the faster encoding's bytes) a
    /// slower-decoding encoding must be to be chosen: [`DECODE_SLACK_PPM`], or
    /// [`FAST_DECODE_SLACK_PPM`] under `--fast-decode`.
    pub decode_slack_ppm: u64,
    /// Try the neighbour-context coder (`Lit.nbr`), the slowest to decode.
    pub nbr: bool,
    /// Try `Lit.hsplit` (high bits Huffman-coded a few words a lookup, low bits
    /// packed), the fastest entropy-coded literal to decode. Only under
    /// `--fast-decode`: it gives up a little of the low bits' skew, and the
    /// ratio-first archives stay as they were.
    pub hsplit: bool,
    /// Try `Lit.rans` (where its estimate says it could be kept).
    pub rans: bool,
    /// How `huffman` and `huffman8` literals limit their code lengths:
    /// [`LengthRule::SMALLEST`], or [`LengthRule::FAST_DECODE`] under
    /// `--fast-decode`.
    pub lengths: LengthRule,
}

/// [`LitPolicy::tensor_zstd_retry`] by default: for the chunks of tensors (and of
/// records and nibbles) the slow zstd level is tried only where the quick one
/// beats every other literal by 5% or more, that is, where it found matches.
/// Weights rarely hold the long matches that make the slow level pay, and its
/// trials dominated compression: at 1.08 (kept for opaque data, where they do
/// pay: one chunk of whisper's CTranslate2 file is 12.6 KB smaller), `brevis
/// compress --threads 1` of the int8 all-MiniLM ONNX took 5.8 s against 1.4 s for
/// 4 more bytes, isnet_quint8.onnx 15.2 s against 3.7 s and the derived FP8 file
/// 5.4 s against 2.3 s for the same bytes. Where the quick level wins by less than
/// 5% (FP32 and FP16 byte planes, GGUF blocks' scales), the slow one saved 27.6 KB
/// of the corpus's 659.4 MB of archives (the totals of `bench/results.json`
/// before and after), while one-thread compression of the corpus took 26.0 s
/// with those retries and 23.8 s without (`bench/same-archives.sh c850acb 78db96a
/// 1`): 16.6 and 10.4 KB in the 2 MiB byte planes of whisper and the FP32
/// all-MiniLM, 0.6 KB in the GGUF. With 0.8 instead of 0.95 the ONNX
/// paraphrase-MiniLM would lose 318 KB (a throwaway build), so 0.95 keeps a
/// margin. Effort 2 still retries wherever the quick level wins
/// ([`THOROUGH_TENSOR_ZSTD_RETRY`]).
pub const TENSOR_ZSTD_RETRY: f64 = 0.95;
/// [`LitPolicy::tensor_zstd_retry`] at effort 2 and above: the slow zstd level is
/// tried wherever the quick one beats every other literal.
pub const THOROUGH_TENSOR_ZSTD_RETRY: f64 = 1.0;

impl LitPolicy {
    /// The ratio-first policy with zstd frames at `zstd_level` (0 = never).
    pub fn new(zstd_level: i32, zstd_retry_within: f64) -> Self {
        LitPolicy {
            zstd_level,
            zstd_retry_within,
            tensor_zstd_retry: TENSOR_ZSTD_RETRY,
            decode_slack_ppm: DECODE_SLACK_PPM,
            nbr: true,
            hsplit: false,
            rans: true,
            lengths: LengthRule::SMALLEST,
        }
    }

    /// The policy for a leaf of a chunk built from an earlier chunk's template
    /// whose leaf there was coded as `encoding`: the zstd and `Lit.rans` trials
    /// only where that leaf was coded so. A like chunk's leaves are coded alike
    /// almost everywhere, and dropping those trials elsewhere (a zstd frame of
    /// every leaf, a rANS table built wherever its estimate could win) made
    /// one-thread compression of the corpus faster (with `ctx::fit`'s early
    /// stop, 1.12x; the GGUF 1.25x: `bench/compress_threads.py` in
    /// `bench/RESULTS.md`), for 55 KB of its 659 MB of archives. `Lit.nbr` is
    /// still tried where it looks promising: its gains differ from chunk to
    /// chunk (trying it only where the template's leaf used it made isnet's
    /// quint8 ONNX 200 KB larger, in a throwaway build).
    pub fn for_template_leaf(self, encoding: LitEncoding) -> Self {
        LitPolicy {
            zstd_level: if encoding == LitEncoding::Zstd {
                self.zstd_level
            } else {
                0
            },
            rans: self.rans && encoding == LitEncoding::Rans,
            ..self
        }
    }

    /// The policy for a chunk with this hint: `zstd_retry_within` at most
    /// `tensor_zstd_retry` unless the chunk is opaque.
    pub fn for_hint(self, hint: super::Hint) -> Self {
        if hint == super::Hint::Opaque {
            self
        } else {
            LitPolicy {
                zstd_retry_within: self.zstd_retry_within.min(self.tensor_zstd_retry),
                ..self
            }
        }
    }

    /// The same policy favouring decode speed: no `Lit.nbr`, `Lit.hsplit` tried,
    /// a slower encoding must win by [`FAST_DECODE_SLACK_PPM`], and Huffman codes
    /// are kept short ([`LengthRule::FAST_DECODE`]).
    pub fn fast_decode(self) -> Self {
        LitPolicy {
            decode_slack_ppm: FAST_DECODE_SLACK_PPM,
            nbr: false,
            hsplit: true,
            lengths: LengthRule::FAST_DECODE,
            ..self
        }
    }
}

/// A literal node for `s` in `encoding`, if the encoding applies.
pub fn lit(s: &Stream, encoding: LitEncoding, zstd_level: i32) -> Option<Node> {
    lit_with(s, encoding, zstd_level, LengthRule::SMALLEST)
}

/// [`lit`], with Huffman code lengths limited by `lengths`.
pub fn lit_with(s: &Stream, encoding: LitEncoding, zstd_level: i32, lengths: LengthRule) -> Option<Node> {
    let payload = match encoding {
        LitEncoding::Zstd => zstd_payload(s, zstd_level)?,
        e => wire::encode_with(e, s, lengths)?,
    };
    Some(Node::Lit {
        width: s.width(),
        count: s.len() as u64,
        encoding,
        payload,
    })
}

/// The raw payload compressed as one zstd frame (content size recorded, no checksum:
/// the chunk's own checksum covers it).
fn zstd_payload(s: &Stream, level: i32) -> Option<Vec<u8>> {
    let width = s.width();
    let bytes = with_words!(s.words(), w => raw::encode(w, width));
    let mut c = zstd::bulk::Compressor::new(level).ok()?;
    c.include_checksum(false).ok()?;
    c.include_contentsize(true).ok()?;
    c.compress(&bytes).ok()
}

/// `Const` if every word is equal, else the smallest literal.
pub fn leaf(s: &Stream, policy: &LitPolicy) -> Node {
    if let Some(v) = constant(s) {
        return Node::Const {
            width: s.width(),
            count: s.len() as u64,
            value: v,
        };
    }
    best_lit(s, policy)
}

/// The word every element equals, if the stream is non-empty and constant.
pub fn constant(s: &Stream) -> Option<u64> {
    with_words!(s.words(), w => {
        let first = *w.first()?;
        if w.iter().all(|&x| x == first) { Some(brevis_format::Word::to_u64(first)) } else { None }
    })
}

/// The smallest literal encoding of `s`.
pub fn best_lit(s: &Stream, policy: &LitPolicy) -> Node {
    best_lit_below(s, policy, usize::MAX)
}

/// The OR of every word of `s` (0 for an empty stream).
fn any_bits(s: &Stream) -> u64 {
    use brevis_format::stream::Words;
    match s.words() {
        Words::U8(w) => u64::from(w.iter().fold(0, |a, &b| a | b)),
        Words::U16(w) => u64::from(w.iter().fold(0, |a, &b| a | b)),
        Words::U32(w) => u64::from(w.iter().fold(0, |a, &b| a | b)),
        Words::U64(w) => w.iter().fold(0, |a, &b| a | b),
    }
}

/// Bytes of a `Lit` node of `s` around a payload of `payload` bytes.
fn lit_size(s: &Stream, payload: usize) -> usize {
    serialized_size(&Node::Lit {
        width: s.width(),
        count: s.len() as u64,
        encoding: LitEncoding::Raw,
        payload: Vec::new(),
    }) + payload
        + brevis_format::bytes::varint_len(payload as u64)
        - 1
}

/// How much smaller (in parts per million of the faster encoding's bytes) a
/// slower-decoding literal encoding must be to be chosen over a faster one.
///
/// Decode speeds on BF16-like columns (`cargo bench -p brevis-format --bench coders`,
/// 2-core EPYC, Melem/s): 7-bit mantissas packed 3,670, Huffman 1,330, rANS 740;
/// 8-bit exponents packed 3,900, Huffman 1,110, rANS 560; whole 16-bit words Huffman
/// 680, rANS 540. So each step down the order raw, packed, Huffman, rANS, zstd costs
/// about 1.3x to 3x the decode time of that literal. A mantissa column is where the
/// choice bites: rANS beats packing by about 0.4% there and takes 5x longer to decode.
/// 0.5% bounds the cost in ratio by 0.5% of any literal; on the corpus it measured
/// +0.04% (BF16), +0.03% (FP16) and +0.10% (FP32 all-MiniLM) of the archive, within
/// issue 4's 0.1% budget, for 22% fewer instructions decoding the BF16 file (see
/// `bench/RESULTS.md`). rANS stays wherever it wins clearly (skewed exponent columns
/// beat Huffman by about 2%). Set to 0 for the smallest literal by exact size.
pub const DECODE_SLACK_PPM: u64 = 5_000;

/// [`LitPolicy::decode_slack_ppm`] under `--fast-decode`: a slower-decoding
/// encoding must be 3% smaller. What the knob costs and buys on the corpus is
/// measured by `bench/decode.sh`, which times a `--fast-decode` archive beside
/// the default one (see `bench/RESULTS.md`).
pub const FAST_DECODE_SLACK_PPM: u64 = 30_000;

/// Literal encodings from fastest to slowest to decode (`nbr` decodes one word
/// at a time, each step waiting on the word before it). Eight Huffman streams
/// decode faster than four (16-bit words 887 against 726 Melem/s, 8-bit 1,520
/// against 1,303: `cargo bench -p brevis-format --bench coders -- decode/huffman`)
/// for a few bytes more, so they are kept wherever those bytes are within the slack;
/// `hsplit` (`--fast-decode` only) decodes faster still where codes are short:
/// BF16 words 1,514 Melem/s against 1,051 for `huffman8` (its split `k = 7`, 0.85%
/// larger), exponent bytes 2,191 against 1,618, but near-uniform 7-bit mantissas
/// 1,249 against 1,640 (same bench, `-- 'decode/(hsplit|huffman8)/'`); since its
/// low bits unpack in lanes, those mantissas too (`bench/coders-ab.sh ded0df7
/// hsplit,huffman8`, one run, Mword/s: BF16 words 1,120 against 627, 7-bit
/// mantissas 1,119 against 1,090).
const BY_DECODE_SPEED: [LitEncoding; 8] = [
    LitEncoding::Raw,
    LitEncoding::BitPacked,
    LitEncoding::HSplit,
    LitEncoding::Huffman8,
    LitEncoding::Huffman,
    LitEncoding::Rans,
    LitEncoding::Zstd,
    LitEncoding::Nbr,
];

/// Shortest stream `huffman8` is tried on: below it, its few extra bytes are
/// rarely within the slack, and its trial would cost an encoding pass.
const HUFFMAN8_MIN_WORDS: usize = 4096;

/// Shortest stream `hsplit` is tried on: its decoder builds a 4096-entry table,
/// which shorter streams do not repay. It is tried on streams of 9 to 32 bits
/// only (float words, FP32's sign and exponent): on bytes it was larger and no
/// faster than `huffman8` (`--fast-decode` archives, `bench/threads.py --runs
/// 15`: the int8 ONNX all-MiniLM 20,982,396 B and 0.0275 s against 20,818,072 B
/// and 0.0241 s; the derived FP8 file 18,850,305 B and 0.0278 s against
/// 18,688,159 B and 0.0267 s): a byte's codes are too long for several a lookup.
/// Measured again at 4bfdfb0 with a throwaway build that tried it on bytes: the int8
/// archive 20,943,496 B against 20,804,828 (and above zstd -19's 20,919,609), one
/// thread 33.9 against 33.4 ms (`bench/threads.py --runs 11`), in Node 51.4-54.0
/// against 55.3-56.5 ms (a throwaway script timing the package's `decodeArchive`
/// on both archives in turn, best of 15, both orders). Synthetic
/// int8-like bytes (6.6 bits a byte, against that file's 7.3) made it look 1.7-1.8x
/// faster (`bench/coders-ab.sh HEAD hsplit,huffman8 int8`, natively and `TARGET=wasi`).
const HSPLIT_MIN_WORDS: usize = 4096;

/// Under a policy with [`LitPolicy::hsplit`] (`--fast-decode`), the program to
/// keep for `root` (of 9 to 32 bits) given the search's `best`: the whole root as one `Lit.hsplit`
/// where that is within the policy's decode slack of `best`'s size. One literal
/// decodes in one pass; the structured programs the search finds for float words
/// by exact size (`Merge.fields[1,8,7]` of a packed sign, a coded exponent and
/// packed mantissas, say) win by a few bytes and decode in three passes and a
/// merge.
pub fn prefer_fast_root(root: &Stream, best: Node, policy: &LitPolicy) -> Node {
    if !policy.hsplit
        || root.width() <= 8
        || root.len() < HSPLIT_MIN_WORDS
        || matches!(best, Node::Lit { .. } | Node::Const { .. })
    {
        return best;
    }
    let Some(fast) = lit(root, LitEncoding::HSplit, 0) else {
        return best;
    };
    let best_size = serialized_size(&best) as u128;
    let slack = u128::from(policy.decode_slack_ppm.min(1_000_000));
    if serialized_size(&fast) as u128 * 1_000_000 <= best_size * (1_000_000 + slack) {
        fast
    } else {
        best
    }
}

/// Shortest stream the neighbour-context coder is tried on: below it the
/// per-context tables cost more than the context saves.
const NBR_MIN_WORDS: usize = 4096;

/// Among `(encoding, size)` trials, the one to keep: walking from the fastest
/// encoding to the slowest, a slower one replaces the choice only if it is smaller
/// by more than `slack_ppm` parts per million of the choice's size.
fn pick(sizes: &[(LitEncoding, usize)], slack_ppm: u64) -> Option<LitEncoding> {
    let slack_ppm = u128::from(slack_ppm.min(1_000_000));
    let mut best: Option<(LitEncoding, usize)> = None;
    for enc in BY_DECODE_SPEED {
        for &(e, size) in sizes.iter().filter(|(e, _)| *e == enc) {
            best = match best {
                Some((_, b)) if (size as u128) * 1_000_000 >= (b as u128) * (1_000_000 - slack_ppm) => best,
                _ => Some((e, size)),
            };
        }
    }
    best.map(|(e, _)| e)
}

/// Whether a literal estimated at `estimate` bytes may still be kept by [`pick`]
/// over faster-decoding ones whose pick is `faster` bytes: it must be smaller by
/// the slack. The margin covers the estimate's error (rANS's: within a few bytes
/// and 0.01%, [`wire::rans::Plan::estimated_len`]) ten times over, so a literal
/// this rules out is one `pick` would not have kept: the archives are the same as
/// with every trial coded (every corpus file, `bench/same-archives.sh`).
fn could_be_picked(estimate: usize, faster: usize, slack_ppm: u64) -> bool {
    let slack = slack_ppm.min(1_000_000) as f64 / 1e6;
    (estimate as f64) < faster as f64 * (1.0 - slack) * (1.0 + ESTIMATE_MARGIN) + ESTIMATE_MARGIN_BYTES
}

/// Relative part of [`could_be_picked`]'s margin.
const ESTIMATE_MARGIN: f64 = 0.001;
/// Absolute part of [`could_be_picked`]'s margin, bytes.
const ESTIMATE_MARGIN_BYTES: f64 = 64.0;

/// The literal encoding of `s` to keep (the smallest, unless a faster-decoding one
/// is within the policy's `decode_slack_ppm`, see `pick`), where `bound` is the size of the
/// best program already found for `s` by other means: the slow zstd level is only
/// tried when a quick zstd trial comes within `zstd_retry_within` of both the
/// best literal and `bound` (otherwise it cannot win, and costs seconds).
///
/// Raw and bit-packed sizes are exact functions of the length and the largest
/// word, and Huffman's of the code lengths, so those payloads are only built
/// for the winner.
pub fn best_lit_below(s: &Stream, policy: &LitPolicy, bound: usize) -> Node {
    pick_lit_below(s, policy, bound).build(s)
}

/// The literal [`best_lit_below`] picks, and its exact serialized size: built
/// where a trial already built it, else only named (raw, packed and Huffman
/// sizes are known without their payloads), so that a search which compares
/// many leaves and keeps few builds only those it keeps ([`PickedLit::build`]).
pub struct PickedLit {
    /// The encoding picked.
    pub encoding: LitEncoding,
    /// The literal's exact serialized size.
    pub size: usize,
    /// The literal, if a trial built it.
    pub node: Option<Node>,
    /// The policy's Huffman length rule, which `size` assumes.
    pub lengths: LengthRule,
}

impl PickedLit {
    /// The literal node of `s` (the stream it was picked for).
    pub fn build(self, s: &Stream) -> Node {
        let node = self
            .node
            .unwrap_or_else(|| lit_with(s, self.encoding, 0, self.lengths).expect("the picked encoding applies"));
        debug_assert_eq!(serialized_size(&node), self.size);
        node
    }
}

/// [`best_lit_below`]'s choice, without building a payload no trial built.
pub fn pick_lit_below(s: &Stream, policy: &LitPolicy, bound: usize) -> PickedLit {
    let width = s.width();
    let n = s.len();
    let raw_size = lit_size(s, n * raw::word_bytes(width));
    // The largest word's bit length is the OR of all words' (a reduction the
    // compiler vectorizes; a maximum over words widened to u64 was 6% of a BF16
    // compression, compared one word at a time).
    let k = (64 - any_bits(s).leading_zeros()) as usize;
    let packed_size = lit_size(s, 1 + (n * k).div_ceil(8));
    let mut sizes = vec![(LitEncoding::Raw, raw_size), (LitEncoding::BitPacked, packed_size)];
    // Entropy-coded and zstd trials, kept in case they win.
    let mut built: Vec<Node> = Vec::new();
    let keep = |node: Node, sizes: &mut Vec<(LitEncoding, usize)>, built: &mut Vec<Node>| {
        if let Node::Lit { encoding, .. } = &node {
            sizes.push((*encoding, serialized_size(&node)));
        }
        built.push(node);
    };
    // Huffman's size is exact from its code lengths: its payload is only
    // built if it is picked. It and rANS's plan come from one count of the symbols.
    let counts = wire::count_symbols(s);
    let huffman_len = |encoding| {
        counts
            .as_ref()
            .and_then(|c| wire::huffman_len_counted(encoding, s, c, policy.lengths))
    };
    if let Some(len) = huffman_len(LitEncoding::Huffman) {
        sizes.push((LitEncoding::Huffman, lit_size(s, len)));
    }
    if policy.hsplit && n >= HSPLIT_MIN_WORDS && width > 8 {
        if let Some(node) = lit(s, LitEncoding::HSplit, 0) {
            keep(node, &mut sizes, &mut built);
        }
    }
    // rANS is coded only where its estimate says `pick` could keep it: `sizes` holds
    // only faster-decoding encodings so far, so it must beat their pick by the
    // slack. Where it cannot, its estimate stands in for its size in the zstd
    // retry below (as its exact size did when it was always coded).
    let mut rans_estimate = None;
    let rans_plan = || counts.as_ref().and_then(|c| wire::rans_plan_counted(s, c));
    if let Some(plan) = policy.rans.then(rans_plan).flatten() {
        let estimate = lit_size(s, plan.estimated_len().ceil() as usize);
        let faster = pick(&sizes, policy.decode_slack_ppm)
            .and_then(|e| sizes.iter().find(|(f, _)| *f == e))
            .map_or(usize::MAX, |&(_, size)| size);
        if could_be_picked(estimate, faster, policy.decode_slack_ppm) {
            let node = Node::Lit {
                width,
                count: n as u64,
                encoding: LitEncoding::Rans,
                payload: wire::rans_encode(plan, s),
            };
            keep(node, &mut sizes, &mut built);
        } else {
            rans_estimate = Some(estimate);
        }
    }
    let nbr_worth_trying = match s.words() {
        brevis_format::stream::Words::U8(w) => policy.nbr && n >= NBR_MIN_WORDS && wire::nbr::promising(w, width),
        _ => false,
    };
    if nbr_worth_trying {
        if let Some(node) = lit(s, LitEncoding::Nbr, 0) {
            keep(node, &mut sizes, &mut built);
        }
    }
    if policy.zstd_level > 0 && n >= 64 {
        let best_size = sizes
            .iter()
            .map(|&(_, z)| z)
            .chain(rans_estimate)
            .min()
            .unwrap_or(usize::MAX);
        let quick = policy.zstd_level.min(3);
        if let Some(node) = lit(s, LitEncoding::Zstd, quick) {
            let size = serialized_size(&node);
            let target = best_size.min(bound) as f64 * policy.zstd_retry_within;
            let retry = policy.zstd_level > quick && (size as f64) < target;
            keep(node, &mut sizes, &mut built);
            if retry {
                if let Some(node) = lit(s, LitEncoding::Zstd, policy.zstd_level) {
                    // Only the smaller of the two zstd trials stays a candidate.
                    if serialized_size(&node) < size {
                        sizes.pop();
                        built.pop();
                        keep(node, &mut sizes, &mut built);
                    }
                }
            }
        }
    }
    let mut enc = pick(&sizes, policy.decode_slack_ppm).expect("raw always applies");
    // Eight Huffman streams hold the same codes as four plus a few bytes, so `pick`
    // can only keep them where it keeps four: they are tried then, which saves their
    // encoding pass everywhere else. (Trying them always could also shift `pick`'s
    // walk among the other encodings in rare near-ties; this leaves it as it was.)
    if enc == LitEncoding::Huffman && n >= HUFFMAN8_MIN_WORDS {
        if let Some(len) = huffman_len(LitEncoding::Huffman8) {
            sizes.push((LitEncoding::Huffman8, lit_size(s, len)));
            enc = pick(&sizes, policy.decode_slack_ppm).expect("raw always applies");
        }
    }
    let size = sizes
        .iter()
        .find(|(e, _)| *e == enc)
        .map(|&(_, size)| size)
        .expect("the pick is among the sizes");
    PickedLit {
        encoding: enc,
        size,
        lengths: policy.lengths,
        node: built
            .into_iter()
            .find(|n| matches!(n, Node::Lit { encoding, .. } if *encoding == enc)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_packed_sizes_are_exact_without_encoding() {
        for (width, values) in [
            (8u8, vec![0u64, 3, 200]),
            (13, vec![5, 8191, 0, 1]),
            (32, vec![7; 1000]),
            (1, vec![1, 0, 1]),
            (16, vec![0x100, 0x7f, 3]),
            (64, vec![1 << 40, 5]),
        ] {
            let s = Stream::from_u64s(width, &values).unwrap();
            let raw = lit(&s, LitEncoding::Raw, 0).unwrap();
            let n = s.len();
            assert_eq!(lit_size(&s, n * raw::word_bytes(width)), serialized_size(&raw));
            let packed = lit(&s, LitEncoding::BitPacked, 0).unwrap();
            let k = 64 - values.iter().max().unwrap().leading_zeros() as usize;
            // What `pick_lit_below` prices packing with.
            assert_eq!(64 - any_bits(&s).leading_zeros() as usize, k, "width {width}");
            assert_eq!(lit_size(&s, 1 + (n * k).div_ceil(8)), serialized_size(&packed));
        }
    }

    /// A xorshift generator from `seed`: each call gives a value below `m`.
    fn below(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut x = seed;
        move |m| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        }
    }

    /// A picked literal's size is its node's, built or not, for streams where
    /// each encoding wins (raw, packed, Huffman, rANS, zstd) and every policy.
    #[test]
    fn picked_sizes_are_the_built_literals_sizes() {
        use LitEncoding::*;
        let mut next = below(0x2545_F491_4F6C_DD1D);
        let streams = [
            Stream::from_u64s(8, &(0..5000).map(|_| next(256)).collect::<Vec<_>>()).unwrap(),
            Stream::from_u64s(8, &(0..5000).map(|_| next(100)).collect::<Vec<_>>()).unwrap(),
            Stream::from_u64s(8, &(0..5000).map(|_| next(4).min(next(256))).collect::<Vec<_>>()).unwrap(),
            Stream::from_u64s(16, &(0..9000).map(|_| next(7).min(next(40)) * 1000).collect::<Vec<_>>()).unwrap(),
            Stream::from_u64s(8, &(0..6000u64).map(|i| (i % 50) * 3).collect::<Vec<_>>()).unwrap(),
            Stream::from_u64s(32, &(0..700).map(|_| next(1 << 20)).collect::<Vec<_>>()).unwrap(),
        ];
        let mut seen = Vec::new();
        for s in &streams {
            for policy in [
                LitPolicy::new(0, 1.0),
                LitPolicy::new(3, 1.0),
                LitPolicy::new(3, 1.0).fast_decode(),
            ] {
                let picked = pick_lit_below(s, &policy, usize::MAX);
                let (enc, size) = (picked.encoding, picked.size);
                let node = picked.build(s);
                assert_eq!(serialized_size(&node), size, "{enc:?}");
                assert!(matches!(node, Node::Lit { encoding, .. } if encoding == enc));
                assert_eq!(node, best_lit(s, &policy));
                seen.push(enc);
            }
        }
        for enc in [Raw, BitPacked, Huffman8, Rans, Zstd] {
            assert!(seen.contains(&enc), "no stream picked {enc:?}: {seen:?}");
        }
    }

    /// What `pick_lit_below` picks with every trial coded (as before rANS was
    /// planned first): exact sizes of raw, packed, Huffman, rANS, and `hsplit` and
    /// `nbr` where the policy tries them, then `pick`, and `huffman8` where
    /// Huffman is picked, Huffman codes limited by the policy's rule. zstd is
    /// left out (its trials do not depend on rANS's size when rANS is coded; the
    /// policies below have it off).
    fn pick_coding_every_trial(s: &Stream, policy: &LitPolicy) -> (LitEncoding, usize, Vec<(LitEncoding, usize)>) {
        use LitEncoding::*;
        let mut encodings = vec![Raw, BitPacked, Huffman, Rans];
        if policy.hsplit && s.len() >= HSPLIT_MIN_WORDS && s.width() > 8 {
            encodings.push(HSplit);
        }
        if let brevis_format::stream::Words::U8(w) = s.words() {
            if policy.nbr && s.len() >= NBR_MIN_WORDS && wire::nbr::promising(w, s.width()) {
                encodings.push(Nbr);
            }
        }
        let mut sizes: Vec<(LitEncoding, usize)> = encodings
            .into_iter()
            .filter_map(|e| lit_with(s, e, 0, policy.lengths).map(|node| (e, serialized_size(&node))))
            .collect();
        let mut enc = pick(&sizes, policy.decode_slack_ppm).unwrap();
        if enc == Huffman && s.len() >= HUFFMAN8_MIN_WORDS {
            let node = lit_with(s, Huffman8, 0, policy.lengths).unwrap();
            sizes.push((Huffman8, serialized_size(&node)));
            enc = pick(&sizes, policy.decode_slack_ppm).unwrap();
        }
        let size = sizes.iter().find(|(e, _)| *e == enc).unwrap().1;
        (enc, size, sizes)
    }

    /// Planning rANS first and coding it only where its estimate could be picked
    /// changes no pick: on streams around the slack's edge (rANS a little smaller
    /// or larger than Huffman and packing), under the ratio-first and fast-decode
    /// policies and with no slack, `pick_lit_below` picks what coding every trial
    /// picks, at the same size. Both outcomes occur: rANS skipped (its estimate
    /// ruled out) and rANS picked.
    #[test]
    fn planning_rans_first_changes_no_pick() {
        let mut next = below(0x1234_5678_9ABC_DEF1);
        let (mut skipped, mut picked_rans) = (0, 0);
        for case in 0..120u64 {
            let width = [3u8, 7, 8, 12, 16][(case % 5) as usize];
            let n = [3_000usize, 20_000, 70_000][(case / 5 % 3) as usize];
            let max = 1u64 << width;
            // From near-uniform (packing wins) to skewed (rANS wins), with the
            // skew varied finely around where rANS's gain crosses the slack.
            let skew = 1 + case % 4;
            let spread = max - (case * 7919 % (max / 2 + 1));
            let values: Vec<u64> = (0..n).map(|_| (0..skew).map(|_| next(spread)).min().unwrap()).collect();
            let s = Stream::from_u64s(width, &values).unwrap();
            for policy in [
                LitPolicy::new(0, 1.0),
                LitPolicy::new(0, 1.0).fast_decode(),
                LitPolicy {
                    decode_slack_ppm: 0,
                    ..LitPolicy::new(0, 1.0)
                },
            ] {
                let got = pick_lit_below(&s, &policy, usize::MAX);
                let (enc, size, sizes) = pick_coding_every_trial(&s, &policy);
                assert_eq!(
                    (got.encoding, got.size),
                    (enc, size),
                    "case {case}, width {width}, n {n}"
                );
                picked_rans += usize::from(got.encoding == LitEncoding::Rans);
                // Whether `pick_lit_below` left rANS uncoded: its estimate against
                // the pick of the faster encodings.
                let faster: Vec<_> = sizes
                    .iter()
                    .copied()
                    .filter(|(e, _)| !matches!(e, LitEncoding::Rans | LitEncoding::Huffman8 | LitEncoding::Nbr))
                    .collect();
                let f = pick(&faster, policy.decode_slack_ppm).unwrap();
                let f_size = faster.iter().find(|(e, _)| *e == f).unwrap().1;
                let estimate = lit_size(&s, wire::rans_plan(&s).unwrap().estimated_len().ceil() as usize);
                skipped += usize::from(!could_be_picked(estimate, f_size, policy.decode_slack_ppm));
            }
        }
        assert!(
            picked_rans > 10 && skipped > 10,
            "rANS picked {picked_rans}, not coded {skipped}"
        );
    }

    #[test]
    fn best_literal_is_never_larger_than_any_encoding() {
        let values: Vec<u64> = (0..5000u64).map(|i| (i * i) % 97).collect();
        let s = Stream::from_u64s(8, &values).unwrap();
        let policy = LitPolicy::new(3, 1.0);
        let best = serialized_size(&best_lit(&s, &policy)) as u64;
        for enc in LitEncoding::ALL {
            if let Some(n) = lit(&s, enc, 3) {
                let size = serialized_size(&n) as u64;
                assert!(best * (1_000_000 - DECODE_SLACK_PPM) <= size * 1_000_000, "{enc:?}");
            }
        }
    }

    /// `best_lit_below` tries `huffman8` only when `huffman` is picked: eight
    /// streams are never smaller than four, so wherever `huffman` is not picked,
    /// `huffman8` would not be either.
    #[test]
    fn huffman8_can_only_win_where_huffman_would() {
        use LitEncoding::*;
        let mut next = below(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let h4 = 5_000 + next(2_000) as usize;
            let mut sizes = vec![(Raw, 8_000), (BitPacked, 4_000 + next(3_000) as usize), (Huffman, h4)];
            for enc in [Rans, Zstd] {
                if next(2) == 0 {
                    sizes.push((enc, h4 - 200 + next(400) as usize));
                }
            }
            let with = |extra: usize| {
                let mut all = sizes.clone();
                all.push((Huffman8, h4 + extra));
                all
            };
            for slack in [DECODE_SLACK_PPM, FAST_DECODE_SLACK_PPM] {
                let without = pick(&sizes, slack);
                for extra in [0, 1, 16, 40] {
                    let full = pick(&with(extra), slack);
                    if without != Some(Huffman) {
                        assert_ne!(full, Some(Huffman8), "{sizes:?} +{extra}");
                    }
                }
            }
        }
    }

    #[test]
    fn slower_encodings_must_win_by_more_than_the_slack() {
        use LitEncoding::*;
        let slack = |b: usize| b - (b as u64 * DECODE_SLACK_PPM / 1_000_000) as usize;
        // rANS within the slack of packing: packing stays.
        assert_eq!(
            pick(
                &[(Raw, 1_000_000), (BitPacked, 900_000), (Rans, slack(900_000) + 1)],
                DECODE_SLACK_PPM
            ),
            Some(BitPacked)
        );
        // Clearly smaller: rANS.
        assert_eq!(
            pick(
                &[(Raw, 1_000_000), (BitPacked, 900_000), (Rans, slack(900_000) - 1)],
                DECODE_SLACK_PPM
            ),
            Some(Rans)
        );
        // Huffman slightly bigger than rANS but within the slack: Huffman.
        assert_eq!(
            pick(&[(Raw, 1000), (Huffman, 500), (Rans, 499)], DECODE_SLACK_PPM),
            Some(Huffman)
        );
        // Equal sizes: the faster one.
        assert_eq!(pick(&[(Raw, 100), (BitPacked, 100)], DECODE_SLACK_PPM), Some(Raw));
    }

    #[test]
    fn fast_decode_keeps_the_faster_encoding_unless_much_smaller() {
        use LitEncoding::*;
        // rANS 2% under Huffman: kept by the default slack, not by the fast one.
        let sizes = [(Raw, 2000), (Huffman, 1000), (Rans, 980)];
        assert_eq!(pick(&sizes, DECODE_SLACK_PPM), Some(Rans));
        assert_eq!(
            pick(&sizes, LitPolicy::new(3, 1.0).fast_decode().decode_slack_ppm),
            Some(Huffman)
        );
        // 4% under: kept by both.
        let sizes = [(Raw, 2000), (Huffman, 1000), (Rans, 960)];
        assert_eq!(pick(&sizes, FAST_DECODE_SLACK_PPM), Some(Rans));
    }

    #[test]
    fn fast_decode_never_emits_the_neighbour_coder() {
        // Runs of a zero point with correlated magnitudes: the neighbour coder's case.
        let mut rng = 1u64;
        let mut values = Vec::new();
        let mut level = 0u64;
        for _ in 0..20_000 {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if (rng >> 60) == 0 {
                level = (rng >> 40) % 5;
            }
            let noise = (rng >> 33) % (2 * level + 1);
            values.push(128 + noise - level);
        }
        let s = Stream::from_u64s(8, &values).unwrap();
        let ratio_first = LitPolicy::new(0, 1.0);
        let is_nbr = |n: &Node| matches!(n, Node::Lit { encoding: Nbr, .. });
        use LitEncoding::Nbr;
        assert!(is_nbr(&best_lit(&s, &ratio_first)), "the fixture should pick Lit.nbr");
        let fast = best_lit(&s, &ratio_first.fast_decode());
        assert!(!is_nbr(&fast));
        let Node::Lit { encoding, payload, .. } = &fast else {
            panic!("a literal was expected, got {fast}");
        };
        let back = wire::decode(*encoding, 8, values.len(), payload).unwrap();
        assert_eq!(back.to_u64s(), values);
    }

    #[test]
    fn slow_zstd_retries_only_where_the_quick_level_wins_except_on_opaque_data() {
        use super::super::Hint;
        let p = LitPolicy::new(19, 1.08);
        assert_eq!(p.for_hint(Hint::Opaque), p);
        for hint in [
            Hint::Tensor(brevis_format::DType::I8, 384),
            Hint::Records(34),
            Hint::Nibbles,
        ] {
            assert_eq!(p.for_hint(hint).zstd_retry_within, TENSOR_ZSTD_RETRY);
            assert_eq!(p.for_hint(hint).zstd_level, 19);
            let thorough = LitPolicy {
                tensor_zstd_retry: THOROUGH_TENSOR_ZSTD_RETRY,
                ..p
            };
            assert_eq!(thorough.for_hint(hint).zstd_retry_within, THOROUGH_TENSOR_ZSTD_RETRY);
        }
    }
}
