#!/usr/bin/env bash
# Session 16 call 5: the flagship (7.5, 8.0, 9.0+PTX) built by kbuild, then common.cuh edited (a
# kernel appended, as bench/build_speed.py does) and rebuilt twice, and pointwise.cu once, under
# bench/step_timeline.py: what bounds a touched header on this machine.
set -uo pipefail
OUT=${OUT:-/tmp/s16}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
PY=$(command -v python3)
W=/tmp/lx; rm -rf $W; mkdir -p $W; cp -r build.toml kernels torch-ext $W/
K=(.gpubin/kbuild build -C $W --python "$PY" --backend cuda --unique-id bench -j "$(nproc)")
s=$SECONDS; "${K[@]}" -q 2>&1 | tail -3; echo "cold: $((SECONDS - s)) s"
for n in h1 h2 cu1; do
  case $n in h*) f=kernels/cuda/common.cuh ;; *) f=kernels/cuda/pointwise.cu ;; esac
  "$PY" -c "
import sys; sys.path.insert(0, 'bench')
from pathlib import Path
import build_speed as b
b.append_edit(Path('$W/$f'), '${n:1}', '${n:0:1}')"
  "$PY" -u bench/step_timeline.py --json "$OUT/ltx-$n.json" -- "${K[@]}" -v > "$OUT/ltx-$n.txt" 2>&1
  sed -n '/^# exit/,/^# threads/p' "$OUT/ltx-$n.txt" | grep -v " 0.0   1      [0-9] "
done
echo done
