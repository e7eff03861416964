//! The search switches of `brevis compress` (`--search`, `--prior`, `--no-ctx`,
//! `--fast-decode`, `--effort`) and `brevis train-prior`, run as a user would.

use std::fs;

mod common;
use common::{brevis, bundled, compress_reported, ok};

#[test]
fn every_search_switch_round_trips_and_reports_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("model.safetensors"), bundled()).unwrap();
    // A prior trained here, on the bundled checkpoint.
    ok(&brevis(&["train-prior", "model.safetensors", "-o", "p.json", "-q"], d));
    let text = fs::read_to_string(d.join("p.json")).unwrap();
    assert!(text.contains("\"brevis-prior\""), "{text}");
    let runs: &[&[&str]] = &[
        &["--search", "menu"],
        &["--search", "menu", "--no-ctx", "--effort", "0"],
        &["--search", "astar"],
        &["--search", "astar", "--effort", "0"],
        &["--search", "astar", "--effort", "2", "--prior", "none"],
        &["--search", "astar", "--prior", "p.json", "--no-ctx"],
        &["--fast-decode"],
        &["--search", "menu", "--fast-decode"],
    ];
    for (i, flags) in runs.iter().enumerate() {
        let out = format!("m{i}.brv");
        let report = format!("r{i}.json");
        let mut args = vec!["compress", "model.safetensors", "-q", "-o", &out, "--report", &report];
        args.extend_from_slice(flags);
        ok(&brevis(&args, d));
        ok(&brevis(&["verify", &out, "-q"], d));
        ok(&brevis(&["verify", &out, "-q", "--threads", "2"], d));
        let r = fs::read_to_string(d.join(&report)).unwrap();
        // Candidates (menu) or expansions (astar) are counted per tensor.
        assert!(
            r.contains("\"candidates\": ") && !r.contains("\"candidates\": 0,"),
            "{flags:?}: {r}"
        );
    }
    // Without ctx literals, no Lit.ctx appears; favouring decode speed, no
    // context-coded literal of either kind.
    let r = fs::read_to_string(d.join("r5.json")).unwrap();
    assert!(!r.contains("Lit.ctx"), "{r}");
    for i in [6, 7] {
        let r = fs::read_to_string(d.join(format!("r{i}.json"))).unwrap();
        assert!(!r.contains("Lit.ctx") && !r.contains("Lit.nbr"), "{r}");
    }
    // The bundled checkpoint's default archive does use Lit.ctx, so the check above can fail.
    let r = fs::read_to_string(d.join("r2.json")).unwrap();
    assert!(r.contains("Lit.ctx"), "{r}");
    // A prior that is not one, and --prior with the menu, are usage errors.
    fs::write(d.join("bad.json"), "{}").unwrap();
    for (search, prior) in [("astar", "bad.json"), ("menu", "none")] {
        let o = brevis(
            &[
                "compress",
                "model.safetensors",
                "-q",
                "-f",
                "--search",
                search,
                "--prior",
                prior,
            ],
            d,
        );
        assert!(!o.status.success(), "--search {search} --prior {prior}");
    }
    // The default search is A*, and takes --prior.
    ok(&brevis(
        &["compress", "model.safetensors", "-q", "-f", "--prior", "none"],
        d,
    ));
}

/// `--fast-decode` cuts tensors into 1 MiB chunks (4 MiB by default): a 2.5 MiB
/// tensor is three chunks there, one otherwise, and both archives round-trip.
#[test]
fn fast_decode_archives_have_one_mib_chunks() {
    let n = 5 << 17; // 655,360 F32 values: 2.5 MiB
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let data: Vec<u8> = (0..n)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Small weights of either sign, as trained tensors have.
            let v = ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1;
            v.to_le_bytes()
        })
        .collect();
    let header = format!(
        "{{\"w\":{{\"dtype\":\"F32\",\"shape\":[{n}],\"data_offsets\":[0,{}]}}}}",
        data.len()
    );
    let header = format!("{header:<width$}", width = header.len().next_multiple_of(8));
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&data);

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("model.safetensors"), &file).unwrap();
    let chunks_of_w = |flags: &[&str], out: &str| {
        let (_, r) = compress_reported(d, out, flags);
        ok(&brevis(&["verify", out, "-q"], d));
        let w = r["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "w")
            .unwrap_or_else(|| panic!("no tensor w in {r}"));
        w["chunks"].as_array().unwrap().len()
    };
    assert_eq!(chunks_of_w(&[], "default.brv"), 1);
    assert_eq!(chunks_of_w(&["--fast-decode"], "fast.brv"), 3);
}
