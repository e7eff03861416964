//! Program synthesis: find a small program that rebuilds a chunk exactly.
//!
//! The seam is [`Synthesizer`]: given a chunk's root stream and what the
//! container knows about it ([`Hint`]), return a program whose output is exactly
//! that stream. [`CandidateSearch`] (the menu) is the first synthesizer: it expands the
//! decompositions that make sense for the dtype (float fields, byte planes,
//! scans, constants), solves each child target recursively, and keeps the
//! smallest candidate by exact serialized size. Every decomposition is
//! target-directed: an operator's inverse splits the exact target into its
//! children's exact targets, so every candidate rebuilds the chunk by
//! construction (and the compressor still verifies it with the real decoder).
//! [`AStarSearch`] searches the same grammar ([`productions`]) best-first,
//! ordered by a learned [`Prior`].

use brevis_format::program::Node;
use brevis_format::stream::Stream;
use brevis_format::DType;

pub mod astar;
pub mod candidates;
pub mod lit;
pub mod prior;
pub mod productions;
pub mod segment;

pub use astar::AStarSearch;
pub use candidates::CandidateSearch;
pub use lit::LitPolicy;
pub use prior::Prior;

std::thread_local! {
    static CANDIDATES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts one complete candidate program compared by exact size on this thread
/// (for reports; [`take_candidates`] reads and resets the count).
pub fn count_candidate() {
    CANDIDATES.with(|c| c.set(c.get() + 1));
}

/// Candidates counted on this thread since the last call. A synthesizer runs on
/// one thread per chunk, so reading before and after one call gives its count.
pub fn take_candidates() -> u64 {
    CANDIDATES.with(|c| c.replace(0))
}

/// What the container knows about a chunk's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hint {
    /// Raw data of a tensor of this dtype and row length (its last
    /// dimension, in words; 0 when it has fewer than two dimensions); the root
    /// width is the dtype's. A chunk need not start on a row: the row length
    /// is the stride of "the word one row back" either way.
    Tensor(DType, u64),
    /// Bytes with no known structure, viewed as words of the root width.
    Opaque,
    /// Bytes made of fixed-size records of this many bytes (GGUF's quantized
    /// blocks), root width 8: columns of the records are coded separately.
    Records(usize),
    /// 4-bit values packed two per byte (int4, uint4, FP4), root width 8.
    Nibbles,
}

/// Finds a program for a chunk.
pub trait Synthesizer: Sync {
    /// A program whose output is exactly `root`.
    fn synthesize(&self, root: &Stream, hint: Hint) -> Node;

    /// As [`Self::synthesize`], building `template` (the shape of an earlier,
    /// similar chunk's program) on `root` first where this synthesizer reuses
    /// templates and it applies. Returns the program and a template of it to
    /// offer later similar chunks (`None`: this synthesizer offers none).
    fn synthesize_reusing(&self, root: &Stream, hint: Hint, template: Option<&Template>) -> (Node, Option<Template>) {
        let _ = template;
        (self.synthesize(root, hint), None)
    }

    /// Whether a chunk of `words` words with this hint, like an earlier chunk
    /// that has no template yet, should wait for that chunk's template rather
    /// than be searched beside it: where [`Self::synthesize_reusing`] offers
    /// templates and would search such a chunk whole (a search on a sample
    /// costs little more than building a template, and builds better where
    /// the first chunk of a tensor is unlike the rest).
    fn waits_for_template(&self, hint: Hint, words: usize) -> bool {
        let _ = (hint, words);
        false
    }
}

/// The shape of a program: its productions in pre-order (operators, field
/// widths, context splits) with the encoding each of its literals took, which
/// a later chunk like the one it was found for can build on its own words
/// instead of searching ([`Synthesizer::synthesize_reusing`]), and the bytes
/// per word it took there.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    pub(crate) prods: Vec<productions::Prod>,
    /// The encoding of the literal each production closed there (`None` for
    /// the others), which the chunk's literals favour
    /// ([`lit::LitPolicy::for_template_leaf`]).
    pub(crate) lits: Vec<Option<brevis_format::wire::LitEncoding>>,
    pub(crate) bytes_per_word: f64,
}
