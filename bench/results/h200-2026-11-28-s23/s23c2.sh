#!/usr/bin/env bash
# s23 call 2: unseen (one round) + synthetic (two rounds) first builds, main (9afb64a = 012d3fc's
# Rust) vs after (ptxas sized by its PTX from the first finished ptxas on).
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/s23.tar.xz
exec > >(tee "$OUT/call.log") 2>&1
nproc; uptime; .gpubin/kbuild --version; .gpubin/kbuild-main --version
OUT=$OUT KINDS="synthetic" REPEAT=2 EXTRA_ARGS="--candidates 1 --no-cicc-alone" bench/unseen_build_gpu.sh before=.gpubin/kbuild-main after=.gpubin/kbuild 2>&1 | grep --line-buffered -v "Verbose split .*in the tail"
OUT=$OUT KINDS="unseen" EXTRA_ARGS="--candidates 1 --no-cicc-alone" bench/unseen_build_gpu.sh before=.gpubin/kbuild-main after=.gpubin/kbuild 2>&1 | grep --line-buffered -v "Verbose split .*in the tail"
uptime
