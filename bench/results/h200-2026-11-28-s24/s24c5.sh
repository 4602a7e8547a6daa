#!/usr/bin/env bash
# s24 call 5 (#41): scripts/gpu-check of the tree with plain RMSNorm's rows of 129-256 vectors
# on two vectors per thread (kbuild f05724b, stripped).
set -uo pipefail
mkdir -p "$OUT"
exec > >(tee "$OUT/call.log") 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
s=$SECONDS
KBUILD_BIN=$PWD/.gpucarry/bin OUT=$OUT/check timeout 400 scripts/gpu-check 2>&1 | grep --line-buffered -E "^=== |passed|failed|FAILED|get_kernel|rel err|bf16 symbols|gpu-check"
echo "gpu-check $((SECONDS-s))s"
