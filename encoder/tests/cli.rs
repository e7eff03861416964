//! The `brevis` command line, run as a user would: round trips, exit codes,
//! and the promises about never losing or overwriting data.

use std::fs;
use std::process::{Command, Output, Stdio};

mod common;
use common::{brevis, brevis_piped, brevis_with_stdin, bundled, compress_reported, ok};

#[test]
fn compress_decompress_verify_inspect_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("model.safetensors"), bundled()).unwrap();
    let before = fs::metadata(d.join("model.safetensors")).unwrap().modified().unwrap();
    ok(&brevis(&["compress", "model.safetensors", "-q"], d));
    assert!(
        d.join("model.safetensors.brv").exists(),
        "default output name is IN.brv"
    );
    // The input is untouched: same bytes, same mtime.
    assert_eq!(fs::read(d.join("model.safetensors")).unwrap(), bundled());
    assert_eq!(
        fs::metadata(d.join("model.safetensors")).unwrap().modified().unwrap(),
        before
    );

    let v = brevis(&["verify", "model.safetensors.brv"], d);
    ok(&v);
    assert!(String::from_utf8_lossy(&v.stdout).contains("OK"));

    let i = brevis(&["inspect", "model.safetensors.brv"], d);
    ok(&i);
    let text = String::from_utf8_lossy(&i.stdout);
    assert!(
        text.contains("lstm_cell.weight_ih") && text.contains("F32") && text.contains("totals by dtype"),
        "{text}"
    );

    ok(&brevis(&["decompress", "model.safetensors.brv", "-o", "out", "-q"], d));
    assert_eq!(fs::read(d.join("out/model.safetensors")).unwrap(), bundled());
}

#[test]
fn directories_round_trip_with_their_tree() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir_all(d.join("repo/onnx")).unwrap();
    fs::write(d.join("repo/model.safetensors"), bundled()).unwrap();
    fs::write(d.join("repo/config.json"), b"{\"a\": 1}").unwrap();
    fs::write(d.join("repo/onnx/model.onnx"), &bundled()[..100_000]).unwrap();
    ok(&brevis(&["compress", "repo", "-o", "repo.brv", "-q"], d));
    ok(&brevis(&["decompress", "repo.brv", "-o", "back", "-q"], d));
    for f in ["model.safetensors", "config.json", "onnx/model.onnx"] {
        assert_eq!(
            fs::read(d.join("back").join(f)).unwrap(),
            fs::read(d.join("repo").join(f)).unwrap(),
            "{f}"
        );
    }
}

#[test]
fn never_overwrites_without_force_and_never_writes_over_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("m.safetensors"), bundled()).unwrap();
    fs::write(d.join("existing.brv"), b"precious").unwrap();
    let o = brevis(&["compress", "m.safetensors", "-o", "existing.brv", "-q"], d);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("already exists"));
    assert_eq!(fs::read(d.join("existing.brv")).unwrap(), b"precious");

    ok(&brevis(
        &["compress", "m.safetensors", "-o", "existing.brv", "-f", "-q"],
        d,
    ));
    assert_ne!(fs::read(d.join("existing.brv")).unwrap(), b"precious");

    let o = brevis(&["compress", "m.safetensors", "-o", "m.safetensors", "-f", "-q"], d);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is one of the inputs"));
    assert_eq!(fs::read(d.join("m.safetensors")).unwrap(), bundled());

    // Decompressing over an existing file is refused too.
    fs::create_dir(d.join("out")).unwrap();
    fs::write(d.join("out/m.safetensors"), b"mine").unwrap();
    let o = brevis(&["decompress", "existing.brv", "-o", "out", "-q"], d);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(fs::read(d.join("out/m.safetensors")).unwrap(), b"mine");
    assert_eq!(
        fs::read_dir(d.join("out")).unwrap().count(),
        1,
        "no temp file left behind"
    );
}

#[test]
fn corrupt_archive_exits_3_and_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("m.safetensors"), bundled()).unwrap();
    ok(&brevis(&["compress", "m.safetensors", "-q"], d));
    let mut a = fs::read(d.join("m.safetensors.brv")).unwrap();
    let mid = a.len() / 2;
    a[mid] ^= 0x10;
    fs::write(d.join("bad.brv"), &a).unwrap();
    let o = brevis(&["decompress", "bad.brv", "-o", "out", "-q"], d);
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("checksum mismatch") && err.contains("m.safetensors"),
        "{err}"
    );
    assert_eq!(
        fs::read_dir(d.join("out")).unwrap().count(),
        0,
        "no partial file under any name"
    );
    assert_eq!(brevis(&["verify", "bad.brv"], d).status.code(), Some(3));

    fs::write(d.join("short.brv"), &a[..100]).unwrap();
    let o = brevis(&["verify", "short.brv"], d);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("truncated"));
}

/// Runs `brevis ARGS` (words split by the shell) in `cwd` on a terminal of its
/// own, which `script` (util-linux: in every Debian) gives it: its standard
/// input and output are that terminal, and what it prints comes back as the
/// output's stdout. `None` where there is no `script`.
fn on_a_terminal(args: &str, cwd: &std::path::Path) -> Option<Output> {
    Command::new("script")
        .arg("--version")
        .output()
        .ok()?
        .status
        .success()
        .then_some(())?;
    let bin = env!("CARGO_BIN_EXE_brevis");
    let o = Command::new("script")
        .args(["-qec", &format!("'{bin}' {args}"), "/dev/null"])
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("run script");
    Some(o)
}

/// `decompress -c` writes the files' bytes to standard output, `-` reads the
/// archive from standard input (mapped when it is a file at its start, read in
/// pieces otherwise), and files named after the archive are the only ones
/// written.
#[test]
fn stdout_stdin_and_chosen_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let second = weights_file(64);
    fs::create_dir_all(d.join("m/sub")).unwrap();
    fs::write(d.join("m/model.safetensors"), bundled()).unwrap();
    fs::write(d.join("m/sub/w.safetensors"), &second).unwrap();
    ok(&brevis(&["compress", "m", "-o", "m.brv", "-q"], d));
    let archive = fs::read(d.join("m.brv")).unwrap();
    let both = [bundled(), &second[..]].concat();

    // To standard output: every file in archive order, or those named.
    let o = brevis(&["decompress", "-c", "m.brv"], d);
    ok(&o);
    assert!(o.stdout == both, "the files one after another");
    assert!(String::from_utf8_lossy(&o.stderr).contains("2 file(s)"));
    let o = brevis(&["decompress", "m.brv", "sub/w.safetensors", "--stdout", "-q"], d);
    ok(&o);
    assert!(o.stdout == second, "the named file alone");
    assert!(o.stderr.is_empty(), "quiet");

    // From standard input: a pipe, a file, and a file read partway.
    let o = brevis_piped(&["decompress", "-c", "-", "--threads", "2"], d, &archive);
    ok(&o);
    assert!(o.stdout == both, "from a pipe");
    let o = brevis_piped(&["decompress", "-", "-o", "piped", "-q"], d, &archive);
    ok(&o);
    assert!(fs::read(d.join("piped/sub/w.safetensors")).unwrap() == second);
    let from_file = || Stdio::from(fs::File::open(d.join("m.brv")).unwrap());
    ok(&brevis_with_stdin(&["verify", "-"], d, from_file()));
    let o = brevis_with_stdin(&["decompress", "-c", "-"], d, from_file());
    ok(&o);
    assert!(o.stdout == both, "from a file");
    let partway = {
        use std::io::Seek;
        let mut f = fs::File::open(d.join("m.brv")).unwrap();
        f.seek(std::io::SeekFrom::Start(10)).unwrap();
        Stdio::from(f)
    };
    let o = brevis_with_stdin(&["verify", "-"], d, partway);
    assert_eq!(
        o.status.code(),
        Some(3),
        "the archive starts where reading is, not at the file's start"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("magic"));

    // Named files only: the others are not written.
    ok(&brevis(
        &["decompress", "m.brv", "model.safetensors", "-o", "one", "-q"],
        d,
    ));
    assert!(fs::read(d.join("one/model.safetensors")).unwrap() == bundled());
    assert!(!d.join("one/sub").exists(), "only the named file");
    // A name the archive does not hold: an error that names it.
    let o = brevis(&["decompress", "m.brv", "nope.bin", "-o", "none", "-q"], d);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not in the archive: nope.bin"));
    assert_eq!(fs::read_dir(d.join("none")).map_or(0, |r| r.count()), 0);
    let o = brevis(&["decompress", "m.brv", "nope.bin", "--salvage", "-o", "none"], d);
    assert_eq!(o.status.code(), Some(1), "salvage checks the names before writing");
    assert!(!d.join("none").exists() || fs::read_dir(d.join("none")).unwrap().count() == 0);

    // The small file alone, from a file: read through the index, so damage in
    // the other file's chunks goes unread; from a pipe the whole archive is
    // decoded and the damage found. Damage in its own chunk: exit 3, no file.
    let index = brevis_decoder::Archive::open(&archive, brevis_decoder::DecodeLimits::default()).unwrap();
    let chunk_of = |path: &str| {
        let f = index.files().iter().find(|f| f.path == path).unwrap();
        let c = &f.segments.iter().rev().find(|s| !s.chunks.is_empty()).unwrap().chunks[0];
        (c.offset + c.record_len / 2) as usize
    };
    let damaged = |at: usize| {
        let mut bad = archive.clone();
        bad[at] ^= 1;
        bad
    };
    fs::write(d.join("other.brv"), damaged(chunk_of("model.safetensors"))).unwrap();
    let o = brevis(&["decompress", "-c", "other.brv", "sub/w.safetensors"], d);
    ok(&o);
    assert!(o.stdout == second);
    ok(&brevis(
        &["decompress", "other.brv", "sub/w.safetensors", "-o", "w", "-q"],
        d,
    ));
    assert!(fs::read(d.join("w/sub/w.safetensors")).unwrap() == second);
    let piped = ["decompress", "-c", "-", "sub/w.safetensors"];
    let o = brevis_piped(&piped, d, &fs::read(d.join("other.brv")).unwrap());
    assert_eq!(o.status.code(), Some(3), "streamed, the damage is found");
    fs::write(d.join("own.brv"), damaged(chunk_of("sub/w.safetensors"))).unwrap();
    let o = brevis(&["decompress", "own.brv", "sub/w.safetensors", "-o", "own"], d);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("sub/w.safetensors"));
    assert!(!d.join("own/sub/w.safetensors").exists(), "never under its name");

    // Refused: with a folder, salvage from standard input, a damaged archive.
    assert_eq!(
        brevis(&["decompress", "-c", "m.brv", "-o", "x"], d).status.code(),
        Some(2)
    );
    let o = brevis_with_stdin(&["decompress", "--salvage", "-"], d, from_file());
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("give it as a file"));
    let mut bad = archive.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 1;
    fs::write(d.join("bad.brv"), &bad).unwrap();
    let o = brevis(&["decompress", "-c", "bad.brv"], d);
    assert_eq!(o.status.code(), Some(3));
    assert!(o.stdout.len() < both.len(), "stops at the damage");

    // Not to a terminal, unless forced; nor from one, which would wait for typing.
    if let Some(o) = on_a_terminal("decompress -c m.brv", d) {
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stdout).contains("standard output is a terminal"));
        let o = on_a_terminal("decompress -c --force -q m.brv", d).expect("script ran before");
        assert!(o.status.success());
        let o = on_a_terminal("verify -", d).expect("script ran before");
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stdout).contains("standard input is a terminal"));
    }
}

/// `compress -c` writes the same archive to standard output as to a file, and
/// refuses standard output that is one of the inputs or a terminal.
#[test]
fn compress_to_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("m.safetensors"), bundled()).unwrap();
    ok(&brevis(&["compress", "m.safetensors", "-q", "-o", "file.brv"], d));
    let o = brevis(&["compress", "m.safetensors", "-c"], d);
    ok(&o);
    assert!(o.stdout == fs::read(d.join("file.brv")).unwrap(), "the same archive");
    assert!(String::from_utf8_lossy(&o.stderr).contains("-> standard output"));

    // Appending to the input (`>>`): refused, the input untouched.
    let append = fs::OpenOptions::new()
        .append(true)
        .open(d.join("m.safetensors"))
        .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args(["compress", "m.safetensors", "-c"])
        .current_dir(d)
        .stdout(Stdio::from(append))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("standard output is one of the inputs"));
    assert!(fs::read(d.join("m.safetensors")).unwrap() == bundled());

    for clash in ["-o", "--report"] {
        let o = brevis(&["compress", "m.safetensors", "-c", clash, "x"], d);
        assert_eq!(o.status.code(), Some(2), "{clash}");
    }
    if let Some(o) = on_a_terminal("compress -c m.safetensors", d) {
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stdout).contains("standard output is a terminal"));
    }
}

#[test]
fn bad_usage_and_missing_inputs() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(brevis(&["compress"], dir.path()).status.code(), Some(2));
    let o = brevis(&["compress", "nope.safetensors"], dir.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope.safetensors"));
    fs::write(
        dir.path().join("bad.safetensors"),
        b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ",
    )
    .unwrap();
    let o = brevis(&["compress", "bad.safetensors"], dir.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a valid safetensors file"));
    assert!(!dir.path().join("bad.safetensors.brv").exists());

    // Outputs that cannot be written: a missing folder, a read-only file system.
    fs::write(dir.path().join("m.safetensors"), bundled()).unwrap();
    for out in ["/nonexistent-brevis/x.brv", "/proc/x.brv"] {
        let o = brevis(&["compress", "m.safetensors", "-o", out], dir.path());
        assert_eq!(o.status.code(), Some(1), "{out}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("cannot write"),
            "{out}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn no_arguments_runs_the_bundled_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let o = brevis(&[], dir.path());
    ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("round trip: bit-exact") && text.contains("zstd -19") && text.contains("smaller than zstd -19"),
        "{text}"
    );
}

#[test]
fn salvage_recovers_every_intact_file_and_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir(d.join("m")).unwrap();
    fs::write(d.join("m/a.safetensors"), bundled()).unwrap();
    let other: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    fs::write(d.join("m/b.bin"), &other).unwrap();
    ok(&brevis(&["compress", "m", "-o", "m.brv", "-q"], d));

    // Damage one tensor's chunk in the middle.
    let mut a = fs::read(d.join("m.brv")).unwrap();
    let (offset, len, seg_start, seg_len) = {
        let ar = brevis_decoder::Archive::open(&a, brevis_decoder::DecodeLimits::default()).unwrap();
        let (f, s) = ar.find_segment("lstm_cell.weight_ih").unwrap();
        assert_eq!(f.path, "a.safetensors");
        (
            s.chunks[0].offset as usize,
            s.chunks[0].record_len as usize,
            s.file_offset as usize,
            s.len as usize,
        )
    };
    a[offset + len / 2] ^= 0x01;
    fs::write(d.join("bad.brv"), &a).unwrap();

    let o = brevis(&["decompress", "--salvage", "bad.brv", "-o", "out"], d);
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("a.safetensors") && err.contains("lstm_cell.weight_ih") && err.contains("lost"),
        "{err}"
    );
    // The intact file comes back whole; the damaged one as .partial, right except the lost tensor.
    assert_eq!(fs::read(d.join("out/b.bin")).unwrap(), other);
    assert!(!d.join("out/a.safetensors").exists());
    let partial = fs::read(d.join("out/a.safetensors.partial")).unwrap();
    assert_eq!(partial.len(), bundled().len());
    assert_eq!(&partial[..seg_start], &bundled()[..seg_start]);
    assert_eq!(&partial[seg_start + seg_len..], &bundled()[seg_start + seg_len..]);
    assert!(partial[seg_start..seg_start + seg_len].iter().all(|&b| b == 0));

    // Plain decompress of the same archive refuses with exit 3 and leaves nothing half-written.
    let o = brevis(&["decompress", "bad.brv", "-o", "out2", "-q"], d);
    assert_eq!(o.status.code(), Some(3));
    assert!(!d.join("out2/a.safetensors").exists());
}

#[test]
fn a_bomb_is_refused_by_default_and_decodes_with_max_ratio_0() {
    // 80 MiB of zeros compress to a few hundred bytes: beyond the default
    // 4096 bytes out per byte in (after the first 64 MiB).
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("zeros.bin"), vec![0u8; 80 << 20]).unwrap();
    ok(&brevis(&["compress", "zeros.bin", "-q"], d));
    let size = fs::metadata(d.join("zeros.bin.brv")).unwrap().len();
    assert!(size < 4096, "{size} bytes");
    fs::remove_file(d.join("zeros.bin")).unwrap();

    let o = brevis(&["verify", "zeros.bin.brv"], d);
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("max_ratio") && err.contains("--max-ratio 0"), "{err}");
    let o = brevis(&["decompress", "zeros.bin.brv", "-q"], d);
    assert_eq!(o.status.code(), Some(3));
    assert!(!d.join("zeros.bin").exists(), "no partial output");

    ok(&brevis(&["verify", "--max-ratio", "0", "zeros.bin.brv", "-q"], d));
    ok(&brevis(&["decompress", "--max-ratio", "0", "zeros.bin.brv", "-q"], d));
    assert_eq!(fs::metadata(d.join("zeros.bin")).unwrap().len(), 80 << 20);
}

#[test]
fn compress_report_and_inspect_usage() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("model.safetensors"), bundled()).unwrap();
    ok(&brevis(
        &["compress", "model.safetensors", "-q", "--report", "r.json"],
        d,
    ));
    let r = fs::read_to_string(d.join("r.json")).unwrap();
    for key in [
        "\"archive_bytes\"",
        "\"usage\"",
        "\"operators\"",
        "\"literal_encodings\"",
        "\"bare_lit_rate\"",
        "\"verified_raw_fallbacks\": 0",
        "\"tensors\"",
        "\"candidates\"",
        "\"search_ms\"",
    ] {
        assert!(r.contains(key), "report lacks {key}: {r}");
    }
    // Every chunk of the archive has its program, bytes and candidates; a
    // searched chunk compared at least one candidate.
    let chunks: usize = r
        .split("\"chunks\": ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    assert!(chunks > 0);
    assert_eq!(r.matches("\"program\": ").count(), chunks, "{r}");
    assert!(
        !r.contains("\"candidates\": 0, \"search_ms\""),
        "a chunk without candidates: {r}"
    );
    // The phases split the synthesis time by chunk: the searched chunks' and
    // the template-built chunks' add up to every chunk's, and verifying took time.
    let json: serde_json::Value = serde_json::from_str(&r).expect("the report is JSON");
    let phase = |k: &str| {
        json["phase_seconds"][k]
            .as_f64()
            .unwrap_or_else(|| panic!("phase {k}: {r}"))
    };
    let (mut searched_ms, mut templated_ms) = (0.0, 0.0);
    for c in json["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["chunks"].as_array().unwrap())
    {
        let ms = c["search_ms"].as_f64().unwrap();
        if c["from_template"].as_bool().expect("from_template") {
            templated_ms += ms;
        } else {
            searched_ms += ms;
        }
    }
    assert!((phase("searched") - searched_ms / 1e3).abs() < 0.01, "{r}");
    assert!((phase("from_template") - templated_ms / 1e3).abs() < 0.01, "{r}");
    assert!(phase("searched") > 0.0 && phase("verify") > 0.0, "{r}");
    let size = fs::metadata(d.join("model.safetensors.brv")).unwrap().len();
    assert!(r.contains(&format!("\"archive_bytes\": {size},")));
    // Brackets balance (the report is one JSON object).
    assert_eq!(r.matches('{').count(), r.matches('}').count());
    assert_eq!(r.matches('[').count(), r.matches(']').count());

    let o = brevis(&["inspect", "model.safetensors.brv"], d);
    ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("usage over {chunks} stored chunk(s):")),
        "{text}"
    );
    for line in ["operators: ", "literal encodings: ", "bare Lit programs: "] {
        assert!(text.contains(line), "{text}");
    }
}

/// `--digest` picks each file's hash and `--fast-decode` defaults to XXH3-128:
/// the header says which, `inspect` prints that digest of the file (16 bytes for
/// XXH3-128, 32 for the others), and every archive verifies and decompresses.
#[test]
fn digest_flags_pick_the_file_hash() {
    use brevis_decoder::{digest, DigestKind};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("model.safetensors"), bundled()).unwrap();
    let cases: [(&[&str], DigestKind, u8); 6] = [
        (&[], DigestKind::Sha256, 0),
        (&["--fast-decode"], DigestKind::Xxh3, 2),
        (&["--fast-decode", "--digest", "sha256"], DigestKind::Sha256, 0),
        (&["--digest", "blake3"], DigestKind::Blake3, 1),
        (&["--digest", "xxh3-128"], DigestKind::Xxh3, 2),
        (&["--digest", "xxh3"], DigestKind::Xxh3, 2),
    ];
    for (i, (flags, kind, header_flags)) in cases.into_iter().enumerate() {
        let out = format!("m{i}.brv");
        let mut args = vec!["compress", "model.safetensors", "-q", "--effort", "0", "-o", &out];
        args.extend_from_slice(flags);
        ok(&brevis(&args, d));
        let archive = fs::read(d.join(&out)).unwrap();
        assert_eq!(archive[10..12], [header_flags, 0], "{flags:?}");
        // XXH3-128 is 16 bytes, stored zero-padded to 32; inspect prints the 16.
        let hash_len = if kind == DigestKind::Xxh3 { 16 } else { 32 };
        let want: String = digest(kind, bundled())[..hash_len]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let shown = brevis(&["inspect", &out], d);
        ok(&shown);
        let text = String::from_utf8_lossy(&shown.stdout);
        assert!(
            text.contains(&format!("  {} {want}\n", kind.name())),
            "{flags:?}: {text}"
        );
        ok(&brevis(&["verify", "-q", &out], d));
        let rebuilt = format!("out{i}");
        ok(&brevis(&["decompress", &out, "-o", &rebuilt, "-q"], d));
        assert_eq!(fs::read(d.join(rebuilt).join("model.safetensors")).unwrap(), bundled());
    }
}

/// A safetensors file of one BF16 tensor of `rows` × 1024 normal-ish weights
/// (a chunk of more than 1 MiB at 512 rows and up) and a small FP32 one.
/// Weight-like values from `seed`: a sum of uniforms, close enough to normal
/// (sigma about 0.04) for weights' exponents.
fn weights_sampler(seed: u64) -> impl FnMut() -> f64 {
    let mut state = seed;
    move || {
        (0..4)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .sum::<f64>()
            * 0.04
    }
}

fn weights_file(rows: usize) -> Vec<u8> {
    use safetensors::tensor::{Dtype, TensorView};
    let mut normal = weights_sampler(0x9e37_79b9_7f4a_7c15);
    let big: Vec<u8> = (0..rows * 1024)
        .flat_map(|_| (((normal() as f32).to_bits() >> 16) as u16).to_le_bytes())
        .collect();
    let small: Vec<u8> = (0..256).flat_map(|_| (normal() as f32).to_le_bytes()).collect();
    let views = [
        ("big", TensorView::new(Dtype::BF16, vec![rows, 1024], &big).unwrap()),
        ("small", TensorView::new(Dtype::F32, vec![256], &small).unwrap()),
    ];
    safetensors::serialize(views, None).unwrap()
}

/// A safetensors file of three BF16 tensors, the second (`b`) the same bytes as
/// the first (3 MiB each): `b` is stored as a copy, between `a`'s chunks and `c`'s.
fn tied_file() -> Vec<u8> {
    use safetensors::tensor::{Dtype, TensorView};
    let mut normal = weights_sampler(0x2545_f491_4f6c_dd1d);
    let mut bf16 = |n: usize| -> Vec<u8> {
        (0..n)
            .flat_map(|_| (((normal() as f32).to_bits() >> 16) as u16).to_le_bytes())
            .collect()
    };
    let (a, c) = (bf16(1536 * 1024), bf16(1024 * 1024));
    let views = [
        ("a", TensorView::new(Dtype::BF16, vec![1536, 1024], &a).unwrap()),
        ("b", TensorView::new(Dtype::BF16, vec![1536, 1024], &a).unwrap()),
        ("c", TensorView::new(Dtype::BF16, vec![1024, 1024], &c).unwrap()),
    ];
    safetensors::serialize(views, None).unwrap()
}

/// `brevis verify -q --threads THREADS /dev/stdin` with `archive` written to
/// its standard input through a pipe: read in pieces, as archives that cannot
/// be mapped are (regular files are mapped).
fn verify_piped(archive: &[u8], threads: &str) -> Output {
    let args = ["verify", "-q", "--threads", threads, "/dev/stdin"];
    brevis_piped(&args, std::path::Path::new("."), archive)
}

#[test]
fn several_threads_decode_as_one_does() {
    // Default archives have a 3 MiB chunk (the decoding threads run it, the
    // thread reading the archive does not), `--fast-decode` ones 1 MiB chunks
    // (it runs some itself); every digest kind, and damage reported alike,
    // whether the archive is mapped (a file) or read in pieces (a pipe). A
    // third file has a tensor stored as a copy of the one before it, between
    // chunks: pieces of a file that no decoding thread hashes.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir_all(d.join("repo")).unwrap();
    let weights = weights_file(1536);
    fs::write(d.join("repo/weights.safetensors"), &weights).unwrap();
    fs::write(d.join("repo/model.safetensors"), bundled()).unwrap();
    let tied = tied_file();
    fs::write(d.join("repo/tied.safetensors"), &tied).unwrap();
    let cases: [&[&str]; 4] = [
        &[],
        &["--fast-decode"],
        &["--digest", "blake3"],
        &["--fast-decode", "--digest", "sha256"],
    ];
    for (i, flags) in cases.into_iter().enumerate() {
        let out = format!("r{i}.brv");
        let mut args = vec!["compress", "repo", "-q", "--effort", "0", "-o", &out];
        args.extend_from_slice(flags);
        ok(&brevis(&args, d));
        let archive = fs::read(d.join(&out)).unwrap();
        for threads in ["1", "2", "3"] {
            ok(&brevis(&["verify", "-q", "--threads", threads, &out], d));
            ok(&verify_piped(&archive, threads));
            let rebuilt = format!("out{i}-{threads}");
            ok(&brevis(
                &["decompress", &out, "-o", &rebuilt, "-q", "--threads", threads],
                d,
            ));
            let back = d.join(&rebuilt);
            assert_eq!(
                fs::read(back.join("weights.safetensors")).unwrap(),
                weights,
                "{flags:?} {threads}"
            );
            assert_eq!(
                fs::read(back.join("model.safetensors")).unwrap(),
                bundled(),
                "{flags:?} {threads}"
            );
            assert!(
                fs::read(back.join("tied.safetensors")).unwrap() == tied,
                "{flags:?} {threads}"
            );
        }
        let shown = brevis(&["inspect", &out], d);
        ok(&shown);
        assert!(
            String::from_utf8_lossy(&shown.stdout).contains("copy of"),
            "{flags:?}: no copy in the archive"
        );
        // A flipped byte in the big tensor's chunk: the same error, however many threads.
        let mut damaged = fs::read(d.join(&out)).unwrap();
        let at = damaged.len() / 3;
        damaged[at] ^= 0x10;
        fs::write(d.join("damaged.brv"), &damaged).unwrap();
        let one = brevis(&["verify", "-q", "--threads", "1", "damaged.brv"], d);
        assert!(!one.status.success(), "{flags:?}: damage not seen");
        for threads in ["1", "2", "3"] {
            let many = brevis(&["verify", "-q", "--threads", threads, "damaged.brv"], d);
            let piped = verify_piped(&damaged, threads);
            for other in [many, piped] {
                assert_eq!(other.status.code(), one.status.code(), "{flags:?} {threads}");
                assert_eq!(
                    String::from_utf8_lossy(&other.stderr),
                    String::from_utf8_lossy(&one.stderr),
                    "{flags:?} {threads}"
                );
            }
        }
    }
}

#[test]
fn the_chunks_of_a_tensor_searched_whole_wait_for_the_first_ones_template() {
    // One tensor of three 1 MiB chunks (`--fast-decode`), searched whole
    // (`--no-sample`, as GGUF's record chunks always are): the first chunk is
    // searched, the other two wait for its template in the next round and are
    // built from it, whatever the threads.
    use safetensors::tensor::{Dtype, TensorView};
    let mut normal = weights_sampler(0x5851_f42d_4c95_7f2d);
    let w: Vec<u8> = (0..1536 * 1024)
        .flat_map(|_| (((normal() as f32).to_bits() >> 16) as u16).to_le_bytes())
        .collect();
    let view = TensorView::new(Dtype::BF16, vec![1536, 1024], &w).unwrap();
    let model = safetensors::serialize(vec![("big.weight", view)], None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("model.safetensors"), &model).unwrap();
    let compress = |out: &str, flags: &[&str]| {
        let flags = [&["--fast-decode", "--no-sample"], flags].concat();
        let (archive, r) = compress_reported(d, out, &flags);
        let big = r["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "big.weight")
            .unwrap();
        let candidates: Vec<u64> = big["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["candidates"].as_u64().unwrap())
            .collect();
        (archive, candidates)
    };
    let (one, candidates) = compress("t1.brv", &["--threads", "1"]);
    assert_eq!(candidates.len(), 3, "{candidates:?}");
    // Built: one candidate per production of the first chunk's program.
    assert!(
        candidates[1] < candidates[0] && candidates[2] == candidates[1],
        "{candidates:?}"
    );
    for threads in ["2", "3"] {
        let (archive, again) = compress(&format!("t{threads}.brv"), &["--threads", threads]);
        assert!(archive == one, "--threads {threads} wrote another archive");
        assert_eq!(again, candidates);
    }
    // Without reuse, every chunk is searched.
    let (_, searched) = compress("s.brv", &["--no-reuse"]);
    assert!(
        searched.iter().all(|&c| c == searched[0] && c > candidates[1]),
        "{searched:?}"
    );
    ok(&brevis(&["decompress", "t1.brv", "-o", "back", "-q"], d));
    assert!(fs::read(d.join("back/model.safetensors")).unwrap() == model);
}

#[test]
fn like_tensors_reuse_an_earlier_programs_shape_whatever_the_threads() {
    // 40 tensors of one role in 40 layers, as a transformer's: each is one
    // chunk; from the second round of 16 chunks on, each is built from the
    // first one's template instead of searched.
    use safetensors::tensor::{Dtype, TensorView};
    let mut normal = weights_sampler(0x2545_f491_4f6c_dd1d);
    let layers: Vec<(String, Vec<u8>)> = (0..40)
        .map(|i| {
            let w = (0..96 * 256)
                .flat_map(|_| (((normal() as f32).to_bits() >> 16) as u16).to_le_bytes())
                .collect();
            // Zero-padded: safetensors stores tensors in name order.
            (format!("layer.{i:02}.dense.weight"), w)
        })
        .collect();
    let views: Vec<(&str, TensorView<'_>)> = layers
        .iter()
        .map(|(name, w)| (name.as_str(), TensorView::new(Dtype::BF16, vec![96, 256], w).unwrap()))
        .collect();
    let model = safetensors::serialize(views, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("model.safetensors"), &model).unwrap();
    let compress = |out: &str, flags: &[&str]| {
        let (archive, r) = compress_reported(d, out, flags);
        // Candidates compared per layer, in layer order.
        let mut per_layer = std::collections::BTreeMap::new();
        for t in r["tensors"].as_array().unwrap() {
            let name = t["name"].as_str().unwrap();
            if let Some(i) = name.strip_prefix("layer.").and_then(|n| n.split('.').next()) {
                per_layer.insert(i.parse::<usize>().unwrap(), t["candidates"].as_u64().unwrap());
            }
        }
        (archive, per_layer.into_values().collect::<Vec<u64>>())
    };
    let (one, candidates) = compress("t1.brv", &["--threads", "1"]);
    for threads in ["2", "3"] {
        let (archive, _) = compress(&format!("t{threads}.brv"), &["--threads", threads]);
        assert!(archive == one, "--threads {threads} wrote another archive");
    }
    ok(&brevis(&["decompress", "t1.brv", "-o", "back", "-q"], d));
    assert!(fs::read(d.join("back/model.safetensors")).unwrap() == model);
    // The file's first chunk is its header, so layers 15 on are in later rounds:
    // one candidate per production of layer 0's program, fewer than its search.
    let built = candidates[15];
    assert!(candidates[15..].iter().all(|&c| c == built), "{candidates:?}");
    assert!(candidates[0] > built, "{candidates:?}");
    // Searching every chunk instead costs candidates and saves almost nothing.
    let (searched, no_reuse) = compress("s.brv", &["--no-reuse"]);
    assert!(no_reuse[15..].iter().all(|&c| c > built), "{no_reuse:?}");
    assert!(
        one.len() as f64 <= searched.len() as f64 * 1.001,
        "{} vs {}",
        one.len(),
        searched.len()
    );
}
