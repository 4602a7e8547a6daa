#!/usr/bin/env python3
"""Benchmark helper (not a test): where the GPU waits during one LTX-Video step.

bench/e2e.py's compiled rows with the kernels run ~3 ms longer than the kernels they launch
(the profiler's GPU time), where torch.compile alone is within ~0.3 ms. This profiles one
forward of a configuration (CPU and CUDA activity), finds the idle intervals between
consecutive GPU operations, and for each one says whether the GPU waited for the host (the
next operation was launched after the previous one ended) and which host op launched it.

    HF_HUB_OFFLINE=1 python bench/step_gaps.py [--config compile+kernels+fp8] [--trace t.json]

Configurations: compile, compile+kernels, compile+kernels+fp8, each optionally with
`--cudagraphs` (torch.compile(mode="reduce-overhead")).
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import statistics
import tempfile
from pathlib import Path

import e2e  # bench/e2e.py, beside this script: the models and compile helpers
import torch


def gpu_gaps(trace: dict, min_us: float):
    """(GPU busy us, idle us, [gap dicts]) of one profiled forward's chrome trace."""
    events = trace["traceEvents"]
    gpu = sorted(
        (e for e in events if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy") and "dur" in e),
        key=lambda e: e["ts"],
    )
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    cpu_ops = sorted((e for e in events if e.get("cat") == "cpu_op" and "dur" in e), key=lambda e: e["ts"])
    starts = [e["ts"] for e in cpu_ops]

    def host_op(ts):
        # The innermost cpu op around ts (the latest start whose interval holds it).
        i = bisect.bisect_right(starts, ts) - 1
        best = None
        while i >= 0 and i > bisect.bisect_right(starts, ts) - 200:
            e = cpu_ops[i]
            if e["ts"] <= ts <= e["ts"] + e["dur"] and (best is None or e["dur"] < best["dur"]):
                best = e
            i -= 1
        return best["name"] if best else "?"

    busy = sum(e["dur"] for e in gpu)
    gaps = []
    end = gpu[0]["ts"] + gpu[0]["dur"]
    for prev, e in zip(gpu, gpu[1:]):
        end = max(end, prev["ts"] + prev["dur"])
        idle = e["ts"] - end
        if idle < min_us:
            continue
        launch = launches.get(e.get("args", {}).get("correlation"))
        launched_at = launch["ts"] if launch else None
        gaps.append(dict(
            idle_us=idle,
            next=e["name"][:80],
            prev=prev["name"][:80],
            # > 0: the launch call began after the GPU had gone idle (the GPU waited for the host).
            launched_after_idle_us=(launched_at - end) if launched_at is not None else None,
            host_op=host_op(launched_at) if launched_at is not None else "?",
        ))
    span = gpu[-1]["ts"] + gpu[-1]["dur"] - gpu[0]["ts"]
    return busy, span - busy, span, gaps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--config", default="compile+kernels+fp8",
                    choices=["compile", "compile+kernels", "compile+kernels+fp8"])
    ap.add_argument("--cudagraphs", action="store_true")
    ap.add_argument("--min-gap-us", type=float, default=2.0)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--trace", type=Path, default=None, help="keep the chrome trace here")
    args = ap.parse_args()

    import kernels

    lk = kernels.get_local_kernel(args.root, backend="cuda")
    model, inputs, blocks = e2e.ltx_model_and_inputs(2)
    if args.config != "compile":
        pieces = lk.blocks.LTX_PIECES | ({"fp8"} if args.config.endswith("fp8") else set())
        lk.patch_transformer(model, pieces=pieces)
    compiled = e2e.compile_model(model, blocks, "full", "reduce-overhead" if args.cudagraphs else None)

    def step():
        if args.cudagraphs:
            torch.compiler.cudagraph_mark_step_begin()
        return compiled(**inputs)

    with torch.no_grad():
        times = e2e.time_forwards(step, 10, 3)
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            step()
            torch.cuda.synchronize()
    path = args.trace or Path(tempfile.mkstemp(suffix=".json")[1])
    p.export_chrome_trace(str(path))
    busy, idle, span, gaps = gpu_gaps(json.loads(path.read_text()), args.min_gap_us)
    label = args.config + (" (CUDA graphs)" if args.cudagraphs else "")
    print(f"{label}: step {statistics.median(times):.2f} ms (median of 10); profiled forward: GPU span "
          f"{span / 1000:.2f} ms, busy {busy / 1000:.2f} ms, idle {idle / 1000:.2f} ms; "
          f"{len(gaps)} gaps >= {args.min_gap_us} us hold {sum(g['idle_us'] for g in gaps) / 1000:.2f} ms")
    host_waits = [g for g in gaps if (g["launched_after_idle_us"] or 0) > 0]
    print(f"  gaps where the launch began after the GPU went idle (host-bound): {len(host_waits)}, "
          f"{sum(g['idle_us'] for g in host_waits) / 1000:.2f} ms")
    by_op = collections.Counter()
    for g in gaps:
        by_op[g["host_op"]] += g["idle_us"]
    print("  idle by the host op that launched the next GPU operation (ms):")
    for op, us in by_op.most_common(12):
        print(f"    {us / 1000:7.3f}  {op}")
    print(f"  the {args.top} longest gaps:")
    for g in sorted(gaps, key=lambda g: -g["idle_us"])[: args.top]:
        late = g["launched_after_idle_us"]
        print(f"    {g['idle_us']:8.1f} us  launch {'?' if late is None else f'{late:+.1f}'} us vs idle start  "
              f"[{g['host_op']}]  {g['prev'][:40]} -> {g['next'][:50]}")


if __name__ == "__main__":
    main()
