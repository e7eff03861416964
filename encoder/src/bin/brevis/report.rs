//! Search reports: `brevis compress --report FILE.json` (per tensor: programs,
//! bytes, candidates compared, search time; per run: operator and literal
//! encoding usage and fallback rates) and the usage summary `brevis inspect`
//! prints.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Result;
use brevis_decoder::{Archive, DecodeError, DecodeLimits};
use brevis_encoder::synth::{take_candidates, Hint, Synthesizer, Template};
use brevis_encoder::FileReport;
use brevis_format::archive::{chunk_checksum, ChunkRecord, SegmentKind};
use brevis_format::program::{self, Node, OPERATOR_NAMES};
use brevis_format::stream::Stream;
use brevis_format::wire::LitEncoding;

use crate::common::CorruptArchive;

/// What the recorder notes of one chunk's synthesis.
#[derive(Clone, Copy, Default)]
struct ChunkStats {
    /// Time in the synthesizer: the search (or the template's build) and the
    /// build of the winning program's literals.
    time: Duration,
    /// Candidates compared.
    candidates: u64,
    /// Built from an earlier chunk's template, not searched: given one, the
    /// synthesizer offers no template of its own.
    from_template: bool,
}

/// Wraps a synthesizer and records, per chunk (keyed by the xxh3 and length of
/// its bytes, as its CHUNK record states them), the search time, the
/// candidates compared and whether it was built from a template.
pub struct Recorder<'a> {
    inner: &'a dyn Synthesizer,
    stats: Mutex<HashMap<(u64, u64), ChunkStats>>,
}

impl<'a> Recorder<'a> {
    pub fn new(inner: &'a dyn Synthesizer) -> Self {
        Recorder {
            inner,
            stats: Mutex::new(HashMap::new()),
        }
    }
}

impl Synthesizer for Recorder<'_> {
    fn synthesize(&self, root: &Stream, hint: Hint) -> Node {
        self.synthesize_reusing(root, hint, None).0
    }

    fn synthesize_reusing(&self, root: &Stream, hint: Hint, template: Option<&Template>) -> (Node, Option<Template>) {
        take_candidates();
        let t = Instant::now();
        let found = self.inner.synthesize_reusing(root, hint, template);
        let elapsed = t.elapsed();
        let stats = ChunkStats {
            time: elapsed,
            candidates: take_candidates(),
            from_template: template.is_some() && found.1.is_none(),
        };
        let mut bytes = Vec::with_capacity(root.mem_bytes());
        if root.write_le_bytes(&mut bytes).is_ok() {
            let key = (chunk_checksum(&bytes), bytes.len() as u64);
            self.stats.lock().expect("recorder lock").insert(key, stats);
        }
        found
    }

    fn waits_for_template(&self, hint: Hint, words: usize) -> bool {
        self.inner.waits_for_template(hint, words)
    }
}

/// How often each operator and each literal encoding occurs in a set of
/// programs, and how many programs are a bare `Lit` at the root.
#[derive(Default)]
pub struct Usage {
    pub chunks: u64,
    pub operators: [u64; OPERATOR_NAMES.len()],
    pub encodings: BTreeMap<&'static str, u64>,
    /// Programs that are a single `Lit` (no operator found anything better).
    pub bare_lit: u64,
    /// Of those, raw literals of the whole chunk.
    pub bare_raw: u64,
}

impl Usage {
    pub fn add(&mut self, node: &Node) {
        self.chunks += 1;
        if let Node::Lit { encoding, .. } = node {
            self.bare_lit += 1;
            self.bare_raw += u64::from(*encoding == LitEncoding::Raw);
        }
        self.walk(node);
    }

    fn walk(&mut self, node: &Node) {
        self.operators[node.operator()] += 1;
        if let Node::Lit { encoding, .. } = node {
            *self.encodings.entry(encoding.name()).or_default() += 1;
        }
        node.children().iter().for_each(|c| self.walk(c));
    }

    /// Lines for people: operator and encoding counts, the bare-`Lit` rate.
    pub fn lines(&self) -> Vec<String> {
        let ops: Vec<String> = OPERATOR_NAMES
            .iter()
            .zip(&self.operators)
            .filter(|(_, &n)| n > 0)
            .map(|(o, n)| format!("{o} {n}"))
            .collect();
        let encs: Vec<String> = self.encodings.iter().map(|(e, n)| format!("{e} {n}")).collect();
        vec![
            format!("operators: {}", ops.join(", ")),
            format!("literal encodings: {}", encs.join(", ")),
            format!(
                "bare Lit programs: {} of {} chunks ({:.2}%), {} of them raw",
                self.bare_lit,
                self.chunks,
                pct(self.bare_lit, self.chunks),
                self.bare_raw
            ),
        ]
    }

    fn json(&self, out: &mut String) {
        out.push_str("{\"chunks\": ");
        let _ = write!(out, "{}, \"operators\": {{", self.chunks);
        let ops: Vec<String> = OPERATOR_NAMES
            .iter()
            .zip(&self.operators)
            .map(|(o, n)| format!("\"{o}\": {n}"))
            .collect();
        out.push_str(&ops.join(", "));
        out.push_str("}, \"literal_encodings\": {");
        let encs: Vec<String> = LitEncoding::ALL
            .iter()
            .map(|e| {
                format!(
                    "\"{}\": {}",
                    e.name(),
                    self.encodings.get(e.name()).copied().unwrap_or(0)
                )
            })
            .collect();
        out.push_str(&encs.join(", "));
        let _ = write!(
            out,
            "}}, \"bare_lit\": {}, \"bare_lit_rate\": {:.6}, \"bare_raw\": {}}}",
            self.bare_lit,
            self.bare_lit as f64 / self.chunks.max(1) as f64,
            self.bare_raw
        );
    }
}

fn pct(a: u64, b: u64) -> f64 {
    100.0 * a as f64 / b.max(1) as f64
}

/// One segment's chunks as the archive stores them: (program, record bytes,
/// decoded xxh3, decoded length). Chunks listed by several segments (copies)
/// are given to the first only.
type Chunks = Vec<(Node, u64, u64, u64)>;

fn walk_archive(
    archive: &Archive<'_>,
    limits: &DecodeLimits,
    mut f: impl FnMut(&str, &str, &SegmentKind, u64, Chunks),
) -> Result<()> {
    let mut seen = HashSet::new();
    let corrupt = |e| CorruptArchive(DecodeError::new(e));
    for file in archive.files() {
        for seg in &file.segments {
            let mut chunks = Vec::new();
            for c in &seg.chunks {
                if !seen.insert(c.offset) {
                    continue;
                }
                let body = archive.chunk_body(c).map_err(CorruptArchive)?;
                let chunk = ChunkRecord::parse(body).map_err(corrupt)?;
                let node = program::parse(chunk.program, &limits.program).map_err(corrupt)?;
                chunks.push((node, c.record_len, chunk.decoded_xxh3, chunk.decoded_len));
            }
            f(&file.path, &seg.name, &seg.kind, seg.len, chunks);
        }
    }
    Ok(())
}

/// Operator and encoding usage over every chunk of an archive.
pub fn archive_usage(archive: &Archive<'_>, limits: &DecodeLimits) -> Result<Usage> {
    let mut u = Usage::default();
    walk_archive(archive, limits, |_, _, _, _, chunks| {
        chunks.iter().for_each(|c| u.add(&c.0));
    })?;
    Ok(u)
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// The `--report` JSON of a finished run: `archive` is the archive written.
pub fn report_json(
    archive: &[u8],
    recorder: &Recorder<'_>,
    reports: &[FileReport],
    elapsed: Duration,
) -> Result<String> {
    let limits = DecodeLimits::default();
    let a = Archive::open(archive, limits).map_err(CorruptArchive)?;
    let stats = recorder.stats.lock().expect("recorder lock");
    let mut usage = Usage::default();
    let mut tensors = Vec::new();
    // Synthesis time of the chunks searched and of those built from a template.
    let (mut searched, mut templated) = (Duration::ZERO, Duration::ZERO);
    walk_archive(&a, &limits, |path, name, kind, len, chunks| {
        let mut t = String::new();
        let (dtype, shape) = match kind {
            SegmentKind::Opaque => ("opaque".to_string(), "null".to_string()),
            SegmentKind::Tensor { dtype, shape } => (dtype.to_string(), format!("{shape:?}")),
        };
        let stored: u64 = chunks.iter().map(|c| c.1).sum();
        let mut time = Duration::ZERO;
        let mut cands = 0u64;
        let mut progs = Vec::new();
        for (node, bytes, sum, dlen) in &chunks {
            usage.add(node);
            let c = stats.get(&(*sum, *dlen)).copied().unwrap_or_default();
            time += c.time;
            cands += c.candidates;
            *if c.from_template { &mut templated } else { &mut searched } += c.time;
            progs.push(format!(
                "{{\"program\": {}, \"bytes\": {bytes}, \"candidates\": {}, \"search_ms\": {:.3}, \"from_template\": {}}}",
                json_str(&node.to_string()),
                c.candidates,
                c.time.as_secs_f64() * 1e3,
                c.from_template
            ));
        }
        let _ = write!(
            t,
            "{{\"file\": {}, \"name\": {}, \"dtype\": {}, \"shape\": {shape}, \"original_bytes\": {len}, \"stored_chunk_bytes\": {stored}, \"candidates\": {cands}, \"search_ms\": {:.3}, \"chunks\": [{}]}}",
            json_str(path),
            json_str(name),
            json_str(&dtype),
            time.as_secs_f64() * 1e3,
            progs.join(", ")
        );
        tensors.push(t);
    })?;
    let verify: u64 = reports.iter().map(|r| r.verify_fallbacks).sum();
    let verify_time: Duration = reports.iter().map(|r| r.verify_time).sum();
    let original: u64 = reports.iter().map(|r| r.size).sum();
    let mut out = String::new();
    let _ = write!(
        out,
        "{{\n\"archive_bytes\": {}, \"original_bytes\": {original}, \"seconds\": {:.3},\n\"phase_seconds\": {{\"searched\": {:.6}, \"from_template\": {:.6}, \"verify\": {:.6}}},\n\"usage\": ",
        archive.len(),
        elapsed.as_secs_f64(),
        searched.as_secs_f64(),
        templated.as_secs_f64(),
        verify_time.as_secs_f64()
    );
    usage.json(&mut out);
    let _ = write!(
        out,
        ",\n\"verified_raw_fallbacks\": {verify}, \"verified_raw_fallback_rate\": {:.6},\n\"tensors\": [\n{}\n]\n}}\n",
        verify as f64 / usage.chunks.max(1) as f64,
        tensors.join(",\n")
    );
    Ok(out)
}
