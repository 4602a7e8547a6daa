#!/usr/bin/env bash
# s25 call 6 (#41): final tree: scripts/gpu-check (all capabilities, the whole CUDA pytest, relu
# fixture, publish + get_kernel, bench); LTX e2e with the fp8 rows, with and without CUDA graphs.
set -uo pipefail
mkdir -p "$OUT"
exec > >(tee "$OUT/call.log") 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
s=$SECONDS
KBUILD_BIN=$PWD/.gpucarry/bin OUT=$OUT/check timeout 270 scripts/gpu-check 2>&1 | grep --line-buffered -E "^=== |passed|failed|FAILED|get_kernel|rel err|bf16 symbols|gpu-check"
echo "gpu-check $((SECONDS-s))s"
export PYTHONPATH=/tmp/site KBUILD_PYTHON=$(command -v python3) HF_HUB_OFFLINE=1
echo "== e2e ltx + fp8, CUDA graphs"; timeout 300 python3 -u bench/e2e.py --models ltx --iters 15 --fp8 --cudagraphs --json "$OUT/e2e-ltx.json"
echo "done $SECONDS s"
