"""HF kernel-builder's own build as a tool of bench/build_speed.py.

What HF's Nix build runs, without Nix: `kernel-builder create-pyproject` writes a CMake project
(CMakeLists.txt, cmake/*.cmake, setup.py) into a copy of the kernel project, then CMake
configures it with Ninja and builds its `install` target into a prefix. The settings follow
HF's own build:

- `-DBUILD_ALL_SUPPORTED_ARCHS=ON`: else a kernel without a capability list builds only the
  local GPU's (none on a CPU machine);
- `-DCMAKE_SKIP_RPATH=ON`, as the Nix build;
- the `install` target (its `local_install` target fails for more than one capability: an
  unquoted `;` in its command);
- `-DNVCC_THREADS=4` for the `hf-t4` tool: HF's Nix build runs nvcc with `--threads 4`
  (its setup.py then divides `-j` by 4; here both HF tools build with `-j` = cores, as kbuild).

hf-kernel-builder 0.16.2 reads the edition-less v4 format and rejects `edition = 5` and kbuild's
own `[kbuild…]` tables: the copy drops them and gives every CUDA kernel the capabilities kbuild
builds; kbuild's generated `kbuild_dtypes.h` (which such a project's sources include) goes into
the copy's `csrc`, on the include path of every unit of HF's build. The generated project can be made on one machine (`--prepare-hf DIR`) and built on
another that has cmake and ninja but no kernel-builder (`--hf-prepared DIR`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

# The tools this module adds: name -> nvcc `--threads` (None: nvcc's default, one thread).
HF_TOOLS = {"hf": None, "hf-t4": 4}

# How the table names them.
HF_LABELS = {"hf": "HF CMake+Ninja", "hf-t4": "HF CMake+Ninja, nvcc --threads 4"}


def hf_build_toml(text: str, caps: list[str] | None) -> str:
    """`build.toml` as hf-kernel-builder 0.16.2 reads it: no `edition` line, no `[kbuild…]`
    table, and, when `caps` is given, exactly those capabilities on every CUDA kernel."""
    out: list[str] = []
    table = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            table = stripped.strip("[]").strip()
        if table == "kbuild" or table.startswith("kbuild."):
            continue
        if table == "general" and stripped.replace(" ", "").startswith("edition="):
            continue
        if caps is not None and table.startswith("kernel.") and \
                stripped.replace(" ", "").startswith("cuda-capabilities="):
            continue  # replaced below
        out.append(line)
        if caps is not None and table.startswith("kernel.") and \
                stripped.replace(" ", "") == 'backend="cuda"':
            out.append("cuda-capabilities = [" + ", ".join(f'"{c}"' for c in caps) + "]")
    return "\n".join(out) + "\n"


def multiline_lists_joined(text: str) -> str:
    """`cuda-capabilities = [` spread over several lines, on one line (so that
    `hf_build_toml` can replace it as one line)."""
    out: list[str] = []
    pending: str | None = None
    for line in text.splitlines():
        if pending is not None:
            pending += " " + line.strip()
            if "]" in line:
                out.append(pending)
                pending = None
            continue
        if line.replace(" ", "").startswith("cuda-capabilities=[") and "]" not in line:
            pending = line.rstrip()
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def kernel_builder_binary(given: str | None) -> str | None:
    """`--kernel-builder`, `$KERNEL_BUILDER`, the bench's install dir, or PATH."""
    for candidate in (given, os.environ.get("KERNEL_BUILDER"), "/work/tools/hfkb/bin/kernel-builder"):
        if candidate and Path(candidate).exists():
            return str(Path(candidate).resolve())
    return shutil.which("kernel-builder")


def cmake_binary(given: str | None) -> str:
    """A cmake of at least 3.26 (the generated project's minimum)."""
    for candidate in (given, os.environ.get("CMAKE"), "/work/tools/hfkb/bin/cmake", shutil.which("cmake")):
        if not candidate or not Path(candidate).exists():
            continue
        out = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
        version = out.split()[2] if out.startswith("cmake version") else "0"
        if tuple(int(x) for x in version.split(".")[:2]) >= (3, 26):
            return candidate
    sys.exit("error: HF's generated CMake project needs cmake >= 3.26, none found\n"
             "hint: run bench/install-hf-kernel-builder, or pass --cmake PATH")


def prepare(src: Path, dest: Path, caps: list[str] | None, kernel_builder: str | None,
            log: Path) -> float:
    """Turn `src` (a copy of a kernel project, moved to `dest`) into the v4 format and run
    `kernel-builder create-pyproject` in it; the seconds create-pyproject took."""
    if kernel_builder is None:
        sys.exit("error: the HF tools need `kernel-builder` (hf-kernel-builder 0.16.2), or a "
                 "project generated beforehand\n"
                 "hint: run bench/install-hf-kernel-builder, pass --kernel-builder PATH, or pass "
                 "--hf-prepared DIR (made by --prepare-hf DIR on a machine that has it)")
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(src, dest)
    toml = dest / "build.toml"
    toml.write_text(hf_build_toml(multiline_lists_joined(toml.read_text()), caps))
    argv = [kernel_builder, "create-pyproject", "--force", "--unique-id", "bench", str(dest)]
    started = time.perf_counter()
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        done = subprocess.run(argv, stdout=out, stderr=out)
    if done.returncode != 0:
        sys.exit(f"error: `{' '.join(argv)}` exited with {done.returncode}; see {log}\n"
                 f"hint: its build.toml is {toml}")
    return time.perf_counter() - started


def capabilities(root: Path, caps: list[str] | None, variant: dict) -> list[str] | None:
    """What HF's copy lists on every CUDA kernel: the capabilities kbuild builds (with `+PTX`
    where it embeds PTX) when they were restricted or come from kbuild's own table, else
    nothing (both tools then take HF's default set)."""
    has_table = "[kbuild.cuda-capabilities]" in (root / "build.toml").read_text()
    if not caps and not has_table:
        return None
    ptx = {g["capability"] for j in variant["compile"] for g in j["gencodes"] if g["ptx"]}
    return [c + ("+PTX" if c in ptx else "") for c in variant["capabilities"]]


def so_facts(so: Path, cuobjdump: Path) -> dict:
    """An extension's size in bytes and the cubins and PTX its fatbinary holds."""
    facts: dict = {"bytes": so.stat().st_size, "path": so.name}
    if cuobjdump.exists():
        for kind in ("elf", "ptx"):
            out = subprocess.run([str(cuobjdump), f"--list-{kind}", str(so)], capture_output=True,
                                 text=True).stdout
            # `ELF file    1: name.sm_90.cubin` / `PTX file    1: name.sm_90.ptx`
            facts[kind] = sorted({w.rsplit(".", 2)[-2] for w in out.split() if w.endswith(
                ".cubin" if kind == "elf" else ".ptx")})
    return facts


def cuda_home(nvcc: Path, tmp: Path) -> Path:
    """A CUDA_HOME cpp_extension and CMake can use: the nvcc's own root, or for the pip CUDA
    (libraries only as `lib/lib*.so.N`) a shim of links into it: `lib64` (also as `lib`, where
    nvcc's own link line looks) with every library under its unversioned name too."""
    root = nvcc.parent.parent
    if (root / "lib64/libcudart.so").exists():
        return root
    shim = tmp / "cuda-home"
    (shim / "lib64").mkdir(parents=True, exist_ok=True)
    for d in ("bin", "include", "nvvm"):
        if (root / d).exists() and not (shim / d).exists():
            (shim / d).symlink_to(root / d)
    if not (shim / "lib").exists():
        (shim / "lib").symlink_to("lib64")
    for lib in sorted((root / "lib").glob("lib*")):
        names = [lib.name]
        if ".so." in lib.name:
            names.append(lib.name.split(".so.")[0] + ".so")
        for name in names:
            if not (shim / "lib64" / name).exists():
                (shim / "lib64" / name).symlink_to(lib)
    return shim


def configure_argv(cmake: str, src: Path, build: Path, prefix: Path, python: str, nvcc: Path,
                   threads: int | None) -> list[str]:
    """CMake's configure step of HF's generated project, with Ninja."""
    argv = [cmake, "-S", str(src), "-B", str(build), "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython3_EXECUTABLE={python}",
            f"-DCMAKE_CUDA_COMPILER={nvcc}",
            # torch's Caffe2 config still asks the legacy FindCUDA, which does not derive the
            # root from the compiler.
            f"-DCUDA_TOOLKIT_ROOT_DIR={nvcc.parent.parent}",
            "-DBUILD_ALL_SUPPORTED_ARCHS=ON",
            "-DCMAKE_SKIP_RPATH=ON",
            f"-DCMAKE_INSTALL_PREFIX={prefix}"]
    if threads:
        argv.append(f"-DNVCC_THREADS={threads}")
    return argv


def build_argv(cmake: str, build: Path, jobs: int) -> list[str]:
    """Ninja builds the extension and installs it into the prefix."""
    return [cmake, "--build", str(build), "--target", "install", "-j", str(jobs)]


def installed_so(prefix: Path) -> Path | None:
    """The extension HF's `install` target put under `prefix`."""
    found = sorted(prefix.rglob("*.so"))
    return found[0] if found else None


class HfBuild:
    """One HF tool's build of one generated project: its own build dir and install prefix."""

    def __init__(self, tool: str, cmake: str, src: Path, scratch: Path, python: str, nvcc: Path,
                 jobs: int, env: dict[str, str]):
        self.src = src
        self.build = scratch / f"{tool}-build"
        self.prefix = scratch / f"{tool}-prefix"
        self.env = env
        self.configure = configure_argv(cmake, src, self.build, self.prefix, python, nvcc,
                                        HF_TOOLS[tool])
        self.make = build_argv(cmake, self.build, jobs)

    def clean(self) -> None:
        shutil.rmtree(self.build, ignore_errors=True)
        shutil.rmtree(self.prefix, ignore_errors=True)

    def so(self) -> Path | None:
        return installed_so(self.prefix)

    def add_generated(self, include: Path) -> None:
        """kbuild's generated headers (`kbuild_dtypes.h` of a `[kbuild.cuda-capabilities]`
        project) into the copy's `csrc`, which HF's CMake puts on every unit's include path."""
        (self.src / "csrc").mkdir(exist_ok=True)
        for header in include.glob("kbuild_*.h"):
            if not (self.src / "csrc" / header.name).exists():
                shutil.copy2(header, self.src / "csrc" / header.name)
