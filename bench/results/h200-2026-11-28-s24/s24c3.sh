#!/usr/bin/env bash
# s24 call 3 (#41): plain RMSNorm rows of 129-256 vectors (h 2048 bf16) on a warp per row with
# 8 vectors per lane, against main's kernels (.gpuwork/base41) in the same rounds: bench.py's
# rms_norm rows (launch loop and CUDA graphs, hot and cold L2) and the CUDA tests of the norms.
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/s23.tar.xz
exec > >(tee "$OUT/call.log") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 KBUILD_PYTHON=$(command -v python3)
start=$SECONDS
.gpubin/kbuild build --backend cuda --cuda-capabilities 9.0 --json > "$OUT/build.json" || { echo BUILD FAILED; tail -c 3000 "$OUT/build.json"; exit 1; }
.gpubin/kbuild -C .gpuwork/base41 build --backend cuda --cuda-capabilities 9.0 --unique-id baseline --json > "$OUT/build-base.json" || { echo BASE BUILD FAILED; exit 1; }
echo "built in $((SECONDS - start)) s"
python3 -u bench/bench.py --only-rms-norm --baseline .gpuwork/base41 --json "$OUT/bench-rms-norm.json"
echo "bench done at $((SECONDS - start)) s"
python3 -m pytest tests/python -q -p no:cacheprovider -x -k "norm" 2>&1 | tail -5
echo "done at $((SECONDS - start)) s"
