#!/usr/bin/env bash
# s23 call 4: paged-attention's first build with the after binary (d4582bd), against session 21's
# floor (171.6 s: paged_attention_v1 alone, nvcc split 16 ways); session 21 measured a0b8c68 at 116.6 s.
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/s23.tar.xz
exec > >(tee "$OUT/call.log") 2>&1
uptime; .gpubin/kbuild --version
OUT=$OUT KINDS=paged EXTRA_ARGS="--candidates 1 --floor-from .gpucarry/paged-floor.json" timeout 420 bench/unseen_build_gpu.sh after=.gpubin/kbuild 2>&1 | grep --line-buffered -v "Verbose split .*in the tail"
uptime
