#!/usr/bin/env bash
# Device-machine decode timing (quiet cores): brevis verify 1/2 threads, baseline, zstd if present.
set -u
# Usage: bench/decode-quiet.sh DIR  (DIR holds brevis, brevis-base and the BF16 corpus file)
cd "${1:?DIR}"
F=model.bf16-derived.safetensors
nproc; uname -r; (lscpu | grep -E "Model name|^CPU\(s\)") || true
./brevis compress $F -o bf16.brv -f -q
ls -l bf16.brv
best() { # best of 9 wall times in seconds of "$@"
  "$@" >/dev/null 2>&1
  local b=999
  for i in 1 2 3 4 5 6 7 8 9; do
    s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
    b=$(python3 -c "print(min($b, $e-$s))" 2>/dev/null || echo "$b $e $s" | awk '{d=$2-$3; print (d<$1?d:$1)}')
  done
  echo "$b"
}
SIZE=$(stat -c %s $F)
mbs() { awk -v s="$SIZE" -v t="$1" 'BEGIN{printf "%.0f", s/t/1e6}'; }
for t in 1 2 4; do x=$(best ./brevis verify bf16.brv -q --threads $t); echo "brevis verify threads=$t: $x s = $(mbs $x) MB/s"; done
x=$(best ./brevis-base verify bf16.brv -q --threads 1); echo "baseline brevis verify threads=1: $x s = $(mbs $x) MB/s"
if command -v zstd >/dev/null; then
  zstd -3 -q -f $F -o z3; zstd -19 -T0 -q -f $F -o z19
  x=$(best zstd -d -q -c z3); echo "zstd -3 -d: $x s = $(mbs $x) MB/s"
  x=$(best zstd -d -q -c z19); echo "zstd -19 -d: $x s = $(mbs $x) MB/s"
else echo "no zstd on this machine"; fi
