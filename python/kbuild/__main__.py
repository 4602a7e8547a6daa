"""`python -m kbuild ARGS`: run the kbuild binary with ARGS, exit with its status."""

from __future__ import annotations

import os
import subprocess
import sys

from kbuild import find_kbuild_bin


def _run() -> int:
    try:
        binary = find_kbuild_bin()
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    args = [binary, *sys.argv[1:]]
    if sys.platform == "win32":  # pragma: no cover - kbuild builds Linux kernels
        return subprocess.run(args).returncode
    os.execv(binary, args)
    return 0  # not reached: execv replaces this process


if __name__ == "__main__":
    sys.exit(_run())
