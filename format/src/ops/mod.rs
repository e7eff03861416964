//! The reversible operators' semantics (decoder direction) and their inverses
//! (encoder direction), side by side. `Lit`, `Const`, `Concat` and `Repeat` need
//! no word-level code beyond copying; the three that transform words live here.
//!
//! All functions work in place or into caller-provided buffers over typed slices,
//! so loops stay simple enough for the compiler to vectorize.

pub mod map;
pub mod merge;
pub mod scan;

pub use map::MapOp;
pub use merge::MergeOp;
pub use scan::ScanOp;
pub mod interleave;
