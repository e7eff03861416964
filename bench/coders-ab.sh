#!/usr/bin/env bash
# Does a change make a literal coder decode faster (natively, or in WebAssembly
# under Node with TARGET=wasi)? Builds the format crate
# at a git revision and as the working tree has it into one binary, and times both
# on the same payloads in one process, A and B alternating call by call
# (bench/coders-ab/main.rs): on a shared machine whose speed drifts by 10-30% from
# one run to the next, only an in-process comparison resolves a few percent.
#
#   bench/coders-ab.sh REV [ENCODING,...] [CASE,...]
#
# REV: a commit or tag, the "before" (A); B is the working tree. ENCODINGs (default
# hsplit,huffman8,packed) are names as `brevis inspect` prints them. CASEs (default:
# the first six) of normal(0, 0.04) weights: bf16, fp16, fp32 (whole words), exp8 (BF16's
# exponent byte), man7 (its 7-bit mantissa), top12 (its top 12 bits: the field
# default BF16 archives code with `ctx`). Payloads are made by B's encoder; both
# must decode them to the same words. More CASEs: man23 (FP32's 23-bit mantissa),
# int8 (the same weights quantized to bytes, scale max/127: about 6.6 bits a byte
# coded, where the int8 ONNX corpus file takes 7.3, so it flatters coders that do
# well on short codes). Env: SECONDS_PER_CASE
# (default 4); FEATURES (the format crate's, space-separated, for both: e.g. "simd", which the CLI
# builds with); TARGET=wasi builds both as WebAssembly (wasm32-wasip1, +simd128)
# and runs them under Node (scripts/wasi-runner.mjs).
# Clean up with rm -rf target/coders-ab.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,23p' "$0"; exit 2; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
REV=$1
WORK=$ROOT/target/coders-ab
OLD=$WORK/format-$(git -C "$ROOT" rev-parse --short "$REV")
rm -rf "$OLD" && mkdir -p "$OLD"
git -C "$ROOT" archive "$REV" format | tar x -C "$OLD" --strip-components=1
# A package of its own name (two versions of one crate in one binary), with the
# workspace's inherited fields and dependencies spelled out.
python3 - "$OLD/Cargo.toml" "$ROOT/Cargo.toml" <<'PY'
import json, sys, tomllib
path, ws_path = sys.argv[1:]
ws = tomllib.load(open(ws_path, "rb"))["workspace"]
crate = tomllib.load(open(path, "rb"))
def val(v):  # TOML of a string, bool, list or table (JSON spells the first three alike)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {val(x)}" for k, x in v.items()) + " }"
    return json.dumps(v)
def resolve(table):  # a dependency table, workspace entries spelled out
    deps = {}
    for name, spec in table.items():
        if isinstance(spec, dict) and spec.pop("workspace", False):
            base = ws["dependencies"][name]
            base = {"version": base} if isinstance(base, str) else dict(base)
            base["features"] = base.get("features", []) + spec.pop("features", [])
            spec = {**base, **spec}
        deps[name] = spec
    return deps
lines = ["[package]", 'name = "brevis-format-before"', 'version = "0.0.0"', 'edition = "2021"', "", "[features]"]
lines += [f"{k} = {val(v)}" for k, v in crate.get("features", {}).items()]
lines += ["", "[dependencies]"] + [f"{k} = {val(v)}" for k, v in resolve(crate.get("dependencies", {})).items()]
# Target-specific dependencies (twox-hash on x86-64) too.
for target, table in crate.get("target", {}).items():
    lines += ["", f"[target.{json.dumps(target)}.dependencies]"]
    lines += [f"{k} = {val(v)}" for k, v in resolve(table.get("dependencies", {})).items()]
open(path, "w").write("\n".join(lines) + "\n")
PY
PROJ=$WORK/bench
# The format crate's features for both builds, as TOML strings ("simd": the
# x86-64 fast paths the CLI has).
FEATURES=$(for f in ${FEATURES:-}; do printf '"%s", ' "$f"; done)
mkdir -p "$PROJ/src"
cp "$HERE/coders-ab/main.rs" "$PROJ/src/main.rs"
cp "$ROOT/format/benches/support/weights.rs" "$PROJ/src/weights.rs"
cat > "$PROJ/Cargo.toml" <<TOML
[package]
name = "coders-ab"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
before = { package = "brevis-format-before", path = "$OLD", features = [$FEATURES] }
after = { package = "brevis-format", path = "$ROOT/format", features = [$FEATURES] }
half = "2"

[profile.release]
debug = "line-tables-only"

[workspace]
TOML
cp "$ROOT/Cargo.lock" "$PROJ/Cargo.lock"
args=("$REV" "${2:-hsplit,huffman8,packed}" "${3:-bf16,fp16,fp32,exp8,man7,top12}" "${SECONDS_PER_CASE:-4}")
if [[ ${TARGET:-} == wasi ]]; then
  # As WebAssembly under Node (the npm package's engine), built as the package
  # is (+simd128): needs the wasm32-wasip1 target. Node 20.20 sometimes dies of
  # a SIGSEGV in V8's own code (`KeyedLoadIC_Megamorphic`, gdb) once the table is
  # printed (4 runs in 10 of a 0.2 s-a-case run; the crate's WASI tests, never in
  # 16): the table stands, the exit status is 139.
  RUSTFLAGS="-C target-feature=+simd128" cargo build --release --quiet --target wasm32-wasip1 --manifest-path "$PROJ/Cargo.toml"
  node --no-warnings "$ROOT/scripts/wasi-runner.mjs" "$PROJ/target/wasm32-wasip1/release/coders-ab.wasm" "${args[@]}"
else
  cargo build --release --quiet --manifest-path "$PROJ/Cargo.toml"
  "$PROJ/target/release/coders-ab" "${args[@]}"
fi
