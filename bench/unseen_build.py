#!/usr/bin/env python3
"""First builds of code no one has measured (issue #42), judged against a floor measured apart.

`--kind` picks the project, generated (or copied) fresh for every build:

- `unseen`: a templated CUDA project whose unit costs a source scan cannot see. Every unit is
  the same file but for one constant, `kSize`, the number of kernels it instantiates (through
  `std::make_integer_sequence`, each kernel a loop unrolled `kUnroll` steps) and the digits of
  its namespace; the constant is written at a fixed width, so every unit has the same length,
  the same includes and the same explicit instantiations and launches, all that kbuild's
  predictor reads (`orchestrator/costs.rs::predict`). Sizes run geometrically from `--lo` to
  `--lo x --spread` kernels (x `--scale`), shuffled in source order (seeded; the largest unit
  is then moved to 3/4 of the source order, so that source order is never lucky). Default:
  3 x cores units.
- `fewer`: the same with fewer units than cores (default 5/8 of the cores, at least 1).
- `synthetic`: bench/first_build.py's project (instantiation counts rising in source order:
  the predictor counts them), with its `--units/--base/--skew/--unroll`.
- `project`: a copy of `--project DIR`, built `--backend cuda --cuda-capabilities CAPS`.

For each it measures, in this order:
1. the prediction: `kbuild build --dry-run -v` at a -j wide enough that every CUDA unit is
   split, whose reasons print each unit's predicted seconds (`--check-equal` fails the run
   when the first tool does not predict the unseen units alike; another tool that does not
   is a warning);
2. the floor, from builds that are not judged:
   - a reference build with the first `--tool`, `-j<cores>`, splits off
     (`KBUILD_NVCC_STEPS=0`: one nvcc per unit, no `--split-compile`): its process tree's CPU
     seconds (kbuild's probes and link included: if anything a floor too high) and each
     unit's time under load (`costs.json`);
   - the longest unit alone: the `--candidates` longest CUDA and C++ (which cannot split)
     units of the reference build compiled one at a time with the command
     `--dry-run -v` prints for them, CUDA ones with nvcc `--split-compile=<cores>`; the
     longest CUDA candidate also with `-Xcicc=-split-compile=<cores>` (only cicc split: what
     kbuild's own split does, see compile/split.rs) and, under 8 cores, unsplit; a unit's
     time alone is the fastest of the ways measured (on few cores a split can cost more than
     it gains);
   - floor = max(tree CPU / cores, the longest unit's time alone);
3. the first build of each `--tool NAME=BINARY` (`-j<cores>`, no levers, empty `build/` and
   `KBUILD_CACHE_DIR`, `--repeat` times): wall, compile phase (first unit start to last unit
   end), tree CPU, peak tree RSS (kbuild and every descendant, sampled every 50 ms) against
   the memory budget kbuild says, each unit's time and split, and wall / floor.

Needs no cargo: the binaries are arguments; torch and nvcc from `--python`. Prints as it goes;
`--out FILE.txt` gets the table and FILE.json everything. From the repository root:

  python3 bench/unseen_build.py --kind unseen --python .venv/bin/python --caps 9.0 \\
      --tool before=target/release/kbuild --out /tmp/unseen.txt
  python3 bench/unseen_build.py --kind unseen --generate-only DIR   # just write the project
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import first_build  # noqa: E402

UNIT = """#include <cuda_runtime.h>
#include <utility>
// One unit of a templated project: every unit is this file but for kSize, how many kernels it
// instantiates (each an unrolled loop of kUnroll steps), and the digits of its namespace.
constexpr int kSize = {size:6d};
constexpr int kUnroll = {unroll:6d};
namespace unit_{index} {{
template <int I> __global__ void kernel(float* o) {{
  float s = o[threadIdx.x];
#pragma unroll
  for (int i = 0; i < kUnroll; i++) s += __sinf(s * (i + I)) * __cosf(s + i);
  o[threadIdx.x] = s;
}}
template <int... Is> const void* const* table(std::integer_sequence<int, Is...>) {{
  static const void* const kernels[] = {{reinterpret_cast<const void*>(&kernel<Is>)...}};
  return kernels;
}}
}}  // namespace unit_{index}
const void* const* unit_{index}_kernels() {{
  return unit_{index}::table(std::make_integer_sequence<int, kSize>{{}});
}}
"""

LEVERS = ("KBUILD_SCHEDULE", "KBUILD_NVCC_STEPS", "KBUILD_JOBSERVER", "MAKEFLAGS", "MFLAGS")


def say(*parts: object) -> None:
    print(*parts, flush=True)


def unit_sizes(units: int, lo: int, spread: float, scale: float, seed: int) -> list[int]:
    """Kernels per unit in source order: geometric from lo to lo x spread (x scale), shuffled,
    the largest moved to 3/4 of the way. One unit is the largest."""
    if units == 1:
        return [max(1, round(scale * lo * spread))]
    sizes = [max(1, round(scale * lo * spread ** (i / (units - 1)))) for i in range(units)]
    random.Random(seed).shuffle(sizes)
    big = sizes.index(max(sizes))
    sizes.insert((3 * units) // 4, sizes.pop(big))
    return sizes


def predictor_instances(text: str) -> int:
    """What kbuild's predictor counts (orchestrator/costs.rs `instances`): explicit
    instantiations and launches."""
    explicit = sum(
        1
        for line in text.splitlines()
        if (l := line.lstrip()).startswith("template")
        and l[len("template") :][:1].isspace()
        and not l[len("template") :].lstrip().startswith("<")
    )
    return explicit + text.count("<<<")


def generate_unseen(root: Path, sizes: list[int], caps: list[str], unroll: int) -> None:
    width = len(str(len(sizes) - 1))
    texts = [
        UNIT.format(size=s, unroll=unroll, index=f"{i:0{width}d}") for i, s in enumerate(sizes)
    ]
    # What the predictor reads must not tell the units apart.
    assert len({len(t) for t in texts}) == 1, "unit sources differ in length"
    assert len({predictor_instances(t) for t in texts}) == 1
    srcs = []
    for i, text in enumerate(texts):
        rel = f"unseen/unit_{i:0{width}d}.cu"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        srcs.append(rel)
    first_build.write_project(root, "unseen", srcs, caps)


def tree_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def kbuild_env(cache: Path, python: str, levers: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LEVERS}
    env.update(KBUILD_CACHE_DIR=str(cache), KBUILD_PYTHON=python, **levers)
    return env


def build(
    binary: Path,
    project: Path,
    python: str,
    jobs: int,
    cache: Path,
    extra: list[str],
    levers: dict[str, str],
    tag: str,
) -> dict:
    """One cold build with `-v`: what it took. Prints each unit as it ends."""
    cmd = [str(binary), "-C", str(project), "build", "-j", str(jobs), "-v", *extra]
    cpu0, load = tree_cpu(), os.getloadavg()[0]
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        env=kbuild_env(cache, python, levers),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], first_build.tree_rss(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    lines: list[tuple[float, str]] = []
    for raw in proc.stderr:
        line = raw.decode(errors="replace").rstrip()
        now = time.monotonic()
        lines.append((now, line))
        if line.strip().startswith("Compiled ") or is_split(line):
            say(f"  {tag} +{now - started:6.1f}s {line.strip()[:200]}")
    proc.wait()
    wall = time.monotonic() - started
    done.set()
    sampler.join()
    cpu = tree_cpu() - cpu0
    text = "\n".join(l for _, l in lines)
    if proc.returncode != 0:
        sys.exit(f"`{shlex.join(cmd)}` failed ({proc.returncode}):\n{text[-4000:]}")
    stripped = [(t, l.strip()) for t, l in lines]
    starts = [t for t, l in stripped if l.startswith("Verbose start ") and l.endswith("]")]
    ends = [t for t, l in stripped if l.startswith("Compiled ") and "] (" in l]
    costs = json.loads((project / "build/.kbuild/costs.json").read_text())["seconds"]
    budget = re.search(r"memory budget ([0-9.]+) (GiB|MiB)", text)
    budget_mib = float(budget[1]) * (1024 if budget[2] == "GiB" else 1) if budget else None
    return {
        "wall_s": wall,
        "compile_s": (max(ends) - min(starts)) if starts and ends else float("nan"),
        "cpu_s": cpu,
        "peak_tree_rss_mib": peak[0] / 2**20,
        "memory_budget_mib": budget_mib,
        "unit_seconds": {Path(k).name: v for k, v in costs.items()},
        "started": [l.split("start ", 1)[1] for _, l in stripped if l.startswith("Verbose start ")],
        # Seconds after the first unit started: when each unit started and ended.
        "spans": spans(stripped),
        "split": [l for _, l in stripped if is_split(l)],
        "load_before": load,
        "load_after": os.getloadavg()[0],
    }


def spans(lines: list[tuple[float, str]]) -> dict[str, list[float]]:
    """Each unit's [start, end] from `-v`'s `start LABEL` and `Compiled LABEL (Ns)` lines."""
    starts = {l[len("Verbose start ") :]: t for t, l in lines if l.startswith("Verbose start ")}
    t0 = min(starts.values(), default=0.0)
    out = {}
    for t, l in lines:
        m = re.match(r"Compiled (.+ \[[^]]+\]) \(", l)
        if m and m[1] in starts:
            out[m[1]] = [round(starts[m[1]] - t0, 1), round(t - t0, 1)]
    return out


def is_split(line: str) -> bool:
    """A `-v` line saying what was split (not a command line that carries the option)."""
    return "split" in line and " -c " not in line


def dry_run(
    binary: Path, project: Path, python: str, jobs: int, cache: Path, extra: list[str],
    levers: dict,
) -> dict:
    """Each unit's compile command and, where the plan splits it, its predicted seconds (a C++
    unit is never split: `None`)."""
    cmd = [str(binary), "-C", str(project), "build", "--dry-run", "-v", "-j", str(jobs), *extra]
    out = subprocess.run(
        cmd, env=kbuild_env(cache, python, levers), capture_output=True, text=True
    )
    if out.returncode != 0:
        sys.exit(f"`{shlex.join(cmd)}` failed:\n{out.stderr[-4000:]}")
    units: dict[str, dict] = {}
    label = None
    for line in (out.stdout + out.stderr).splitlines():
        if line.startswith("  compile "):
            label = line[len("  compile ") :]
            units[label] = {"command": None, "predicted_s": None}
        elif line.startswith("  ") and not line.startswith("    "):
            label = None
        elif label and line.startswith("    split "):
            m = re.search(r"predicted ([0-9.]+)s", line)
            units[label]["predicted_s"] = float(m[1]) if m else None
            units[label]["split"] = line.strip()
        elif label and line.startswith("    ") and units[label]["command"] is None:
            units[label]["command"] = line.strip()
    return units


def alone_command(command: str, out_dir: Path, split: str | None) -> list[str]:
    """`command` writing into `out_dir`, without any split or `--threads`, plus `split`."""
    args, out, i = shlex.split(command), [], 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "-MF"):
            out += [a, str(out_dir / ("unit.o" if a == "-o" else "unit.d"))]
            i += 2
            continue
        if a == "--threads":
            i += 2
            continue
        if a.startswith(("--split-compile", "-Xcicc=-split-compile", "--threads=")):
            i += 1
            continue
        out.append(a)
        i += 1
    return out + ([split] if split else [])


def time_alone(command: str, split: str | None, cwd: Path) -> float:
    with tempfile.TemporaryDirectory(prefix="kbuild-alone-") as tmp:
        cmd = alone_command(command, Path(tmp), split)
        started = time.monotonic()
        run = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        took = time.monotonic() - started
    if run.returncode != 0:
        sys.exit(f"`{shlex.join(cmd)}` failed:\n{run.stderr[-4000:]}")
    return took


def unit_key(label: str, dry: dict) -> str:
    """The costs.json name of a unit's object, from its dry-run command."""
    args = shlex.split(dry[label]["command"])
    return Path(args[args.index("-o") + 1]).name


def measure_floor(args, binary: Path, make, extra: list[str], cores: int) -> dict:
    """The reference build (splits off) and the candidates compiled alone."""
    with tempfile.TemporaryDirectory(prefix="kbuild-floor-") as tmp:
        project, cache = Path(tmp) / "p", Path(tmp) / "cache"
        make(project)
        say(f"== reference build: -j{cores}, KBUILD_NVCC_STEPS=0 (one nvcc per unit, no split)")
        ref = build(binary, project, args.python, cores, cache, extra,
                    {"KBUILD_NVCC_STEPS": "0"}, "reference")
        say(f"   wall {ref['wall_s']:.1f}s, tree CPU {ref['cpu_s']:.1f}s "
            f"-> CPU / {cores} = {ref['cpu_s'] / cores:.1f}s")
        dry = dry_run(
            binary, project, args.python, cores, cache, extra, {"KBUILD_NVCC_STEPS": "0"}
        )
        by_key = {unit_key(l, dry): l for l in dry if dry[l]["command"]}
        ranked = sorted(ref["unit_seconds"].items(), key=lambda kv: -kv[1])
        labels = [by_key[k] for k, _ in ranked if k in by_key]
        cuda = [l for l in labels if "nvcc" in Path(shlex.split(dry[l]["command"])[0]).name]
        cands = cuda[: args.candidates] + [l for l in labels if l not in cuda][: args.candidates]
        alone = {}
        for label in cands:
            is_cuda = label in cuda
            split = f"--split-compile={cores}" if is_cuda else None
            s = time_alone(dry[label]["command"], split, project)
            alone[label] = {"split_compile_s": s} if is_cuda else {"unsplit_s": s}
            say(f"   alone {label}: {s:.1f}s ({split or 'C++, unsplit'})")
        if cuda and not args.no_cicc_alone:
            # The longest alone, not under the reference build's load.
            top = max(cuda[: args.candidates], key=lambda l: alone[l]["split_compile_s"])
            ways = [("cicc_split_s", f"-Xcicc=-split-compile={cores}")]
            if cores < 8:
                ways.append(("unsplit_s", None))
            for name, split in ways:
                s = time_alone(dry[top]["command"], split, project)
                alone[top][name] = s
                say(f"   alone {top}: {s:.1f}s ({split or 'unsplit'})")
    # A unit's time alone is the fastest way measured: split, or (where splitting costs more
    # than it gains, e.g. on few cores) not.
    for v in alone.values():
        v["best_s"] = min(v.values())
    longest = max((v["best_s"], k) for k, v in alone.items())
    floor = max(ref["cpu_s"] / cores, longest[0])
    say(f"== floor {floor:.1f}s = max(tree CPU {ref['cpu_s']:.1f}s / {cores}, "
        f"longest alone {longest[0]:.1f}s: {longest[1]})")
    return {"reference": ref, "alone": alone, "longest_alone": list(longest), "floor_s": floor}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kind", choices=["unseen", "fewer", "synthetic", "project"], required=True)
    ap.add_argument("--tool", action="append", default=[], help="NAME=PATH of a kbuild binary")
    ap.add_argument("--python", default=os.environ.get("KBUILD_PYTHON", "python3"))
    ap.add_argument("--caps", default="9.0", help="comma-separated CUDA capabilities")
    ap.add_argument("--cores", type=int, default=os.cpu_count(), help="-j and the floor's cores")
    ap.add_argument("--units", type=int, help="default: unseen 3 x cores, fewer 5/8 x cores")
    ap.add_argument("--lo", type=int, default=16, help="kernels in the smallest unseen unit")
    ap.add_argument("--spread", type=float, default=14.0, help="largest / smallest kernels")
    ap.add_argument("--kernel-unroll", type=int, default=512, help="kUnroll of every kernel")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every unit's kernels")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--base", type=int, default=4, help="synthetic: first unit's instances")
    ap.add_argument("--skew", type=float, default=16.0, help="synthetic: last / first")
    ap.add_argument("--unroll", type=int, default=384, help="synthetic: first loop length")
    ap.add_argument("--project", type=Path, help="--kind project: the project to copy")
    ap.add_argument("--candidates", type=int, default=3,
                    help="longest CUDA (and C++) units of the reference build to compile alone")
    ap.add_argument("--no-cicc-alone", action="store_true",
                    help="skip the longest unit alone with cicc-only split and unsplit")
    ap.add_argument("--repeat", type=int, default=1, help="first builds per tool")
    ap.add_argument("--check-equal", action="store_true",
                    help="fail unless the first tool predicts every generated unit alike")
    ap.add_argument("--generate-only", type=Path)
    ap.add_argument("--floor-only", action="store_true",
                    help="measure the floor, save it with --out and stop (a long project's floor "
                         "and its judged builds then fit in two GPU calls)")
    ap.add_argument("--floor-from", type=Path,
                    help="the floor of an earlier --floor-only run's .json instead of measuring it")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    caps, cores = args.caps.split(","), args.cores
    units = args.units or {"unseen": 3 * cores, "fewer": max(1, cores * 5 // 8)}.get(args.kind)
    sizes = None
    extra: list[str] = []
    if args.kind in ("unseen", "fewer"):
        sizes = unit_sizes(units, args.lo, args.spread, args.scale, args.seed)
        what = (f"{args.kind}: {units} units on {cores} cores, kernels per unit (source order) "
                f"{sizes}, kUnroll {args.kernel_unroll}")

        def make(root: Path) -> None:
            generate_unseen(root, sizes, caps, args.kernel_unroll)
    elif args.kind == "synthetic":
        units = args.units or 24
        what = (f"synthetic (bench/first_build.py): {units} units, base {args.base}, skew "
                f"{args.skew}, unroll from {args.unroll}")

        def make(root: Path) -> None:
            first_build.generate(root, units, caps, args.skew, args.base, args.unroll)
    else:
        if not args.project:
            ap.error("--kind project needs --project DIR")
        what = f"{args.project.name} (a copy; --backend cuda --cuda-capabilities {args.caps})"
        extra = ["--backend", "cuda", "--cuda-capabilities", args.caps]

        def make(root: Path) -> None:
            shutil.copytree(args.project, root, ignore=shutil.ignore_patterns("build", ".git"))
    if args.generate_only:
        make(args.generate_only)
        say(what)
        return
    if not args.tool:
        ap.error("give at least one --tool NAME=PATH")
    if any("=" not in t for t in args.tool):
        ap.error("--tool takes NAME=PATH, e.g. before=.gpubin/kbuild-main")
    tools = [(n, Path(b).resolve()) for n, b in (t.split("=", 1) for t in args.tool)]
    for name, binary in tools:
        if not os.access(binary, os.X_OK):
            ap.error(f"--tool {name}={binary}: not an executable file")
    say(f"# {what}, caps {args.caps}, -j{cores}")
    say(f"# {platform.node()} {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}, "
        f"load {os.getloadavg()[0]:.1f}")
    result: dict = {"what": what, "cores": cores, "caps": args.caps, "sizes": sizes}

    # 1. What kbuild predicts (each tool: the "after" may predict otherwise).
    wide = max(cores, 2 * (units or 63) + 2)
    result["predicted"] = {}
    for name, binary in tools:
        with tempfile.TemporaryDirectory(prefix="kbuild-dry-") as tmp:
            make(Path(tmp) / "p")
            dry = dry_run(binary, Path(tmp) / "p", args.python, wide, Path(tmp) / "c", extra, {})
        pred = {l: d["predicted_s"] for l, d in dry.items()}
        result["predicted"][name] = pred
        gen = [v for l, v in pred.items() if l.startswith("unseen/")]
        say(f"== {name} predicts (dry run at -j{wide}): " + ", ".join(
            f"{l.split(' [')[0]} {v}" for l, v in pred.items()))
        if sizes is not None and (None in gen or len(set(gen)) != 1):
            msg = f"{name}: the units are not all predicted the same: {sorted(set(gen), key=str)}"
            # The first tool's predictor is the one the project must hide costs from; a later
            # one that reads them is worth knowing, not a reason to measure nothing.
            if args.check_equal and name == tools[0][0]:
                sys.exit(msg)
            say("   WARNING " + msg)
            result.setdefault("warnings", []).append(msg)

    # 2. The floor, from builds not judged (or an earlier run's, on the same machine).
    if args.floor_from:
        earlier = json.loads(args.floor_from.read_text())
        if earlier.get("what") != what or earlier.get("cores") != cores:
            sys.exit(f"--floor-from {args.floor_from}: measured for {earlier.get('what')!r} on "
                     f"{earlier.get('cores')} cores, not {what!r} on {cores}")
        floor = earlier["floor"]
        say(f"== floor {floor['floor_s']:.1f}s from {args.floor_from} (measured "
            f"{earlier.get('floor_measured', 'earlier')})")
    else:
        floor = measure_floor(args, tools[0][1], make, extra, cores)
        result["floor_measured"] = time.strftime("%Y-%m-%d %H:%M")
    result["floor"] = floor
    save(args.out, result)  # what a run cut short still leaves
    if args.floor_only:
        return

    # 3. The first builds judged.
    result["builds"] = {}
    for round_ in range(args.repeat):
        for name, binary in tools:
            tag = name if args.repeat == 1 else f"{name} #{round_ + 1}"
            with tempfile.TemporaryDirectory(prefix="kbuild-first-") as tmp:
                project, cache = Path(tmp) / "p", Path(tmp) / "cache"
                make(project)
                say(f"== first build: {tag}")
                r = build(binary, project, args.python, cores, cache, extra, {}, tag)
            r["ratio"] = r["wall_s"] / floor["floor_s"]
            r["compile_ratio"] = r["compile_s"] / floor["floor_s"]
            say(f"   {tag}: wall {r['wall_s']:.1f}s = {r['ratio']:.2f}x the floor "
                f"{floor['floor_s']:.1f}s (compile phase {r['compile_s']:.1f}s, "
                f"{r['compile_ratio']:.2f}x), peak {r['peak_tree_rss_mib']:.0f} MiB "
                f"of {r['memory_budget_mib'] or float('nan'):.0f} MiB")
            result["builds"][tag] = r
            save(args.out, result)
    text = report(result)
    say(text)
    if args.out:
        args.out.write_text(text)


def save(out: Path | None, result: dict) -> None:
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(result, indent=1))


def report(result: dict) -> str:
    floor, cores = result["floor"], result["cores"]
    ref = floor["reference"]
    lines = [
        f"# first build, {result['what']}, caps {result['caps']}, -j{cores}",
        f"# {platform.node()} {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}",
        f"# floor {floor['floor_s']:.1f}s = max(reference tree CPU {ref['cpu_s']:.1f}s / {cores} "
        f"= {ref['cpu_s'] / cores:.1f}s, longest unit alone {floor['longest_alone'][0]:.1f}s "
        f"({floor['longest_alone'][1]}))",
        f"# reference build (-j{cores}, KBUILD_NVCC_STEPS=0): wall {ref['wall_s']:.1f}s; "
        f"units {min(ref['unit_seconds'].values()):.1f}-{max(ref['unit_seconds'].values()):.1f}s",
    ]
    for label, a in floor["alone"].items():
        lines.append(f"# alone {label}: " + ", ".join(f"{k} {v:.1f}" for k, v in a.items()))
    lines += [
        "",
        "| build | wall s | wall/floor | compile phase s | compile/floor | tree CPU s |"
        " longest unit s (as built) | peak tree MiB | budget MiB | load before/after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in result["builds"].items():
        lines.append(
            f"| {name} | {r['wall_s']:.1f} | {r['ratio']:.2f}x | {r['compile_s']:.1f} | "
            f"{r['compile_ratio']:.2f}x | {r['cpu_s']:.1f} | "
            f"{max(r['unit_seconds'].values()):.1f} | {r['peak_tree_rss_mib']:.0f} | "
            f"{r['memory_budget_mib'] or float('nan'):.0f} | "
            f"{r['load_before']:.1f}/{r['load_after']:.1f} |"
        )
    for name, r in result["builds"].items():
        lines.append(f"\n{name}: started {r['started']}")
        last = sorted(r["spans"].items(), key=lambda kv: -kv[1][1])[:3]
        lines.append(f"{name}: last to end (start, end s after the first start): {last}")
        lines += [f"{name}: {s}" for s in r["split"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
