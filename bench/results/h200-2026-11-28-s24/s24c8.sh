#!/usr/bin/env bash
# s24 call 8 (#42): `unseen` again, main's scheduling (d4582bd) alone, floor measured in this call.
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/s23.tar.xz
exec > >(tee "$OUT/call.log") 2>&1
nproc; uptime; nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
OUT=$OUT KINDS="unseen" EXTRA_ARGS="--candidates 1 --no-cicc-alone" bench/unseen_build_gpu.sh after=.gpubin/kbuild 2>&1 | grep --line-buffered -E "^==|wall|floor|^\|"
uptime
