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
