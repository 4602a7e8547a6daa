"""bench/unseen_build.py's projects must hide their units' costs from kbuild's predictor while
one constant drives them, and the floor's "alone" compiles must be the command kbuild runs, split
as asked and nothing else. Runs the real kbuild (target/release/kbuild, built by scripts/setup)
and the setup's nvcc."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import unseen_build  # noqa: E402


def kbuild() -> Path:
    binary = ROOT / "target/release/kbuild"
    if not binary.exists():
        pytest.fail("no target/release/kbuild: run scripts/setup", pytrace=False)
    return binary


def nvcc() -> Path:
    pip = Path(sysconfig.get_paths()["purelib"]) / "nvidia/cu13/bin/nvcc"
    found = pip if pip.exists() else shutil.which("nvcc")
    if not found:
        pytest.fail("no nvcc: run scripts/setup (it installs cuda-toolkit[nvcc] into .venv)",
                    pytrace=False)
    return Path(found)


def test_the_unseen_project_has_three_units_per_core_ten_times_apart_shuffled():
    sizes = unseen_build.unit_sizes(48, lo=16, spread=14.0, scale=1.0, seed=42)
    assert len(sizes) == 48
    assert (min(sizes), max(sizes)) == (16, 224)
    assert sizes != sorted(sizes) and sizes != sorted(sizes, reverse=True)
    assert sizes.index(224) == 36  # 3/4 of the way: source order is never lucky
    assert unseen_build.unit_sizes(1, lo=16, spread=14.0, scale=0.5, seed=42) == [112]


def test_kbuild_predicts_every_unseen_unit_the_same_cost(tmp_path):
    sizes = unseen_build.unit_sizes(12, lo=16, spread=12.0, scale=1.0, seed=42)
    unseen_build.generate_unseen(tmp_path / "p", sizes, ["9.0"], 512)
    dry = unseen_build.dry_run(
        kbuild(), tmp_path / "p", sys.executable, 32, tmp_path / "cache", [], {}
    )
    predicted = {l: d["predicted_s"] for l, d in dry.items() if l.startswith("unseen/")}
    assert len(predicted) == 12
    assert None not in predicted.values()
    assert len(set(predicted.values())) == 1, predicted


def test_the_size_constant_alone_sets_how_many_kernels_a_unit_compiles(tmp_path):
    unseen_build.generate_unseen(tmp_path, [3, 11], ["9.0"], 4)
    small, large = sorted((tmp_path / "unseen").glob("*.cu"))
    differ = [
        (a, b)
        for a, b in zip(small.read_text().splitlines(), large.read_text().splitlines())
        if a != b
    ]
    assert all("kSize" in a or "unit_" in a for a, _ in differ), differ
    for source, kernels in ((small, 3), (large, 11)):
        cubin = tmp_path / f"{source.stem}.cubin"
        done = subprocess.run(
            [str(nvcc()), "-cubin", "-std=c++20", "-arch", "sm_90", str(source), "-o", str(cubin)],
            capture_output=True, text=True,
        )
        assert done.returncode == 0, done.stderr
        names = re.findall(rb"\.text\.(_Z\w+kernel\w+)", cubin.read_bytes())
        assert len(set(names)) == kernels


def test_a_unit_alone_runs_kbuilds_command_split_only_as_asked(tmp_path):
    command = (
        "/x/nvcc -ccbin /usr/bin/c++ -c /p/u.cu -o /p/build/u.o -MD -MF /p/build/u.d "
        "-gencode arch=compute_90,code=sm_90 --threads 1 -Xcicc=-split-compile=13 "
        "'-D__CUDA_ARCH_LIST__=900' --split-compile=3"
    )
    args = unseen_build.alone_command(command, tmp_path, "--split-compile=16")
    assert args == shlex.split(
        f"/x/nvcc -ccbin /usr/bin/c++ -c /p/u.cu -o {tmp_path}/unit.o -MD -MF {tmp_path}/unit.d "
        "-gencode arch=compute_90,code=sm_90 -D__CUDA_ARCH_LIST__=900 --split-compile=16"
    )


def test_a_floor_measured_for_another_project_or_core_count_is_refused(tmp_path):
    # --floor-from lets a long project's floor and its judged builds run in two GPU calls; a
    # floor from a different project (or -j) would judge the builds against the wrong number.
    earlier = tmp_path / "fewer.json"
    earlier.write_text('{"what": "fewer: 2 units on 2 cores", "cores": 2, "floor": {}}')
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench/unseen_build.py"), "--kind", "fewer", "--cores", "2",
         "--units", "3", "--scale", "0.1", "--tool", f"k={kbuild()}", "--python", sys.executable,
         "--floor-from", str(earlier)],
        capture_output=True, text=True, timeout=300,
    )
    assert run.returncode != 0
    assert "--floor-from" in run.stderr and "measured for 'fewer: 2 units on 2 cores'" in run.stderr


def test_the_step_timeline_records_each_compiler_process_with_its_niceness_and_busy_cpus(tmp_path):
    source = tmp_path / "x.cpp"
    source.write_text("#include <regex>\n#include <iostream>\nint main() { std::regex r(\"a+\"); }\n")
    out = tmp_path / "t.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench/step_timeline.py"), "--interval", "0.02", "--json",
         str(out), "--", "nice", "-n", "5", "c++", "-O2", "-c", str(source), "-o",
         str(tmp_path / "x.o")],
        capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    cc1 = [r for r in result["rows"] if r["comm"] == "cc1plus"]
    assert cc1, result["rows"]
    assert cc1[0]["end"] >= cc1[0]["start"] and cc1[0]["nice"] >= 5 and cc1[0]["split"] is None
    assert result["busy_cpus"] and all(b >= 0 for b in result["busy_cpus"])
    assert "cc1plus" in run.stdout and "busy CPUs" in run.stdout
