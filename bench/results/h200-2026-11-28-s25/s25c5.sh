#!/usr/bin/env bash
# s25 call 5 (#41): where the GPU waits in one compiled LTX step (bench/step_gaps.py): compile +
# kernels, + fp8, and + fp8 under CUDA graphs (reduce-overhead).
set -uo pipefail
mkdir -p "$OUT"
exec > >(tee "$OUT/call.log") 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | grep -v WARNING
export PYTHONPATH=/tmp/site KBUILD_PYTHON=$(command -v python3) HF_HUB_OFFLINE=1
s=$SECONDS; .gpucarry/bin/kbuild build --cuda-capabilities 9.0 2>&1 | tail -1; echo "build $((SECONDS-s))s"
for c in "compile+kernels+fp8" "compile+kernels" "compile+kernels+fp8 --cudagraphs"; do
  echo "== $c"; timeout 150 python3 -u bench/step_gaps.py --config $c 2>&1 | grep -v Warning
done
echo "done $SECONDS s"
