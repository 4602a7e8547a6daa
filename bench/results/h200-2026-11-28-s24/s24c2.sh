#!/usr/bin/env bash
# s24 call 2 (#41): the flagship built for sm_90 with main's kbuild (d4582bd's Rust), then
# bench.py's rms_norm rows with the CUDA-graph measurement against a copy side by side, hot and
# cold L2.
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/s23.tar.xz
exec > >(tee "$OUT/call.log") 2>&1
nproc; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 KBUILD_PYTHON=$(command -v python3)
python3 -c "import kernels, torch; print('kernels', kernels.__version__, 'torch', torch.__version__)"
start=$SECONDS
.gpubin/kbuild build --backend cuda --cuda-capabilities 9.0 --json > "$OUT/build.json" || { echo BUILD FAILED; tail -20 "$OUT/build.json"; exit 1; }
echo "flagship built in $((SECONDS - start)) s"
python3 -u bench/bench.py --only-rms-norm --json "$OUT/bench-rms-norm.json"
echo "done at $((SECONDS - start)) s"
