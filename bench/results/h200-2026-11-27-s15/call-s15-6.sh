#!/usr/bin/env bash
# Session 15 call 6: the flagship's first build ever under KBUILD_MEMORY=2195742720 (1.5 x HF's
# cold peak in call 4), kbuild 105e9d3 (.gpubin/kbuild) against the same plus "a step never
# measured needs at most its sibling capability's peak" (.gpubin/kbuild-sib), alternating, twice.
set -uo pipefail
OUT=${OUT:-/tmp/s15}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
PY=$(command -v python3); export KBUILD_PYTHON=$PY PYTHONUNBUFFERED=1
rm -rf /tmp/ltxm && mkdir -p /tmp/ltxm && cp -r build.toml kernels torch-ext /tmp/ltxm/
# toolchain answers once, outside the timed runs
.gpubin/kbuild build -C /tmp/ltxm --python "$PY" --backend cuda --dry-run >/dev/null 2>&1
for round in 1 2; do
  for bin in kbuild kbuild-sib; do
    rm -rf /tmp/kc /tmp/ltxm/out
    KBUILD_CACHE_DIR=/tmp/kc KBUILD_MEMORY=2195742720 timeout 120 "$PY" -u bench/step_timeline.py --interval 0.25 -- \
      .gpubin/$bin build -C /tmp/ltxm --python "$PY" --backend cuda --unique-id bench -j 16 -v \
      --out-dir /tmp/ltxm/out >"$OUT/ltxm-$bin-$round.txt" 2>&1
    echo "$bin round $round: $(grep -E '^# exit' "$OUT/ltxm-$bin-$round.txt")"
  done
done
echo done
