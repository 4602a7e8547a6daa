#!/usr/bin/env bash
# Session 16 call 1: the touch cases again with an edit that changes code (a kernel appended),
# not a comment (which left the preprocessed source as it was: kbuild's device step cache could
# reuse passes HF runs again). ltx_kernels (3 runs) and causal-conv1d (1 run).
set -uo pipefail
OUT=${OUT:-/tmp/s16}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
F='measured|^\||^=== |FAILED|reused|all runs'
CASES=touch-cu,touch-h RUNS=3 KBUILD_BIN=.gpubin OUT=$OUT/bench timeout -s INT 250 scripts/gpu-bench-hf ltx_kernels 2>&1 | grep --line-buffered -E "$F"
CASES=touch-cu RUNS=1 KBUILD_BIN=.gpubin OUT=$OUT/bench timeout -s INT 320 scripts/gpu-bench-hf causal-conv1d 2>&1 | grep --line-buffered -E "$F"
echo done
