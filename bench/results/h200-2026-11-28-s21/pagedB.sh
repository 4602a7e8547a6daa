#!/usr/bin/env bash
# s21 paged call B: paged-attention's first builds, before/after, against call A's floor.
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/bins.tar.xz
uptime
OUT=$OUT KINDS=paged EXTRA_ARGS="--candidates 1 --floor-from .gpucarry/paged-floor.json" bench/unseen_build_gpu.sh before=.gpubin/kbuild-main after=.gpubin/kbuild
uptime
