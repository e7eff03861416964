//! `brevis` with duplicates and fine-tunes, run as a user would: a folder
//! holding the same model twice, `--base` round trips, refusals without it.

use std::fs;
use std::path::Path;

mod common;
use common::{brevis, brevis_piped, bundled, ok};

fn size(p: &Path) -> u64 {
    fs::metadata(p).unwrap().len()
}

/// A folder `m` holding the bundled model twice (`a.safetensors`,
/// `b/a.safetensors`), compressed to `m.brv`: the second a copy of the first.
fn model_twice() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir_all(d.join("m/b")).unwrap();
    fs::write(d.join("m/a.safetensors"), bundled()).unwrap();
    fs::write(d.join("m/b/a.safetensors"), bundled()).unwrap();
    ok(&brevis(&["compress", "m", "-o", "m.brv", "-q"], d));
    dir
}

#[test]
fn a_folder_with_the_same_model_twice_costs_barely_more_than_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir_all(d.join("m/onnx")).unwrap();
    fs::write(d.join("m/model.safetensors"), bundled()).unwrap();
    fs::write(d.join("m/onnx/copy.safetensors"), bundled()).unwrap();
    fs::write(d.join("one.safetensors"), bundled()).unwrap();
    ok(&brevis(&["compress", "m", "-o", "m.brv", "-q"], d));
    ok(&brevis(&["compress", "m", "-o", "plain.brv", "--no-dedup", "-q"], d));
    ok(&brevis(&["compress", "one.safetensors", "-o", "one.brv", "-q"], d));
    let (twice, plain, once) = (
        size(&d.join("m.brv")),
        size(&d.join("plain.brv")),
        size(&d.join("one.brv")),
    );
    assert!(twice < once + 1000, "{twice} vs {once}");
    assert!(plain > 2 * once - 1000, "{plain} vs {once}");
    ok(&brevis(&["verify", "m.brv"], d));
    ok(&brevis(&["decompress", "m.brv", "-o", "out", "-q"], d));
    assert_eq!(fs::read(d.join("out/onnx/copy.safetensors")).unwrap(), bundled());
    let i = brevis(&["inspect", "m.brv"], d);
    ok(&i);
    assert!(String::from_utf8_lossy(&i.stdout).contains("copy of segment"));
}

/// A mapped archive's copies are decoded again from their source's records
/// (`verify`) or read back from the files written (`decompress`): nothing
/// held, so `--max-retained` does not bind. Read from a pipe, `verify` holds
/// their source's bytes until the last copy, within `--max-retained`, and
/// `decompress` reads them back from the files written, holding nothing.
#[test]
fn copies_hold_nothing_from_a_mapped_archive_and_their_source_from_a_pipe() {
    let dir = model_twice();
    let d = dir.path();
    // SHA-256 file digests, and XXH3-128 ones (hashed in turn on two threads).
    ok(&brevis(&["compress", "m", "-o", "fast.brv", "-q", "--fast-decode"], d));
    for archive in ["m.brv", "fast.brv"] {
        for threads in ["1", "2"] {
            let limit = ["--max-retained", "1"];
            ok(&brevis(
                &[&["--threads", threads, "verify", archive], &limit[..]].concat(),
                d,
            ));
            let out = format!("out-{archive}-{threads}");
            let decompress = ["--threads", threads, "decompress", archive, "-o", &out, "-q"];
            ok(&brevis(&[&decompress[..], &limit[..]].concat(), d));
            for f in ["a.safetensors", "b/a.safetensors"] {
                assert!(fs::read(d.join(&out).join(f)).unwrap() == bundled(), "{out}/{f}");
            }
        }
    }
    #[cfg(target_os = "linux")]
    for (command, limit, refused) in [
        ("verify", "1", true),
        ("verify", "100000000", false),
        ("decompress", "1", false),
    ] {
        let mut args = vec!["--threads", "2", command, "--max-retained", limit, "/dev/stdin"];
        if command == "decompress" {
            args.extend(["-o", "piped"]);
        }
        // The decoder may stop reading at the refusal: a broken pipe is fine.
        let out = brevis_piped(&args, d, &fs::read(d.join("m.brv")).unwrap());
        let err = String::from_utf8_lossy(&out.stderr);
        if refused {
            assert_eq!(out.status.code(), Some(3), "{err}");
            assert!(err.contains("retained bytes"), "{err}");
        } else {
            assert!(out.status.success(), "{err}");
        }
    }
    #[cfg(target_os = "linux")]
    for f in ["a.safetensors", "b/a.safetensors"] {
        assert!(fs::read(d.join("piped").join(f)).unwrap() == bundled(), "piped/{f}");
    }
}

/// `decompress --stdout` cannot read copies back from what it wrote: from a
/// file it decodes their sources again (nothing held, `--max-retained 1` does
/// not bind), from a pipe it holds them within `--max-retained`, as `verify`.
#[test]
fn copies_to_standard_output_are_decoded_again_or_held() {
    let dir = model_twice();
    let d = dir.path();
    let archive = fs::read(d.join("m.brv")).unwrap();
    let twice = [bundled(), bundled()].concat();
    for threads in ["1", "2"] {
        let args = ["--threads", threads, "decompress", "-c", "--max-retained", "1"];
        let o = brevis(&[&args[..], &["m.brv"]].concat(), d);
        ok(&o);
        assert!(o.stdout == twice, "from a file, {threads} thread(s)");
        let o = brevis_piped(&[&args[..], &["-"]].concat(), d, &archive);
        assert_eq!(o.status.code(), Some(3), "from a pipe the source must be held");
        assert!(String::from_utf8_lossy(&o.stderr).contains("retained bytes"));
        let o = brevis_piped(&["--threads", threads, "decompress", "-c", "-"], d, &archive);
        ok(&o);
        assert!(o.stdout == twice, "from a pipe, {threads} thread(s)");
    }
    // The copy alone: its source's file is not written, and not needed. In
    // `m.brv` it is half the bytes, so the whole archive is streamed; beside a
    // larger file it is read through the index, its chunks its source's.
    fs::write(d.join("m/c.bin"), bundled().repeat(3)).unwrap();
    ok(&brevis(&["compress", "m", "-o", "more.brv", "-q"], d));
    for archive in ["m.brv", "more.brv"] {
        let o = brevis(&["decompress", "-c", archive, "b/a.safetensors"], d);
        ok(&o);
        assert!(o.stdout == bundled(), "{archive}");
        let out = format!("copy-{archive}");
        ok(&brevis(
            &["decompress", archive, "b/a.safetensors", "-o", &out, "-q"],
            d,
        ));
        assert!(fs::read(d.join(&out).join("b/a.safetensors")).unwrap() == bundled());
        assert!(!d.join(&out).join("a.safetensors").exists());
    }
}

#[test]
fn a_file_that_is_all_copies_gets_its_digest_on_any_number_of_threads() {
    // `b.bin` is one opaque segment, a copy of `a.bin`'s: it has no chunk of
    // its own, so its FILE record (on several threads computed beside the
    // chunks, and written before the first segment) is written after its
    // chunk loop, which has nothing to do.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir_all(d.join("m")).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let data: Vec<u8> = (0..200_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 56) as u8
        })
        .collect();
    fs::write(d.join("m/a.bin"), &data).unwrap();
    fs::write(d.join("m/b.bin"), &data).unwrap();
    let mut archives = Vec::new();
    for threads in ["1", "3"] {
        let out = format!("m{threads}.brv");
        ok(&brevis(&["compress", "m", "-o", &out, "-q", "--threads", threads], d));
        ok(&brevis(&["verify", &out, "-q"], d));
        archives.push(fs::read(d.join(&out)).unwrap());
    }
    assert!(archives[0] == archives[1], "the archive depends on --threads");
    let i = brevis(&["inspect", "m3.brv"], d);
    ok(&i);
    assert!(String::from_utf8_lossy(&i.stdout).contains("copy of segment"));
}

#[test]
fn a_finetune_round_trips_with_its_base_and_is_refused_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir_all(d.join("base")).unwrap();
    fs::create_dir_all(d.join("tuned")).unwrap();
    fs::write(d.join("base/model.safetensors"), bundled()).unwrap();
    // The fine-tune: every 10th F32 weight past the header nudged in its last mantissa bits.
    let mut tuned = bundled().to_vec();
    let header = 8 + u64::from_le_bytes(tuned[..8].try_into().unwrap()) as usize;
    for i in (header..tuned.len()).step_by(40) {
        tuned[i] ^= 0x03;
    }
    fs::write(d.join("tuned/model.safetensors"), &tuned).unwrap();
    ok(&brevis(&["compress", "base", "-o", "base.brv", "-q"], d));
    ok(&brevis(&["compress", "tuned", "-o", "alone.brv", "-q"], d));
    for base in ["base", "base.brv", "base/model.safetensors"] {
        ok(&brevis(
            &["compress", "tuned", "-o", "delta.brv", "--base", base, "-q", "-f"],
            d,
        ));
        assert!(
            size(&d.join("delta.brv")) * 4 < size(&d.join("alone.brv")),
            "{base}: {} vs {}",
            size(&d.join("delta.brv")),
            size(&d.join("alone.brv"))
        );
        ok(&brevis(&["verify", "delta.brv", "--base", base], d));
    }
    ok(&brevis(
        &["decompress", "delta.brv", "--base", "base.brv", "-o", "out", "-q"],
        d,
    ));
    assert_eq!(fs::read(d.join("out/model.safetensors")).unwrap(), tuned);
    // The fine-tuned file alone beside a larger one: read through the index,
    // with the base; without it, refused as the streamed decode refuses it.
    fs::write(d.join("tuned/extra.bin"), bundled().repeat(3)).unwrap();
    let delta = ["compress", "tuned", "-o", "delta2.brv", "--base", "base.brv", "-q"];
    ok(&brevis(&delta, d));
    let o = brevis(
        &[
            "decompress",
            "-c",
            "delta2.brv",
            "model.safetensors",
            "--base",
            "base.brv",
        ],
        d,
    );
    ok(&o);
    assert!(o.stdout == tuned);
    let o = brevis(&["decompress", "-c", "delta2.brv", "model.safetensors"], d);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("archive needs its base"));
    assert!(o.stdout.is_empty() || o.stdout.len() < tuned.len());

    // Without the base, or with another one: exit 1, the tensor named, no output file.
    let no_base = brevis(&["decompress", "delta.brv", "-o", "nothing"], d);
    assert_eq!(no_base.status.code(), Some(1));
    let err = String::from_utf8_lossy(&no_base.stderr);
    assert!(
        err.contains("archive needs its base: base tensor missing") && err.contains("segment `"),
        "{err}"
    );
    assert!(!d.join("nothing/model.safetensors").exists());
    fs::write(d.join("other.safetensors"), &tuned).unwrap();
    let wrong = brevis(&["verify", "delta.brv", "--base", "other.safetensors"], d);
    assert_eq!(wrong.status.code(), Some(1));
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(err.contains("archive needs its base: wrong base tensor"), "{err}");
    let missing = brevis(&["verify", "delta.brv", "--base", "nope"], d);
    assert_eq!(missing.status.code(), Some(1));
}
