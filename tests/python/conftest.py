"""Loads the built ltx_kernels variants through `kernels.get_local_kernel`, as users do.

The repo root (holding build/<variant>/) is two levels up, or $LTX_KERNELS_ROOT. The cpu
variant must exist (tests fail, not skip, without it: run `kbuild build`); CUDA cases skip
when torch sees no GPU.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # read when huggingface_hub is first imported

import pytest
import torch

REPO_ROOT = Path(os.environ.get("LTX_KERNELS_ROOT", Path(__file__).resolve().parents[2])).resolve()

_loaded: dict = {}


def load_kernel(backend: str):
    if backend not in _loaded:
        import kernels

        try:
            _loaded[backend] = kernels.get_local_kernel(REPO_ROOT, backend=backend)
        except FileNotFoundError as e:
            pytest.fail(
                f"no ltx_kernels {backend} build for torch {torch.__version__} under "
                f"{REPO_ROOT / 'build'}: run `kbuild build` in {REPO_ROOT} "
                f"(or point LTX_KERNELS_ROOT at a built checkout)\n{e}",
                pytrace=False,
            )
    return _loaded[backend]


def backend_params():
    return [
        pytest.param("cpu", id="cpu"),
        pytest.param(
            "cuda",
            id="cuda",
            marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU"),
        ),
    ]


@pytest.fixture(params=backend_params())
def lk(request):
    """The kernel module for one backend, with `.device` set to that backend's device."""
    mod = load_kernel(request.param)
    return SimpleNamespace(mod=mod, device=torch.device(request.param), backend=request.param)


@pytest.fixture
def cuda_lk():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    return SimpleNamespace(mod=load_kernel("cuda"), device=torch.device("cuda"), backend="cuda")


@pytest.fixture
def cpu_lk():
    return SimpleNamespace(mod=load_kernel("cpu"), device=torch.device("cpu"), backend="cpu")
