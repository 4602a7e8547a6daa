#!/usr/bin/env bash
# s21 call 5: fewer first builds, before (a0b8c68) / after (waited-for by what is left), call 4's floor.
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/bins.tar.xz
uptime
OUT=$OUT KINDS="fewer" EXTRA_ARGS="--candidates 1 --no-cicc-alone --floor-from .gpucarry/fewer-floor.json" bench/unseen_build_gpu.sh before=.gpubin/kbuild-a0b8c68 after=.gpubin/kbuild 2>&1 | grep --line-buffered -v "Verbose split .*in the tail"
uptime
