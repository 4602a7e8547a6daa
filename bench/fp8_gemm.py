#!/usr/bin/env python3
"""Benchmark (not a test): the LTX-Video block's token-wide projections in bf16 and in FP8 at
the step's shapes (CFG batch 2, 5376 tokens), split into what the fp8 piece runs: the row
quantization of the activation (eager, torch.compile'd as one kernel, and the kernels'
``quantize_fp8``; for the feed-forward down projection's input, of GELU's output) and
``torch._scaled_mm`` with row/channel scales and the bias in its epilogue.

    python bench/fp8_gemm.py [--root .]

Each row is the median µs of 15 rounds of 20 calls captured in a CUDA graph (device time only).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F
from bench import capture  # bench/bench.py, beside this script

TOKENS = 2 * 7 * 16 * 24
SHAPES = (("qkv", 6144, 2048), ("out / cross q / cross out", 2048, 2048), ("ff up", 8192, 2048), ("ff down", 2048, 8192))


def graph_us(fn, calls=20, rounds=15):
    g = capture(fn, calls)
    times = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000 / calls)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = ap.parse_args()
    import kernels

    lk = kernels.get_local_kernel(args.root, backend="cuda")
    fp8 = lk.fp8

    torch.manual_seed(0)
    quant = torch.compile(fp8.quantize_rows)
    gelu_quant = torch.compile(lambda t: fp8.quantize_rows(F.gelu(t, approximate="tanh")))
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| projection | N | K | bf16 F.linear µs (TFLOP/s) | quantize eager µs | quantize compiled µs "
          "| quantize_fp8 µs (% of copy) | scaled_mm µs (TFLOP/s) | scaled_mm one scale each µs (TFLOP/s) "
          "| fp8 total (quantize_fp8) vs bf16 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, n, k in SHAPES:
        x = torch.randn(TOKENS, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        wq, ws = fp8.quantize_weight(w)
        xq, xs = fp8.quantize_rows(x)
        flop = 2 * TOKENS * n * k
        bf16 = graph_us(lambda: F.linear(x, w, bias))
        gelu = name == "ff down"  # its input is GELU's output: quantized with the GELU fused
        comp = gelu_quant if gelu else quant
        q_eager = graph_us(lambda: fp8.quantize_rows(F.gelu(x, approximate="tanh") if gelu else x))
        comp(x)
        q_comp = graph_us(lambda: comp(x))
        ours = graph_us(lambda: lk.quantize_fp8(x, gelu))
        copy = graph_us(lambda: x.clone())
        # A copy moves 2 bytes in and out per element; quantize_fp8 2 in and 1 out.
        ours_pct = 100 * copy * 0.75 / ours
        mm = graph_us(lambda: torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws, bias=bias, out_dtype=torch.bfloat16))
        one = torch.ones((), device="cuda")
        mm1 = graph_us(lambda: torch._scaled_mm(xq, wq.t(), scale_a=one, scale_b=one, bias=bias, out_dtype=torch.bfloat16))
        print(f"| {name} | {n} | {k} | {bf16:.1f} ({flop / bf16 * 1e-6:.0f}) | {q_eager:.1f} | {q_comp:.1f} "
              f"| {ours:.1f} ({ours_pct:.0f}%) | {mm:.1f} ({flop / mm * 1e-6:.0f}) | {mm1:.1f} ({flop / mm1 * 1e-6:.0f}) "
              f"| {bf16 / (ours + mm):.2f}x |", flush=True)


if __name__ == "__main__":
    main()
