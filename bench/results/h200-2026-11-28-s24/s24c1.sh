#!/usr/bin/env bash
# s24 call 1: unseen first builds (one round each), main before the ptxas sizing (9afb64a's
# Rust) vs d4582bd (main's current Rust: a ptxas sized by its PTX), floor measured in this call.
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/s23.tar.xz
exec > >(tee "$OUT/call.log") 2>&1
nproc; uptime; nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
.gpubin/kbuild --version; .gpubin/kbuild-main --version
OUT=$OUT KINDS="unseen" EXTRA_ARGS="--candidates 1 --no-cicc-alone" bench/unseen_build_gpu.sh before=.gpubin/kbuild-main after=.gpubin/kbuild 2>&1 | grep --line-buffered -v "Verbose split .*in the tail"
uptime
