#!/usr/bin/env bash
# The first-build benchmark (bench/first_build.py, issue #27) on the GPU machine: 16 cores,
# nvcc and torch, no cargo, no network. The kbuild binaries are carried in .gpubin/: kbuild
# (this branch) and, when present, kbuild-main (git main, the "before").
#
#   OUT=results-dir PYTHON=python3 bench/first_build_gpu.sh
#   PROJECT=.gpuwork/src/paged-attention CAPS=9.0 OUT=... bench/first_build_gpu.sh   # a real one
#
# SOURCE_ORDER=1 adds a build of each binary with units in source order (KBUILD_SCHEDULE=fifo).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/first-build}
mkdir -p "$OUT"
tools=(--tool after=.gpubin/kbuild)
if [ -x .gpubin/kbuild-main ]; then
  tools=(--tool before=.gpubin/kbuild-main "${tools[@]}")
fi
[ -n "${SOURCE_ORDER:-}" ] && tools+=(--source-order)
name=h100-first-build
project=()
if [ -n "${PROJECT:-}" ]; then
  project=(--project "$PROJECT")
  name=h100-first-build-$(basename "$PROJECT")
fi
"$PY" bench/first_build.py --python "$(command -v "$PY")" --caps "${CAPS:-9.0}" \
  --units "${UNITS:-24}" --base "${BASE:-4}" --skew "${SKEW:-16}" --unroll "${UNROLL:-384}" --jobs "$(nproc)" \
  "${project[@]}" "${tools[@]}" --out "$OUT/$name.txt"
