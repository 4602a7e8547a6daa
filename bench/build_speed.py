#!/usr/bin/env python3
"""Build speed, kbuild against torch.utils.cpp_extension.load (ninja) and HF kernel-builder's
generated CMake + Ninja project (`hf`, `hf-t4`: see bench/hf_build.py), side by side.

Same machine, same run, same sources, same capabilities, same parallelism (`kbuild -j N`,
`MAX_JOBS=N`), medians of `--runs` runs of each case:

  cold        nothing built (kbuild: no build/ at all, so the toolchain is asked too;
              cpp_extension: an empty build directory)
  no-op       nothing changed since the last build (a new process each time, as a user runs it;
              timed bare: no memory cgroup, no RSS sampler, which add ~15 ms to a 25 ms run)
  touch .cu   one kernel source edited: a small kernel appended (new device code and a new
              host stub, so every pass of the unit runs again; a comment would leave the
              preprocessed source as it was, and a step cache could then reuse a pass)
  touch .h    one header edited that several kernel sources include, the same way
  remote      (kbuild only) a cold build in a second checkout of the same sources at another
              path, with `KBUILD_REMOTE_CACHE` pointing at a `redis-server` on loopback that a
              first, untimed build filled: what a CI shard or a teammate pays (needs
              `redis-server` on PATH: `apt-get install -y redis-server`)

The same case for a real heavy project (kernels-community causal-conv1d from a git mirror), and
cold builds on sccache-dist with 1 and 2 build servers (`KBUILD_DIST`), are in
bench/remote_bench.py (its docstring gives the command).

plus the peak memory of the cold builds (the largest single process; the sampled sum over the
process tree; and, where this script can make a memory cgroup for each build, the tree's exact
peak from the cgroup, page cache included), the size of each tool's extension `.so` after its
cold build, and the floor: the longest single device pass (one capability) or host pass
of any unit, measured alone, plus the link; kbuild's cold time is shown as a multiple of it.

Only the CUDA variant is compared (cpp_extension builds one extension). kbuild builds with
`--unique-id bench` so that an edit does not rename the op namespace (outside git the namespace
hashes the sources, and every edit would recompile the bindings too).

Levers (`--levers baseline,ljf,steps,steps-ljf,torch-import`): the kbuild cold case once more
per setting of its levers, each alone: `baseline` (one nvcc per unit with a fixed `--threads`
share, jobs in plan order), `jobserver` (nvcc's device passes share kbuild's jobserver), `ljf`
(jobs start longest first by the last build's times), `all` (both; these four with one nvcc per
unit), `steps` (kbuild runs nvcc's steps itself: the host compile beside the device passes,
every step under the build's job slots), `steps-ljf` (both; kbuild's default), `torch-import`
(the defaults, but the toolchain probe imports torch as before session 6). Those cold builds
start without objects and without the toolchain cache, but with `build/.kbuild/costs.json` from
the bench's previous kbuild build (an untimed warm-up build makes one when there is none yet),
since longest-first needs the last build's times; the plain `cold` case removes build/ entirely
(a first build ever).

Projects: `ltx_kernels` (the flagship), `activations` (bench/projects), and real HF projects
whose sources live under `--src-dir` (default `.gpuwork/src`, see bench/prepare-gpu-bench):
`relu` (huggingface/kernels examples/kernels/relu), `causal-conv1d` and `paged-attention`
(kernels-community).

HF's tools: cold = CMake configure (its time also shown alone) + `cmake --build --target
install`; the other cases run only the build. `--prepare-hf DIR` writes the generated projects
(for `--projects` and `--caps`) and exits; `--hf-prepared DIR` builds those instead of running
kernel-builder, for a machine without it.

kbuild under HF's memory: the tools `kbuild-mem-hf` and `kbuild-mem-hf-t4` build as a first
build ever (build/ removed, and a kbuild cache without the times and peaks other builds learned:
each process reserves a guess) with `KBUILD_MEMORY` set to
`--memory-factor` (default 1.5) times the peak the HF tool's cold build reached in the same round
(its tree's cgroup peak, else the sampled tree), and are compared with that HF tool: whether
kbuild stays within the memory target and how fast it still is. Name their HF tool too.

A long run can be split: `--projects`, `--tools kbuild,cppext,hf,hf-t4`, `--cases
cold,noop,touch-cu,touch-h,floor` select what runs, `--json-out` writes what was measured, and
`--merge a.json b.json …` prints the table of several such files (runs of the same case are
pooled before the median).

Needs no cargo: the kbuild binary comes from `--kbuild` or `$KBUILD` (default
`target/release/kbuild`). cpp_extension needs `ninja` on PATH (`pip install ninja`) or in
`--ninja-dir`. Run from the repository root:

  KBUILD=target/release/kbuild python3 bench/build_speed.py --python .venv/bin/python
  python3 bench/build_speed.py --caps 8.0 --runs 3 --out bench/results/cpu-….txt
  python3 bench/build_speed.py --cases cold --tools kbuild --levers baseline,ljf --json-out a.json
  python3 bench/build_speed.py --merge a.json b.json --out table.txt
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import hf_build
from hf_build import HF_LABELS, HF_TOOLS

REPO = Path(__file__).resolve().parent.parent

# kbuild cold with `KBUILD_MEMORY` = `--memory-factor` x this HF tool's cold peak.
BUDGETED = {"kbuild-mem-hf": "hf", "kbuild-mem-hf-t4": "hf-t4"}

# Each tool's name in the table.
TOOL_LABELS = {"kbuild": "kbuild", "cppext": "cpp_extension", **HF_LABELS,
               **{t: f"kbuild, --memory = factor x {HF_LABELS[peer]}'s peak"
                  for t, peer in BUDGETED.items()}}


@dataclass
class Project:
    """A project to build: where it is, what to copy, which files the edit cases touch."""

    name: str
    root: Path
    copy: list[str] | None  # None: the whole directory
    touch_cu: str
    touch_header: str | None  # None: the project has no header that kernel sources share
    external: bool = False  # its root is relative to --src-dir


PROJECTS = {
    "ltx_kernels": Project(
        "ltx_kernels",
        REPO,
        ["build.toml", "kernels", "torch-ext"],
        "kernels/cuda/pointwise.cu",
        "kernels/cuda/common.cuh",
    ),
    "activations": Project(
        "activations (HF relu style)",
        REPO / "bench/projects/activations",
        ["build.toml", "activations_cuda", "torch-ext"],
        "activations_cuda/relu.cu",
        "activations_cuda/common.cuh",
    ),
    "relu": Project("relu (HF examples/kernels/relu)", Path("relu"), None, "relu_cuda/relu.cu",
                    None, external=True),
    "causal-conv1d": Project(
        "causal-conv1d (kernels-community)",
        Path("causal-conv1d"),
        None,
        "causal-conv1d/causal_conv1d_update.cu",
        "causal-conv1d/causal_conv1d_common.h",
        external=True,
    ),
    # The second heavy real project: two template-heavy attention units (v1, v2) and the cache
    # kernels; every unit includes the attention headers.
    "paged-attention": Project(
        "paged-attention (kernels-community)",
        Path("paged-attention"),
        None,
        "paged-attention/cache_kernels.cu",
        "paged-attention/attention/attention_utils.cuh",
        external=True,
    ),
}


# What each lever setting sets in kbuild's environment.
LEVERS = {
    "baseline": {"KBUILD_NVCC_STEPS": "0", "KBUILD_JOBSERVER": "0", "KBUILD_SCHEDULE": "fifo"},
    "jobserver": {"KBUILD_NVCC_STEPS": "0", "KBUILD_JOBSERVER": "1", "KBUILD_SCHEDULE": "fifo"},
    "ljf": {"KBUILD_NVCC_STEPS": "0", "KBUILD_JOBSERVER": "0", "KBUILD_SCHEDULE": "longest-first"},
    "all": {"KBUILD_NVCC_STEPS": "0", "KBUILD_JOBSERVER": "1", "KBUILD_SCHEDULE": "longest-first"},
    "steps": {"KBUILD_NVCC_STEPS": "1", "KBUILD_JOBSERVER": "0", "KBUILD_SCHEDULE": "fifo"},
    "steps-ljf": {"KBUILD_NVCC_STEPS": "1", "KBUILD_JOBSERVER": "0",
                  "KBUILD_SCHEDULE": "longest-first"},
    "torch-import": {"KBUILD_PROBE_IMPORT": "1"},
}

# `--cases` names → the table's column names.
CASES = {"cold": "cold", "noop": "no-op", "touch-cu": "touch .cu", "touch-h": "touch .h",
         "remote": "cold, 2nd checkout, warm remote"}


@dataclass
class Run:
    seconds: float
    max_rss_kib: int = 0
    tree_rss_kib: int = 0
    # The whole tree's peak from a memory cgroup of its own (0: none could be made).
    cgroup_peak_kib: int = 0
    configure_s: float = 0.0  # HF's cold builds: the CMake configure step's share of `seconds`


@dataclass
class Results:
    cases: dict[str, list[Run]] = field(default_factory=dict)
    # Printed with each run as it is measured: a run cut short (a device call's time limit)
    # still shows what finished.
    label: str = ""

    def add(self, case: str, run: Run) -> None:
        self.cases.setdefault(case, []).append(run)
        if self.label:
            peak = max(run.tree_rss_kib, run.cgroup_peak_kib)
            memory = f", peak RSS {run.max_rss_kib // 1024} MiB / tree {peak // 1024} MiB" \
                if peak else ""
            print(f"  measured {self.label} {case}: {run.seconds:.2f} s{memory}", flush=True)

    def to_json(self) -> dict:
        return {c: [vars(r) for r in runs] for c, runs in self.cases.items()}

    @staticmethod
    def from_json(data: dict) -> "Results":
        return Results({c: [Run(**r) for r in runs] for c, runs in data.items()})

    def extend(self, other: "Results") -> None:
        for c, runs in other.cases.items():
            self.cases.setdefault(c, []).extend(runs)

    def median(self, case: str) -> float | None:
        runs = self.cases.get(case)
        return statistics.median(r.seconds for r in runs) if runs else None

    def peak(self, case: str, attr: str) -> int | None:
        runs = self.cases.get(case)
        return max(getattr(r, attr) for r in runs) if runs else None


def children_of(pid: int) -> list[int]:
    """`pid`'s children: `/proc/<pid>/task/*/children` where the kernel has it
    (CONFIG_PROC_CHILDREN), else every process's parent from `/proc/*/stat`."""
    try:
        found = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.extend(int(c) for c in f.read().split())
        return found
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        return []
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # `pid (comm) state ppid …`; comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 1:].split()
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry))
    return found


def tree_rss_kib(pid: int) -> int:
    """Resident memory of `pid` and all its descendants, summed."""
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
        except (OSError, ValueError):
            continue
        stack.extend(children_of(p))
    return total


class MemCgroup:
    """A memory cgroup for one timed command (v2, or v1's memory hierarchy), below the one
    this script runs in: its peak usage is the whole process tree's, with no sampling gap
    (page cache the tree faulted in counts too). None where no cgroup can be made (not root,
    no memory controller delegated)."""

    def __init__(self, path: Path, v2: bool):
        self.path, self.v2 = path, v2

    @staticmethod
    def make(name: str) -> "MemCgroup | None":
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        root = Path("/sys/fs/cgroup")
        for line in lines:
            _, ctl, rel = line.split(":", 2)
            rel = rel.lstrip("/")
            if "memory" in ctl.split(","):
                parent, v2 = root / "memory" / rel, False
            elif ctl == "" and (root / rel / "memory.peak").exists():
                parent, v2 = root / rel, True
            else:
                continue
            path = parent / f"{name}-{os.getpid()}"
            try:
                path.mkdir()
            except OSError:
                return None
            return MemCgroup(path, v2)
        return None

    def join(self) -> None:
        """Move the calling process in (a `preexec_fn`: the child before it execs)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def peak_kib(self) -> int:
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        try:
            return int((self.path / name).read_text().split()[0]) // 1024
        except (OSError, ValueError):
            return 0

    def remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError:
            pass


def timed(argv: list[str], env: dict[str, str], cwd: Path, log: Path, bare: bool = False) -> Run:
    """Run `argv`, returning its wall time and memory; its output goes to `log`. `bare` times
    the process alone (the no-op case): no memory cgroup to join before `exec` (it makes
    `subprocess` fork instead of vfork) and no sampler thread; the largest process's RSS is
    still known from wait4."""
    with open(log, "ab") as out:
        out.write(f"\n$ {shlex.join(argv)}\n".encode())
        out.flush()
        cgroup = None if bare else MemCgroup.make("kbuild-bench")
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=out,
                                preexec_fn=cgroup.join if cgroup else None)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not bare and not done.wait(0.25):
                peak[0] = max(peak[0], tree_rss_kib(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        # wait4's rusage covers the process and its reaped descendants: the largest one's RSS.
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    cgroup_kib = cgroup.peak_kib() if cgroup else 0
    if cgroup:
        cgroup.remove()
    with open(log, "a") as out:
        out.write(f"[{seconds:.2f} s, largest process {usage.ru_maxrss // 1024} MiB, "
                  f"tree sampled {peak[0] // 1024} MiB, cgroup peak {cgroup_kib // 1024} MiB]\n")
    if proc.returncode != 0:
        sys.exit(f"error: `{shlex.join(argv)}` exited with {proc.returncode}; see {log}")
    return Run(seconds, usage.ru_maxrss, peak[0], cgroup_kib)


def restrict_capabilities(build_toml: Path, caps: list[str]) -> None:
    """Build only `caps`: filter a `[kbuild.cuda-capabilities]` table, else give every CUDA
    kernel an explicit `cuda-capabilities` list (replacing its own, if any)."""
    lines = build_toml.read_text().splitlines()
    has_table = any(l.strip() == "[kbuild.cuda-capabilities]" for l in lines)
    out, table = [], None
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("["):
            table = stripped
        if has_table and table == "[kbuild.cuda-capabilities]" and stripped.startswith('"'):
            cap = stripped.split('"')[1]
            if cap not in caps:
                continue
        if not has_table and table and table.startswith("[kernel.") and \
                stripped.replace(" ", "").startswith("cuda-capabilities="):
            continue  # replaced below
        out.append(line)
        if not has_table and table and table.startswith("[kernel.") and stripped == 'backend = "cuda"':
            out.append("cuda-capabilities = [" + ", ".join(f'"{c}"' for c in caps) + "]")
    build_toml.write_text("\n".join(out) + "\n")


def append_edit(path: Path, n: int, tag: str) -> None:
    """Append a kernel of its own to a CUDA source or header: an edit that changes what every
    pass of the units that read it compile (both sides: device code and a host stub), as a real
    edit does. Guarded so that a header included twice, or by a C++ unit, still compiles;
    `static`, so the units that include the header do not define the same symbol."""
    name = f"kbuild_bench_edit_{tag}_{n}"
    with open(path, "a") as f:
        f.write(f"\n#if defined(__CUDACC__) && !defined({name.upper()})\n"
                f"#define {name.upper()}\n"
                f"[[maybe_unused]] static __global__ void {name}(int *p) {{ if (p) *p = {n}; }}\n"
                "#endif\n")


def dry_run(kbuild: list[str], work: Path, env: dict[str, str]) -> tuple[dict, list, list[str]]:
    """kbuild's plan of the CUDA variant: its JSON, and the compile and link commands."""
    plan = json.loads(
        subprocess.run(kbuild + ["--dry-run", "--json"], cwd=work, env=env, check=True,
                       capture_output=True, text=True).stdout)
    text = subprocess.run(kbuild + ["--dry-run"], cwd=work, env=env, check=True,
                          capture_output=True, text=True).stdout.splitlines()
    compiles, link = [], []
    for i, line in enumerate(text):
        if line.startswith("  compile "):
            compiles.append((line[len("  compile "):], shlex.split(text[i + 1])))
        elif line.strip() == "link":
            link = shlex.split(text[i + 1])
    return plan["variants"][0], compiles, link


def redirect(argv: list[str], out: Path) -> list[str]:
    """`argv` writing its output to `out` and no dependency file."""
    result, skip = [], 0
    for a in argv:
        if skip:
            skip -= 1
        elif a in ("-o", "-MF"):
            skip = 1
        elif a != "-MD":
            result.append(a)
    return result + ["-o", str(out)]


def without_gencodes(argv: list[str]) -> list[str]:
    result, skip = [], 0
    for a in argv:
        if skip:
            skip -= 1
        elif a in ("-gencode", "--threads"):
            skip = 1
        elif a != "--jobserver":  # a pass alone has no jobserver to share
            result.append(a)
    return result


@dataclass
class Floor:
    """Every pass of every unit, each run alone, and the link."""

    passes: list[tuple[float, str]]
    link: float

    def longest(self) -> tuple[float, str]:
        return max(self.passes)

    def work(self) -> float:
        return sum(t for t, _ in self.passes)

    def pipeline(self) -> tuple[float, str]:
        """The longest unit as one nvcc runs it: its device passes side by side (as many
        threads as capabilities), then its host pass, which compiles the fatbinary in. No
        schedule of whole nvcc invocations beats this (the floor above assumes a unit's host
        pass could overlap its own device passes)."""
        units: dict[str, dict[str, float]] = {}
        for t, what in self.passes:
            device = " device " in what
            part = units.setdefault(what.split(" device " if device else " host")[0],
                                    {"device": 0.0, "host": 0.0})
            if device:
                part["device"] = max(part["device"], t)
            else:
                part["host"] += t
        return max((d["device"] + d["host"], u) for u, d in units.items())

    def to_json(self) -> dict:
        return {"passes": self.passes, "link": self.link}

    @staticmethod
    def from_json(data: dict | None) -> "Floor | None":
        return Floor([tuple(p) for p in data["passes"]], data["link"]) if data else None


def floor(compiles: list, link: list[str], variant: dict, env: dict[str, str], tmp: Path,
          log: Path) -> Floor:
    """Time every device pass (one capability, `-cubin`) and host pass of every unit alone,
    and the link."""
    passes: list[tuple[float, str]] = []
    jobs = {j["label"]: j for j in variant["compile"]}
    for label, argv in compiles:
        job = jobs[label]
        if not job["gencodes"]:
            t = timed(redirect(argv, tmp / "unit.o"), env, tmp, log).seconds
            passes.append((t, f"{label} host"))
            continue
        base = without_gencodes(argv)
        cubins = []
        for g in job["gencodes"]:
            sm = g["capability"].replace(".", "")
            device = [a for a in base if a != "-c"] + [
                "-cubin", "-gencode", f"arch=compute_{sm},code=sm_{sm}"]
            t = timed(redirect(device, tmp / "unit.cubin"), env, tmp, log).seconds
            cubins.append(t)
            passes.append((t, f"{label} device sm_{sm}"))
        sm = job["gencodes"][0]["capability"].replace(".", "")
        one = base + ["-gencode", f"arch=compute_{sm},code=sm_{sm}"]
        whole = timed(redirect(one, tmp / "unit.o"), env, tmp, log).seconds
        passes.append((max(whole - cubins[0], 0.0), f"{label} host (one-arch compile - its cubin)"))
    link_s = timed(redirect(link, tmp / "link.so"), env, tmp, log).seconds if link else 0.0
    return Floor(passes, link_s)


CPPEXT_SCRIPT = """
import json, sys
from torch.utils.cpp_extension import load
a = json.loads(sys.argv[1])
load(name=a["name"], sources=a["sources"], extra_include_paths=a["includes"],
     extra_cflags=a["cflags"], extra_cuda_cflags=a["cuda_cflags"], build_directory=a["dir"],
     is_python_module=False, verbose=True)
"""


class RedisServer:
    """A `redis-server` of the bench's own on a free loopback port (the remote object cache)."""

    def __init__(self, dir: Path):
        if shutil.which("redis-server") is None:
            sys.exit("error: the `remote` case needs redis-server on PATH\n"
                     "hint: `apt-get install -y redis-server`, or leave `remote` out of --cases")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(dir)], stdout=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    sys.exit("error: redis-server did not listen within 10 s")
                time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def copy_project(project: Project, dest: Path, caps: list[str] | None) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    if project.copy is None:
        shutil.copytree(project.root, dest, ignore=shutil.ignore_patterns("build", ".git"))
    else:
        dest.mkdir(parents=True)
    for item in project.copy or []:
        src = project.root / item
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest / item)
    if caps:
        restrict_capabilities(dest / "build.toml", caps)
    return dest


def bench_project(project: Project, args, results: dict, tmp_root: Path, log: Path) -> None:
    """Both tools, each on its own copy of the sources, interleaved case by case so that a
    busy moment of the machine falls on both."""
    scratch = tmp_root / project.root.name
    work = copy_project(project, scratch / "kbuild-src", args.caps)
    cwork = copy_project(project, scratch / "cppext-src", args.caps) \
        if "cppext" in args.tools else work
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    kbuild = [args.kbuild, "build", "--python", args.python, "--backend", "cuda",
              "--unique-id", "bench", "-j", str(args.jobs)]
    variant, compiles, link = dry_run(kbuild, work, env)
    caps = variant["capabilities"]
    ptx = [g["capability"] for j in variant["compile"] for g in j["gencodes"] if g["ptx"]]
    arch_list = ";".join(c + ("+PTX" if c in ptx else "") for c in caps)
    nvcc = Path(next(j for j in variant["compile"] if j["gencodes"])["compiler"])

    # cpp_extension gets the same sources (its own copy), includes, defines and capabilities;
    # the generated headers come from kbuild's first build.
    gen_include = scratch / "gen-include"
    in_cwork = lambda p: p.replace(str(work), str(cwork))  # noqa: E731
    # cpp_extension sets its own extension name and half/bf16 rules, and builds against the
    # full Python API (with `Py_LIMITED_API` torch's pybind11 headers do not compile).
    own = ("TORCH_EXTENSION_NAME", "Py_LIMITED_API")
    defines = sorted({tuple(d) for j in variant["compile"] for d in j["defines"]
                      if d[0] not in own and not d[0].startswith("__CUDA_NO_")},
                     key=str)
    dflags = [f"-D{k}={v}" if v is not None else f"-D{k}" for k, v in defines]
    std = variant["compile"][0]["std"]
    # The host compiler gets HF's GNU dialect (`gnu++20`), nvcc `c++20`: take each from its job.
    cuda_std = next((j["std"] for j in variant["compile"] if j["lang"] == "cuda"), std)
    includes = [str(gen_include)] + sorted({in_cwork(i) for j in variant["compile"]
                                            for i in j["include_dirs"]
                                            if i != variant["generated_include"]})
    cuda_root = hf_build.cuda_home(nvcc, tmp_root)
    cenv = dict(env)
    cenv.update(MAX_JOBS=str(args.jobs), TORCH_CUDA_ARCH_LIST=arch_list,
                CUDA_HOME=str(cuda_root))
    if args.ninja_dir:
        cenv["PATH"] = args.ninja_dir + os.pathsep + cenv["PATH"]
    if "cppext" in args.tools and shutil.which("ninja", path=cenv["PATH"]) is None:
        sys.exit("error: cpp_extension needs ninja on PATH\nhint: `pip install ninja`, or pass "
                 "--ninja-dir DIR")
    build_dir = scratch / "cppext-build"
    spec = json.dumps({
        "name": "bench_" + project.root.name.replace("-", "_"),
        "sources": [in_cwork(j["source"]) for j in variant["compile"]],
        "includes": includes,
        "cflags": ["-O3", f"-std={std}"] + dflags,
        "cuda_cflags": ["-O3", f"-std={cuda_std}"] + dflags,
        "dir": str(build_dir),
    })
    cppext = [args.python, "-c", CPPEXT_SCRIPT, spec]

    kb, cx = Results(label=f"{project.name} kbuild"), Results(label=f"{project.name} cppext")
    levers: dict[str, Results] = {
        lever: Results(label=f"{project.name} kbuild {lever}") for lever in args.levers
    }
    tools = {"kbuild": (kb, kbuild, env, work), "cppext": (cx, cppext, cenv, cwork)}
    hf = hf_builds(project, args, scratch, variant, nvcc, cuda_root, env, log)
    tools.update(
        {t: (Results(label=f"{project.name} {t}"), b.make, b.env, b.src) for t, b in hf.items()}
    )
    tools = {t: v for t, v in tools.items() if t in args.tools}
    budgeted = {t: Results(label=f"{project.name} {t}") for t in BUDGETED if t in args.tools}
    saved_costs = scratch / "costs.json"

    def kbuild_run(extra_env: dict[str, str] | None = None, bare: bool = False) -> Run:
        run = timed(kbuild, {**env, **(extra_env or {})}, work, log, bare)
        costs = work / "build/.kbuild/costs.json"
        if costs.exists():
            shutil.copy2(costs, saved_costs)
        return run

    def cold(tool: str) -> Run:
        res, argv, tenv, twork = tools[tool]
        if tool == "kbuild":
            shutil.rmtree(work / "build", ignore_errors=True)
            return kbuild_run()
        if tool in hf:
            b = hf[tool]
            if not Path(variant["generated_include"]).exists():
                kbuild_run()  # untimed: a project with kbuild's table includes its headers
            b.add_generated(Path(variant["generated_include"]))
            b.clean()
            conf = timed(b.configure, tenv, twork, log)
            made = timed(argv, tenv, twork, log)
            return Run(conf.seconds + made.seconds, max(conf.max_rss_kib, made.max_rss_kib),
                       max(conf.tree_rss_kib, made.tree_rss_kib),
                       cgroup_peak_kib=max(conf.cgroup_peak_kib, made.cgroup_peak_kib),
                       configure_s=conf.seconds)
        shutil.rmtree(build_dir, ignore_errors=True)
        build_dir.mkdir(parents=True)
        if not gen_include.exists():
            if not Path(variant["generated_include"]).exists():
                kbuild_run()  # untimed: cpp_extension compiles with kbuild's generated headers
            shutil.copytree(variant["generated_include"], gen_include)
        return timed(argv, tenv, twork, log)

    def budgeted_cold(tool: str) -> Run:
        """kbuild's first build ever (no build/, a cache without the times and peaks other
        builds learned) with `--memory-factor` x the peak of the HF tool's last cold."""
        peer = BUDGETED[tool]
        last = tools[peer][0].cases["cold"][-1]
        peak_kib = max(last.cgroup_peak_kib, last.tree_rss_kib)
        budget = int(peak_kib * 1024 * args.memory_factor)
        print(f"  {tool}: KBUILD_MEMORY={budget} ({args.memory_factor} x {peer}'s cold peak "
              f"{peak_kib // 1024} MiB)", flush=True)
        shutil.rmtree(work / "build", ignore_errors=True)
        cache = first_build_cache(scratch / f"cache-{tool}", env)
        return kbuild_run({"KBUILD_MEMORY": str(budget), "KBUILD_CACHE_DIR": str(cache)})

    def lever_cold(lever: str) -> Run:
        lenv = LEVERS[lever]
        if lenv.get("KBUILD_SCHEDULE", "longest-first") != "fifo" and not saved_costs.exists():
            shutil.rmtree(work / "build", ignore_errors=True)
            kbuild_run(lenv)  # warm-up: records the times longest-first orders by
        shutil.rmtree(work / "build", ignore_errors=True)
        if saved_costs.exists():
            (work / "build/.kbuild").mkdir(parents=True)
            shutil.copy2(saved_costs, work / "build/.kbuild/costs.json")
        return kbuild_run(lenv)

    def timed_case(case: str) -> None:
        bare = case == "no-op"
        for tool, (res, argv, tenv, twork) in tools.items():
            res.add(case, kbuild_run(bare=bare) if tool == "kbuild"
                    else timed(argv, tenv, twork, log, bare))

    def remote_cold(r: int) -> Run:
        """A cold build of a fresh second checkout against the remote cache a first one filled."""
        second = copy_project(project, scratch / f"second-checkout-{r}", args.caps)
        run = timed(kbuild, {**env, "KBUILD_REMOTE_CACHE": redis.url}, second, log)
        shutil.rmtree(second, ignore_errors=True)
        return run

    redis = None
    if "remote" in args.cases and "kbuild" in tools:
        redis = RedisServer(scratch / "redis")
        shutil.rmtree(work / "build", ignore_errors=True)
        timed(kbuild, {**env, "KBUILD_REMOTE_CACHE": redis.url}, work, log)  # untimed: fills it

    edits = [c for c in ("noop", "touch-cu", "touch-h") if c in args.cases]
    for r in range(args.runs):
        for tool, (res, *_rest) in tools.items():
            if "cold" in args.cases:
                res.add("cold", cold(tool))
            elif r == 0 and edits:
                cold(tool)  # untimed: the edit cases start from a built tree
        if "cold" in args.cases:
            for tool, res in budgeted.items():
                res.add("cold", budgeted_cold(tool))
            if budgeted and edits:
                kbuild_run()  # untimed: the edit cases start from kbuild's own build
        for lever in args.levers:
            levers[lever].add("cold", lever_cold(lever))
        if args.levers and edits:
            # Untimed: a lever's environment (`KBUILD_PROBE_IMPORT`) is part of the toolchain
            # question, so the first default build after one asks the toolchain again.
            kbuild_run()
        if redis:
            kb.add(CASES["remote"], remote_cold(r))
        if "noop" in args.cases:
            for _ in range(3 if r == 0 else 1):
                timed_case("no-op")
        # Tools that share a source copy (the HF tools) see one edit.
        sources = {twork for *_rest, twork in tools.values()}
        if "touch-cu" in args.cases:
            for src in sources:
                append_edit(src / project.touch_cu, r, "cu")
            timed_case("touch .cu")
        if "touch-h" in args.cases and project.touch_header:
            for src in sources:
                append_edit(src / project.touch_header, r, "h")
            timed_case("touch .h")

    if redis:
        redis.stop()
    fl = None
    if "floor" in args.cases:
        if not Path(variant["generated_include"]).exists():
            kbuild_run()  # untimed: the passes include kbuild's generated headers
        fl = floor(compiles, link, variant, env, scratch, log)
    built = {"kbuild": next(iter(sorted((work / "build").glob("torch*-cu*/**/*.so"))), None),
             "cppext": next(iter(sorted(build_dir.glob("*.so"))), None),
             **{t: b.so() for t, b in hf.items()}}
    sizes = {t: hf_build.so_facts(so, nvcc.parent / "cuobjdump") for t, so in built.items()
             if t in tools and so is not None}
    results[project.name] = {"kbuild": kb, "cppext": cx, "levers": levers, "floor": fl,
                             "caps": arch_list, "units": len(variant["compile"]), "so": sizes,
                             **{t: tools[t][0] for t in hf if t in tools}, **budgeted}


def first_build_cache(fresh: Path, env: dict[str, str]) -> Path:
    """A kbuild cache directory as a first build ever sees it: kbuild's own (`KBUILD_CACHE_DIR`,
    else `$XDG_CACHE_HOME/kbuild`, else `~/.cache/kbuild`) without the times and peaks
    (`costs/`, `memory/`) that builds elsewhere learned; its other entries (managed toolchains,
    fetched dependencies) are linked in."""
    real = Path(env.get("KBUILD_CACHE_DIR") or
                Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kbuild")
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(parents=True)
    if real.is_dir():
        for entry in real.iterdir():
            if entry.name not in ("costs", "memory"):
                (fresh / entry.name).symlink_to(entry.resolve())
    return fresh


def prepare_hf(args, tmp_root: Path, log: Path) -> None:
    """`--prepare-hf DIR`: HF's generated project of each of `--projects` (capabilities as the
    bench would build them) in DIR/<name>, for a machine without kernel-builder."""
    kernel_builder = hf_build.kernel_builder_binary(args.kernel_builder)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    for name in args.projects.split(","):
        project = PROJECTS[name]
        work = copy_project(project, tmp_root / name / "kbuild-src", args.caps)
        variant, _, _ = dry_run([args.kbuild, "build", "--python", args.python, "--backend",
                                 "cuda", "--unique-id", "bench"], work, env)
        dest = Path(args.prepare_hf).resolve() / name
        copy = copy_project(project, tmp_root / name / "hf-src", None)
        seconds = hf_build.prepare(copy, dest, hf_build.capabilities(project.root, args.caps,
                                                                     variant), kernel_builder, log)
        print(f"{dest}: kernel-builder create-pyproject {seconds:.2f} s", flush=True)
    shutil.rmtree(tmp_root, ignore_errors=True)


def hf_builds(project: Project, args, scratch: Path, variant: dict, nvcc: Path, cuda_root: Path,
              env: dict[str, str], log: Path) -> dict[str, "hf_build.HfBuild"]:
    """The HF tools asked for, on one copy of the project that HF's kernel-builder generated
    (here, or beforehand with `--prepare-hf`)."""
    asked = [t for t in HF_TOOLS if t in args.tools]
    if not asked:
        return {}
    src = scratch / "hf-src"
    if args.hf_prepared:
        key = next(k for k, v in PROJECTS.items() if v is project)
        prepared = Path(args.hf_prepared) / key
        if not (prepared / "CMakeLists.txt").exists():
            sys.exit(f"error: {prepared}/CMakeLists.txt not found\n"
                     f"hint: make it with `build_speed.py --prepare-hf {args.hf_prepared} "
                     f"--projects ... --caps ...` where kernel-builder is installed")
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(prepared, src)
    else:
        hf_build.prepare(copy_project(project, scratch / "hf-copy", None), src,
                         hf_build.capabilities(project.root, args.caps, variant),
                         hf_build.kernel_builder_binary(args.kernel_builder), log)
    hf_env = {**env, "CUDA_HOME": str(cuda_root), "CUDAToolkit_ROOT": str(cuda_root)}
    cmake = hf_build.cmake_binary(args.cmake)
    # The root's own nvcc path, so that CMake finds the toolkit (the shim's, for the pip CUDA).
    hf_nvcc = cuda_root / "bin" / nvcc.name
    return {t: hf_build.HfBuild(t, cmake, src, scratch, args.python, hf_nvcc, args.jobs, hf_env)
            for t in asked}


def fmt_s(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s"


def fmt_mib(kib: int | None) -> str:
    return "-" if not kib else f"{kib / 1024:.0f} MiB"


def tool_table(r: dict, cases: list[str]) -> list[str]:
    """One row per tool measured (HF's cold with its configure share), then each other tool's
    time over kbuild's, and each tool's extension size."""
    measured = [(t, r[t]) for t in TOOL_LABELS if t in r and r[t].cases]
    lines = ["| tool | " + " | ".join(cases)
             + " | peak RSS (largest process / tree sampled / tree's cgroup) |",
             "|---|" + "---|" * (len(cases) + 1)]
    for tool, res in measured:
        cells = [fmt_s(res.median(c)) for c in cases]
        conf = [x.configure_s for x in res.cases.get("cold", []) if x.configure_s]
        if conf and "cold" in cases:
            i = cases.index("cold")
            cells[i] += f" (configure {fmt_s(statistics.median(conf))})"
        rss = " / ".join(fmt_mib(res.peak("cold", a))
                         for a in ("max_rss_kib", "tree_rss_kib", "cgroup_peak_kib"))
        lines.append(f"| {TOOL_LABELS[tool]} | " + " | ".join(cells) + f" | {rss} |")
    kb = r["kbuild"]
    for tool, res in measured:
        # A budgeted kbuild is set beside the HF tool whose peak it was given.
        ours, theirs = (res, r.get(BUDGETED[tool])) if tool in BUDGETED else (kb, res)
        if tool == "kbuild" or not ours.cases or theirs is None or not theirs.cases:
            continue
        ratios = []
        for c in cases:
            a, b = ours.median(c), theirs.median(c)
            ratios.append(f"{b / a:.2f}x" if a and b else "-")
        peak_kb, peak = ours.peak("cold", "tree_rss_kib"), theirs.peak("cold", "tree_rss_kib")
        rss = f"kbuild tree = {peak_kb / peak:.2f}x" if peak_kb and peak else ""
        name = f"{TOOL_LABELS[BUDGETED[tool]]} / {TOOL_LABELS[tool]}" if tool in BUDGETED \
            else f"{TOOL_LABELS[tool]} / kbuild"
        lines.append(f"| {name} | " + " | ".join(ratios) + f" | {rss} |")
    if r.get("so"):
        lines.append("")
    for tool, so in r.get("so", {}).items():
        lines.append(f"`.so` {TOOL_LABELS[tool]}: {so['bytes'] / 2**20:.2f} MiB ({so['bytes']} B, "
                     f"{so['path']}); cubins {','.join(so.get('elf', [])) or '-'}; PTX "
                     f"{','.join(so.get('ptx', [])) or '-'}")
    return lines


def report(results: dict, header: str) -> str:
    """The tables of `results` (project name → what `bench_project` measured, with `jobs`)."""
    lines = [header, ""]
    for name, r in results.items():
        kb, cx, jobs = r["kbuild"], r["cppext"], r["jobs"]
        every = [r[t] for t in TOOL_LABELS if t in r]
        cases = [c for c in CASES.values() if any(c in res.cases for res in every)]
        runs = sorted({len(v) for res in (*every, *r["levers"].values()) for v in res.cases.values()})
        lines.append(f"## {name}: {r['units']} units, TORCH_CUDA_ARCH_LIST={r['caps']}, "
                     f"-j{jobs}, medians of {'/'.join(map(str, runs)) or '0'} runs")
        lines.append("")
        fl: Floor | None = r["floor"]
        if cases:
            lines.extend(tool_table(r, cases))
        bounds = None
        if fl:
            pass_s, which = fl.longest()
            total = pass_s + fl.link
            # With fewer cores than passes the work itself bounds the build too.
            work = max(pass_s, fl.work() / jobs) + fl.link
            bounds = (total, work)
            cold = kb.median("cold")
            lines.append("")
            lines.append(f"floor: {fmt_s(total)} = longest pass {fmt_s(pass_s)} ({which}) + link "
                         f"{fmt_s(fl.link)}" + (f"; kbuild cold = {cold / total:.2f}x the floor"
                                                 if cold else ""))
            lines.append(f"work bound at -j{jobs}: {fmt_s(work)} = max(longest pass, all "
                         f"passes {fmt_s(fl.work())} / {jobs}) + link" +
                         (f"; kbuild cold = {cold / work:.2f}x it" if cold else ""))
            unit_s, unit = fl.pipeline()
            pipe = unit_s + fl.link
            lines.append(f"nvcc pipeline bound: {fmt_s(pipe)} = longest unit {fmt_s(unit_s)} ({unit}: "
                         f"its longest device pass, then its host pass) + link" +
                         (f"; kbuild cold = {cold / pipe:.2f}x it" if cold else ""))
            lines.append("passes alone: " + "; ".join(f"{w} {fmt_s(t)}" for t, w in fl.passes))
        levers = {k: v for k, v in r["levers"].items() if v.cases}
        if levers:
            cppext_cold = cx.median("cold")
            lines.append("")
            lines.append("kbuild cold by lever (each alone; with the last build's costs.json):")
            lines.append("")
            lines.append("| lever | environment | cold | cpp_extension / kbuild | x the floor | "
                         "x the work bound |")
            lines.append("|---|---|---|---|---|---|")
            for lever, res in levers.items():
                t = res.median("cold")
                env = LEVERS[lever]
                cells = [
                    fmt_s(t),
                    f"{cppext_cold / t:.2f}x" if cppext_cold and t else "-",
                    f"{t / bounds[0]:.2f}x" if bounds and t else "-",
                    f"{t / bounds[1]:.2f}x" if bounds and t else "-",
                ]
                settings = " ".join(f"{k}={v}" for k, v in env.items())
                lines.append(f"| {lever} | {settings} | " + " | ".join(cells) + " |")
        lines.append("")
        all_runs = [(tool, r[tool]) for tool in TOOL_LABELS if tool in r]
        all_runs += [(f"kbuild[{lever}]", res) for lever, res in levers.items()]
        lines.append("all runs (s): " + "; ".join(
            f"{tool} {c}: " + ", ".join(f"{x.seconds:.2f}" for x in runs)
            for tool, res in all_runs for c, runs in res.cases.items()))
        lines.append("")
    return "\n".join(lines)


def to_json(results: dict, header: str) -> dict:
    return {"header": header, "projects": {
        name: {**{t: r[t].to_json() for t in TOOL_LABELS if t in r}, "so": r.get("so", {}),
               "levers": {k: v.to_json() for k, v in r["levers"].items()},
               "floor": r["floor"].to_json() if r["floor"] else None,
               "caps": r["caps"], "units": r["units"], "jobs": r["jobs"]}
        for name, r in results.items()}}


def merge(paths: list[str]) -> tuple[dict, str]:
    """The results of several `--json-out` files, runs of the same case pooled."""
    results: dict = {}
    headers = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        headers.append(f"{path}: " + data["header"].replace("\n\n", "\n").replace("\n", "\n  "))
        for name, p in data["projects"].items():
            r = results.setdefault(name, {"kbuild": Results(), "cppext": Results(), "levers": {},
                                          "floor": None, "caps": p["caps"], "units": p["units"],
                                          "jobs": p["jobs"]})
            if (r["caps"], r["jobs"]) != (p["caps"], p["jobs"]):
                sys.exit(f"error: {path}: {name} was measured with caps {p['caps']} -j{p['jobs']}, "
                         f"another file with caps {r['caps']} -j{r['jobs']}\n"
                         "hint: merge only runs of the same settings")
            for tool in TOOL_LABELS:
                if tool in p:
                    r.setdefault(tool, Results()).extend(Results.from_json(p[tool]))
            r.setdefault("so", {}).update(p.get("so", {}))
            for lever, runs in p["levers"].items():
                r["levers"].setdefault(lever, Results()).extend(Results.from_json(runs))
            r["floor"] = r["floor"] or Floor.from_json(p["floor"])
    header = "# build speed, merged from\n\n" + \
        "\n".join(f"- {h}" for h in headers)
    return results, header


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kbuild", default=os.environ.get("KBUILD", str(REPO / "target/release/kbuild")))
    p.add_argument("--python", default=os.environ.get("KBUILD_PYTHON", str(REPO / ".venv/bin/python")))
    p.add_argument("--projects", default="ltx_kernels,activations")
    p.add_argument("--caps", type=lambda s: s.split(","), default=None,
                   help="build only these capabilities (e.g. 8.0), for slow machines")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count())
    p.add_argument("--ninja-dir", default=None, help="directory holding `ninja`")
    p.add_argument("--skip-floor", action="store_true", help="same as leaving `floor` out of --cases")
    p.add_argument("--cases", type=lambda s: [c for c in s.split(",") if c],
                   default=[*CASES, "floor"], help="of " + ",".join([*CASES, "floor"]))
    p.add_argument("--tools", type=lambda s: [t for t in s.split(",") if t],
                   default=["kbuild", "cppext"],
                   help="of " + ",".join(TOOL_LABELS))
    p.add_argument("--src-dir", default=str(REPO / ".gpuwork/src"),
                   help="where the sources of the real HF projects (relu, causal-conv1d, paged-attention) are")
    p.add_argument("--kernel-builder", default=None,
                   help="hf-kernel-builder 0.16.2 (default: $KERNEL_BUILDER, "
                        "/work/tools/hfkb/bin, PATH)")
    p.add_argument("--cmake", default=None, help="cmake >= 3.26 (default: $CMAKE, PATH)")
    p.add_argument("--prepare-hf", metavar="DIR", default=None,
                   help="write HF's generated project of each --projects (with --caps) to DIR/<name> "
                        "and exit")
    p.add_argument("--hf-prepared", metavar="DIR", default=None,
                   help="build the HF projects generated in DIR by --prepare-hf")
    p.add_argument("--memory-factor", type=float, default=1.5,
                   help="kbuild-mem-hf*: KBUILD_MEMORY = this x the HF tool's cold peak")
    p.add_argument("--levers", type=lambda s: [v for v in s.split(",") if v], default=[],
                   help="kbuild cold once per setting: of " + ",".join(LEVERS))
    p.add_argument("--json-out", default=None, help="also write the measurements here as JSON")
    p.add_argument("--merge", nargs="+", metavar="JSON", default=None,
                   help="print the table of these --json-out files and exit")
    p.add_argument("--out", default=None, help="also write the table here")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = p.parse_args()
    if args.merge:
        results, header = merge(args.merge)
        text = report(results, header)
        if args.out:
            Path(args.out).write_text(text + "\n")
        print(text)
        return
    for what, given, valid in (("case", args.cases, [*CASES, "floor"]),
                               ("tool", args.tools, list(TOOL_LABELS)),
                               ("project", args.projects.split(","), list(PROJECTS)),
                               ("lever", args.levers, list(LEVERS))):
        if bad := [g for g in given if g not in valid]:
            sys.exit(f"error: unknown {what} `{bad[0]}`\nhint: use one of {', '.join(valid)}")
    for tool, peer in BUDGETED.items():
        if tool in args.tools and peer not in args.tools:
            sys.exit(f"error: `{tool}` takes `{peer}`'s cold peak in the same round\n"
                     f"hint: add `{peer}` to --tools")
        if tool in args.tools and "cold" not in args.cases:
            sys.exit(f"error: `{tool}` measures cold builds only\nhint: add `cold` to --cases")
    if args.skip_floor and "floor" in args.cases:
        args.cases.remove("floor")
    args.kbuild = str(Path(args.kbuild).resolve())
    args.python = str(Path(args.python).absolute())
    for project in PROJECTS.values():
        if project.external:
            project.root = Path(args.src_dir).resolve() / project.root

    tmp_root = Path(tempfile.mkdtemp(prefix="kbuild-bench-"))
    log = tmp_root / "bench.log"
    if args.prepare_hf:
        prepare_hf(args, tmp_root, log)
        return
    version = subprocess.run([args.kbuild, "--version"], capture_output=True, text=True).stdout.strip()
    torch_v = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    header = (f"# build speed: {' vs '.join(TOOL_LABELS[t] for t in args.tools)}\n\n"
              f"date {time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}, {os.cpu_count()} cores "
              f"({cpu}), load average at start {os.getloadavg()[0]:.1f}\n"
              f"{version}, torch {torch_v}, python {args.python}\n"
              f"caps: {','.join(args.caps) if args.caps else 'as build.toml (full)'}; "
              f"kbuild runs with --unique-id bench; cold kbuild includes asking the toolchain\n"
              f"tools {','.join(args.tools)}; cases {','.join(args.cases)}; "
              f"levers {','.join(args.levers) or 'none'}")
    print(header, flush=True)
    print(f"scratch and log: {tmp_root}", flush=True)
    results: dict = {}
    for name in args.projects.split(","):
        bench_project(PROJECTS[name], args, results, tmp_root, log)
        results[PROJECTS[name].name]["jobs"] = args.jobs
        print(report({k: v for k, v in results.items() if k == PROJECTS[name].name}, ""), flush=True)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(to_json(results, header), indent=1) + "\n")
    text = report(results, header + f"\nload average at end {os.getloadavg()[0]:.1f}")
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    if not args.keep:
        shutil.rmtree(tmp_root, ignore_errors=True)


if __name__ == "__main__":
    main()
