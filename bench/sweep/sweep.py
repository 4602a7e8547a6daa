#!/usr/bin/env python3
"""Side-by-side sweep of streaming-kernel variants (pointwise_sweep.so) against torch.compile
and eager, in one process on one GPU. Not a test and not the benchmark of record (that is
bench/bench.py): this picks launch shapes and cache policies for kernels/cuda/pointwise.cu.

    nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC -cudart static \
         -o pointwise_sweep.so bench/sweep/pointwise_sweep.cu bench/sweep/bulk_sweep.cu
    python bench/sweep/sweep.py --so pointwise_sweep.so [--out DIR] [--ops gelu,geglu,rope] [--graph]

Stage 1 times every variant (shuffled rounds, median); stage 2 re-times the best few with
torch.compile and eager, interleaved, many rounds, and prints for each the median time, the
median of its per-round ratio to torch.compile, and in how many rounds it was faster.
--graph times CUDA-graph replays instead of launch loops. Results: bench/results/*sweep*.txt,
what they taught: bench/NOTES.md.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench  # noqa: E402 (bench/bench.py: the timing helpers of the benchmark of record)

GRAPH = False  # --graph: every impl is timed as replays of a CUDA graph of its calls


def rounds(impls, n_rounds, calls, seed=0):
    """Shuffled interleaved rounds (bench.time_rounds): {name: [ms per call, one per round]}."""
    if GRAPH:
        graphs = {k: bench.capture(fn, calls) for k, fn in impls.items()}
        t = bench.time_rounds({k: g.replay for k, g in graphs.items()},
                              argparse.Namespace(rounds=n_rounds, warmup=2, iters=1), seed)
        return {k: [ms / calls for ms in v] for k, v in t.items()}
    return bench.time_rounds(impls, argparse.Namespace(rounds=n_rounds, warmup=2, iters=calls), seed)


REFERENCE = {  # what kernels/cuda/pointwise.cu does now
    "gelu": "T256 V1 nc.noL1.L2pf256 st.cs strided",
    "geglu": "T1024 V1 nc.noL1.L2pf256 st.cs rowblock",
    "rope": "T256 V1 nc.noL1.L2pf256 st.cs strided",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--so", required=True)
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--ops", default="gelu,geglu,rope")
    ap.add_argument("--graph", action="store_true", help="time CUDA-graph replays, not launch loops")
    args = ap.parse_args()
    global GRAPH
    GRAPH = args.graph
    lib = ctypes.CDLL(args.so)
    lib.sweep_launch.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 4 + [ctypes.c_uint] * 4 + [
        ctypes.c_void_p]
    n_cfg = lib.sweep_configs()
    buf = ctypes.create_string_buffer(64)
    op_names = ["gelu", "geglu", "rope"]
    variants = {op: {} for op in op_names}
    for i in range(n_cfg):
        lib.sweep_name(i, buf, 64)
        variants[op_names[lib.sweep_op(i)]][buf.value.decode()] = i
    lib.bulk_launch.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulonglong,
                                ctypes.c_ulonglong, ctypes.c_void_p]
    for i in range(lib.bulk_configs()):  # bulk_sweep.cu: copy-engine variants of gelu/geglu
        lib.bulk_name(i, buf, 64)
        variants[op_names[lib.bulk_op(i)]][buf.value.decode()] = ("bulk", i)

    dt = torch.bfloat16
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  variants {n_cfg}")
    ceiling = bench.copy_ceiling(argparse.Namespace(repeats=5))  # a launch loop, also with --graph
    print(f"copy ceiling: {ceiling:.3f} TB/s")

    def rope_eager(x, cos, sin):
        x_real, x_imag = x.unflatten(2, (-1, 2)).unbind(-1)
        x_rot = torch.stack([-x_imag, x_real], dim=-1).flatten(2)
        return (x.float() * cos + x_rot.float() * sin).to(x.dtype)

    def geglu_eager(x):
        a, g = x.chunk(2, dim=-1)
        return a * F.gelu(g, approximate="tanh")

    def gelu_eager(x):
        return F.gelu(x, approximate="tanh")

    cases = {}
    xa = torch.randn(4, 4096, 8192, device="cuda", dtype=dt)
    cases["gelu"] = (gelu_eager, (xa,), xa.numel() * 4, (xa, None, None, xa.numel() // 8, 0, 0, 0))
    xg = torch.randn(2, 4096, 2 * 8192, device="cuda", dtype=dt)
    cases["geglu"] = (geglu_eager, (xg,), xg.numel() * 3, (xg, None, None, xg.numel() // 16, 1024, 0, 0))
    q3 = torch.randn(2, 8192, 2048, device="cuda", dtype=dt)
    ang = torch.rand(2, 8192, 1024, device="cuda") * 6.3
    cos = ang.cos().repeat_interleave(2, -1).contiguous()
    sin = ang.sin().repeat_interleave(2, -1).contiguous()
    cases["rope"] = (rope_eager, (q3, cos, sin), q3.numel() * 4 + cos.numel() * 8,
                     (q3, cos, sin, q3.numel() // 8, 256, 8192, 2048))

    cur = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731 (the capture stream in a graph)
    ptr = lambda t: None if t is None else t.data_ptr()  # noqa: E731
    for op in args.ops.split(","):
        eager, inputs, nbytes, (x, c, s, nvec, dvec, seq, tw) = cases[op]
        expected = eager(*inputs)
        out = torch.empty_like(expected)

        def launch(i, o):
            if isinstance(i, tuple):
                return lib.bulk_launch(i[1], ptr(x), o.data_ptr(), x.numel() * 2, dvec * 16, cur())
            return lib.sweep_launch(i, ptr(x), ptr(c), ptr(s), o.data_ptr(), nvec, dvec, seq, tw, cur())

        def make(i, fresh=False):
            if fresh:  # allocate the output per call, as the op does
                def f():
                    o = torch.empty_like(expected)
                    launch(i, o)
                    return o
                return f
            return lambda: launch(i, out)

        bad = []
        for name, i in variants[op].items():
            out.zero_()
            rc = make(i)()
            torch.cuda.synchronize()
            err = ((out.float() - expected.float()).norm() / expected.float().norm()).item()
            if rc != 0 or not err < 1e-2:
                bad.append((name, rc, err))
        if len(bad) == len(variants[op]):
            print(f"{op}: every variant failed: {bad[:2]}")
            raise SystemExit(3)
        if bad:
            print(f"{op}: {len(bad)} variants wrong or failed, e.g. {bad[:3]}")
        impls = {k: make(i) for k, i in variants[op].items() if k not in {b[0] for b in bad}}
        t1 = rounds(impls, 5, 20)
        med = sorted((statistics.median(v), k) for k, v in t1.items())
        lines = [f"  {k:<36} {ms:.4f} ms  {nbytes / ms / 1e9:6.3f} TB/s  {100 * nbytes / ms / 1e9 / ceiling:6.1f}%"
                 for ms, k in med]
        (args.out / f"stage1_{op}.txt").write_text("\n".join(lines) + "\n")
        print(f"\n== {op}: stage 1 (5 rounds x 20 calls), best 10 and worst 2 of {len(med)} ==")
        print("\n".join(lines[:10] + lines[-2:]))

        compiled = torch.compile(eager, dynamic=False, fullgraph=True)
        compiled(*inputs)
        top = [k for _, k in med[: args.top]]
        top += [k for _, k in med if k.startswith("bulk") and k not in top][:2]
        stage2 = {k: impls[k] for k in top}
        for k in top[:2]:
            stage2[k + " +alloc"] = make(variants[op][k], fresh=True)
        ref = REFERENCE[op]
        stage2[ref + " +alloc (product)"] = make(variants[op][ref], fresh=True)
        stage2["torch.compile"] = lambda: compiled(*inputs)
        stage2["eager"] = lambda: eager(*inputs)
        t2 = rounds(stage2, args.rounds, 50, seed=1)
        base = t2["torch.compile"]
        print(f"== {op}: stage 2 ({args.rounds} interleaved rounds x 50 calls) ==")
        print(f"  {'impl':<44} {'median ms':>9} {'TB/s':>6} {'%copy':>6} {'ratio vs compile':>16} {'wins':>6}")
        for k in sorted(stage2, key=lambda k: statistics.median(t2[k])):
            ms = statistics.median(t2[k])
            ratios = [a / b for a, b in zip(t2[k], base)]
            wins = sum(r < 1 for r in ratios)
            print(f"  {k:<44} {ms:9.4f} {nbytes / ms / 1e9:6.3f} {100 * nbytes / ms / 1e9 / ceiling:5.1f}% "
                  f"{statistics.median(ratios):16.4f} {wins:>3}/{len(ratios)}")
        del x, c, s, out, expected


if __name__ == "__main__":
    main()
