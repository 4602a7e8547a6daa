#!/usr/bin/env python3
"""Run a command and say which compiler processes ran under it, when, and with how much memory.

    python3 bench/step_timeline.py [--interval 0.2] [--json FILE] -- kbuild build ...

Samples the command's process tree every --interval seconds (from /proc) and prints, for each
compiler-like process it saw (cicc, ptxas, cudafe++, cc1plus, fatbinary, nvlink, ld, ...): when it
started and ended (seconds from the command's start, to the nearest sample), its CPU seconds,
most threads and peak RSS, and what it compiled (the last path-like argument). Then the peak RSS
of the whole tree and, for every second, how many of each program ran and how many of the
machine's CPUs were busy (/proc/stat: the build's shape, what overlapped, where cores sat idle).
A device pass's row also says its niceness and its `-split-compile` count. What bounds a build, and whether a split pass ran beside the
chain it should not slow, is read off this table; nothing here changes what the command does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
# Processes worth a row: the compilers and what nvcc and kbuild run between them.
PROGRAMS = {"cicc", "ptxas", "cudafe++", "cc1plus", "cc1", "fatbinary", "nvlink", "ld", "as",
            "gcc", "g++", "c++", "nvcc", "kbuild", "ninja", "cmake", "python3", "python"}


def children(pid: int) -> list[int]:
    """`pid`'s children, whichever of its threads started them (kbuild spawns from workers)."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return found


def tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children(p))
    return out


def sample(pid: int) -> dict | None:
    """comm, cpu seconds, threads, rss KiB and argv of `pid`; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return None
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    # fields[0] is state (field 3); utime/stime are fields 14/15, num_threads 20, rss 24.
    cpu = (int(fields[11]) + int(fields[12])) / TICK
    threads = int(fields[17])
    rss = int(fields[21]) * PAGE_KIB
    nice = int(fields[16])
    return {"comm": comm, "cpu": cpu, "threads": threads, "rss": rss, "argv": argv, "nice": nice}


def split_count(argv: list[str]) -> int | None:
    """A device pass's `-split-compile=N` (ptxas, cicc) or `-split-compile N` (cicc)."""
    for i, a in enumerate(argv):
        m = re.fullmatch(r"--?split-compile(?:=(\d+))?", a)
        if m:
            count = m.group(1) or (argv[i + 1] if i + 1 < len(argv) else "")
            return int(count) if count.isdigit() else None
    return None


def busy_jiffies() -> tuple[int, int]:
    """The machine's busy and total CPU time so far (/proc/stat, in ticks)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def what(argv: list[str]) -> str:
    """The file a compiler process works on: its last argument that names a source-like file."""
    exts = (".cu", ".cpp", ".cc", ".c", ".ii", ".i", ".ptx", ".cubin", ".s", ".o", ".so")
    for a in reversed(argv):
        if a.endswith(exts) and not a.startswith("-"):
            return Path(a).name
    return ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--json", type=Path, help="also write the rows and the shape here")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command given (put it after --)")
    start = time.monotonic()
    child = subprocess.Popen(command)
    rows: dict[int, dict] = {}
    peak_tree, peak_at, at_peak = 0, 0.0, []
    cpus, last, busy = os.cpu_count() or 1, busy_jiffies(), []
    while True:
        now = time.monotonic() - start
        cur = busy_jiffies()
        if cur[1] > last[1]:
            busy.append((now, cpus * (cur[0] - last[0]) / (cur[1] - last[1])))
        last = cur
        total, here = 0, []
        for pid in tree(child.pid):
            s = sample(pid)
            if s is None:
                continue
            total += s["rss"]
            here.append((s["rss"], s["comm"], what(s["argv"])))
            row = rows.get(pid)
            if row is None or row["comm"] != s["comm"]:
                # A fork that exec'd since the last sample starts a new row under the same pid.
                if row is not None:
                    rows[-pid * 1000 - len(rows)] = row
                row = rows[pid] = {"comm": s["comm"], "start": now, "what": what(s["argv"]),
                                   "cpu": 0.0, "threads": 0, "rss": 0, "nice": s["nice"],
                                   "split": split_count(s["argv"])}
            row["end"] = now
            row["cpu"] = max(row["cpu"], s["cpu"])
            row["threads"] = max(row["threads"], s["threads"])
            row["rss"] = max(row["rss"], s["rss"])
        if total > peak_tree:
            peak_tree, peak_at, at_peak = total, now, here
        if child.poll() is not None:
            break
        time.sleep(args.interval)
    wall = time.monotonic() - start
    shown = sorted((r for r in rows.values() if r["comm"] in PROGRAMS and r["comm"] not in
                    ("kbuild", "python3", "python")), key=lambda r: r["start"])
    print(f"# {' '.join(command)}", flush=True)
    print(f"# exit {child.returncode}, wall {wall:.1f} s, peak tree RSS "
          f"{peak_tree // 1024} MiB at {peak_at:.1f} s (sampled every {args.interval} s)")
    print(f"{'start':>7} {'end':>7} {'wall':>6} {'cpu':>6} {'thr':>3} {'MiB':>6} {'nice':>4} "
          f"{'split':>5}  program  file")
    for r in shown:
        split = "" if r["split"] is None else str(r["split"])
        print(f"{r['start']:7.1f} {r['end']:7.1f} {r['end'] - r['start']:6.1f} {r['cpu']:6.1f} "
              f"{r['threads']:3d} {r['rss'] // 1024:6d} {r['nice']:4d} {split:>5}  "
              f"{r['comm']:<9} {r['what']}")
    shape = []
    for second in range(int(wall) + 1):
        running: dict[str, int] = {}
        for r in shown:
            if r["start"] <= second + 0.5 and r["end"] >= second - 0.5:
                running[r["comm"]] = running.get(r["comm"], 0) + r["threads"]
        shape.append(running)
    print("# at the peak: " + ", ".join(f"{c} {w} {r // 1024}" for r, c, w in
                                        sorted(at_peak, reverse=True) if r >= 100 * 1024))
    per_second: dict[int, list[float]] = {}
    for t, b in busy:
        per_second.setdefault(int(t), []).append(b)
    busy_cpus = [round(sum(v) / len(v), 1) for _, v in sorted(per_second.items())]
    print(f"# threads running by program and the machine's busy CPUs (of {cpus}), per second "
          "(second: busy | program=threads ...)")
    for second, running in enumerate(shape):
        cpus_busy = busy_cpus[second] if second < len(busy_cpus) else float("nan")
        print(f"{second:5d}: {cpus_busy:5.1f} | "
              + " ".join(f"{k}={v}" for k, v in sorted(running.items())))
    if args.json:
        args.json.write_text(json.dumps({"command": command, "exit": child.returncode,
                                         "wall_s": wall, "peak_tree_kib": peak_tree,
                                         "at_peak": at_peak,
                                         "rows": shown, "shape": shape,
                                         "busy_cpus": busy_cpus}, indent=1))
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
