#!/usr/bin/env bash
# s23 call 1: fewer + synthetic first builds, main (9afb64a = 012d3fc's Rust) vs after (29a9836:
# a ptxas whose PTX predicts several typical ones splits as it starts), two rounds each.
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/s23.tar.xz
exec > >(tee "$OUT/call.log") 2>&1
nproc; uptime; .gpubin/kbuild --version; .gpubin/kbuild-main --version
OUT=$OUT KINDS="synthetic fewer" REPEAT=2 EXTRA_ARGS="--candidates 1 --no-cicc-alone" bench/unseen_build_gpu.sh before=.gpubin/kbuild-main after=.gpubin/kbuild 2>&1 | grep --line-buffered -v "Verbose split .*in the tail"
uptime
