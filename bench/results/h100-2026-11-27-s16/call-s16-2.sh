#!/usr/bin/env bash
# Session 16 call 2: paged-attention's touched cache_kernels.cu with the code edit (1 run).
set -uo pipefail
OUT=${OUT:-/tmp/s16}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
F='measured|^\||^=== |FAILED|reused|all runs'
CASES=touch-cu RUNS=${RUNS:-1} KBUILD_BIN=.gpubin OUT=$OUT/bench timeout -s INT ${LIMIT:-570} scripts/gpu-bench-hf paged-attention 2>&1 | grep --line-buffered -E "$F"
echo done
