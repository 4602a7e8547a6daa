"""pytest plugin written by `kbuild test`: load kernels with the backend that runs here.

`kernels` picks the backend from how torch was built (`torch.version.cuda` set: cuda), not from
the machine: PyPI's Linux torch is a CUDA build, so on a machine without a GPU a project's
unchanged tests (`get_kernel(repo, version=1)`, `get_local_kernel(path)`) would ask for a CUDA
variant that cannot run. `kbuild test` loads this plugin with `KBUILD_TEST_BACKEND` set to the
backend it built (`cpu`); a test that passes `backend=` keeps its choice.
"""

import functools
import os

import kernels

_BACKEND = os.environ.get("KBUILD_TEST_BACKEND")


def _with_backend(load):
    @functools.wraps(load)
    def wrapper(*args, **kwargs):
        kwargs.setdefault("backend", _BACKEND)
        return load(*args, **kwargs)

    return wrapper


def pytest_configure(config):
    if not _BACKEND:
        return
    for name in ("get_kernel", "get_local_kernel", "has_kernel"):
        if hasattr(kernels, name):
            setattr(kernels, name, _with_backend(getattr(kernels, name)))


def pytest_report_header(config):
    if _BACKEND:
        return f"kbuild: kernels load the {_BACKEND} backend unless a test names one"
