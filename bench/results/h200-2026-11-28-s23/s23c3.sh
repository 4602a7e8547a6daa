#!/usr/bin/env bash
# s23 call 3: synthetic + fewer first builds, two rounds each, main (9afb64a = 012d3fc's Rust)
# vs after (d4582bd: ptxas sized against the typical input of those started so far).
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/s23.tar.xz
exec > >(tee "$OUT/call.log") 2>&1
nproc; uptime; .gpubin/kbuild --version; .gpubin/kbuild-main --version
OUT=$OUT KINDS="synthetic fewer" REPEAT=2 EXTRA_ARGS="--candidates 1 --no-cicc-alone" bench/unseen_build_gpu.sh before=.gpubin/kbuild-main after=.gpubin/kbuild 2>&1 | grep --line-buffered -v "Verbose split .*in the tail"
uptime
