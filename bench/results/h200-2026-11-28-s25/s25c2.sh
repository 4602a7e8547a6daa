#!/usr/bin/env bash
# s25 call 2 (#41): LTX e2e with the fp8 row, each configuration profiled by kind (main ecc9c7e
# + bench/e2e.py's profile by kind): the "before" of this session's fp8 work.
set -uo pipefail
mkdir -p "$OUT"
exec > >(tee "$OUT/call.log") 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site KBUILD_PYTHON=$(command -v python3) HF_HUB_OFFLINE=1
python3 -c "import kernels, diffusers; print('kernels', kernels.__version__, 'diffusers', diffusers.__version__)"
s=$SECONDS; .gpucarry/bin/kbuild build --cuda-capabilities 9.0 2>&1 | tail -1; echo "build $((SECONDS-s))s"
echo "== e2e ltx + fp8"; timeout 420 python3 -u bench/e2e.py --models ltx --iters 15 --fp8 --json "$OUT/e2e-ltx.json" --profile "$OUT/profile-ltx.txt"
echo "done $SECONDS s"
