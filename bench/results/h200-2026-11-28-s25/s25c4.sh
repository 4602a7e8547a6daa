#!/usr/bin/env bash
# s25 call 4 (#41): FP8 quantization as a reciprocal multiply, warp per row, fast GELU division: CUDA pytest of the fp8
# ops, compile and diffusers tests; bench/fp8_gemm.py; LTX e2e with the fp8 row, profiled by kind.
set -uo pipefail
mkdir -p "$OUT"
exec > >(tee "$OUT/call.log") 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | grep -v WARNING
export PYTHONPATH=/tmp/site KBUILD_PYTHON=$(command -v python3) HF_HUB_OFFLINE=1
git log --oneline -1
s=$SECONDS; .gpucarry/bin/kbuild build --cuda-capabilities 9.0 2>&1 | tail -1; echo "build $((SECONDS-s))s"
echo "== pytest (cuda)"; (cd tests/python && timeout 200 python3 -m pytest -q -p no:cacheprovider -k cuda test_fp8_ops.py test_compile.py test_diffusers.py test_ops.py test_block_ops.py > "$OUT/pytest.txt" 2>&1; tail -3 "$OUT/pytest.txt"; grep -E "^(FAILED|E  )" "$OUT/pytest.txt" | head -30)
echo "== fp8_gemm"; timeout 120 python3 -u bench/fp8_gemm.py | tee "$OUT/fp8_gemm.txt"
echo "== e2e ltx + fp8"; timeout 330 python3 -u bench/e2e.py --models ltx --iters 15 --fp8 --json "$OUT/e2e-ltx.json" --profile "$OUT/profile-ltx.txt"
echo "done $SECONDS s"
