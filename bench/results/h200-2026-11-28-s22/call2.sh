#!/usr/bin/env bash
# s22 call 2 (#41): Mochi joint-attention op + fused qkv (with/without, profiled); LTX with CUDA graphs rows.
set -uo pipefail
mkdir -p "$OUT"
exec > >(tee "$OUT/call2.log") 2>&1
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site KBUILD_PYTHON=$(command -v python3) HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name --format=csv,noheader
s=$SECONDS; .gpucarry/kbuild build --backend cuda --cuda-capabilities 9.0 2>&1 | tail -1; echo "build $((SECONDS-s))s"
echo "== pytest diffusers (cuda)"; timeout 90 python3 -m pytest -q -p no:cacheprovider tests/python/test_diffusers.py -k "cuda" 2>&1 | tail -4
echo "== e2e mochi"; timeout 240 python3 -u bench/e2e.py --models mochi --without attention,qkv --json "$OUT/e2e-mochi.json" --profile "$OUT/profile-mochi.txt"
echo "== e2e ltx cudagraphs"; timeout 300 python3 -u bench/e2e.py --models ltx --cudagraphs --iters 15 --json "$OUT/e2e-ltx.json"
echo "done $SECONDS s"
