#!/usr/bin/env bash
# Issue #42's first-build measurements (bench/unseen_build.py) on the GPU machine (16 cores,
# nvcc and torch, no cargo, no network; kbuild binaries carried in, e.g. in .gpubin/), or on
# the 2-core machine. Each argument is NAME=BINARY, built side by side:
#
#   OUT=$OUT bench/unseen_build_gpu.sh before=.gpubin/kbuild-main after=.gpubin/kbuild
#
# KINDS picks the projects, in order (default "unseen fewer synthetic"):
#   unseen     3 x cores units whose costs (~10x apart) no source scan sees, shuffled
#   fewer      the same kind of units, 5/8 of the cores of them (one on 2 cores)
#   synthetic  bench/first_build.py's project, costs the predictor reads (SYNTHETIC_ARGS,
#              default the H100 runs': 24 units, base 4, skew 16, unroll 384)
#   paged      a copy of .gpuwork/src/paged-attention (bench/prepare-gpu-bench), long: alone
# Each writes $OUT/<kind>.txt, .json and .log (the log as it runs). CAPS (9.0), SCALE (1: units
# of ~3-34 s alone), CORES (nproc), REPEAT (1), PYTHON (python3) and EXTRA_ARGS (e.g.
# "--candidates 1" for paged, whose units are long alone) pass through.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || {
  echo "usage: OUT=DIR bench/unseen_build_gpu.sh NAME=BINARY [NAME=BINARY...]" >&2
  exit 2
}
PY=$(command -v "${PYTHON:-python3}")
OUT=${OUT:-/tmp/unseen-build}
mkdir -p "$OUT"
status=0
export PYTHONUNBUFFERED=1
tools=()
for spec in "$@"; do tools+=(--tool "$spec"); done
# shellcheck disable=SC2206 # EXTRA_ARGS: more options for bench/unseen_build.py, split on spaces
common=(--python "$PY" --caps "${CAPS:-9.0}" --cores "${CORES:-$(nproc)}"
  --repeat "${REPEAT:-1}" ${EXTRA_ARGS:-} "${tools[@]}")
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
for kind in ${KINDS:-unseen fewer synthetic}; do
  case $kind in
  unseen | fewer) args=(--kind "$kind" --scale "${SCALE:-1}" --check-equal) ;;
  synthetic) args=(--kind synthetic ${SYNTHETIC_ARGS:---units 24 --base 4 --skew 16 --unroll 384}) ;;
  paged) args=(--kind project --project .gpuwork/src/paged-attention) ;;
  *)
    echo "unknown kind $kind" >&2
    exit 2
    ;;
  esac
  echo "==> $kind ($(date -u +%H:%M:%S))"
  start=$SECONDS
  if "$PY" bench/unseen_build.py "${args[@]}" "${common[@]}" --out "$OUT/$kind.txt" 2>&1 |
    tee "$OUT/$kind.log"; then
    echo "==> $kind took $((SECONDS - start))s"
  else
    echo "==> $kind FAILED after $((SECONDS - start))s"
    status=1
  fi
done
exit $status
