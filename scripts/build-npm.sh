#!/usr/bin/env bash
# Builds the npm package brevis-decoder and packs it:
#
#   scripts/build-npm.sh            -> npm/dist/brevis-decoder-<version>.tgz
#
# 1. installs what is missing, from the registries only: the wasm32 target
#    (rustup), wasm-bindgen-cli at exactly the version in Cargo.lock and
#    wasm-pack (cargo install, skipped when present: ~7 min each), and
#    binaryen's wasm-opt (npm, compiled to JS/wasm) and esbuild (to measure the minified bundle);
# 2. wasm-pack builds decoder-wasm (feature `wasm`) with +simd128 into
#    npm/brevis-decoder/wasm (its own target dir: target/wasm, so RUSTFLAGS
#    never invalidate the native build);
#    Fat LTO, one codegen unit, and opt-level "s" for the archive/stream/binding
#    crate and the zstd decoder (not for brevis-format's coders, where the time
#    goes) keep the gzipped module under the 100 KiB budget: -2.1 KB for -2%
#    BF16 decode speed in Node; BLAKE3 at "s" was 0.5 KB smaller and no
#    slower in Node than at level 3. xxhash-rust stays at level 3: its
#    one-shot XXH3-64 (record and chunk checksums) made `verifyArchive` of
#    the --fast-decode corpus archives 3-8% faster than at "s", for 1.2 KB
#    (bench/wasm/AB.md), which step 3's two flags pay for;
# 3. wasm-opt -O3, repeated until it stops shrinking the module (--converge:
#    -360 B gzipped over one -O3), shrinks and speeds the module. With
#    --low-memory-unused it folds constant additions into load and store
#    offsets, which is wrong only for an address that wraps around below 1 KiB:
#    none does (the stack's deepest kilobyte is there, `--stack-first`; data
#    starts at 1 MiB), 0.5 KB smaller; --strip-target-features drops a
#    section engines ignore, 0.1 KB;
# 4. npm pack writes the tarball the tests install.
#
# Env: BREVIS_NPM_OPT=0 skips wasm-opt (faster iteration).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PKG=npm/brevis-decoder
log() { printf '[build-npm] %s\n' "$*" >&2; }

# --------------------------------------------------------------- toolchain
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  log "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

WBG_VERSION=$(awk '/^name = "wasm-bindgen"$/ {getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock)
[[ -n $WBG_VERSION ]] || { log "no wasm-bindgen in Cargo.lock"; exit 1; }
if [[ $(wasm-bindgen --version 2>/dev/null | awk '{print $2}') != "$WBG_VERSION" ]]; then
  log "cargo install wasm-bindgen-cli $WBG_VERSION (several minutes, once)"
  # Not --locked: one of its locked dependencies is gone from the registry.
  cargo install wasm-bindgen-cli --version "$WBG_VERSION"
fi
if ! command -v wasm-pack > /dev/null; then
  log "cargo install wasm-pack (several minutes, once)"
  cargo install wasm-pack
fi
if [[ ! -x npm/tools/node_modules/.bin/wasm-opt || ! -x npm/tools/node_modules/.bin/esbuild ]]; then
  log "npm ci in npm/tools (binaryen, esbuild)"
  (cd npm/tools && npm ci --no-audit --no-fund)
fi

# --------------------------------------------------------------- build
log "wasm-pack build (release, +simd128)"
rm -rf "$PKG/wasm"
CARGO_TARGET_DIR="$ROOT/target/wasm" RUSTFLAGS="-C target-feature=+simd128" \
  CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
  wasm-pack --log-level warn build decoder-wasm --release --target web --mode no-install --no-pack \
  --out-dir "$ROOT/$PKG/wasm" --out-name brevis_decoder -- --features wasm \
  --config 'profile.release.package.brevis-decoder.opt-level="s"' \
  --config 'profile.release.package.ruzstd.opt-level="s"' \
  --config 'profile.release.package.blake3.opt-level="s"'
rm -f "$PKG/wasm/.gitignore"

WASM="$PKG/wasm/brevis_decoder_bg.wasm"
if [[ ${BREVIS_NPM_OPT:-1} != 0 ]]; then
  log "wasm-opt -O3 --converge --low-memory-unused"
  npm/tools/node_modules/.bin/wasm-opt -O3 --converge --low-memory-unused \
    --enable-simd --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types --enable-multivalue \
    --strip-debug --strip-producers --strip-target-features -o "$WASM.opt" "$WASM"
  mv "$WASM.opt" "$WASM"
fi

# --------------------------------------------------------------- pack
mkdir -p npm/dist
rm -f npm/dist/brevis-decoder-*.tgz
TGZ=$(cd "$PKG" && npm pack --silent --pack-destination ../dist)
log "packed npm/dist/$TGZ"
wasm_gz=$(gzip -9c "$WASM" | wc -c)
js_gz=$(cat "$PKG"/src/*.js "$PKG/wasm/brevis_decoder.js" | gzip -9c | wc -c)
log "sizes: wasm $(wc -c < "$WASM") B ($wasm_gz B gzipped), JS $js_gz B gzipped, tarball $(wc -c < "npm/dist/$TGZ") B"
if [[ -x npm/tools/node_modules/.bin/esbuild ]]; then
  # What a web app ships: the browser entry with the wasm glue and both
  # adapters, bundled and minified (esbuild), gzipped, plus the gzipped .wasm.
  esb=npm/tools/node_modules/.bin/esbuild
  core_gz=$("$esb" --bundle --minify --format=esm --log-level=warning "$PKG/src/index.js" | gzip -9c | wc -c)
  adapters_gz=$(for f in ort transformers; do
    "$esb" --bundle --minify --format=esm --log-level=warning --external:brevis-decoder "$PKG/src/$f.js"
  done | gzip -9c | wc -c)
  total=$((wasm_gz + core_gz + adapters_gz))
  log "bundled and minified: JS $core_gz B + adapters $adapters_gz B gzipped; with the wasm $total B"
  # The package's size budget (npm/brevis-decoder/README.md, "Size"): a change
  # that breaks it fails here, not silently (one did, by 266 B).
  budget=${BUNDLE_BUDGET:-102400}
  if ((total > budget)); then
    log "over the size budget: $total B > $budget B (BUNDLE_BUDGET)"
    exit 1
  fi
fi
echo "$ROOT/npm/dist/$TGZ"
