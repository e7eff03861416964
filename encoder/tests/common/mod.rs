//! Helpers shared by the CLI tests: run `brevis` as a user would.

use std::path::Path;
use std::process::{Command, Output};

/// Runs the `brevis` binary with `args` in `cwd`.
pub fn brevis(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run brevis")
}

/// The bundled real checkpoint (Silero VAD, FP32 safetensors).
pub fn bundled() -> &'static [u8] {
    include_bytes!("../../assets/silero_vad_16k.safetensors")
}

/// Asserts the run succeeded, showing its output if not.
pub fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Compresses `model.safetensors` in `dir` to `out` with `flags` and
/// `--report`; returns the archive's bytes and the parsed report.
#[allow(dead_code)] // Not every test binary that includes this module uses it.
pub fn compress_reported(dir: &Path, out: &str, flags: &[&str]) -> (Vec<u8>, serde_json::Value) {
    let report = format!("{out}.json");
    let mut args = vec!["compress", "model.safetensors", "-q", "-o", out, "--report", &report];
    args.extend_from_slice(flags);
    ok(&brevis(&args, dir));
    let r = std::fs::read_to_string(dir.join(&report)).expect("the report");
    let archive = std::fs::read(dir.join(out)).expect("the archive");
    (archive, serde_json::from_str(&r).expect("a JSON report"))
}

/// Runs `brevis` with `args` in `cwd`, its standard input `stdin`.
#[allow(dead_code)]
pub fn brevis_with_stdin(args: &[&str], cwd: &Path, stdin: std::process::Stdio) -> Output {
    Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args(args)
        .current_dir(cwd)
        .stdin(stdin)
        .output()
        .expect("run brevis")
}

/// Runs `brevis` with `args` in `cwd`, `input` written to its standard input
/// through a pipe (from another thread, so that neither side waits on the
/// other's full pipe).
#[allow(dead_code)]
pub fn brevis_piped(args: &[&str], cwd: &Path, input: &[u8]) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run brevis");
    let mut pipe = child.stdin.take().expect("its stdin");
    let input = input.to_vec();
    // It stops reading at the first error: a broken pipe then is no failure.
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let out = child.wait_with_output().expect("brevis ran");
    writer.join().expect("the writer");
    out
}
