#!/usr/bin/env bash
# Experiment (session 12): what bounds paged-attention's cold and touched-.cu builds on the H100.
set -uo pipefail
OUT=${OUT:-/tmp/exp1}; mkdir -p "$OUT"
BIN=$PWD/.gpubin/kbuild-exp
PY=$(command -v python3); export KBUILD_PYTHON=$PY PYTHONUNBUFFERED=1
lscpu > "$OUT/lscpu.txt"; grep -E 'Model name|Thread|Core|Socket|^CPU\(s\)|NUMA node\(s\)' "$OUT/lscpu.txt"
W=/tmp/pa; rm -rf $W; cp -r .gpuwork/src/paged-attention $W
F=$W/paged-attention/cache_kernels.cu
B=("$BIN" build -C "$W" --python "$PY" --backend cuda --cuda-capabilities 9.0 --unique-id bench -j 16 -v)
tl() { local name=$1; shift; env "$@" python3 -u bench/step_timeline.py --json "$OUT/$name.json" -- "${B[@]}" > "$OUT/$name.txt" 2>&1; echo "== $name rc=$? $(grep -m1 '^# exit' "$OUT/$name.txt")"; grep -E 'split over|reused from the device' "$OUT/$name.txt" | head -5; }
tl cold X=1
n=0
edit() { n=$((n+1)); if [ "$1" = comment ]; then echo "// bench edit $n" >> $F; else echo "static const int kbuild_bench_edit_$n = $n;" >> $F; fi; }
edit comment; tl touch-comment X=1
edit code; tl touch-code-late X=1
edit code; tl touch-code-nolate KBUILD_EXP_LATE=0
edit code; tl touch-code-nice KBUILD_EXP_NICE=1
edit code; tl touch-code-late2 X=1
edit code; tl touch-code-nolate2 KBUILD_EXP_LATE=0
edit comment; tl touch-comment2 X=1
