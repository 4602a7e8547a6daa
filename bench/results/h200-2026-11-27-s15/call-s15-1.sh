#!/usr/bin/env bash
# Session 15 call 1 (kbuild af8c2c1): scripts/gpu-check (without its cpp_extension bench; it
# now includes the relu fixture edited and relinked once), then gpu-bench-hf ltx-memory.
set -uo pipefail
OUT=${OUT:-/tmp/s15}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader; nproc; ldd --version | head -1
SKIP_BENCH=1 KBUILD_BIN=.gpubin OUT=$OUT/check timeout -s INT 280 scripts/gpu-check 2>&1 | tee "$OUT/check.log" | grep --line-buffered -E "^=== |gpu-check|linked once|relu correct|passed|failed"
KBUILD_BIN=.gpubin OUT=$OUT/bench timeout -s INT 280 scripts/gpu-bench-hf ltx-memory 2>&1 | grep --line-buffered -E "measured|KBUILD_MEMORY|^\||^=== |FAILED"
echo done
