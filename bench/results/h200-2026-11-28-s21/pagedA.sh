#!/usr/bin/env bash
# s21 paged call A: paged-attention's floor on the H200 (reference build + longest unit alone).
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/bins.tar.xz
uptime
OUT=$OUT KINDS=paged EXTRA_ARGS="--candidates 1 --no-cicc-alone --floor-only" bench/unseen_build_gpu.sh before=.gpubin/kbuild-main after=.gpubin/kbuild
uptime
