"""pytest plugin: load kernels with the `cpu` backend unless a test names one.

`kernels` picks the backend from how torch was built (`torch.version.cuda` set: CUDA), not from
what the repository has. PyPI ships only CUDA builds of torch for Linux, so the unchanged tests of a
cpu-only kernel-builder project (`symbol-conflicts`, `symbol-conflicts2`: `get_kernel(repo,
version=1)`) ask for a CUDA variant that such a project never has. HF runs those tests with a CPU
torch; `scripts/gpu-corpus` loads this plugin (`-p kbuild_cpu_backend`) for projects whose
build.toml lists only the cpu backend instead. A test that passes `backend=` keeps its choice.
"""

import functools

import kernels


def _default_cpu(load):
    @functools.wraps(load)
    def wrapper(*args, **kwargs):
        kwargs.setdefault("backend", "cpu")
        return load(*args, **kwargs)

    return wrapper


def pytest_configure(config):
    for name in ("get_kernel", "get_local_kernel", "has_kernel"):
        if hasattr(kernels, name):
            setattr(kernels, name, _default_cpu(getattr(kernels, name)))
