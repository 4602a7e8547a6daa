#!/usr/bin/env python3
"""ltx_kernels benchmark (not a test): our ops vs F.rms_norm / eager / torch.compile, with the
achieved TB/s and the fraction of the device-to-device copy ceiling measured in the same run.

    HF_HUB_OFFLINE=1 python bench/bench.py [--root REPO] [--json results.json] [--quick]
        [--only-rms-norm] [--baseline OTHER_BUILT_CHECKOUT]

Timing: the implementations of one row are timed in interleaved rounds (`--rounds`, shuffled
order each round); in a round each gets `warmup` calls, then CUDA events around `iters`
back-to-back calls (the method of shared/notes/anchors.md: hot, same buffers). "ms" is the
median over rounds; "vs ours" is the median of the per-round ratio other/ours and "wins" counts
the rounds where ours was faster, so a claim of "faster" rests on every round, not on one
median. Eager rows are timed in rounds of their own after that: their temporaries reshuffle the
caching allocator, and where an output lands moves a streaming kernel by up to ~5% (seen in
bench/sweep), which would charge eager's allocations to whichever row follows them. Their
"vs ours" is the ratio of medians. "graph" columns replay the same calls captured in a CUDA graph: device time without
Python launch overhead. Under each rms_norm shape, CUDA graphs of calls time ours, F.rms_norm and
two same-bytes copies side by side, with x hot in L2 and cold (see bench_rms_norm_cold).
Bytes: each input read once plus each output written once (conditioning rows and tables that
are shared across rows count once).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import random
import statistics
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn.functional as F


def time_loop(fn, iters, warmup, repeats):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        runs.append(a.elapsed_time(b) / iters)
    return statistics.median(runs)


def time_rounds(impls, args, seed=0):
    """{name: fn} -> {name: [ms per call, one per round]}, rounds interleaved in shuffled order."""
    rng = random.Random(seed)
    names = list(impls)
    times = {n: [] for n in names}
    for _ in range(args.rounds):
        rng.shuffle(names)
        for n in names:
            fn = impls[n]
            for _ in range(args.warmup):
                fn()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(args.iters):
                fn()
            b.record()
            b.synchronize()
            times[n].append(a.elapsed_time(b) / args.iters)
    return times


def time_graph(fn, calls=20, replays=10, repeats=5):
    try:
        g = capture(fn, calls)
        g.replay()
        torch.cuda.synchronize()
        runs = []
        for _ in range(repeats):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(replays):
                g.replay()
            b.record()
            b.synchronize()
            runs.append(a.elapsed_time(b) / (replays * calls))
        return statistics.median(runs)
    except Exception as e:  # noqa: BLE001 - a baseline that cannot be captured is reported as such
        print(f"    (graph capture failed: {type(e).__name__}: {str(e)[:80]})")
        return float("nan")


def copy_ceiling(args):
    n = (2 << 30) // 2  # 2 GiB of bf16
    src = torch.randn(n // 1024, 1024, device="cuda").to(torch.bfloat16).view(-1)
    dst = torch.empty_like(src)
    ms = time_loop(lambda: dst.copy_(src), 20, 5, args.repeats)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n * 2 / (ms * 1e-3) / 1e12


def compiled(fn):
    return torch.compile(fn, dynamic=False, fullgraph=True)


def row(name, shape, nbytes, times, ours_times, ceiling, graph_ms=float("nan"), paired=True):
    ms = statistics.median(times)
    tbs = nbytes / (ms * 1e-3) / 1e12
    if paired:  # timed in the same interleaved rounds as ours
        ratios = [t / o for t, o in zip(times, ours_times)]
        vs, wins = statistics.median(ratios), sum(r > 1 for r in ratios)
    else:
        vs, wins = ms / statistics.median(ours_times), None
    return dict(name=name, shape=shape, ms=ms, graph_ms=graph_ms, tbs=tbs, pct=100 * tbs / ceiling,
                vs_ours=vs, ours_wins=wins, rounds=len(times))


def fmt(r, is_ours):
    g = f"{r['graph_ms']:.4f}" if not math.isnan(r["graph_ms"]) else "   -  "
    wins = "  (own rounds)" if r["ours_wins"] is None else f"{r['ours_wins']:>3}/{r['rounds']}"
    cmp = "" if is_ours else f"{r['vs_ours']:7.3f}x  {wins}"
    return f"  {r['name']:<22} {r['ms']:9.4f} {g:>9} {r['tbs']:7.2f} {r['pct']:6.1f}%  {cmp}"


HEADER = (f"  {'impl':<22} {'ms':>9} {'graph ms':>9} {'TB/s':>7} {'%copy':>7}  "
          f"{'vs ours':>8}  ours faster (rounds)")


def bench_rms_norm(lk, args, ceiling, results, base=None):
    # 2x4992x2048: LTX-Video's hidden states (49 frames at 512x768, CFG batch 2).
    shapes = [(1, 1024, 2048), (2, 1024, 2048), (4, 1024, 2048), (2, 4992, 2048), (2, 4096, 3072),
              (4, 4096, 3072), (8, 8192, 4096)]
    if args.quick:
        shapes = shapes[::2]
    eps = 1e-6
    print("\n== rms_norm, bfloat16, weight, eps 1e-6 ==")
    for shape in shapes:
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(shape[-1], device="cuda", dtype=torch.bfloat16)
        h = shape[-1]
        nbytes = x.numel() * 2 * 2 + h * 2
        formula = lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w  # noqa: E731
        fc = compiled(lambda a, b: a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + eps) * b)
        impls = {
            "ltx_kernels.rms_norm": lambda: lk.rms_norm(x, w, eps),
            "F.rms_norm": lambda: F.rms_norm(x, (h,), w, eps),
            "torch.compile(formula)": lambda: fc(x, w),
            "eager formula": formula,
        }
        if base is not None:  # another build (--baseline), timed in the same rounds
            impls["baseline rms_norm"] = lambda: base.rms_norm(x, w, eps)
        # correctness guard on the benchmarked data
        ref = F.rms_norm(x.float(), (h,), w.float(), eps)
        err = ((lk.rms_norm(x, w, eps).float() - ref).norm() / ref.norm()).item()
        print(f" {'x'.join(map(str, shape))}  (rel err vs fp32 {err:.1e})")
        print(HEADER)
        times = time_rounds({k: v for k, v in impls.items() if k != "eager formula"}, args)
        times.update(time_rounds({"eager formula": impls["eager formula"]}, args))
        ours = times["ltx_kernels.rms_norm"]
        for name, fn in impls.items():
            graphed = ("ltx_kernels.rms_norm", "F.rms_norm", "baseline rms_norm")
            gms = time_graph(fn) if name in graphed else float("nan")
            r = row(name, shape, nbytes, times[name], ours, ceiling, gms, paired=name != "eager formula")
            print(fmt(r, name == "ltx_kernels.rms_norm"))
            results.append(dict(op="rms_norm", **r))
        cold = bench_rms_norm_cold(lk, shape, eps, args, base)
        results.append(dict(op="rms_norm", name="graph, copy side by side", shape=shape, **cold))
        del x, w


def bench_rms_norm_cold(lk, shape, eps, args, base=None):
    """% of copy measured as the kernel sees it, apart from the launch loop's host time: each
    impl and a plain copy (`x.clone()`, the copy ceiling's kernel) of the same x are captured in
    a CUDA graph of back-to-back calls and replayed, in interleaved rounds. "hot": every call
    reads the same x (at small shapes it stays in L2, which flatters both); "cold": the calls
    cycle over enough distinct x that they span >= 4x the L2 cache, so each call reads DRAM.
    Outputs are kept alive during capture, so every call writes new memory. %copy = the faster
    same-bytes reference's time (the clone, or torch's elementwise `neg`) / impl time."""
    h = shape[-1]
    xbytes = math.prod(shape) * 2
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    sets = max(2, math.ceil(4 * l2 / (2 * xbytes)))
    xs = [torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    w = torch.randn(h, device="cuda", dtype=torch.bfloat16)
    impls = {
        "copy (x.clone())": lambda x: x.clone(),
        "neg (torch kernel)": torch.neg,
        "ltx_kernels.rms_norm": lambda x: lk.rms_norm(x, w, eps),
        "F.rms_norm": lambda x: F.rms_norm(x, (h,), w, eps),
    }
    if base is not None:
        impls["baseline rms_norm"] = lambda x: base.rms_norm(x, w, eps)
    calls = max(sets, 20 if xbytes < 64 << 20 else 4)  # outputs are kept: 4 of the largest
    out = {"sets": sets, "l2_bytes": l2}
    rounds = max(5, args.rounds // 4)
    for label, inputs in (("hot", [xs[0]] * calls), ("cold", [xs[i % sets] for i in range(calls)])):
        graphs, kept = {}, []
        for name, fn in impls.items():
            bound = [functools.partial(fn, x) for x in inputs]
            graphs[name], outputs = capture_calls(bound, keep=True)
            kept.append(outputs)
        times = time_rounds({k: g.replay for k, g in graphs.items()},
                            argparse.Namespace(rounds=rounds, warmup=1, iters=5))
        us = {k: statistics.median(v) * 1e3 / calls for k, v in times.items()}
        # The faster of the two same-bytes references: in a graph the clone is a memcpy node,
        # which at large sizes runs below the SMs' copy speed.
        ref = min(us["copy (x.clone())"], us["neg (torch kernel)"])
        span = f"{sets} x, {sets * 2 * xbytes / 2**20:.0f} MiB read+written per cycle" if label == "cold" \
            else "one x, read again by every call"
        print(f"    graph of {calls} calls, {label} ({span}; L2 {l2 / 2**20:.0f} MiB), "
              f"median of {rounds} interleaved rounds:")
        for name, t in us.items():
            print(f"      {name:<22} {t:8.2f} us/call  {2 * xbytes / (t * 1e-6) / 1e12:6.2f} TB/s  "
                  f"{100 * ref / t:6.1f}% of the faster copy")
        out[label] = {k: dict(us=t, pct_of_copy=100 * ref / t) for k, t in us.items()}
        del graphs, kept
    del xs
    torch.cuda.empty_cache()
    return out


def bench_fused(lk, args, ceiling, results):
    eps = 1e-6
    b, s, h = 4, 4096, 3072
    dt = torch.bfloat16
    x = torch.randn(b, s, h, device="cuda", dtype=dt)
    res = torch.randn_like(x)
    gate = torch.randn(b, h, device="cuda", dtype=dt)
    scale = torch.randn(b, 1, h, device="cuda", dtype=dt) * 0.1
    shift = torch.randn(b, 1, h, device="cuda", dtype=dt) * 0.1
    n = x.numel()

    def gated_eager(x, res, gate):
        return res + torch.tanh(gate).unsqueeze(1) * F.rms_norm(x, (h,), None, eps)

    def adaln_rms_eager(x, scale, shift):
        return F.rms_norm(x, (h,), None, eps) * (1 + scale) + shift

    def adaln_layer_eager(x, scale, shift):
        return F.layer_norm(x, (h,), None, None, eps) * (1 + scale) + shift

    heads, hd, S = 32, 64, 8192
    q = torch.randn(2, S, heads, hd, device="cuda", dtype=dt)
    ang = torch.rand(S, hd, device="cuda") * 6.3
    cos_h, sin_h = ang.cos(), ang.sin()
    cos_f, sin_f = lk.rope_3d_tables(8, 32, 32, heads * hd, batch_size=2, device="cuda")
    q3 = q.flatten(2)

    def rope_eager(x, cos, sin):  # diffusers' LTX apply_rotary_emb on [B, S, C]
        x_real, x_imag = x.unflatten(2, (-1, 2)).unbind(-1)
        x_rot = torch.stack([-x_imag, x_real], dim=-1).flatten(2)
        return (x.float() * cos + x_rot.float() * sin).to(x.dtype)

    def rope_head_eager(x, cos, sin):  # [B, S, heads, D] with a [S, D] table
        x_real, x_imag = x.unflatten(-1, (-1, 2)).unbind(-1)
        x_rot = torch.stack([-x_imag, x_real], dim=-1).flatten(-2)
        return (x.float() * cos[:, None] + x_rot.float() * sin[:, None]).to(x.dtype)

    xg = torch.randn(2, 4096, 2 * 8192, device="cuda", dtype=dt)
    xa = torch.randn(4, 4096, 8192, device="cuda", dtype=dt)

    def geglu_eager(x):
        a, g = x.chunk(2, dim=-1)
        return a * F.gelu(g, approximate="tanh")

    cases = [
        ("fused_residual_gated_rms_norm", f"{b}x{s}x{h}, gate [B,H]", 3 * n * 2,
         lambda x, res, gate: lk.fused_residual_gated_rms_norm(x, res, gate, None, eps), gated_eager, (x, res, gate)),
        ("adaln rms", f"{b}x{s}x{h}, scale/shift [B,1,H]", 2 * n * 2,
         lambda x, scale, shift: lk.adaln(x, scale, shift, None, eps, "rms"), adaln_rms_eager, (x, scale, shift)),
        ("adaln layer", f"{b}x{s}x{h}, scale/shift [B,1,H]", 2 * n * 2,
         lambda x, scale, shift: lk.adaln(x, scale, shift, None, eps, "layer"), adaln_layer_eager, (x, scale, shift)),
        ("rope_3d head table", f"2x{S}x{heads}x{hd}, fp32 [S,D]", 2 * q.numel() * 2 + 2 * cos_h.numel() * 4,
         lk.rope_3d, rope_head_eager, (q, cos_h, sin_h)),
        ("rope_3d LTX table", f"2x{S}x{heads * hd}, fp32 [B,S,C]", 2 * q.numel() * 2 + 2 * cos_f.numel() * 4,
         lk.rope_3d, rope_eager, (q3, cos_f, sin_f)),
        ("geglu", "2x4096x(2x8192)", xg.numel() * 2 * 3 // 2,
         lk.geglu, geglu_eager, (xg,)),
        ("gelu_tanh", "4x4096x8192", xa.numel() * 2 * 2,
         lk.gelu_tanh, lambda x: F.gelu(x, approximate="tanh"), (xa,)),
    ]
    if args.quick:
        cases = cases[:2]
    placements = []
    print("\n== fused ops, bfloat16 ==")
    for name, shape, nbytes, ours, eager, inputs in cases:
        c = compiled(eager)
        expected = eager(*inputs).float()
        err = ((ours(*inputs).float() - expected).norm() / expected.norm()).item()
        print(f" {name}: {shape}  (rel err vs eager {err:.1e}; byte-count limit "
              f"{nbytes / (ceiling * 1e12) * 1e3:.4f} ms)")
        print(HEADER)
        impls = {"ltx_kernels": lambda: ours(*inputs), "torch.compile": lambda: c(*inputs),
                 "eager": lambda: eager(*inputs)}
        times = time_rounds({k: v for k, v in impls.items() if k != "eager"}, args)
        times.update(time_rounds({"eager": impls["eager"]}, args))
        for label, fn in impls.items():
            gms = time_graph(fn) if label != "eager" else float("nan")
            r = row(label, shape, nbytes, times[label], times["ltx_kernels"], ceiling, gms,
                    paired=label != "eager")
            print(fmt(r, label == "ltx_kernels"))
            results.append(dict(op=name, **r))
        placements.append((name, placement_check(ours, c, inputs, args)))

    # Streaming kernels at the copy ceiling move by a few % with where their buffers sit, for
    # torch.compile's kernels as for ours (both use the same cached output block in the
    # interleaved rounds above, but graph capture gives each its own). So the comparison is
    # repeated with the inputs copied to new places (behind a random-size pad) and the cached
    # output blocks released, several times.
    print(f"\n== placements: torch.compile time / ours, median of {args.placement_rounds} interleaved "
          f"rounds per placement of the buffers; loop | CUDA graph of {args.iters} calls ==")
    for name, (ratios, graph_ratios) in placements:
        won = sum(r > 1 for r in ratios) + sum(r > 1 for r in graph_ratios)
        print(f"  {name:<30} " + " ".join(f"{r:6.3f}" for r in ratios) + " |" +
              " ".join(f"{r:6.3f}" for r in graph_ratios) +
              f"   ours faster in {won}/{len(ratios) + len(graph_ratios)}")
        results.append(dict(op=name, name="placements", compile_over_ours=ratios,
                            graph_compile_over_ours=graph_ratios))


def placement_check(ours, compiled_fn, inputs, args):
    ratios, graph_ratios = [], []
    gen = torch.Generator().manual_seed(0)
    for _ in range(args.placements):
        torch.cuda.empty_cache()  # the outputs too get a new block, not the cached one
        pad = torch.empty(int(torch.randint(1, 64, (1,), generator=gen)) << 20, dtype=torch.uint8, device="cuda")
        moved = tuple(t.clone() for t in inputs)
        impls = {"ours": lambda: ours(*moved), "compile": lambda: compiled_fn(*moved)}
        sub = argparse.Namespace(rounds=args.placement_rounds, warmup=args.warmup, iters=args.iters)
        t = time_rounds(impls, sub)
        ratios.append(statistics.median([c / o for c, o in zip(t["compile"], t["ours"])]))
        graphs = {k: capture(fn, args.iters) for k, fn in impls.items()}
        t = time_rounds({k: g.replay for k, g in graphs.items()}, argparse.Namespace(
            rounds=args.placement_rounds, warmup=1, iters=1))
        graph_ratios.append(statistics.median([c / o for c, o in zip(t["compile"], t["ours"])]))
        del pad, moved, graphs
    return ratios, graph_ratios


def capture(fn, calls):
    """A CUDA graph of `calls` back-to-back calls of fn (its outputs in the graph's own pool)."""
    return capture_calls([fn] * calls)[0]


def capture_calls(calls, keep=False):
    """A CUDA graph of `calls` (functions of no argument) run back to back, after the first
    three warm up on a side stream; with `keep`, also their outputs, held alive so that each
    call writes its own memory (else each output goes back to the graph's pool as it is
    dropped)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for call in calls[:3]:
            call()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    outputs = []
    with torch.cuda.graph(g):
        for call in calls:
            if keep:
                outputs.append(call())
            else:
                call()
    return g, outputs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--iters", type=int, default=50, help="timed calls per round")
    ap.add_argument("--warmup", type=int, default=3, help="untimed calls before each round")
    ap.add_argument("--rounds", type=int, default=40, help="interleaved rounds per row")
    ap.add_argument("--repeats", type=int, default=5, help="copy-ceiling repeats")
    ap.add_argument("--placements", type=int, default=6, help="input placements per fused op")
    ap.add_argument("--placement-rounds", type=int, default=10, help="interleaved rounds per placement")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only-rms-norm", action="store_true", help="the rms_norm rows alone")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another built checkout whose rms_norm is timed in the same rounds")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.placements = min(args.rounds, 5), min(args.placements, 2)

    import kernels

    lk = kernels.get_local_kernel(args.root, backend="cuda")
    base = None if args.baseline is None else kernels.get_local_kernel(args.baseline, backend="cuda")
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  kernel {lk.__name__}"
          + ("" if base is None else f"  baseline {base.__name__} ({args.baseline})"))
    ceiling = copy_ceiling(args)
    print(f"copy ceiling (2 GiB bf16 device-to-device, read+write): {ceiling:.3f} TB/s")
    results = []
    bench_rms_norm(lk, args, ceiling, results, base)
    if not args.only_rms_norm:
        bench_fused(lk, args, ceiling, results)
    if args.json:
        args.json.write_text(json.dumps(dict(ceiling_tbs=ceiling, device=torch.cuda.get_device_name(),
                                             torch=torch.__version__, results=results), indent=1))


if __name__ == "__main__":
    main()
