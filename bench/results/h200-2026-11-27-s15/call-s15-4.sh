#!/usr/bin/env bash
# Session 15 call 4 (kbuild 105e9d3: a C++ unit never measured is sized by its preprocessed
# source under a budget where 3 GiB each would bind): gpu-bench-hf ltx-memory again, then the
# flagship under that KBUILD_MEMORY by hand: a first build ever (fresh KBUILD_CACHE_DIR), and
# the same in a fresh out dir with the cache it filled (peaks learned), each with a timeline.
set -uo pipefail
OUT=${OUT:-/tmp/s15}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
PY=$(command -v python3); export KBUILD_PYTHON=$PY PYTHONUNBUFFERED=1
KBUILD_BIN=.gpubin OUT=$OUT/bench timeout -s INT 240 scripts/gpu-bench-hf ltx-memory 2>&1 | grep --line-buffered -E "measured|KBUILD_MEMORY|^\||^=== |FAILED"
M=$(grep -o "KBUILD_MEMORY=[0-9]*" "$OUT/bench/ltx-memory.log" | head -1 | cut -d= -f2)
echo "budget $M"
rm -rf /tmp/ltxm /tmp/kc && mkdir -p /tmp/ltxm && cp -r build.toml kernels torch-ext /tmp/ltxm/
for run in first-ever learned; do
  KBUILD_CACHE_DIR=/tmp/kc KBUILD_MEMORY=$M timeout 120 "$PY" -u bench/step_timeline.py --interval 0.25 -- \
    .gpubin/kbuild build -C /tmp/ltxm --python "$PY" --backend cuda --unique-id bench -j 16 -v \
    --out-dir /tmp/ltxm/out-$run >"$OUT/ltxm-$run.txt" 2>&1
  grep -E "^# exit|alone|never measured|Finished" "$OUT/ltxm-$run.txt"
done
echo done
