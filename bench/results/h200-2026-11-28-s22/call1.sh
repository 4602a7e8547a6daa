#!/usr/bin/env bash
# s22 call 1 (#41): attention backends at the models' shapes; LTX e2e with/without the cuDNN piece, profiled.
set -uo pipefail
mkdir -p "$OUT"
exec > >(tee "$OUT/call1.log") 2>&1
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site KBUILD_PYTHON=$(command -v python3) HF_HUB_OFFLINE=1
nproc; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
s=$SECONDS; .gpucarry/kbuild build --backend cuda --cuda-capabilities 9.0 2>&1 | tail -2; echo "build $((SECONDS-s))s"
echo "== attention"; timeout 150 python3 -u bench/attention.py --json "$OUT/attention.json"
echo "== pytest attention piece"; timeout 60 python3 -m pytest -q -p no:cacheprovider tests/python/test_diffusers.py -k "attention" 2>&1 | tail -3
echo "== e2e ltx"; timeout 400 python3 -u bench/e2e.py --models ltx --without attention --iters 15 --json "$OUT/e2e-ltx.json" --profile "$OUT/profile-ltx.txt"
echo "done $SECONDS s"
