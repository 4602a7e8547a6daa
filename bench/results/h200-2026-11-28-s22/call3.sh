#!/usr/bin/env bash
# s22 call 3 (#41): gpu-check of the tree; Mochi e2e (15 steps, with/without the joint attention + fused qkv); LTX e2e (15 steps).
set -uo pipefail
mkdir -p "$OUT"
exec > >(tee "$OUT/call3.log") 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
s=$SECONDS
KBUILD_BIN=$PWD/.gpucarry/bin OUT=$OUT/check timeout 230 scripts/gpu-check 2>&1 | grep --line-buffered -E "^=== |passed|failed|FAILED|get_kernel|rel err|bf16 symbols|gpu-check" 
echo "gpu-check $((SECONDS-s))s"
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1
echo "== e2e mochi"; timeout 150 python3 -u bench/e2e.py --models mochi --mochi-iters 15 --without attention,qkv --json "$OUT/e2e-mochi.json" --profile "$OUT/profile-mochi.txt"
echo "== e2e ltx"; timeout 200 python3 -u bench/e2e.py --models ltx --iters 15 --without attention --json "$OUT/e2e-ltx.json"
echo "done $SECONDS s"
