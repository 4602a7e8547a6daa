#!/usr/bin/env bash
# s23 call 5 (run inline, on the machine call 4 left warm): paged-attention's first build with main's binary.
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/s23.tar.xz; OUT=$OUT KINDS=paged EXTRA_ARGS="--candidates 1 --floor-from .gpucarry/paged-floor.json" timeout 200 bench/unseen_build_gpu.sh before=.gpubin/kbuild-main 2>&1 | grep --line-buffered -v "Verbose split .*in the tail" | tee $OUT/call.log | tail -5
