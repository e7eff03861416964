#!/usr/bin/env bash
# Brevis benchmark: one command from a fresh checkout to bench/RESULTS.md.
#
#   bench/run.sh [--quick] [--tools brevis,zstd19,...] [FILE_FILTER...]
#
#   --quick        only the small files (< 30 MB, plus silero-vad-v6/*): a couple of minutes
#   FILE_FILTER    keep corpus files whose manifest path contains any of these substrings
#
# Steps: (1) fetch/verify the corpus with ../shared/corpus/fetch.sh (idempotent, seconds when
# cached), (2) create/reuse bench/.venv with the pinned ZipNN, pcodec and OpenZL, (3) build
# brevis in release mode unless BREVIS_BIN points at a binary, (4) run bench/bench.py, which
# writes bench/RESULTS.md and bench/results.json.  Exit status is bench.py's: 0 ok, 1 brevis failed / round trip FAIL,
# 2 a peer failed.
#
# Environment:
#   BREVIS_CORPUS  corpus directory (default ~/.cache/brevis-corpus)
#   BREVIS_BIN     brevis binary to benchmark; when set, the cargo build is skipped
#   PYTHON         interpreter used to create the venv (default python3; 3.11 expected)
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
SHARED=$REPO/../shared
CORPUS=${BREVIS_CORPUS:-$HOME/.cache/brevis-corpus}
VENV=$REPO/bench/.venv
ZIPNN_VERSION=0.5.4
PCODEC_VERSION=1.1.0
OPENZL_VERSION=0.3.0

# The command as typed, for RESULTS.md.
cmd="bench/run.sh${*:+ $*}"
[[ -n ${BREVIS_BIN:-} ]] && cmd="BREVIS_BIN=$BREVIS_BIN $cmd"
[[ -n ${BREVIS_CORPUS:-} ]] && cmd="BREVIS_CORPUS=$BREVIS_CORPUS $cmd"

log() { printf '[bench] %s\n' "$*" >&2; }

for tool in zstd xz cargo; do
  if [[ $tool == cargo && -n ${BREVIS_BIN:-} ]]; then continue; fi
  command -v "$tool" >/dev/null || { log "missing required tool: $tool"; exit 2; }
done

# 1. corpus
log "fetching / verifying corpus in $CORPUS"
bash "$SHARED/corpus/fetch.sh" "$CORPUS"

# 2. venv with the pinned peers: ZipNN (it pulls in torch: several GB on first install), pcodec
#    and OpenZL (binary wheels, a few MB)
if [[ ! -x $VENV/bin/python ]]; then
  log "creating $VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
fi
pin() {  # pin PACKAGE VERSION: install PACKAGE==VERSION into the venv unless it is already there
  local have
  have=$("$VENV/bin/python" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$1" \
           2>/dev/null || true)
  if [[ $have != "$2" ]]; then
    log "installing $1==$2 into $VENV (found: ${have:-none})"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$1==$2"
  fi
}
pin zipnn "$ZIPNN_VERSION"
pin pcodec "$PCODEC_VERSION"
pin openzl "$OPENZL_VERSION"

# 3. brevis
if [[ -z ${BREVIS_BIN:-} ]]; then
  log "building brevis (cargo build --release -p brevis-encoder)"
  (cd "$REPO" && cargo build --release -p brevis-encoder)
  BREVIS_BIN=$REPO/target/release/brevis
  [[ -x $BREVIS_BIN ]] || { log "build produced no $BREVIS_BIN"; exit 1; }
else
  log "using BREVIS_BIN=$BREVIS_BIN (no cargo build)"
  [[ -x $BREVIS_BIN ]] || { log "BREVIS_BIN is not an executable: $BREVIS_BIN"; exit 2; }
  export BREVIS_BIN
fi

# 4. measure (BREVIS_BIN is only exported when overridden, so RESULTS.md can tell the two apart)
log "running bench/bench.py $*"
cd "$REPO"
BREVIS_CORPUS=$CORPUS BREVIS_BENCH_CMD=$cmd \
  exec "$VENV/bin/python" "$REPO/bench/bench.py" "$@"
