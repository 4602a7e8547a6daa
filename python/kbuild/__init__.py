"""kbuild: build GPU kernels for the Hugging Face Kernel Hub and publish them.

The package is the `kbuild` command-line binary; this module only finds it, so that
`python -m kbuild` and other Python code can run it.
"""

from __future__ import annotations

import os
import sys
import sysconfig

__all__ = ["find_kbuild_bin"]


def _candidates():
    exe = "kbuild" + (sysconfig.get_config_var("EXE") or "")
    # Where pip, uv and pipx put a wheel's scripts: this environment's, the user scheme's
    # (`pip install --user`), then next to this package (`pip install --target DIR` puts
    # them in DIR/bin).
    schemes = [sysconfig.get_path("scripts")]
    user = f"{os.name}_user"
    if user in sysconfig.get_scheme_names():
        schemes.append(sysconfig.get_path("scripts", scheme=user))
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    schemes.append(os.path.join(here, "bin"))
    for scripts in schemes:
        if scripts:
            yield os.path.join(scripts, exe)


def find_kbuild_bin() -> str:
    """The path of the `kbuild` binary installed with this package.

    Raises FileNotFoundError, naming every place looked at, when the binary is missing
    (a broken install: reinstall with `pip install --force-reinstall kbuild`).
    """
    looked = []
    for path in _candidates():
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        looked.append(path)
    raise FileNotFoundError(
        "the kbuild binary is not installed next to this Python package (looked at: "
        + ", ".join(looked)
        + ")\nhint: reinstall it: `pip install --force-reinstall kbuild`"
    )


if sys.version_info < (3, 9):  # pragma: no cover - requires-python says so too
    raise ImportError("kbuild needs Python 3.9 or later")
