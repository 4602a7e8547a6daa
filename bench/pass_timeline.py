#!/usr/bin/env python3
"""Run a command and record when each compiler pass under it ran: a timeline of a build.

Samples /proc every --every seconds (default 0.1) for the command's descendants that are
compiler passes (cicc, ptxas, cudafe++, cc1plus, fatbinary, nvlink, ld, gcc/g++ drivers
are skipped) and for the machine's busy CPUs (/proc/stat). Each pass gets: first and last
time seen (seconds after the command started), CPU seconds, the most threads it had, its
niceness, `-split-compile` count and the file it writes. Prints the passes longest first
and the busy CPUs per second; --json writes everything.

    bench/pass_timeline.py --json /tmp/t.json -- kbuild -C proj build -j16 -v

Used for issue #42 (how a first build's device passes share the cores); a sample every
0.1 s misses passes shorter than that, which do not matter there.
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

PASSES = {"cicc", "ptxas", "cudafe++", "cc1plus", "fatbinary", "nvlink", "ld", "ld.lld"}
TICK = os.sysconf("SC_CLK_TCK")


def children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def descendants(root: int) -> list[int]:
    kids = children_map()
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for k in kids.get(pid, []):
            out.append(k)
            todo.append(k)
    return out


def busy_jiffies() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def describe(args: list[str]) -> dict:
    split = None
    out = None
    arch = None
    for i, a in enumerate(args):
        m = re.match(r"-+split-compile[= ]?(\d+)?$", a)
        if m:
            split = int(m.group(1)) if m.group(1) else int(args[i + 1])
        if a in ("-o", "--output-file") and i + 1 < len(args):
            out = args[i + 1]
        if a.startswith("-arch=") or a.startswith("--gpu-name"):
            arch = a.split("=", 1)[-1]
    return {"split": split, "out": Path(out).name if out else None, "arch": arch}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--every", type=float, default=0.1)
    ap.add_argument("--json", type=Path)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command to run")
    t0 = time.monotonic()
    proc = subprocess.Popen(command)
    passes: dict[int, dict] = {}
    busy: list[tuple[float, float]] = []
    cpus = os.cpu_count() or 1
    last = busy_jiffies()
    while proc.poll() is None:
        now = time.monotonic() - t0
        for pid in descendants(proc.pid):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                comm = stat[stat.index("(") + 1 : stat.rindex(")")]
                if comm not in PASSES:
                    continue
                rest = stat[stat.rindex(")") + 2 :].split()
                cpu = (int(rest[11]) + int(rest[12])) / TICK
                nice, threads = int(rest[16]), int(rest[17])
                p = passes.get(pid)
                if p is None:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    cmd = [c.decode(errors="replace") for c in cmd if c]
                    p = passes[pid] = {"pass": comm, "first": now, **describe(cmd),
                                       "nice": nice, "threads": threads}
                p["last"], p["cpu"] = now, cpu
                p["threads"] = max(p["threads"], threads)
            except (OSError, ValueError, IndexError):
                continue
        cur = busy_jiffies()
        if cur[1] > last[1]:
            busy.append((now, cpus * (cur[0] - last[0]) / (cur[1] - last[1])))
        last = cur
        time.sleep(args.every)
    wall = time.monotonic() - t0
    rows = sorted(passes.values(), key=lambda p: -(p["last"] - p["first"]))
    print(f"# {' '.join(command)}: rc {proc.returncode}, wall {wall:.1f}s, {len(rows)} passes")
    print("| pass | writes | split | nice | threads | start s | end s | cpu s |")
    print("|---|---|---|---|---|---|---|---|")
    for p in rows[:40]:
        print(f"| {p['pass']} | {p['out']} | {p['split']} | {p['nice']} | {p['threads']} | "
              f"{p['first']:.1f} | {p['last']:.1f} | {p['cpu']:.1f} |")
    per_second: dict[int, list[float]] = {}
    for t, b in busy:
        per_second.setdefault(int(t), []).append(b)
    line = " ".join(f"{s}:{sum(v) / len(v):.0f}" for s, v in sorted(per_second.items()))
    print(f"busy CPUs of {cpus} per second: {line}")
    if args.json:
        args.json.write_text(json.dumps({"command": command, "rc": proc.returncode,
                                         "wall": wall, "passes": rows, "busy": busy}))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
