#!/usr/bin/env bash
# Build every cargo-fuzz target in fuzz/ and run each for SECONDS_PER_TARGET
# seconds (default 15), failing on the first crash, hang or out-of-memory.
# Without a nightly toolchain or cargo-fuzz it prints why and exits 0, so CI
# runs the pass only where the fuzzing toolchain is available.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]
#
# Each target starts from its committed seeds (fuzz/corpus/TARGET, rebuilt by
# `cargo test --release -p brevis-tests --test fuzz_seeds -- --ignored`); what
# libFuzzer finds goes to fuzz/target/work-corpus/TARGET (ignored by git), crash
# inputs to fuzz/artifacts/TARGET. Reproduce one with
# `cargo +nightly fuzz run TARGET fuzz/artifacts/TARGET/crash-…`.
# Extra libFuzzer flags can be passed in FUZZ_ARGS (e.g. FUZZ_ARGS=-jobs=2);
# FUZZ_TARGETS="archive literal" runs only those targets. Every target runs
# twice: with the safe code alone, then as the CLI builds the format crate
# (feature `cli`: the AVX2/BMI2 fast paths, which fall back to the safe code on
# CPUs without them, and literals decoded into kept buffers, not zeroed ones).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

secs=${1:-15}
targets=(${FUZZ_TARGETS:-archive program literal stream structured})

skip() {
  echo "skipping fuzz pass: $*" >&2
  exit 0
}
if ! [[ $secs =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
  echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET]" >&2
  exit 2
fi
command -v cargo >/dev/null 2>&1 || skip "cargo not found"
cargo +nightly --version >/dev/null 2>&1 || skip "no nightly toolchain (rustup toolchain install nightly)"
cargo fuzz --version >/dev/null 2>&1 || skip "cargo-fuzz not installed (cargo install cargo-fuzz)"

for features in "" cli; do
  label=${features:-safe}
  echo "[fuzz] building ${#targets[@]} targets ($label)" >&2
  (cd fuzz && cargo +nightly fuzz build ${features:+--features $features})

  for t in "${targets[@]}"; do
    work=fuzz/target/work-corpus/$t
    mkdir -p "$work"
    # One allocation larger than this is a failure: programs and literals of at
    # most 2^16 words never need 64 MiB; a whole archive may need a 16 MiB chunk
    # times the program working-memory factor, and its files (capped at 64 MiB).
    case $t in
      program | literal) malloc_mb=64 ;;
      *) malloc_mb=512 ;;
    esac
    echo "[fuzz] $t ($label): ${secs}s" >&2
    # The working corpus comes first: libFuzzer adds what it finds there, never
    # to the committed seeds. -timeout: one input running over 10 s is a hang.
    # shellcheck disable=SC2086
    (cd fuzz && cargo +nightly fuzz run ${features:+--features $features} "$t" "../$work" "corpus/$t" -- \
      -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb="$malloc_mb" \
      -print_final_stats=1 ${FUZZ_ARGS:-}) \
      || { echo "[fuzz] $t ($label) FAILED: see fuzz/artifacts/$t/" >&2; exit 1; }
  done
done
echo "[fuzz] all ${#targets[@]} targets ran ${secs}s each, without and with feature cli, without a crash" >&2
