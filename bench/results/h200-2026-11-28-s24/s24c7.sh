#!/usr/bin/env bash
# s24 call 7 (#42): `fewer` (10 units on 16 cores), two rounds each, main before the ptxas sizing
# (9afb64a's Rust) vs d4582bd (main's scheduling now), floor measured in this call.
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/s23.tar.xz
exec > >(tee "$OUT/call.log") 2>&1
nproc; uptime; nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
OUT=$OUT KINDS="fewer" REPEAT=2 EXTRA_ARGS="--candidates 1 --no-cicc-alone" bench/unseen_build_gpu.sh before=.gpubin/kbuild-main after=.gpubin/kbuild 2>&1 | grep --line-buffered -v "Verbose split .*in the tail"
uptime
