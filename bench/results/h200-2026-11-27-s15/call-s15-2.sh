#!/usr/bin/env bash
# Session 15 call 2/3: gpu-bench-hf PART ($1: relu-memory-t4 or relu-memory).
set -uo pipefail
OUT=${OUT:-/tmp/s15}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
KBUILD_BIN=.gpubin OUT=$OUT/bench timeout -s INT ${LIMIT:-560} scripts/gpu-bench-hf "$1" 2>&1 | grep --line-buffered -E "measured|KBUILD_MEMORY|^\||^=== |FAILED|cold "
echo done
