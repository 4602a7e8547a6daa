#!/usr/bin/env python3
"""First-build scheduling (issue #27): a heavy project, built for the first time.

A generated kbuild project whose CUDA units have skewed costs, the longest ones last in source
order (as in real template-instantiation projects: one `.cu` per size, the big sizes at the
end), built cold by each kbuild binary given: empty `build/`, empty `costs.json` and an empty
`KBUILD_CACHE_DIR`. For each build it reports the wall time, the CPU seconds of the whole
process tree, the peak memory of the process tree (RSS summed over kbuild and every
descendant, sampled every 50 ms), the units split and the floor:

  floor = max(sum of unit CPU seconds / cores, longest unit after splitting)

where the unit CPU seconds are the process tree's CPU time of the build (kbuild's own share is
small) and the longest unit is the longest wall time `costs.json` recorded for a unit in that
build (with the splits it had). The target is a first build <= 1.15x the floor.

`--project DIR` builds a copy of a real project instead (e.g. kernels-community
`paged-attention`, prepared by bench/prepare-gpu-bench), for `--caps` only
(`--backend cuda --cuda-capabilities CAPS`). `--source-order` adds, for each binary, a build with
`KBUILD_SCHEDULE=fifo`: units started in source order, as kbuild did before #27.

Needs no cargo: the binaries are arguments. The project needs torch and nvcc (the Python of
`--python`, nvcc beside it or on PATH). From the repository root:

  python3 bench/first_build.py --python .venv/bin/python --caps 8.0 \\
      --tool before=/path/to/main/kbuild --tool after=target/debug/kbuild \\
      --out bench/results/cpu-…-first-build.txt
  python3 bench/first_build.py --generate-only DIR   # just write the project
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

KERNEL = """#include <cuda_runtime.h>
// Unit {index}: {count} instantiations of a kernel whose unrolled loop grows with N.
template <int N> __global__ void heavy_{index}(float* o) {{
  float s = o[threadIdx.x];
#pragma unroll
  for (int i = 0; i < N; i++) s += __sinf(s * i) * __cosf(s + i);
  o[threadIdx.x] = s;
}}
{instances}
void launch_{index}(float* o, cudaStream_t stream) {{
  heavy_{index}<{first}><<<1, 32, 0, stream>>>(o);
}}
"""

BINDING = """#include <torch/library.h>
#include "registration.h"
#include "torch_binding.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {{
  ops.def("noop(Tensor x) -> ()");
}}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
"""


def instance_counts(units: int, skew: float, base: int) -> list[int]:
    """Instantiations per unit, rising in source order: the last unit `skew` times the first."""
    if units == 1:
        return [base]
    return [max(1, round(base * skew ** (i / (units - 1)))) for i in range(units)]


def generate(
    root: Path, units: int, caps: list[str], skew: float, base: int, first: int = 64
) -> list[int]:
    """Write the project under `root`; returns each unit's instantiation count. `first` is the
    smallest unrolled loop length (each instantiation one more): the cost of one instance."""
    counts = instance_counts(units, skew, base)
    for i, count in enumerate(counts):
        lines = "".join(
            f"template __global__ void heavy_{i}<{first + k}>(float*);\n" for k in range(count)
        )
        path = root / "heavy" / f"unit_{i:02d}.cu"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(KERNEL.format(index=i, count=count, instances=lines, first=first))
    write_project(root, "heavy", [f"heavy/unit_{i:02d}.cu" for i in range(units)], caps)
    return counts


def write_project(root: Path, name: str, srcs: list[str], caps: list[str]) -> None:
    """The torch binding, the Python package and build.toml of a project whose CUDA kernel
    `name` compiles `srcs` (relative to `root`)."""
    (root / "torch-ext").mkdir(parents=True, exist_ok=True)
    (root / "torch-ext" / "torch_binding.cpp").write_text(BINDING.format())
    (root / "torch-ext" / "torch_binding.h").write_text("#pragma once\n")
    (root / "torch-ext" / name).mkdir(exist_ok=True)
    (root / "torch-ext" / name / "__init__.py").write_text(
        "from ._ops import ops\n\n__all__ = [\"ops\"]\n"
    )
    cap_list = ", ".join(f'"{c}"' for c in caps)
    src_list = ", ".join(f'"{s}"' for s in srcs)
    (root / "build.toml").write_text(
        f"""[general]
name = "{name}"
version = 1
edition = 5
license = "apache-2.0"
backends = ["cuda"]

[general.hub]
repo-id = "kbuild-bench/{name}"

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]

[kernel.{name}]
backend = "cuda"
depends = ["torch"]
src = [{src_list}]
cuda-capabilities = [{cap_list}]
"""
    )


def tree_rss(root_pid: int) -> int:
    """Resident bytes of `root_pid` and every descendant (read from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def build(
    binary: Path,
    project: Path,
    python: str,
    jobs: int,
    cache: Path,
    extra: list[str],
    fifo: bool = False,
) -> dict:
    """One cold build; what it took."""
    env = dict(os.environ, KBUILD_CACHE_DIR=str(cache), KBUILD_PYTHON=python)
    for var in ("KBUILD_SCHEDULE", "KBUILD_NVCC_STEPS", "KBUILD_JOBSERVER", "MAKEFLAGS"):
        env.pop(var, None)
    if fifo:
        env["KBUILD_SCHEDULE"] = "fifo"
    cmd = [str(binary), "-C", str(project), "build", "-j", str(jobs), "-v", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    # stderr read as it comes, each line with its time: the compile phase runs from the first
    # unit's start to the last unit's end.
    lines: list[tuple[float, str]] = []
    for raw in proc.stderr:
        lines.append((time.monotonic(), raw.decode(errors="replace").rstrip()))
    proc.wait()
    wall = time.monotonic() - started
    done.set()
    sampler.join()
    err = "\n".join(line for _, line in lines).encode()
    unit_lines = [(t, l.strip()) for t, l in lines if l.rstrip().endswith("s)") or "start " in l]
    starts = [t for t, l in unit_lines if l.startswith("Verbose start") and l.endswith("]")]
    ends = [t for t, l in unit_lines if l.startswith("Compiled ") and "] (" in l]
    compile_s = (max(ends) - min(starts)) if starts and ends else float("nan")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{err.decode()[-4000:]}")
    costs = json.loads((project / "build/.kbuild/costs.json").read_text())["seconds"]
    said = err.decode()
    return {
        "wall_s": wall,
        "compile_s": compile_s,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "peak_tree_rss_mib": peak[0] / 2**20,
        "unit_seconds": costs,
        "longest_unit_s": max(costs.values()),
        "so_bytes": sum(p.stat().st_size for p in project.glob("build/*/*.so")),
        "split": [l.strip() for l in said.splitlines() if "split `" in l or "split over" in l],
        "started": [l.split("start ", 1)[1] for l in said.splitlines() if "Verbose start " in l],
        "load_before": load,
        "load_after": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", action="append", default=[], help="NAME=PATH of a kbuild binary")
    ap.add_argument("--python", default=os.environ.get("KBUILD_PYTHON", "python3"))
    ap.add_argument("--caps", default="8.0", help="comma-separated CUDA capabilities")
    ap.add_argument("--units", type=int, default=8)
    ap.add_argument("--skew", type=float, default=12.0, help="last unit's / first unit's size")
    ap.add_argument("--base", type=int, default=2, help="first unit's instantiations")
    ap.add_argument("--unroll", type=int, default=64, help="loop length of the first instance")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--generate-only", type=Path)
    ap.add_argument("--project", type=Path, help="a real project to copy and build instead")
    ap.add_argument(
        "--source-order",
        action="store_true",
        help="also build with KBUILD_SCHEDULE=fifo (units in source order)",
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    caps = args.caps.split(",")
    if args.generate_only:
        print(generate(args.generate_only, args.units, caps, args.skew, args.base, args.unroll))
        return
    what = (
        f"{args.project.name} (a copy; --backend cuda --cuda-capabilities {args.caps})"
        if args.project
        else f"synthetic heavy project: {args.units} units, skew {args.skew}, "
        f"unroll from {args.unroll}, caps {args.caps}"
    )
    lines = [
        f"# first build, {what}, -j{args.jobs}",
        f"# {platform.node()} {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}",
    ]
    extra = ["--backend", "cuda", "--cuda-capabilities", args.caps] if args.project else []
    runs = []
    for spec in args.tool:
        name, binary = spec.split("=", 1)
        runs.append((name, binary, False))
        if args.source_order:
            runs.append((f"{name} source order", binary, True))
    results = {}
    counts = None
    for name, binary, fifo in runs:
        with tempfile.TemporaryDirectory(prefix="kbuild-first-") as tmp:
            project, cache = Path(tmp) / "heavy", Path(tmp) / "cache"
            if args.project:
                shutil.copytree(
                    args.project, project, ignore=shutil.ignore_patterns("build", ".git")
                )
            else:
                counts = generate(project, args.units, caps, args.skew, args.base, args.unroll)
            r = build(
                Path(binary).resolve(), project, args.python, args.jobs, cache, extra, fifo
            )
        # The CPU of the compile phase: all but the probes, link and packaging (their CPU is
        # counted too, so this floor is if anything too high).
        r["floor_s"] = max(r["cpu_s"] / args.jobs, r["longest_unit_s"])
        results[name] = r
        print(json.dumps({name: r}, indent=1), file=sys.stderr)
    if counts is not None:
        lines.append(f"# instantiations per unit (source order): {counts}")
    lines.append(
        "| build | wall s | compile phase s | tree CPU s | longest unit s | floor s |"
        " compile/floor | peak tree MiB | .so MiB | load avg before/after |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['wall_s']:.1f} | {r['compile_s']:.1f} | {r['cpu_s']:.1f} | "
            f"{r['longest_unit_s']:.1f} | {r['floor_s']:.1f} | "
            f"{r['compile_s'] / r['floor_s']:.2f}x | "
            f"{r['peak_tree_rss_mib']:.0f} | {r['so_bytes'] / 2**20:.2f} | {r['load_before']:.1f}/{r['load_after']:.1f} |"
        )
    for name, r in results.items():
        lines.append(f"\n{name}: started {r['started']}")
        for s in r["split"]:
            lines.append(f"{name}: {s}")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
