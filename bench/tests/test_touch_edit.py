"""The edit bench/build_speed.py makes for its "touch .cu" and "touch .h" cases must change what
every compiler pass of the affected units sees, on both tools alike; a comment does not (the
preprocessed source stays byte for byte the same, so a step cache could reuse passes that HF's
build runs again). Runs the real nvcc and host compiler of the setup's toolchain."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import build_speed  # noqa: E402

KERNEL = "__global__ void scale(float *p, float s) { p[threadIdx.x] *= s; }\n"
# An include guard, not `#pragma once`: the edit lands after its `#endif`, so its own guard is
# what keeps a second inclusion from defining the kernel again.
HEADER = ("#ifndef COMMON_CUH\n#define COMMON_CUH\n"
          "__device__ inline float twice(float x) { return 2 * x; }\n#endif\n")


def nvcc() -> Path:
    pip = Path(sysconfig.get_paths()["purelib"]) / "nvidia/cu13/bin/nvcc"
    found = pip if pip.exists() else shutil.which("nvcc")
    if not found:
        pytest.fail("no nvcc: run scripts/setup (it installs cuda-toolkit[nvcc] into .venv)",
                    pytrace=False)
    return Path(found)


def run(*argv, cwd: Path) -> str:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"{argv} failed:\n{done.stderr}"
    return done.stdout + done.stderr


def preprocessed(src: Path) -> str:
    """What the device passes read: nvcc's preprocessor output for one capability."""
    return run(nvcc(), "-E", "-arch=compute_75", src.name, cwd=src.parent)


def entries(src: Path) -> int:
    ptx = src.with_suffix(".ptx")
    run(nvcc(), "-ptx", "-arch=compute_75", src.name, "-o", ptx.name, cwd=src.parent)
    return ptx.read_text().count(".entry ")


def test_a_touched_kernel_source_gets_a_kernel_of_its_own_that_every_pass_sees(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    before, kernels_before = preprocessed(src), entries(src)

    build_speed.append_edit(src, 0, "cu")
    build_speed.append_edit(src, 1, "cu")  # a second run's edit

    assert preprocessed(src) != before
    assert entries(src) == kernels_before + 2
    warnings = run(nvcc(), "-c", "-arch=sm_75", src.name, "-o", "k.o", cwd=tmp_path)
    assert "warning" not in warnings, warnings


def test_a_touched_header_still_compiles_included_twice_by_cuda_units_and_by_cpp_units(tmp_path):
    header = tmp_path / "common.cuh"
    header.write_text(HEADER)
    for name in ("a.cu", "b.cu"):  # two units including it: each gets its own (static) kernel
        kernel = KERNEL.replace("scale", f"scale_{name[0]}")
        (tmp_path / name).write_text('#include "common.cuh"\n#include "common.cuh"\n' + kernel)
    # A C++ unit (g++, no CUDA keywords: it defines the header's away) includes it too.
    (tmp_path / "c.cpp").write_text(
        "#define __device__\n#include \"common.cuh\"\nint host() { return 1; }\n")
    before = preprocessed(tmp_path / "a.cu")

    build_speed.append_edit(header, 0, "h")
    build_speed.append_edit(tmp_path / "a.cu", 0, "cu")  # both cases in one run

    assert preprocessed(tmp_path / "a.cu") != before
    assert entries(tmp_path / "a.cu") == 1 + 1 + 1  # its own, the header's, its edit's
    for name in ("a.cu", "b.cu"):
        run(nvcc(), "-c", "-arch=sm_75", name, "-o", name + ".o", cwd=tmp_path)
    run(nvcc(), "-arch=sm_75", "a.cu.o", "b.cu.o", "-shared", "-o", "ab.so", cwd=tmp_path)
    run("c++", "-c", "c.cpp", "-o", "c.o", cwd=tmp_path)


def test_a_comment_appended_leaves_what_the_compiler_passes_see_as_it_was(tmp_path):
    """Why the edit is code: the old edit was invisible past the preprocessor."""
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    before = preprocessed(src)
    with open(src, "a") as f:
        f.write("\n// bench edit 0\n")
    assert preprocessed(src) == before
