#!/usr/bin/env bash
# s24 call 6 (#42): where a first build of `unseen` (48 units, 16 cores) leaves cores idle:
# bench/step_timeline.py around one cold build by main's kbuild (d4582bd's Rust), -v kept.
set -uo pipefail
mkdir -p .gpubin "$OUT"; tar -C .gpubin -xJf .gpucarry/s23.tar.xz
exec > >(tee "$OUT/call.log") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"; uptime
python3 bench/unseen_build.py --kind unseen --cores 16 --generate-only /tmp/unseen
export KBUILD_CACHE_DIR=/tmp/kcache KBUILD_PYTHON=$(command -v python3) PYTHONUNBUFFERED=1
python3 bench/step_timeline.py --interval 0.2 --json "$OUT/timeline.json" -- \
  .gpubin/kbuild -C /tmp/unseen build -j16 -v --backend cuda --cuda-capabilities 9.0 \
  2> >(python3 -u -c 'import sys,time
t=time.time()
for l in sys.stdin: print(f"{time.time()-t:7.2f} {l.rstrip()}", flush=True)' > "$OUT/build.log") > "$OUT/timeline.txt"
echo "rc $?"; sleep 1; tail -5 "$OUT/build.log"; grep -n "busy" "$OUT/timeline.txt" | head -3; uptime
