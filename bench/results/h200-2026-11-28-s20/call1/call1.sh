#!/usr/bin/env bash
# s20 call 1: merged #42 tree (87a2a26) on the GPU: flagship -j16 vs -j5 identical; main vs merged bytes; gpu-check.
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/bins.tar.xz
exec > >(tee "$OUT/call1.log") 2>&1
nproc; nvidia-smi --query-gpu=name --format=csv,noheader
.gpubin/kbuild --version
echo "== repro3 (merged: -j16 vs -j5, two dirs, empty caches)"
timeout 200 bash .gpubin/repro3.sh
cp /tmp/ra.sums "$OUT/merged-j16.sums"; cp /tmp/rc.sums "$OUT/merged-j5.sums"
echo "== flagship with main's kbuild (-j16), what differs from merged"
rm -rf /tmp/rm /tmp/rm-cache; mkdir -p /tmp/rm; cp -r build.toml kernels torch-ext /tmp/rm/
s=$SECONDS; KBUILD_CACHE_DIR=/tmp/rm-cache timeout 120 .gpubin/kbuild-main -q -C /tmp/rm build --unique-id repro -j 16 > /dev/null; echo "main rc=$? $((SECONDS-s))s"
(cd /tmp/rm/build && find . -path ./.kbuild -prune -o -type f -print | sort | xargs sha256sum) > "$OUT/main-j16.sums"
diff "$OUT/main-j16.sums" "$OUT/merged-j16.sums" && echo "main == merged"
echo "== gpu-check (merged)"
s=$SECONDS
KBUILD_BIN=$PWD/.gpubin OUT=$OUT/check timeout 420 scripts/gpu-check 2>&1 | grep --line-buffered -v "^\s*$" | tail -40
echo "gpu-check rc=${PIPESTATUS[0]} $((SECONDS-s))s"
