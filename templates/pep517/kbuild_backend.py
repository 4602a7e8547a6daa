"""PEP 517 build backend of a kbuild kernel project: `pip install .` runs `kbuild wheel`.

Written by `kbuild create-pyproject`, which points `[build-system]` at this file through
`backend-path`: the backend lives in the project, so pip needs nothing from an index to build
(`requires = []`), and the wheel is the one `kbuild wheel` writes, byte for byte.

kbuild is a native binary, not a Python package: it is found through `$KBUILD`, else `PATH`.
The kernel is built against the torch of the interpreter pip installs into (`sys.executable`,
or `$KBUILD_PYTHON`); pip's isolated build environment hides that interpreter's packages
through `PYTHONNOUSERSITE` and a `sitecustomize` on `PYTHONPATH`, which are taken out of
kbuild's environment so it sees that torch.

Config settings (`pip install . -C backend=cpu`): `backend` chooses the variant's backend
[default: the one `kernels` loads with that torch: cuda for a CUDA torch, else cpu, when the
project has it].
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile


def _kbuild():
    exe = os.environ.get("KBUILD") or shutil.which("kbuild")
    if not exe:
        raise RuntimeError(
            "kbuild is not on PATH\nhint: install kbuild (`cargo install --path <kbuild>`) "
            "or set KBUILD=/path/to/kbuild"
        )
    return exe


def _env():
    """This process's environment without what pip's isolation adds."""
    env = dict(os.environ)
    env.pop("PYTHONNOUSERSITE", None)
    paths = env.pop("PYTHONPATH", "").split(os.pathsep)
    kept = [p for p in paths if p and not os.path.isfile(os.path.join(p, "sitecustomize.py"))]
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    return env


def _run(args):
    print("kbuild backend:", " ".join(args), file=sys.stderr)
    subprocess.run(args, check=True, env=_env(), stdout=sys.stderr)


def _python():
    return os.environ.get("KBUILD_PYTHON") or sys.executable


def _backend(config_settings):
    """`-C backend=…`, else the backend `kernels` loads, when the project builds it."""
    chosen = (config_settings or {}).get("backend")
    if chosen:
        return chosen
    probe = "import torch; print('cuda' if torch.version.cuda else 'cpu')"
    out = subprocess.run([_python(), "-c", probe], check=True, env=_env(), capture_output=True)
    wanted = out.stdout.decode().strip()
    listed = subprocess.run(
        [_kbuild(), "list-variants", "--json", "--python", _python()],
        check=True,
        env=_env(),
        capture_output=True,
    )
    backends = {v["backend"] for v in json.loads(listed.stdout)["variants"]}
    return wanted if wanted in backends else None


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Build one variant's wheel with `kbuild wheel` and return its file name."""
    args = [_kbuild(), "wheel", "-C", os.getcwd(), "--python", _python()]
    backend = _backend(config_settings)
    if backend:
        args += ["--backend", backend]
    with tempfile.TemporaryDirectory(dir=wheel_directory) as dist:
        _run(args + ["--dist-dir", dist])
        wheels = [w for w in os.listdir(dist) if w.endswith(".whl")]
        if len(wheels) != 1:
            raise RuntimeError(
                f"kbuild wheel wrote {len(wheels)} wheels ({', '.join(wheels)})\n"
                "hint: choose the backend: `pip install . -C backend=cpu`"
            )
        os.replace(os.path.join(dist, wheels[0]), os.path.join(wheel_directory, wheels[0]))
    return wheels[0]


def get_requires_for_build_wheel(config_settings=None):
    """Nothing from an index: kbuild and torch come from the machine."""
    return []
