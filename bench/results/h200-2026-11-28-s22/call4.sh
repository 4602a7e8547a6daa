#!/usr/bin/env bash
# s22 call 4 (#41): final tree: CUDA pytest of the block ops / diffusers patches (capture test, fp8); LTX e2e with the optional fp8 row; Mochi e2e (final op).
set -uo pipefail
mkdir -p "$OUT"
exec > >(tee "$OUT/call4.log") 2>&1
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site KBUILD_PYTHON=$(command -v python3) HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name --format=csv,noheader
s=$SECONDS; .gpucarry/bin/kbuild build --cuda-capabilities 9.0 2>&1 | tail -1; echo "build $((SECONDS-s))s"
echo "== pytest block ops + diffusers (cpu and cuda)"; timeout 120 python3 -m pytest -q -p no:cacheprovider tests/python/test_block_ops.py tests/python/test_diffusers.py 2>&1 | tail -3
echo "== e2e ltx + fp8"; timeout 220 python3 -u bench/e2e.py --models ltx --iters 15 --fp8 --json "$OUT/e2e-ltx.json"
echo "== e2e mochi"; timeout 150 python3 -u bench/e2e.py --models mochi --mochi-iters 15 --json "$OUT/e2e-mochi.json" --profile "$OUT/profile-mochi.txt"
echo "done $SECONDS s"
