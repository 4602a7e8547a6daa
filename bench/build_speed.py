#!/usr/bin/env python3
"""Build speed, kbuild against torch.utils.cpp_extension.load (ninja), side by side.

Same machine, same run, same sources, same capabilities, same parallelism (`kbuild -j N`,
`MAX_JOBS=N`), medians of `--runs` runs of each case:

  cold        nothing built (kbuild: no build/ at all, so the toolchain is asked too;
              cpp_extension: an empty build directory)
  no-op       nothing changed since the last build (a new process each time, as a user runs it)
  touch .cu   one kernel source edited (a comment appended: a real content change)
  touch .h    one header edited that two kernel sources include

plus the peak memory of the cold builds (the largest single process, and the sampled sum over
the process tree), and the floor: the longest single device pass (one capability) or host pass
of any unit, measured alone, plus the link; kbuild's cold time is shown as a multiple of it.

Only the CUDA variant is compared (cpp_extension builds one extension). kbuild builds with
`--unique-id bench` so that an edit does not rename the op namespace (outside git the namespace
hashes the sources, and every edit would recompile the bindings too).

Needs no cargo: the kbuild binary comes from `--kbuild` or `$KBUILD` (default
`target/release/kbuild`). cpp_extension needs `ninja` on PATH (`pip install ninja`) or in
`--ninja-dir`. Run from the repository root:

  KBUILD=target/release/kbuild python3 bench/build_speed.py --python .venv/bin/python
  python3 bench/build_speed.py --caps 8.0 --runs 3 --out bench/results/cpu-….txt
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Project:
    """A project to build: where it is, what to copy, which files the edit cases touch."""

    name: str
    root: Path
    copy: list[str]
    touch_cu: str
    touch_header: str


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
}


@dataclass
class Run:
    seconds: float
    max_rss_kib: int = 0
    tree_rss_kib: int = 0


@dataclass
class Results:
    cases: dict[str, list[Run]] = field(default_factory=dict)

    def add(self, case: str, run: Run) -> None:
        self.cases.setdefault(case, []).append(run)

    def median(self, case: str) -> float | None:
        runs = self.cases.get(case)
        return statistics.median(r.seconds for r in runs) if runs else None

    def peak(self, case: str, attr: str) -> int | None:
        runs = self.cases.get(case)
        return max(getattr(r, attr) for r in runs) if runs else None


def tree_rss_kib(pid: int) -> int:
    """Resident memory of `pid` and all its descendants (`/proc/*/task/*/children`)."""
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    stack.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return total


def timed(argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> Run:
    """Run `argv`, returning its wall time and memory; its output goes to `log`."""
    with open(log, "ab") as out:
        out.write(f"\n$ {shlex.join(argv)}\n".encode())
        out.flush()
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=out)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.25):
                peak[0] = max(peak[0], tree_rss_kib(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        # wait4's rusage covers the process and its reaped descendants: the largest one's RSS.
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    with open(log, "a") as out:
        out.write(f"[{seconds:.2f} s, largest process {usage.ru_maxrss // 1024} MiB]\n")
    if proc.returncode != 0:
        sys.exit(f"error: `{shlex.join(argv)}` exited with {proc.returncode}; see {log}")
    return Run(seconds, usage.ru_maxrss, peak[0])


def restrict_capabilities(build_toml: Path, caps: list[str]) -> None:
    """Build only `caps`: filter a `[kbuild.cuda-capabilities]` table, else give every CUDA
    kernel an explicit `cuda-capabilities` list."""
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
        out.append(line)
        if not has_table and table and table.startswith("[kernel.") and stripped == 'backend = "cuda"':
            out.append("cuda-capabilities = [" + ", ".join(f'"{c}"' for c in caps) + "]")
    build_toml.write_text("\n".join(out) + "\n")


def append_edit(path: Path, n: int) -> None:
    with open(path, "a") as f:
        f.write(f"\n// bench edit {n}\n")


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
        else:
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


def cuda_home(nvcc: Path, tmp: Path) -> Path:
    """A CUDA_HOME cpp_extension can use: the nvcc's own root, or for the pip CUDA (no
    `lib64/libcudart.so`) a shim of links into it."""
    root = nvcc.parent.parent
    if (root / "lib64/libcudart.so").exists():
        return root
    shim = tmp / "cuda-home"
    (shim / "lib64").mkdir(parents=True, exist_ok=True)
    for d in ("bin", "include", "nvvm"):
        if (root / d).exists() and not (shim / d).exists():
            (shim / d).symlink_to(root / d)
    for lib in (root / "lib").glob("libcudart.so*"):
        link = shim / "lib64" / lib.name
        if not link.exists():
            link.symlink_to(lib)
    if not (shim / "lib64/libcudart.so").exists():
        so = sorted((root / "lib").glob("libcudart.so.*"))[0]
        (shim / "lib64/libcudart.so").symlink_to(so)
    return shim


def copy_project(project: Project, dest: Path, caps: list[str] | None) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for item in project.copy:
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
    cwork = copy_project(project, scratch / "cppext-src", args.caps)
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
    includes = [str(gen_include)] + sorted({in_cwork(i) for j in variant["compile"]
                                            for i in j["include_dirs"]
                                            if i != variant["generated_include"]})
    cenv = dict(env)
    cenv.update(MAX_JOBS=str(args.jobs), TORCH_CUDA_ARCH_LIST=arch_list,
                CUDA_HOME=str(cuda_home(nvcc, tmp_root)))
    if args.ninja_dir:
        cenv["PATH"] = args.ninja_dir + os.pathsep + cenv["PATH"]
    if shutil.which("ninja", path=cenv["PATH"]) is None:
        sys.exit("error: cpp_extension needs ninja on PATH\nhint: `pip install ninja`, or pass "
                 "--ninja-dir DIR")
    build_dir = scratch / "cppext-build"
    spec = json.dumps({
        "name": "bench_" + project.root.name.replace("-", "_"),
        "sources": [in_cwork(j["source"]) for j in variant["compile"]],
        "includes": includes,
        "cflags": ["-O3", f"-std={std}"] + dflags,
        "cuda_cflags": ["-O3", f"-std={std}"] + dflags,
        "dir": str(build_dir),
    })
    cppext = [args.python, "-c", CPPEXT_SCRIPT, spec]

    kb, cx = Results(), Results()
    both = lambda case: (kb.add(case, timed(kbuild, env, work, log)),  # noqa: E731
                         cx.add(case, timed(cppext, cenv, cwork, log)))
    for r in range(args.runs):
        shutil.rmtree(work / "build", ignore_errors=True)
        shutil.rmtree(build_dir, ignore_errors=True)
        build_dir.mkdir(parents=True)
        kb.add("cold", timed(kbuild, env, work, log))
        if not gen_include.exists():
            shutil.copytree(variant["generated_include"], gen_include)
        cx.add("cold", timed(cppext, cenv, cwork, log))
        for _ in range(3 if r == 0 else 1):
            both("no-op")
        append_edit(work / project.touch_cu, r)
        append_edit(cwork / project.touch_cu, r)
        both("touch .cu")
        append_edit(work / project.touch_header, r)
        append_edit(cwork / project.touch_header, r)
        both("touch .h")

    fl = None
    if not args.skip_floor:
        fl = floor(compiles, link, variant, env, scratch, log)
    results[project.name] = {"kbuild": kb, "cppext": cx, "floor": fl, "caps": arch_list,
                             "units": len(variant["compile"])}


def fmt_s(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s"


def fmt_mib(kib: int | None) -> str:
    return "-" if kib is None else f"{kib / 1024:.0f} MiB"


def report(results: dict, args, header: str) -> str:
    lines = [header, ""]
    cases = ["cold", "no-op", "touch .cu", "touch .h"]
    for name, r in results.items():
        kb, cx = r["kbuild"], r["cppext"]
        lines.append(f"## {name}: {r['units']} units, TORCH_CUDA_ARCH_LIST={r['caps']}, "
                     f"-j{args.jobs}, medians of {args.runs} runs")
        lines.append("")
        lines.append("| tool | " + " | ".join(cases) + " | peak RSS (largest process / tree) |")
        lines.append("|---|" + "---|" * (len(cases) + 1))
        for tool, res in (("kbuild", kb), ("cpp_extension", cx)):
            cells = [fmt_s(res.median(c)) for c in cases]
            rss = f"{fmt_mib(res.peak('cold', 'max_rss_kib'))} / {fmt_mib(res.peak('cold', 'tree_rss_kib'))}"
            lines.append(f"| {tool} | " + " | ".join(cells) + f" | {rss} |")
        ratios = []
        for c in cases:
            a, b = kb.median(c), cx.median(c)
            ratios.append(f"{b / a:.2f}x" if a and b else "-")
        lines.append("| cpp_extension / kbuild | " + " | ".join(ratios) + " | |")
        if r["floor"]:
            fl: Floor = r["floor"]
            pass_s, which = fl.longest()
            total = pass_s + fl.link
            # With fewer cores than passes the work itself bounds the build too.
            work = max(pass_s, fl.work() / args.jobs) + fl.link
            cold = kb.median("cold")
            lines.append("")
            lines.append(f"floor: {fmt_s(total)} = longest pass {fmt_s(pass_s)} ({which}) + link "
                         f"{fmt_s(fl.link)}; kbuild cold = {cold / total:.2f}x the floor")
            lines.append(f"work bound at -j{args.jobs}: {fmt_s(work)} = max(longest pass, all "
                         f"passes {fmt_s(fl.work())} / {args.jobs}) + link; kbuild cold = "
                         f"{cold / work:.2f}x it")
            lines.append("passes alone: " + "; ".join(f"{w} {fmt_s(t)}" for t, w in fl.passes))
        lines.append("")
        lines.append("all runs (s): " + "; ".join(
            f"{tool} {c}: " + ", ".join(f"{x.seconds:.2f}" for x in res.cases.get(c, []))
            for tool, res in (("kbuild", kb), ("cppext", cx)) for c in cases))
        lines.append("")
    return "\n".join(lines)


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
    p.add_argument("--skip-floor", action="store_true")
    p.add_argument("--out", default=None, help="also write the table here")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = p.parse_args()
    args.kbuild = str(Path(args.kbuild).resolve())
    args.python = str(Path(args.python).absolute())

    tmp_root = Path(tempfile.mkdtemp(prefix="kbuild-bench-"))
    log = tmp_root / "bench.log"
    version = subprocess.run([args.kbuild, "--version"], capture_output=True, text=True).stdout.strip()
    torch_v = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    header = (f"# build speed: kbuild vs torch.utils.cpp_extension.load (ninja)\n\n"
              f"date {time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}, {os.cpu_count()} cores "
              f"({cpu}), load average at start {os.getloadavg()[0]:.1f}\n"
              f"{version}, torch {torch_v}, python {args.python}\n"
              f"caps: {','.join(args.caps) if args.caps else 'as build.toml (full)'}; "
              f"kbuild runs with --unique-id bench; cold kbuild includes asking the toolchain")
    print(header, flush=True)
    print(f"scratch and log: {tmp_root}", flush=True)
    results: dict = {}
    for name in args.projects.split(","):
        bench_project(PROJECTS[name], args, results, tmp_root, log)
        print(report({k: v for k, v in results.items() if k == PROJECTS[name].name}, args, ""), flush=True)
    text = report(results, args, header)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    if not args.keep:
        shutil.rmtree(tmp_root, ignore_errors=True)


if __name__ == "__main__":
    main()
