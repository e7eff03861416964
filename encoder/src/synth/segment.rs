//! Regime changes: a stream whose distribution changes along its length (an
//! embedding table whose first rows are unused tokens of small magnitude, a
//! tensor whose row blocks were scaled differently) costs less as a `Concat` of
//! blocks, each a literal with its own tables, than as one literal whose table
//! fits none of them. The blocks are chosen by dynamic programming over the
//! stream cut into equal units, each candidate block priced from its histogram
//! (order-0 entropy plus a table's typical cost); the chosen cut is then priced
//! by the literal's own estimate, and the caller builds the `Concat` and keeps
//! it only if its exact serialized size is smaller.

use brevis_format::program::Node;
use brevis_format::stream::{Stream, Words};
use brevis_format::Word;

/// Most units a stream is cut into for the search (the DP prices
/// `units * (units + 1) / 2` blocks).
const MAX_UNITS: usize = 64;
/// Fewest words in a unit: below it a block's tables cost more than a regime
/// can save.
const MIN_UNIT: usize = 16_384;
/// Fine units per unit: where a cut is finally placed.
const REFINE: usize = 8;
/// Widest word the census is taken of (`2^width` counts per unit).
const MAX_WIDTH: u8 = 12;

/// The DP's price of a block beyond its order-0 entropy: bytes per present
/// symbol, and per block (a `Lit` header, rANS states). A `Lit.ctx` table of
/// FP8 words costs about 1.5 B per symbol over order-0, but the DP cuts only
/// at units and the literal's own estimate vetoes a bad cut, so a lower price
/// that lets it try more blocks codes smaller: on all-MiniLM's derived FP8 /
/// FP16 files (`brevis compress`), 0.25 gave 18,550,548 / 38,383,613 B, 1.0
/// gave 18,551,894 / 38,384,531 B, 1.5 gave 18,552,763 / 38,385,321 B, 3.0 gave
/// 18,553,189 / 38,387,471 B, and 0 (no table cost) 18,552,301 / 38,392,614 B.
const TABLE_BYTES_PER_SYMBOL: f64 = 0.25;
const BLOCK_BYTES: f64 = 24.0;

/// The ends of the blocks (increasing, the last is `s.len()`, at least two)
/// that the estimate `price` (bytes of one block from its histogram of
/// `2^width` counts) says code `s` in fewer bytes than one block, by more than
/// `min_gain` bytes. `None` if one block is best, or `s` is too short or too
/// wide to be cut. The DP itself prices blocks by order-0 entropy (cheap, and
/// close to what the entropy coders reach); `price` judges only its result.
pub fn regime_cuts(s: &Stream, min_gain: f64, price: impl Fn(&[u64]) -> Option<f64>) -> Option<Vec<usize>> {
    let width = s.width();
    let n = s.len();
    if width > MAX_WIDTH || n < 2 * MIN_UNIT {
        return None;
    }
    // The DP runs over units; each cut is then moved within a unit either side
    // in steps of a fine unit (`REFINE` per unit).
    let fine = n.div_ceil(MAX_UNITS).max(MIN_UNIT).div_ceil(REFINE);
    let fines = n.div_ceil(fine);
    let units = fines.div_ceil(REFINE);
    let at = |u: usize| (u * REFINE).min(fines);
    let size = 1usize << width;
    // Only the symbols present in `s` are counted and priced (a few hundred of
    // a 12-bit field's 4096 values): `cum[u * m + j]` counts occurrences of
    // `present[j]` in fine units `0..u`. The sums below add the same terms in
    // the same order as over every symbol, so the cuts are the same.
    let present = match s.words() {
        Words::U8(w) => present_symbols(w, size),
        Words::U16(w) => present_symbols(w, size),
        _ => return None,
    };
    let m = present.len();
    // Columns fit a u16: `size` is at most 2^MAX_WIDTH.
    let mut slot = vec![0u16; size];
    for (j, &v) in present.iter().enumerate() {
        slot[v as usize] = j as u16;
    }
    let mut cum = vec![0u64; (fines + 1) * m];
    match s.words() {
        Words::U8(w) => census(w, fine, &slot, m, &mut cum),
        Words::U16(w) => census(w, fine, &slot, m, &mut cum),
        _ => return None,
    }
    let mut counts = vec![0u64; m];
    // The census of fine units `a..b`, in `counts` (present symbols only).
    let census_of = |counts: &mut Vec<u64>, a: usize, b: usize| {
        let (hi, lo) = (&cum[b * m..(b + 1) * m], &cum[a * m..(a + 1) * m]);
        for ((c, &h), &l) in counts.iter_mut().zip(hi).zip(lo) {
            *c = h - l;
        }
    };
    let log2 = SmallLog2::get();
    let block = |counts: &mut Vec<u64>, a: usize, b: usize| -> f64 {
        census_of(counts, a, b);
        let n: u64 = counts.iter().sum();
        let nl = (n as f64).log2();
        let (mut bits, mut syms) = (0.0, 0usize);
        for &c in counts.iter().filter(|&&c| c > 0) {
            bits += c as f64 * (nl - log2.of(c));
            syms += 1;
        }
        bits / 8.0 + TABLE_BYTES_PER_SYMBOL * syms as f64 + BLOCK_BYTES
    };
    // The literal's own estimate takes a histogram of every symbol.
    let mut hist = vec![0u64; size];
    let mut priced = |counts: &mut Vec<u64>, a: usize, b: usize| -> Option<f64> {
        census_of(counts, a, b);
        for (&v, &c) in present.iter().zip(counts.iter()) {
            hist[v as usize] = c;
        }
        price(&hist)
    };
    // best[j]: cheapest cover of units `0..j`; from[j]: where its last block starts.
    let mut best = vec![f64::INFINITY; units + 1];
    let mut from = vec![0usize; units + 1];
    best[0] = 0.0;
    for j in 1..=units {
        for i in 0..j {
            let c = best[i] + block(&mut counts, at(i), at(j));
            if c < best[j] {
                best[j] = c;
                from[j] = i;
            }
        }
    }
    // Block starts in fine units, the end appended.
    let mut bounds = vec![fines];
    let mut j = units;
    while j > 0 {
        bounds.push(at(from[j]));
        j = from[j];
    }
    bounds.reverse();
    if bounds.len() < 3 {
        return None;
    }
    // Each cut moved to where its two blocks cost least.
    for t in 1..bounds.len() - 1 {
        let (prev, next) = (bounds[t - 1], bounds[t + 1]);
        let lo = (bounds[t] + 1).saturating_sub(REFINE).max(prev + 1);
        let hi = (bounds[t] + REFINE - 1).min(next - 1);
        let mut chosen = (f64::INFINITY, bounds[t]);
        for c in lo..=hi {
            let cost = block(&mut counts, prev, c) + block(&mut counts, c, next);
            if cost < chosen.0 {
                chosen = (cost, c);
            }
        }
        bounds[t] = chosen.1;
    }
    // The cut priced by the literal's own estimate: neighbours merged while
    // that says one block of both is no larger (the DP's price of a table
    // is low, see `TABLE_BYTES_PER_SYMBOL`).
    let mut prices = Vec::with_capacity(bounds.len() - 1);
    for pair in bounds.windows(2) {
        prices.push(priced(&mut counts, pair[0], pair[1])?);
    }
    loop {
        let mut merge: Option<(usize, f64, f64)> = None;
        for t in 0..prices.len() - 1 {
            let both = priced(&mut counts, bounds[t], bounds[t + 2])?;
            let saved = prices[t] + prices[t + 1] - both;
            if saved >= 0.0 && merge.is_none_or(|(_, s, _)| saved > s) {
                merge = Some((t, saved, both));
            }
        }
        let Some((t, _, both)) = merge else { break };
        bounds.remove(t + 1);
        prices.remove(t + 1);
        prices[t] = both;
        if prices.len() < 2 {
            return None;
        }
    }
    let cut: f64 = prices.iter().sum();
    if cut + min_gain >= priced(&mut counts, 0, fines)? {
        return None;
    }
    Some(bounds[1..].iter().map(|&u| (u * fine).min(n)).collect())
}

/// The symbols occurring in `words` (each below `size`), in increasing order.
fn present_symbols<W: Word>(words: &[W], size: usize) -> Vec<u32> {
    let mut seen = vec![false; size];
    for x in words {
        seen[x.to_u64() as usize] = true;
    }
    (0..size as u32).filter(|&v| seen[v as usize]).collect()
}

/// Fills `cum` (see [`regime_cuts`]) from `words` cut into units of `unit`
/// words; `slot[v]` is the column of symbol `v`, one of `m`.
fn census<W: Word>(words: &[W], unit: usize, slot: &[u16], m: usize, cum: &mut [u64]) {
    for (u, part) in words.chunks(unit).enumerate() {
        let (done, rest) = cum.split_at_mut((u + 1) * m);
        let row = &mut rest[..m];
        row.copy_from_slice(&done[u * m..]);
        for x in part {
            row[slot[x.to_u64() as usize] as usize] += 1;
        }
    }
}

/// `log2` of the counts below [`SmallLog2::LEN`], computed once: the DP takes
/// the log of every count of every block it prices, and most counts are
/// small. The same `f64::log2` values, so no price changes.
struct SmallLog2(Vec<f64>);

impl SmallLog2 {
    const LEN: usize = 1 << 12;

    fn get() -> &'static SmallLog2 {
        static TABLE: std::sync::OnceLock<SmallLog2> = std::sync::OnceLock::new();
        TABLE.get_or_init(|| SmallLog2((0..Self::LEN).map(|c| (c as f64).log2()).collect()))
    }

    fn of(&self, c: u64) -> f64 {
        match self.0.get(c as usize) {
            Some(&l) => l,
            None => (c as f64).log2(),
        }
    }
}

/// `Concat` of the blocks of `s` ending at `ends`, each solved by `solve`.
pub fn concat_blocks(s: &Stream, ends: &[usize], solve: impl Fn(&Stream) -> Option<Node>) -> Option<Node> {
    let mut children = Vec::with_capacity(ends.len());
    let mut start = 0;
    for &end in ends {
        let words = match s.words() {
            Words::U8(w) => Words::U8(w.get(start..end)?.to_vec()),
            Words::U16(w) => Words::U16(w.get(start..end)?.to_vec()),
            Words::U32(w) => Words::U32(w.get(start..end)?.to_vec()),
            Words::U64(w) => Words::U64(w.get(start..end)?.to_vec()),
        };
        children.push(solve(&Stream::new(s.width(), words).ok()?)?);
        start = end;
    }
    (children.len() >= 2 && start == s.len()).then_some(Node::Concat(children))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes whose first `split` words are small and the rest spread wide.
    fn two_regimes(n: usize, split: usize) -> Stream {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let v: Vec<u64> = (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let r = x >> 8;
                if i < split {
                    r % 8
                } else {
                    r % 256
                }
            })
            .collect();
        Stream::from_u64s(8, &v).unwrap()
    }

    fn order0_bytes(hist: &[u64]) -> Option<f64> {
        let n: u64 = hist.iter().sum();
        let bits: f64 = hist
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| c as f64 * (n as f64 / c as f64).log2())
            .sum();
        Some(bits / 8.0 + 300.0)
    }

    #[test]
    fn cuts_where_the_regime_changes() {
        let n = 64 * MIN_UNIT;
        // Not on a unit: the DP finds the unit, the refinement the fine unit.
        let split = 16 * MIN_UNIT + 5 * MIN_UNIT / REFINE;
        let s = two_regimes(n, split);
        let ends = regime_cuts(&s, 0.0, order0_bytes).expect("two regimes");
        assert_eq!(ends, vec![split, n]);
        let policy = super::super::LitPolicy::new(0, 1.0);
        let node = concat_blocks(&s, &ends, |b| Some(super::super::lit::best_lit(b, &policy))).unwrap();
        let Node::Concat(children) = &node else {
            panic!("a Concat")
        };
        assert_eq!(children.len(), 2);
    }

    #[test]
    fn one_regime_is_not_cut() {
        let s = two_regimes(64 * MIN_UNIT, 0);
        assert_eq!(regime_cuts(&s, 0.0, order0_bytes), None);
        // Too short to cut at all.
        let s = two_regimes(MIN_UNIT, MIN_UNIT / 2);
        assert_eq!(regime_cuts(&s, 0.0, order0_bytes), None);
    }
}
