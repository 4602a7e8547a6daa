#!/usr/bin/env bash
# Session 16 call 4: paged-attention (9.0) built by kbuild, then cache_kernels.cu edited (a kernel
# appended, as bench/build_speed.py does) and rebuilt three times under bench/step_timeline.py:
# which chain bounds the touched .cu with a code edit on this machine.
set -uo pipefail
OUT=${OUT:-/tmp/s16}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
PY=$(command -v python3)
W=/tmp/pa; rm -rf $W; cp -r .gpuwork/src/paged-attention $W
K=(.gpubin/kbuild build -C $W --python "$PY" --backend cuda --cuda-capabilities 9.0 --unique-id bench -j "$(nproc)")
s=$SECONDS; "${K[@]}" -q 2>&1 | tail -3; echo "cold: $((SECONDS - s)) s"
for n in 1 2 3; do
  "$PY" -c "
import sys; sys.path.insert(0, 'bench')
from pathlib import Path
import build_speed as b
b.append_edit(Path('$W/paged-attention/cache_kernels.cu'), $n, 'cu')"
  "$PY" -u bench/step_timeline.py --json "$OUT/touch$n.json" -- "${K[@]}" -v > "$OUT/touch$n.txt" 2>&1
  grep -E "^# exit|^ +[0-9.]+ +[0-9.]+ +[0-9.]+ " "$OUT/touch$n.txt" | grep -v " 0.0   1      2 "
done
echo done
