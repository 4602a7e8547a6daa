#!/usr/bin/env python3
"""Host time per call of ltx_kernels.rms_norm (not a test): where a small RMSNorm's time goes
when the loop is bound by the CPU, not the GPU (bench.py's 1024-row shapes on the H100).

    HF_HUB_OFFLINE=1 python bench/host_overhead.py [--root REPO] [--backend cpu|cuda]
        [--shape 1x1x8] [--calls 20000] [--rounds 15] [--json out.json]

Each implementation is timed in interleaved rounds (shuffled order each round): `calls`
back-to-back calls between two clock reads (CUDA: wall time, synchronized before and after, one
sync per `calls` calls; cpu: the thread's CPU time, which other processes on a shared machine
do not inflate), reported as the median over rounds in µs per call. The input is
tiny (default 1x1x8), so the kernel's own time is negligible and what is left is the Python
wrapper, the torch.ops call, the dispatcher, the binding (checks, allocation, device guard,
stream) and the launch. The cpu variant runs the same Python, torch.ops and dispatcher path as
the cuda one (only the allocator and the launch differ), so it measures that path without a GPU.

Yardsticks from torch itself (the same on every build of ours): `x.neg()` (one native op: its
Python binding, dispatcher, allocation and launch), the same op through `torch.ops.aten`, an
allocation alone (`torch.empty_like`), and `F.rms_norm`. Host speed varies between machines and
runs by tens of percent, so compare builds by their ratio to a yardstick measured in the same
run, not by absolute µs from different runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn.functional as F


def impls(lk, base, x, w, eps):
    h = x.shape[-1]
    out = torch.empty_like(x)
    fns = {
        "ltx_kernels.rms_norm": lambda: lk.rms_norm(x, w, eps),
        "ltx_kernels.rms_norm out=": lambda: lk.rms_norm(x, w, eps, out=out),
        "torch.ops OpOverload": lambda: lk._ops.ops.rms_norm.default(x, w, eps),
        "C++ callable (_op)": lambda: lk._ops.ops.rms_norm.default._op(x, w, eps),
    }
    if base is not None:
        fns.update({
            "baseline rms_norm": lambda: base.rms_norm(x, w, eps),
            "baseline rms_norm out=": lambda: base.rms_norm(x, w, eps, out=out),
            "baseline OpOverload": lambda: base._ops.ops.rms_norm.default(x, w, eps),
        })
    return {
        **fns,
        "F.rms_norm": lambda: F.rms_norm(x, (h,), w, eps),
        "x.neg()": lambda: x.neg(),
        "torch.ops.aten.neg": lambda: torch.ops.aten.neg.default(x),
        "torch.empty_like": lambda: torch.empty_like(x),
    }


def time_rounds(fns, calls, rounds, sync, clock, seed=0):
    rng = random.Random(seed)
    names = list(fns)
    times = {n: [] for n in names}
    for _ in range(rounds):
        rng.shuffle(names)
        for n in names:
            fn = fns[n]
            for _ in range(max(calls // 20, 10)):
                fn()
            sync()
            t0 = clock()
            for _ in range(calls):
                fn()
            sync()
            times[n].append((clock() - t0) / calls * 1e6)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another built checkout (e.g. the commit before a change), timed in the "
                    "same rounds")
    ap.add_argument("--backend", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shape", default="1x1x8", help="x's shape, e.g. 1x1x8 or 2x1024x2048")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--calls", type=int, default=20000, help="timed calls per round")
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    ap.add_argument("--clock", choices=["wall", "thread"], default=None,
                    help="wall (perf_counter) or this thread's CPU time [default: wall on cuda, "
                    "thread on cpu]")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    args.clock = args.clock or ("wall" if args.backend == "cuda" else "thread")

    import kernels

    lk = kernels.get_local_kernel(args.root, backend=args.backend)
    base = None
    if args.baseline is not None:
        base = kernels.get_local_kernel(args.baseline, backend=args.backend)
    device = torch.device(args.backend)
    dtype = getattr(torch, args.dtype)
    shape = tuple(int(s) for s in args.shape.split("x"))
    x = torch.randn(shape, device=device, dtype=dtype)
    w = torch.randn(shape[-1], device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    where = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    # cpu: the thread's CPU time, so that other processes on a shared machine do not count.
    clock = time.perf_counter if args.clock == "wall" else time.thread_time
    print(f"host overhead: {lk.__name__} on {where}, torch {torch.__version__}, x {args.shape} "
          f"{args.dtype}, {args.rounds} rounds of {args.calls} calls, {args.clock} clock"
          + ("" if base is None else f"; baseline {base.__name__} from {args.baseline}"))

    times = time_rounds(impls(lk, base, x, w, 1e-6), args.calls, args.rounds, sync, clock)
    med = {n: statistics.median(t) for n, t in times.items()}
    print(f"  {'impl':<28} {'µs/call':>8} {'min':>7} {'max':>7} {'/ x.neg()':>10} "
          f"{'/ F.rms_norm':>13}")
    for n, m in med.items():
        print(f"  {n:<28} {m:8.3f} {min(times[n]):7.3f} {max(times[n]):7.3f} "
              f"{m / med['x.neg()']:10.3f} {m / med['F.rms_norm']:13.3f}")
    if args.json:
        summary = dict(kernel=lk.__name__, baseline=base and base.__name__, device=where,
                       torch=torch.__version__, shape=args.shape, dtype=args.dtype,
                       us_per_call=med, rounds=times)
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
