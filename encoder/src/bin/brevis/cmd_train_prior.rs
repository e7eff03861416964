//! `brevis train-prior SAMPLE... [-o FILE]`: learn the production prior.

use std::path::PathBuf;

use anyhow::{Context, Result};
use brevis_encoder::synth::astar::PriorTrainer;
use brevis_encoder::{compress_files, CompressOptions};

use crate::common::{collect_inputs, input_files, map_sources, progress};

#[derive(clap::Args)]
pub struct Args {
    /// Sample files (or one model directory); every container brevis reads.
    #[arg(required = true)]
    samples: Vec<PathBuf>,
    /// The prior file to write (JSON, see docs/PRIOR.md).
    #[arg(short, long, default_value = "prior.json")]
    output: PathBuf,
    /// Search one chunk in this many (chosen by a hash of its bytes); 1 searches all.
    #[arg(long, default_value_t = 1)]
    every: u64,
}

pub fn run(args: Args, quiet: bool) -> Result<()> {
    let sources = collect_inputs(&args.samples)?;
    let maps = map_sources(&sources)?;
    let files = input_files(&sources, &maps);
    let total: u64 = files.iter().map(|f| f.data.len() as u64).sum();
    let trainer = PriorTrainer::new(args.every);
    let pb = progress(total, quiet, "train");
    // The pipeline plans and chunks exactly as `compress` does; the archive is dropped.
    compress_files(std::io::sink(), &files, &trainer, &CompressOptions::default(), &|n| {
        pb.inc(n)
    })?;
    pb.finish_and_clear();
    let (counts, searched) = trainer.counts();
    let names: Vec<String> = sources
        .iter()
        .map(|s| {
            s.disk
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    let trained_on = vec![
        format!("brevis train-prior --every {} {}", args.every, names.join(" ")),
        format!("{searched} chunks searched"),
    ];
    let mut json = serde_json::to_string_pretty(&counts.to_file(trained_on))?;
    json.push('\n');
    std::fs::write(&args.output, json).with_context(|| format!("cannot write `{}`", args.output.display()))?;
    if !quiet {
        eprintln!(
            "{} contexts from {searched} chunks -> {}",
            counts.contexts.len(),
            args.output.display()
        );
    }
    Ok(())
}
