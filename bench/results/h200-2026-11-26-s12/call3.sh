#!/usr/bin/env bash
# Experiment (session 12): split device passes at low priority taking no slots (kbuild-new)
# against kbuild main 9f5f2a2 (kbuild), paged-attention 9.0 cold and touched .cu, same machine.
set -uo pipefail
OUT=${OUT:-/tmp/exp3}; mkdir -p "$OUT"; R=/tmp/tl; rm -rf $R; mkdir -p $R
PY=$(command -v python3); export KBUILD_PYTHON=$PY PYTHONUNBUFFERED=1
nproc; lscpu | grep -E 'Model name|Thread'
tl() { local name=$1; shift; python3 -u bench/step_timeline.py --interval 0.25 -- "$@" > "$R/$name.txt" 2>&1; echo "== $name rc=$? $(grep -m1 '^# exit' "$R/$name.txt")"; grep -m1 '^# at the peak' "$R/$name.txt"; tar czf "$OUT/tl.tgz" -C $R .; }
for b in new old; do
  bin=$PWD/.gpubin/kbuild; [ $b = new ] && bin=$PWD/.gpubin/kbuild-new
  W=/tmp/pa-$b; rm -rf $W; cp -r .gpuwork/src/paged-attention $W
  tl pa-cold-$b "$bin" build -C "$W" --python "$PY" --backend cuda --cuda-capabilities 9.0 --unique-id bench -j 16 -v
done
for b in new old; do
  bin=$PWD/.gpubin/kbuild; [ $b = new ] && bin=$PWD/.gpubin/kbuild-new
  W=/tmp/pa-$b; echo "static const int kbuild_bench_edit_1 = 1;" >> $W/paged-attention/cache_kernels.cu
  tl pa-touch-$b "$bin" build -C "$W" --python "$PY" --backend cuda --cuda-capabilities 9.0 --unique-id bench -j 16 -v
done
tl ltx-cold-new $PWD/.gpubin/kbuild-new build -C . --out-dir /tmp/ltxout --python "$PY" --backend cuda --unique-id bench -j 16 -v
echo done
