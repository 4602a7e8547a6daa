#!/usr/bin/env bash
# s25 call 1 (#41): cuBLASLt's algorithms at LTX's projection shapes (bench/gemm_algos.cu); bf16
# vs FP8 projections split into quantize + scaled_mm (bench/fp8_gemm.py); LTX e2e with the fp8
# row, profiled by kind (main ecc9c7e + bench changes).
set -uo pipefail
mkdir -p "$OUT"
exec > >(tee "$OUT/call.log") 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site KBUILD_PYTHON=$(command -v python3) HF_HUB_OFFLINE=1
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
echo "== gemm_algos"; s=$SECONDS
if ! $NVCC -O2 -std=c++17 -arch=sm_90 bench/gemm_algos.cu -lcublasLt -o /tmp/gemm_algos 2>&1 | tail -3; then :; fi
if [ ! -x /tmp/gemm_algos ]; then
  LT=$(python3 -c "import glob,os,torch;d=os.path.dirname(os.path.dirname(torch.__file__));print(sorted(glob.glob(d+'/nvidia/**/libcublasLt.so*',recursive=True))[0])")
  echo "linking $LT"; $NVCC -O2 -std=c++17 -arch=sm_90 bench/gemm_algos.cu -I$(dirname $(dirname $LT))/include -L$(dirname $LT) -l:$(basename $LT) -Xlinker -rpath=$(dirname $LT) -o /tmp/gemm_algos 2>&1 | tail -3
fi
timeout 90 /tmp/gemm_algos 32 30 | tee "$OUT/gemm_algos.txt"; echo "gemm_algos $((SECONDS-s))s"
s=$SECONDS; .gpucarry/bin/kbuild build --cuda-capabilities 9.0 2>&1 | tail -1; echo "build $((SECONDS-s))s"
echo "== fp8_gemm"; timeout 120 python3 -u bench/fp8_gemm.py | tee "$OUT/fp8_gemm.txt"
echo "== e2e ltx + fp8"; timeout 300 python3 -u bench/e2e.py --models ltx --iters 15 --fp8 --json "$OUT/e2e-ltx.json" --profile "$OUT/profile-ltx.txt"
echo "done $SECONDS s"
