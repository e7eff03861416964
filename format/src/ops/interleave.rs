//! `Interleave(P1..Pk)`: the children's words taken in turn,
//! `out[i·k + j] = child_j[i]` — the columns of `k`-word records put back
//! together. `Concat` joins blocks; `Interleave` joins columns. It is what lets
//! a program split records wider than 64 bits (a GGUF block of a 2-byte scale,
//! a 2-byte minimum and 16 bytes of nibbles) into streams of like bytes.
//!
//! Encoder direction ([`split`]): column `j` of the target is its words
//! `j, j+k, j+2k, …`.

use alloc::vec::Vec;

use crate::stream::Word;

/// The decoder direction: writes the interleaving of `columns` into `out`
/// (`out.len()` must be `k × column length`).
pub fn apply<W: Word>(columns: &[&[W]], out: &mut [W]) {
    let k = columns.len();
    for (j, col) in columns.iter().enumerate() {
        // `get_mut`, not `out[j..]`: with empty columns `out` is empty and `j` past its end.
        let tail = out.get_mut(j..).unwrap_or_default();
        for (d, &v) in tail.iter_mut().step_by(k).zip(col.iter()) {
            *d = v;
        }
    }
}

/// The encoder direction: the `k` columns of `target` (whose length must be a
/// multiple of `k`).
pub fn split<W: Word>(target: &[W], k: usize) -> Vec<Vec<W>> {
    (0..k)
        .map(|j| target.get(j..).unwrap_or_default().iter().step_by(k).copied().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_then_apply_round_trips() {
        let t: Vec<u8> = (0..60).collect();
        let cols = split(&t, 20);
        assert_eq!(cols[1], [1, 21, 41]);
        let refs: Vec<&[u8]> = cols.iter().map(|c| c.as_slice()).collect();
        let mut out = alloc::vec![0u8; 60];
        apply(&refs, &mut out);
        assert_eq!(out, t);
    }

    /// Found by `cargo fuzz`: empty columns used to panic (`out[j..]` past the end).
    #[test]
    fn empty_columns_are_empty() {
        let mut out: [u16; 0] = [];
        apply(&[&[], &[], &[]], &mut out);
        assert_eq!(split::<u16>(&[], 3), [[], [], []]);
    }
}
