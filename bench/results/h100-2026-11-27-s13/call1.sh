#!/usr/bin/env bash
# Session 13 call 1: kbuild main (.gpubin/kbuild) against fronts-apart (.gpubin/kbuild-fa):
# paged-attention 9.0 cold and touched .cu, the flagship cold; per-process timelines.
set -uo pipefail
OUT=${OUT:-/tmp/exp1}; mkdir -p "$OUT"; R=/tmp/tl; rm -rf $R; mkdir -p $R
PY=$(command -v python3); export KBUILD_PYTHON=$PY PYTHONUNBUFFERED=1
nproc; lscpu | grep -E 'Model name|Thread'; nvidia-smi --query-gpu=name --format=csv,noheader
tl() { local name=$1; shift; python3 -u bench/step_timeline.py --interval 0.25 -- "$@" > "$R/$name.txt" 2>&1; echo "== $name rc=$? $(grep -m1 '^# exit' "$R/$name.txt")"; grep -m1 '^# at the peak' "$R/$name.txt" | cut -c1-400; tar czf "$OUT/tl.tgz" -C $R .; }
bin() { if [ "$1" = fa ]; then echo "$PWD/.gpubin/kbuild-fa"; else echo "$PWD/.gpubin/kbuild"; fi; }
for b in fa main; do
  W=/tmp/pa-$b; rm -rf $W; cp -r .gpuwork/src/paged-attention $W
  tl pa-cold-$b "$(bin $b)" build -C "$W" --python "$PY" --backend cuda --cuda-capabilities 9.0 --unique-id bench -j 16 -v
done
for b in fa main; do
  W=/tmp/pa-$b; echo "static const int kbuild_bench_edit_1 = 1;" >> $W/paged-attention/cache_kernels.cu
  tl pa-touch-$b "$(bin $b)" build -C "$W" --python "$PY" --backend cuda --cuda-capabilities 9.0 --unique-id bench -j 16 -v
done
for b in fa main; do
  rm -rf /tmp/ltx-$b; mkdir -p /tmp/ltx-$b; cp -r build.toml kernels torch-ext /tmp/ltx-$b/
  tl ltx-cold-$b "$(bin $b)" build -C /tmp/ltx-$b --python "$PY" --backend cuda --unique-id bench -j 16 -v
done
echo done
