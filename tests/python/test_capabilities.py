"""The capability matrix: sm_7x builds carry no bfloat16 kernels and asking for one raises an
error naming the capability and the dtypes that work."""

from __future__ import annotations

import glob
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from conftest import REPO_ROOT


def test_cpu_tensors_pass_the_dtype_check_for_every_dtype(cpu_lk):
    caps = cpu_lk.mod.functional._capabilities
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        caps.check_dtype(torch.device("cpu"), dtype, "rms_norm")
    x = torch.randn(2, 64, dtype=torch.bfloat16)
    assert cpu_lk.mod.rms_norm(x).dtype == torch.bfloat16


def needs_built(mod, *caps):
    """Skip unless the imported build carries code for every capability in `caps`: a build for
    part of the matrix (`kbuild build --cuda-capabilities native`, the author's loop) has less."""
    built = mod.functional._capabilities.CAPABILITY_DTYPES
    missing = [c for c in caps if c not in built]
    if missing:
        pytest.skip(f"this build has no code for {', '.join(missing)} (built for {', '.join(built)})")


def fake_capability(monkeypatch, mod, cap):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: cap)
    mod.reset_dtype_check_cache()


def test_bf16_on_a_7_5_gpu_raises_naming_capability_and_working_dtypes(cuda_lk, monkeypatch):
    needs_built(cuda_lk.mod, "7.5")
    fake_capability(monkeypatch, cuda_lk.mod, (7, 5))
    x = torch.randn(4, 64, device="cuda", dtype=torch.bfloat16)
    calls = [
        lambda: cuda_lk.mod.rms_norm(x),
        lambda: cuda_lk.mod.fused_residual_gated_rms_norm(x, x, x),
        lambda: cuda_lk.mod.adaln(x, x, x),
        lambda: cuda_lk.mod.rope_3d(x.view(1, 4, 1, 64), torch.ones(4, 64, device="cuda"), torch.zeros(4, 64, device="cuda")),
        lambda: cuda_lk.mod.geglu(x),
        lambda: cuda_lk.mod.gelu_tanh(x),
    ]
    for call in calls:
        with pytest.raises(RuntimeError) as e:
            call()
        msg = str(e.value)
        assert "7.5" in msg and "bfloat16" in msg, msg
        assert "float32" in msg and "float16" in msg, msg
    # float16 is built for 7.5 (and runs here, on the real GPU's cubin).
    y = cuda_lk.mod.rms_norm(x.half())
    assert y.dtype == torch.float16
    fake_capability(monkeypatch, cuda_lk.mod, (7, 5))
    with pytest.raises(RuntimeError, match="7.5"):
        cuda_lk.mod.gelu_tanh(x)  # the cache does not leak a pass from an earlier check
    monkeypatch.undo()
    cuda_lk.mod.reset_dtype_check_cache()


def test_bf16_on_an_8_6_gpu_uses_the_8_0_cubin(cuda_lk, monkeypatch):
    needs_built(cuda_lk.mod, "8.0")
    fake_capability(monkeypatch, cuda_lk.mod, (8, 6))
    x = torch.randn(4, 64, device="cuda", dtype=torch.bfloat16)
    assert cuda_lk.mod.rms_norm(x).dtype == torch.bfloat16
    monkeypatch.undo()
    cuda_lk.mod.reset_dtype_check_cache()


def _cuobjdump():
    found = shutil.which("cuobjdump")
    if found:
        return found
    for c in [
        Path(torch.__file__).parents[1] / "nvidia/cu13/bin/cuobjdump",
        Path("/usr/local/cuda/bin/cuobjdump"),
    ]:
        if c.exists():
            return str(c)
    return None


def test_sm75_cubins_carry_no_bf16_kernels():
    libs = sorted(glob.glob(str(REPO_ROOT / "build" / "*-cu*-*" / "_ltx_kernels_cuda_*.abi3.so")))
    if not libs:
        pytest.skip("no CUDA variant built")
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found")
    for lib in libs:
        meta = json.loads((Path(lib).parent / "metadata.json").read_text())
        archs = [a.removesuffix("+PTX") for a in meta["backend"]["archs"]]
        if not {"7.5", "8.0", "9.0"} <= set(archs):
            pytest.skip(f"{Path(lib).parent.name} is built for {', '.join(archs)} only")
        text = subprocess.run([tool, "--list-text", lib], capture_output=True, text=True, check=True).stdout
        per_arch = {}
        for line in text.splitlines():
            for arch in ("sm_75", "sm_80", "sm_90"):
                if f".{arch}." in line:
                    per_arch.setdefault(arch, []).append(line)
        assert set(per_arch) == {"sm_75", "sm_80", "sm_90"}, per_arch.keys()
        bf16 = {a: [s for s in names if "bfloat16" in s.lower()] for a, names in per_arch.items()}
        assert bf16["sm_75"] == [], bf16["sm_75"][:3]
        assert bf16["sm_80"] and bf16["sm_90"]
        assert len(per_arch["sm_75"]) + len(bf16["sm_90"]) == len(per_arch["sm_90"])
