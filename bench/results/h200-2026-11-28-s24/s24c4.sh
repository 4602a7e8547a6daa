#!/usr/bin/env bash
# s24 call 4 (#41): plain RMSNorm rows of 129-256 vectors (h 2048 bf16) on fewer threads per
# row (A: 2 vectors per thread, 128 threads; B: 4 per thread, 64 threads: one wave at 2048 rows)
# against main's kernels (.gpuwork/base41), each bench run with the baseline in its rounds.
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/s23.tar.xz
exec > >(tee "$OUT/call.log") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 KBUILD_PYTHON=$(command -v python3)
start=$SECONDS
for t in base41 candA candB; do
  .gpubin/kbuild -C .gpuwork/$t build --backend cuda --cuda-capabilities 9.0 --unique-id $t --json > "$OUT/build-$t.json" || { echo "BUILD $t FAILED"; exit 1; }
done
echo "built in $((SECONDS - start)) s"
for c in candA candB; do
  echo "##### $c"
  python3 -u bench/bench.py --only-rms-norm --root .gpuwork/$c --baseline .gpuwork/base41 --rounds 24 --json "$OUT/bench-$c.json"
  echo "bench $c done at $((SECONDS - start)) s"
done
