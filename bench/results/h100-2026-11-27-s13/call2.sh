#!/usr/bin/env bash
# Session 13 call 2: kbuild main (.gpubin/kbuild) against fronts-apart with one critical unit when predicted (.gpubin/kbuild-fa):
# paged-attention 9.0 cold: fa first (costs predicted), main (costs timed by fa's build, shared
# through kbuild's cache), fa again (timed); the flagship cold; per-process timelines.
set -uo pipefail
OUT=${OUT:-/tmp/exp1}; mkdir -p "$OUT"; R=/tmp/tl; rm -rf $R; mkdir -p $R
PY=$(command -v python3); export KBUILD_PYTHON=$PY PYTHONUNBUFFERED=1
nproc; lscpu | grep -E 'Model name|Thread'; nvidia-smi --query-gpu=name --format=csv,noheader
tl() { local name=$1; shift; python3 -u bench/step_timeline.py --interval 0.25 -- "$@" > "$R/$name.txt" 2>&1; echo "== $name rc=$? $(grep -m1 '^# exit' "$R/$name.txt")"; grep -m1 '^# at the peak' "$R/$name.txt" | cut -c1-400; tar czf "$OUT/tl.tgz" -C $R .; }
bin() { if [ "$1" = fa ]; then echo "$PWD/.gpubin/kbuild-fa"; else echo "$PWD/.gpubin/kbuild"; fi; }
for run in fa main fa-timed; do
  b=${run%-timed}; W=/tmp/pa-$run; rm -rf $W; cp -r .gpuwork/src/paged-attention $W
  tl pa-cold-$run "$(bin $b)" build -C "$W" --python "$PY" --backend cuda --cuda-capabilities 9.0 --unique-id bench -j 16 -v
done
for b in fa main; do
  rm -rf /tmp/ltx-$b; mkdir -p /tmp/ltx-$b; cp -r build.toml kernels torch-ext /tmp/ltx-$b/
  tl ltx-cold-$b "$(bin $b)" build -C /tmp/ltx-$b --python "$PY" --backend cuda --unique-id bench -j 16 -v
done
echo done
