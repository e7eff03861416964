//! The learned production prior: how often each production won under each
//! context, with back-off to coarser contexts and Witten-Bell smoothing.
//! `brevis train-prior` counts the wins ([`PriorCounts`]); the A* search turns
//! them into a cost in bits (`−log2 p`) that orders its expansions. The file
//! format is documented in `docs/PRIOR.md`.

use std::collections::BTreeMap;

use anyhow::{bail, Context as _, Result};
use brevis_format::stream::Stream;
use brevis_format::with_words;
use serde::{Deserialize, Serialize};

use super::productions::{Prod, Role};

/// The prior trained on part of the public corpus (`scripts/train-prior.sh`).
pub const DEFAULT_PRIOR: &str = include_str!("../../prior/default.json");

/// The `format` field every prior file carries.
pub const FORMAT: &str = "brevis-prior";

/// The version of the file layout this build reads and writes.
pub const VERSION: u32 = 1;

/// Largest cost one production may add, in bits: an unseen production stays
/// possible, and the sum over a program stays far below one byte once scaled.
pub const MAX_BITS: f64 = 16.0;

/// Words sampled (evenly spaced) for a hole's features.
const FEATURE_SAMPLE: usize = 4096;

/// Cheap features of a hole's target, bucketed (see `docs/PRIOR.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Features {
    /// Order-0 entropy per bit of width, in quarters (0..=3).
    pub entropy: u8,
    /// Share of zero words: 0 none, 1 under 10%, 2 under 50%, 3 the rest.
    pub zeros: u8,
    /// Distinct words per sampled word: 0 under 1%, 1 under 10%, 2 under 50%, 3 the rest.
    pub distinct: u8,
    /// Length: 0 under 4 Ki words, 1 under 64 Ki, 2 under 1 Mi, 3 the rest
    /// (table costs weigh on short streams, not on long ones).
    pub size: u8,
}

impl Features {
    /// Features of `s`, from up to 4096 evenly spaced words.
    pub fn of(s: &Stream) -> Features {
        let n = s.len();
        if n == 0 {
            return Features {
                entropy: 0,
                zeros: 0,
                distinct: 0,
                size: 0,
            };
        }
        let step = n.div_ceil(FEATURE_SAMPLE).max(1);
        let mut words: Vec<u64> =
            with_words!(s.words(), w => w.iter().step_by(step).map(|x| brevis_format::Word::to_u64(*x)).collect());
        let m = words.len();
        let zeros = words.iter().filter(|&&x| x == 0).count();
        words.sort_unstable();
        let mut h = 0.0;
        let mut distinct = 0usize;
        for run in words.chunk_by(|a, b| a == b) {
            distinct += 1;
            let p = run.len() as f64 / m as f64;
            h -= p * p.log2();
        }
        let per_bit = h / f64::from(s.width());
        let zr = zeros as f64 / m as f64;
        let dr = distinct as f64 / m as f64;
        Features {
            entropy: ((per_bit * 4.0) as u8).min(3),
            zeros: if zeros == 0 {
                0
            } else if zr < 0.1 {
                1
            } else if zr < 0.5 {
                2
            } else {
                3
            },
            size: match n {
                0..4096 => 0,
                4096..65536 => 1,
                65536..1048576 => 2,
                _ => 3,
            },
            distinct: if dr < 0.01 {
                0
            } else if dr < 0.1 {
                1
            } else if dr < 0.5 {
                2
            } else {
                3
            },
        }
    }
}

/// Where a production is chosen: the hole's role (with the root's dtype or
/// hint), width, the parent production, the depth, and the target's features.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Context {
    /// [`Role::label`].
    pub role: String,
    /// Word width of the hole.
    pub width: u8,
    /// The parent production's name (`-` at the root).
    pub parent: String,
    /// Depth of the hole (root 0), capped at 3.
    pub depth: u8,
    /// The target's features.
    pub features: Features,
}

impl Context {
    /// The context of a hole.
    pub fn new(role: Role, s: &Stream, parent: Option<Prod>, depth: u32) -> Context {
        Context {
            role: role.label(),
            width: s.width(),
            parent: parent.map(|p| p.name()).unwrap_or_else(|| "-".into()),
            depth: depth.min(3) as u8,
            features: Features::of(s),
        }
    }

    /// The keys of this context from the finest to the coarsest (the back-off
    /// chain): everything; role, width and parent; role alone.
    pub fn keys(&self) -> [String; 3] {
        let f = &self.features;
        [
            format!(
                "{}|{}|{}|{}|e{}z{}d{}n{}",
                self.role, self.width, self.parent, self.depth, f.entropy, f.zeros, f.distinct, f.size
            ),
            format!("{}|{}|{}", self.role, self.width, self.parent),
            self.role.clone(),
        ]
    }
}

/// The file: counts of winning productions per context key, at every level of
/// the back-off chain.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PriorFile {
    /// Always `brevis-prior`.
    pub format: String,
    /// Layout version ([`VERSION`]).
    pub version: u32,
    /// How the counts were made (the command and samples), for people.
    #[serde(default)]
    pub trained_on: Vec<String>,
    /// Context key → production name → wins.
    pub contexts: BTreeMap<String, BTreeMap<String, u64>>,
}

/// Counts being gathered by `brevis train-prior`.
#[derive(Clone, Debug, Default)]
pub struct PriorCounts {
    /// Context key → production name → wins.
    pub contexts: BTreeMap<String, BTreeMap<String, u64>>,
}

impl PriorCounts {
    /// Counts `weight` wins of `prod` in `ctx`, at every back-off level.
    pub fn add(&mut self, ctx: &Context, prod: Prod, weight: u64) {
        for key in ctx.keys() {
            *self.contexts.entry(key).or_default().entry(prod.name()).or_default() += weight;
        }
    }

    /// Adds another set of counts.
    pub fn merge(&mut self, other: PriorCounts) {
        for (k, m) in other.contexts {
            let e = self.contexts.entry(k).or_default();
            for (p, c) in m {
                *e.entry(p).or_default() += c;
            }
        }
    }

    /// The file these counts make.
    pub fn to_file(&self, trained_on: Vec<String>) -> PriorFile {
        PriorFile {
            format: FORMAT.into(),
            version: VERSION,
            trained_on,
            contexts: self.contexts.clone(),
        }
    }
}

/// A loaded prior: `p(production | context)` with Witten-Bell back-off.
#[derive(Clone, Debug)]
pub struct Prior {
    contexts: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Prior {
    /// Parses a prior file (JSON, see `docs/PRIOR.md`).
    pub fn parse(text: &str) -> Result<Prior> {
        let f: PriorFile = serde_json::from_str(text).context("not a prior file (JSON)")?;
        if f.format != FORMAT {
            bail!("not a prior file: format is `{}`, not `{FORMAT}`", f.format);
        }
        if f.version != VERSION {
            bail!("prior file version {} (this build reads {VERSION})", f.version);
        }
        Ok(Prior { contexts: f.contexts })
    }

    /// The prior that ships with the encoder.
    pub fn default_prior() -> Prior {
        Prior::parse(DEFAULT_PRIOR).expect("the shipped prior parses (tested)")
    }

    /// Number of context keys.
    pub fn len(&self) -> usize {
        self.contexts.len()
    }

    /// True when the prior holds no counts.
    pub fn is_empty(&self) -> bool {
        self.contexts.is_empty()
    }

    /// `p(prod | ctx)` among `choices` (the productions that apply), smoothed:
    /// Witten-Bell interpolation from the finest context down to a uniform
    /// distribution over `choices`, then renormalized over `choices`.
    pub fn probabilities(&self, ctx: &Context, choices: &[Prod]) -> Vec<f64> {
        let names: Vec<String> = choices.iter().map(|p| p.name()).collect();
        let k = choices.len().max(1) as f64;
        let mut p: Vec<f64> = vec![1.0 / k; choices.len()];
        // Coarsest first: each level interpolates its counts with the level below.
        for key in ctx.keys().iter().rev() {
            let Some(counts) = self.contexts.get(key) else { continue };
            let n: u64 = counts.values().sum();
            let t = counts.len() as f64;
            if n == 0 {
                continue;
            }
            let n = n as f64;
            for (pi, name) in p.iter_mut().zip(&names) {
                let c = counts.get(name).copied().unwrap_or(0) as f64;
                *pi = (c + t * *pi) / (n + t);
            }
        }
        let sum: f64 = p.iter().sum();
        if sum > 0.0 {
            p.iter_mut().for_each(|x| *x /= sum);
        }
        p
    }

    /// `−log2 p` of each of `choices`, capped at [`MAX_BITS`].
    pub fn costs(&self, ctx: &Context, choices: &[Prod]) -> Vec<f64> {
        self.probabilities(ctx, choices)
            .into_iter()
            .map(|p| if p > 0.0 { (-p.log2()).min(MAX_BITS) } else { MAX_BITS })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_prior_parses_and_has_counts() {
        let p = Prior::default_prior();
        assert!(!p.is_empty());
    }

    #[test]
    fn probabilities_sum_to_one_and_follow_counts() {
        let s = Stream::from_u64s(8, &(0..1000u64).map(|i| i % 7).collect::<Vec<_>>()).unwrap();
        let ctx = Context::new(Role::Field(super::super::productions::LitMode::Entropy), &s, None, 1);
        let mut c = PriorCounts::default();
        c.add(&ctx, Prod::Lit, 9);
        c.add(&ctx, Prod::Split8, 1);
        let text = serde_json::to_string(&c.to_file(vec![])).unwrap();
        let prior = Prior::parse(&text).unwrap();
        let choices = [Prod::Split8, Prod::Lit, Prod::Const];
        let p = prior.probabilities(&ctx, &choices);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert!(p[1] > p[0] && p[0] > p[2] && p[2] > 0.0, "{p:?}");
        // An unseen context backs off to uniform.
        let other = Context::new(Role::Column, &s, None, 1);
        let q = prior.probabilities(&other, &choices);
        assert!(q.iter().all(|&x| (x - 1.0 / 3.0).abs() < 1e-9));
    }

    #[test]
    fn bad_files_are_refused() {
        assert!(Prior::parse("{}").is_err());
        assert!(Prior::parse(r#"{"format":"other","version":1,"contexts":{}}"#).is_err());
        assert!(Prior::parse(r#"{"format":"brevis-prior","version":9,"contexts":{}}"#).is_err());
    }
}
