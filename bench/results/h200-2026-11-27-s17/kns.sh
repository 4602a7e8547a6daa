#!/usr/bin/env bash
# #43 major 1 on CUDA: a kernel that registers under KERNEL_NS (from cuda-flags) still runs after
# a commit changes the op namespace (before the fix: "Could not run '_relu_cuda_<new>::relu'").
set -uo pipefail
BIN=$(realpath .gpubin)
rm -rf /tmp/kns && cp -r .gpubin/kns /tmp/kns && cd /tmp/kns || exit 1
git init -q && git -c user.name=t -c user.email=t@l add -A && git -c user.name=t -c user.email=t@l commit -qm one
run() {
  "$BIN/kbuild" -v build 2>&1 | grep -E "relu_cuda.cu|Compiled|fresh|probe|reused" | head -8
  python3 -c "
import sys, torch, kernels, pathlib
k = kernels.get_local_kernel(pathlib.Path('/tmp/kns'))
x = torch.tensor([-1.0, 2.0, -3.0, 4.0], device='cuda')
print('relu ->', k.relu(x).tolist())"
}
run || exit 1
echo "# commit two" >> build.toml && git -c user.name=t -c user.email=t@l commit -qam two
run
