#!/usr/bin/env bash
# s21 probe: where a first build's device passes run on 16 cores (fewer, synthetic), kbuild a0b8c68.
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/bins.tar.xz
exec > >(tee "$OUT/probe.log") 2>&1
nproc; lscpu | grep -E "Model name|Thread|Core|Socket|MHz"; nvidia-smi --query-gpu=name --format=csv,noheader
.gpubin/kbuild --version; uptime
export PYTHONUNBUFFERED=1
python3 bench/unseen_build.py --kind fewer --cores 16 --generate-only /tmp/p-fewer
python3 bench/unseen_build.py --kind synthetic --units 24 --base 4 --skew 16 --unroll 384 --generate-only /tmp/p-synthetic
for kind in fewer synthetic; do
  echo "== $kind $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
  KBUILD_CACHE_DIR=/tmp/pc-$kind KBUILD_PYTHON=python3 timeout 150 python3 -u bench/pass_timeline.py \
    --json "$OUT/$kind-timeline.json" -- .gpubin/kbuild -C /tmp/p-$kind build -j16 -v 2> "$OUT/$kind-v.log"
  grep -E "Verbose .*(race|raced|split over|copy)" "$OUT/$kind-v.log" | cut -c1-220
done
echo "== unit_7 alone $(date -u +%T)"
cd /tmp/p-fewer
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc); echo "nvcc: $NVCC"; D=$(dirname "$NVCC")
mkdir -p /tmp/k7
s=$SECONDS; timeout 120 "$NVCC" -c unseen/unit_7.cu -o /tmp/k7/u7.o -gencode arch=compute_90,code=sm_90 -O3 --split-compile=16 --keep --keep-dir /tmp/k7 --time /tmp/k7/t.csv; echo "nvcc split16 $((SECONDS-s))s"
awk -F, '{print $2, $(NF-1)}' /tmp/k7/t.csv
for n in 16 9 4 1; do /usr/bin/time -f "ptxas split $n: %e s wall %U user" timeout 100 "$D/ptxas" -arch=sm_90 -O3 -split-compile=$n /tmp/k7/unit_7.ptx -o /tmp/k7/x$n.cubin; done
uptime
