#!/usr/bin/env bash
# Issue #41, small-shape RMSNorm: one batch for a GPU machine with nvcc and torch but no cargo
# (the lent H100), in the way of scripts/gpu-check. Builds the flagship with a carried kbuild,
# then, printing as it goes (all of it also in $OUT/log):
#   1. host µs per rms_norm call on CUDA (bench/host_overhead.py; tiny x and 2x1024x2048),
#   2. bench/bench.py's rms_norm rows (small shapes and the large ones, % of copy),
#   3. the CUDA pytest suite (every op: the allocation path changed for all of them).
# With BASELINE=<dir holding build.toml, kernels/, torch-ext/ of an earlier commit>, that tree is
# built too (sm_90 only) and its rms_norm is timed in the same rounds as ours (steps 1 and 2):
# host time differs between machines and runs by tens of percent, so only a same-run baseline
# says what a change bought.
#
#   KBUILD_BIN=.gpubin OUT=$OUT [BASELINE=.base41] bench/rms_norm_gpu.sh
#
# Python packages missing on the machine (kernels, …) are installed from wheels in .whl/.
set -uo pipefail
cd "$(dirname "$0")/.."

BIN=${KBUILD_BIN:-target/release}
OUT=${OUT:-/tmp/rms-norm-gpu}
BASELINE=${BASELINE:-}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log") 2>&1
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export KBUILD_PYTHON=$(command -v "$PY")

failed=()
step() {
  local name=$1
  shift
  echo
  echo "=== $name"
  local start=$SECONDS
  if "$@"; then
    echo "=== $name: ok ($((SECONDS - start)) s)"
  else
    echo "=== $name: FAILED ($((SECONDS - start)) s)"
    failed+=("$name")
  fi
}

base_args=()
[ -n "$BASELINE" ] && base_args=(--baseline "$BASELINE")

machine() {
  nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.sm --format=csv,noheader
  lscpu | grep -E '^(Model name|CPU\(s\)|CPU max MHz)' || true
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
}

build() {
  "$BIN/kbuild" build --json >"$OUT/build.json"
}

build_baseline() {
  # Its own op namespace: inside a git checkout kbuild would name it after the same HEAD.
  "$BIN/kbuild" -C "$BASELINE" build --backend cuda --cuda-capabilities 9.0 --unique-id baseline \
    --json >"$OUT/build-baseline.json"
}

# cuda: tiny x (host time alone) and the bench's 2x1024x2048, against the baseline; cpu: our
# build alone (the baseline is built for cuda only), the same path without the GPU, to compare
# this host's CPU with the numbers in bench/NOTES.md taken on a machine without one.
host_overhead() {
  "$PY" -u bench/host_overhead.py --backend cuda "${base_args[@]}" --rounds 15 --calls 20000 \
    --json "$OUT/host-tiny.json" &&
    "$PY" -u bench/host_overhead.py --backend cuda "${base_args[@]}" --shape 2x1024x2048 \
      --rounds 15 --calls 5000 --json "$OUT/host-2x1024x2048.json" &&
    "$PY" -u bench/host_overhead.py --backend cpu --rounds 9 --calls 20000
}

bench_rms_norm() {
  "$PY" -u bench/bench.py --only-rms-norm "${base_args[@]}" --json "$OUT/bench-rms-norm.json"
}

pytest_cuda() {
  "$PY" -m pytest tests/python -q -rs -p no:cacheprovider >"$OUT/pytest.txt" 2>&1
  local rc=$?
  tail -5 "$OUT/pytest.txt"
  return $rc
}

step machine machine
step "kbuild build (flagship)" build
[ -n "$BASELINE" ] && step "kbuild build (baseline $BASELINE, cuda sm_90)" build_baseline
step "host µs per call (bench/host_overhead.py)" host_overhead
step "bench.py rms_norm rows" bench_rms_norm
step "pytest tests/python (CUDA + cpu)" pytest_cuda

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "rms_norm_gpu: all steps passed"
else
  echo "rms_norm_gpu: FAILED: ${failed[*]}"
  exit 1
fi
