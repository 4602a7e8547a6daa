#!/usr/bin/env bash
# Experiment (session 12): per-process timelines of kbuild builds on the GPU machine
# (bench/step_timeline.py): paged-attention 9.0 cold + touched .cu, nvcc --time of the touched
# unit as one nvcc, relu (default capabilities) cold, the flagship cold. Results: $OUT/tl.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/exp2}; mkdir -p "$OUT"; R=/tmp/tl; rm -rf $R; mkdir -p $R
BIN=$PWD/.gpubin/kbuild
PY=$(command -v python3); export KBUILD_PYTHON=$PY PYTHONUNBUFFERED=1
nproc; lscpu | grep -E 'Model name|Thread'
tl() { local name=$1; shift; python3 -u bench/step_timeline.py --interval 0.25 -- "$@" > "$R/$name.txt" 2>&1; echo "== $name rc=$? $(grep -m1 '^# exit' "$R/$name.txt")"; grep -m1 '^# at the peak' "$R/$name.txt"; tar czf "$OUT/tl.tgz" -C $R .; }
W=/tmp/pa; rm -rf $W; cp -r .gpuwork/src/paged-attention $W
F=$W/paged-attention/cache_kernels.cu
B=("$BIN" build -C "$W" --python "$PY" --backend cuda --cuda-capabilities 9.0 --unique-id bench -j 16 -v)
tl pa-cold "${B[@]}"
echo "static const int kbuild_bench_edit_1 = 1;" >> $F
tl pa-touch "${B[@]}"
cmd=$(grep -m1 'Verbose .*/nvcc .*cache_kernels.cu' $R/pa-touch.txt | sed -e 's/^ *Verbose //' -e 's/--split-compile=[0-9]*//' -e 's#-o [^ ]*#-o /tmp/ck.o#' -e 's#-MF [^ ]*#-MF /tmp/ck.d#')
echo "static const int kbuild_bench_edit_2 = 2;" >> $F
s=$SECONDS; eval "$cmd --time $R/ck-time.csv" > $R/ck-nvcc.txt 2>&1; echo "== one nvcc of cache_kernels.cu: rc=$? $((SECONDS - s)) s"; cat $R/ck-time.csv
tar czf "$OUT/tl.tgz" -C $R .
rm -rf /tmp/relu; cp -r .gpuwork/src/relu /tmp/relu
tl relu-cold "$BIN" build -C /tmp/relu --python "$PY" --backend cuda --unique-id bench -j 16 -v
tl ltx-cold "$BIN" build -C . --out-dir /tmp/ltxout --python "$PY" --backend cuda --unique-id bench -j 16 -v
echo done
